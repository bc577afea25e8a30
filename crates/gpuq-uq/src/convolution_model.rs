//! (iii) The time response of a user's model to AR(1) load samples p s(t), by
//! modal superposition and FFT convolution.
//!
//! Each mode i of the modal basis ([`crate::modal::modal_basis`]) is an
//! oscillator q'' + 2 z_i w_i q' + w_i^2 q = Gamma_i s(t); with s held over each
//! step (zero-order hold) its response is exactly the discrete convolution with
//! kappa_i(j) = [Phi_i^j gamma_i]_q, Phi_i = e^(A_i dt) and gamma_i =
//! int_0^dt e^(A_i s) ds (0, Gamma_i) from one 3 x 3 matrix exponential per
//! mode. An output o then has the scalar kernel g_o(j) = sum_i phi_i(o)
//! kappa_i(j), and the rest is the beam's convolution path
//! ([`crate::convolution::Kernels`], [`crate::convolution::ConvolutionKernels`]):
//! the AR(1) filter folded into the kernel, one FFT of each sample's normals,
//! one product and inverse FFT per output, statistics reduced where the
//! samples are computed, on the CPU (Rayon, rustfft) or the GPU (cuFFT).
//!
//! Cost: the modes, then O(m N_t) for the kernels, O(r L log L) per sample.
//! Only x0 = 0 is supported.

use crate::convolution::{ConvolutionKernels, ConvolutionResult, Dense, Kernels};
use crate::eigen::ModeOptions;
use crate::lobpcg::EigenBackend;
use crate::modal::{modal_basis, ModalSummary};
use crate::model::Model;
use crate::psd::Ar1;
use gpuq_core::{Error, Result};
use serde::Serialize;
use std::time::Instant;

/// The convolution problem on a model (it needs M and damping).
#[derive(Clone, Debug)]
pub struct ModelConvolution<'a> {
    /// The model.
    pub model: &'a Model,
    /// The load's shape p on the free DOFs.
    pub load_shape: Vec<f64>,
    /// Output DOFs (full numbering).
    pub outputs: Vec<usize>,
    /// The modes kept (at least one).
    pub modes: ModeOptions,
    /// The load process (its `dt` is the time step).
    pub load: Ar1,
    /// Time steps N_t.
    pub steps: usize,
}

/// What [`model_convolution`] returns: the statistics (outputs in the order
/// given) and the modes used.
#[derive(Clone, Debug, Serialize)]
pub struct ModelConvolutionResult {
    /// Statistics, peaks, histories and timings.
    pub response: ConvolutionResult,
    /// The modes.
    pub modal: ModalSummary,
}

/// kappa(j), j = 0..nt: the zero-order-hold response of q'' + 2 z w q' + w^2 q
/// = gamma u to a unit step of u held over [0, dt), sampled at the steps' ends
/// shifted as the beam's output kernel (kappa(0) = \[gamma_d\]_q). O(nt).
pub fn mode_kernel(w: f64, z: f64, gamma: f64, dt: f64, nt: usize) -> Vec<f64> {
    // The augmented [A, B; 0, 0] dt of order 3.
    let aug = Dense {
        n: 3,
        a: vec![
            0.0,
            dt,
            0.0,
            -w * w * dt,
            -2.0 * z * w * dt,
            gamma * dt,
            0.0,
            0.0,
            0.0,
        ],
    };
    let e = aug.expm();
    let phi = [e.a[0], e.a[1], e.a[3], e.a[4]];
    let mut v = [e.a[2], e.a[5]];
    let mut out = Vec::with_capacity(nt);
    for _ in 0..nt {
        out.push(v[0]);
        v = [phi[0] * v[0] + phi[1] * v[1], phi[2] * v[0] + phi[3] * v[1]];
    }
    out
}

