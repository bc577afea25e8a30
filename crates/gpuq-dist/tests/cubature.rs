//! Cubature across ranks (threads): the adaptive methods on `Dist<CpuBackend>`
//! give the one-rank results bit for bit for built-ins, closures and
//! expressions at 1 to 4 ranks, and a NaN on one rank's share stops every rank.

use gpuq_core::Error;
use gpuq_cpu::CpuBackend;
use gpuq_cubature::{builtin, integrate, Expr, Func, Method, Options, Outcome};
use gpuq_dist::{Dist, ThreadComm};
use gpuq_kernels::cubature::integrand::F4;
use std::sync::Arc;

fn opts() -> Options {
    Options {
        rel_tol: 1e-5,
        max_evals: 50_000_000,
        initial_boxes: 64,
        ..Options::default()
    }
}

/// `method` on `f` over the unit cube of `n` axes on `ranks` thread ranks
/// (every rank's outcome).
fn on_ranks(
    ranks: usize,
    method: Method,
    f: Func<'_>,
    n: usize,
) -> Vec<gpuq_core::Result<Outcome>> {
    ThreadComm::run(ranks, |comm| {
        let dist = Dist::new(CpuBackend::new(), Arc::new(comm));
        integrate(&dist, method, f, &vec![0.0; n], &vec![1.0; n], &opts())
    })
    .unwrap()
}

#[test]
fn every_rank_count_gives_the_one_rank_bits() {
    let e = Expr::parse("exp(-sum(i, 1, n, (x[i] - 0.3)^2)) * cos(x1 + 2*x2)", 3).unwrap();
    let closure = |x: &[f64]| (x[0] * x[1]).sin() + x[2];
    let b = builtin(F4, 3, &[], &[]).unwrap();
    for f in [Func::Expr(&e), Func::Closure(&closure), Func::Builtin(b)] {
        for m in [Method::TwoPhase, Method::BreadthFirst] {
            let serial =
                integrate(&CpuBackend::new(), m, f, &[0.0; 3], &[1.0; 3], &opts()).unwrap();
            for ranks in 1..=4 {
                for o in on_ranks(ranks, m, f, 3) {
                    let o = o.unwrap();
                    assert_eq!(
                        o.estimate.to_bits(),
                        serial.estimate.to_bits(),
                        "{f:?} {m:?} {ranks}"
                    );
                    assert_eq!(o.error.to_bits(), serial.error.to_bits());
                    assert_eq!(o.evaluations, serial.evaluations);
                }
            }
        }
    }
}

#[test]
fn a_nan_on_one_rank_stops_every_rank() {
    // Non-finite only where x1 > 0.9: the last rank's boxes of the first round.
    let e = Expr::parse("sqrt(0.9 - x1) + x2", 2).unwrap();
    for m in [Method::TwoPhase, Method::BreadthFirst] {
        for o in on_ranks(3, m, Func::Expr(&e), 2) {
            match o {
                Err(Error::IntegrandNotFinite { value, point }) => {
                    assert!(value.is_nan());
                    assert!(point[0] > 0.9, "{point:?}");
                }
                other => panic!("{m:?}: {other:?}"),
            }
        }
    }
}
