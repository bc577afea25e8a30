//! A stop request ([`gpuq_core::interrupt`], Ctrl-C in the CLI) ends the random static
//! response of a model after its first block of samples, with the statistics of those.
//! (A test binary of its own: the request is process-wide.)

use gpuq_sparse::{Coo, Csr};
use gpuq_uq::model::{Damping, Model};
use gpuq_uq::static_model::{
    model_static_response, ModelStatic, StaticSolver, Theta, HOST_BAND_BLOCK,
};

/// A chain of unit springs with its first DOF to be fixed.
fn chain(n: usize) -> Csr<f64> {
    let mut coo = Coo::new(n, n);
    for i in 0..n {
        coo.push(i, i, if i + 1 == n { 1.0 } else { 2.0 }).unwrap();
        if i + 1 < n {
            coo.push(i, i + 1, -1.0).unwrap();
            coo.push(i + 1, i, -1.0).unwrap();
        }
    }
    Csr::from_coo(&coo).unwrap()
}

#[test]
fn a_stop_request_ends_the_samples_after_the_first_block() {
    let k = chain(20);
    let model = Model::new(k.clone(), None, Damping::None, &[0]).unwrap();
    let term = model.reduce_matrix(&k, "a term").unwrap();
    let problem = ModelStatic {
        model: &model,
        load_mean: vec![1.0; model.dofs()],
        load_std: None,
        load_factor: None,
        terms: vec![(term, Theta::Uniform { lo: 0.0, hi: 0.5 })],
        outputs: vec![19],
        design: Default::default(),
        tol: 1e-10,
    };
    // The chain is banded: the band strategy, blocks of HOST_BAND_BLOCK samples.
    let samples = 4 * HOST_BAND_BLOCK as u64;
    gpuq_core::interrupt::request();
    let r = model_static_response(&problem, samples, 1).unwrap();
    gpuq_core::interrupt::clear();
    assert_eq!(r.solver, StaticSolver::Band);
    assert!(r.interrupted && !r.converged);
    assert_eq!(r.samples, HOST_BAND_BLOCK as u64);
    assert!(r.outputs[0].mean.is_finite() && r.outputs[0].mean > 0.0);
    let whole = model_static_response(&problem, samples, 1).unwrap();
    assert!(!whole.interrupted && whole.converged);
    assert_eq!(whole.samples, samples);
}