/// Runs `samples` AR(1) load samples through the model's modes by FFT
/// convolution on `backend` (see the module docs); histories of samples
/// 0..keep. Errors on a bad problem (sizes, outputs, no mass or damping,
/// fewer than 2 steps, no modes), and as the eigensolver does.
pub fn model_convolution<B: ConvolutionKernels + EigenBackend>(
    backend: &B,
    problem: &ModelConvolution<'_>,
    samples: usize,
    seed: u64,
    keep: usize,
) -> Result<ModelConvolutionResult> {
    let start = Instant::now();
    let model = problem.model;
    problem.load.validate()?;
    if problem.steps < 2 {
        return Err(Error::InvalidArgument(
            "convolution: at least 2 steps".into(),
        ));
    }
    if samples == 0 {
        return Err(Error::InvalidArgument(
            "model_convolution: samples must be at least 1".into(),
        ));
    }
    if problem.modes.count == 0 {
        return Err(Error::InvalidArgument(
            "the convolution of a model runs on its modes: ModelConvolution::modes.count must be at least 1".into(),
        ));
    }
    if problem.load_shape.len() != model.dofs() {
        return Err(Error::shape(
            "load shape",
            model.dofs(),
            problem.load_shape.len(),
        ));
    }
    if matches!(model.damping, crate::model::Damping::None) {
        return Err(Error::InvalidArgument(
            "the convolution needs damping: a damping matrix, Rayleigh coefficients or a modal ratio"
                .into(),
        ));
    }
    if problem.outputs.is_empty() {
        return Err(Error::InvalidArgument("no output DOFs".into()));
    }
    let out: Vec<usize> = problem
        .outputs
        .iter()
        .map(|&d| model.reduced_dof(d))
        .collect::<Result<_>>()?;
    let basis = modal_basis(backend, model, &problem.load_shape, &out, &problem.modes)?;
    let s = &basis.summary;
    let dt = problem.load.dt;
    let kappas: Vec<Vec<f64>> = (0..s.omega.len())
        .map(|i| mode_kernel(s.omega[i], s.damping[i], basis.gamma[i], dt, problem.steps))
        .collect();
    let g: Vec<Vec<f64>> = basis
        .at_outputs
        .iter()
        .map(|row| {
            (0..problem.steps)
                .map(|j| row.iter().zip(&kappas).map(|(phi, k)| phi * k[j]).sum())
                .collect()
        })
        .collect();
    let kernels = Kernels::new(&g, &problem.load, problem.steps);
    let setup_s = start.elapsed().as_secs_f64();
    let t = Instant::now();
    let sums = backend.convolve(&kernels, seed, samples, keep)?;
    let time_s = t.elapsed().as_secs_f64();
    let d = (samples.max(2) - 1) as f64;
    Ok(ModelConvolutionResult {
        response: ConvolutionResult {
            samples,
            steps: problem.steps,
            std: sums.m2.iter().map(|q| (q / d).sqrt()).collect(),
            mean: sums.mean,
            peaks: sums.peaks,
            histories: sums.histories,
            setup_s,
            time_s,
        },
        modal: basis.summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beam::Beam;
    use crate::model::Damping;
    use gpuq_cpu::CpuBackend;

    #[test]
    fn a_mode_kernel_is_the_exact_step_response() {
        // Undamped: a unit step of u held over [0, dt) from rest gives
        // q(dt) = gamma (1 - cos w dt) / w^2, then free oscillation.
        let (w, dt, g) = (3.0f64, 0.1, 2.0);
        let k = mode_kernel(w, 0.0, g, dt, 5);
        let q1 = g * (1.0 - (w * dt).cos()) / (w * w);
        let v1 = g * (w * dt).sin() / w;
        assert!((k[0] - q1).abs() < 1e-14);
        for (j, kj) in k.iter().enumerate() {
            let t = j as f64 * dt;
            let want = q1 * (w * t).cos() + v1 / w * (w * t).sin();
            assert!((kj - want).abs() < 1e-13, "{j}: {kj} vs {want}");
        }
    }

    /// The beam's model with every mode (seed 001's example 3 as `uq
    /// convolution` runs it): under a constant unit tip load the response
    /// settles at sum_j g(j), the tip flexibility L^3 / (3 E I); the samples
    /// are those of the kernel's FFT path.
    #[test]
    fn the_beams_modes_settle_at_the_tip_flexibility() {
        let beam = Beam::unit(8).unwrap();
        let model = beam.model().unwrap();
        let n = model.dofs();
        let mut shape = vec![0.0; n];
        shape[beam.tip()] = 1.0;
        let load = Ar1 {
            phi: 0.9,
            sigma: 1.0,
            dt: 0.01,
        };
        let basis = modal_basis(
            &gpuq_cpu::CpuBackend::new(),
            &model,
            &shape,
            &[beam.tip()],
            &ModeOptions::every(n),
        )
        .unwrap();
        let s = &basis.summary;
        assert_eq!(s.omega.len(), n);
        assert!((s.mass_captured - 1.0).abs() < 1e-9);
        // Long enough for the slowest mode (w = 3.5, 2 % damping) to settle.
        let steps = 400_000;
        let settled: f64 = (0..n)
            .map(|i| {
                let k = mode_kernel(s.omega[i], s.damping[i], basis.gamma[i], load.dt, steps);
                basis.at_outputs[0][i] * k.iter().sum::<f64>()
            })
            .sum();
        assert!(
            (settled / beam.tip_deflection(1.0) - 1.0).abs() < 1e-6,
            "{settled}"
        );
        let problem = ModelConvolution {
            model: &model,
            load_shape: shape,
            outputs: vec![beam.tip()],
            modes: ModeOptions::every(n),
            load,
            steps: 300,
        };
        let r = model_convolution(&CpuBackend::new(), &problem, 64, 5, 2).unwrap();
        assert!(r.response.std[299] > 0.0 && r.response.peaks.len() == 64);
    }

    #[test]
    fn bad_problems_are_refused() {
        let beam = Beam::unit(8).unwrap();
        let model = Model::new(
            beam.stiffness().to_csr().unwrap(),
            Some(beam.mass().to_csr().unwrap()),
            Damping::Modal(0.02),
            &[],
        )
        .unwrap();
        let ok = ModelConvolution {
            model: &model,
            load_shape: vec![1.0; 8],
            outputs: vec![6],
            modes: ModeOptions {
                count: 3,
                ..ModeOptions::default()
            },
            load: Ar1 {
                phi: 0.5,
                sigma: 1.0,
                dt: 0.01,
            },
            steps: 64,
        };
        let cpu = CpuBackend::new();
        assert!(model_convolution(&cpu, &ok, 10, 1, 0).is_ok());
        assert!(model_convolution(&cpu, &ok, 0, 1, 0).is_err());
        for bad in [
            ModelConvolution {
                steps: 1,
                ..ok.clone()
            },
            ModelConvolution {
                outputs: vec![8],
                ..ok.clone()
            },
            ModelConvolution {
                load_shape: vec![1.0; 3],
                ..ok.clone()
            },
            ModelConvolution {
                modes: ModeOptions {
                    count: 0,
                    ..ok.modes
                },
                ..ok.clone()
            },
        ] {
            assert!(model_convolution(&cpu, &bad, 10, 1, 0).is_err());
        }
    }
}
