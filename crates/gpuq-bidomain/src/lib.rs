//! # gpuq-bidomain
//!
//! Semi-implicit time stepping of the cardiac bidomain model (seed 002,
//! chapter 8) on any gpuq backend: the coupled 2x2 system for
//! `(phi_e, v_m)` of [`gpuq_sparse::bidomain`] solved by preconditioned CG
//! each step, with the preconditioner built once and reused, and every solve
//! warm-started from the previous step's solution.
//!
//! ## Example
//!
//! 5 ms on a 1.6 mm square sheet (16 x 16 cells) on the CPU backend, PCG with
//! the 2x2-block Jacobi preconditioner (`amg` builds the AMG one the same
//! way):
//!
//! ```
//! use gpuq_bidomain::{block_jacobi, BidomainConfig, Simulation, Tissue};
//! use gpuq_cpu::CpuBackend;
//!
//! let mut config = BidomainConfig::new(Tissue::square(16)?);
//! config.dt = 0.1; // ms
//! config.solver.rtol = 1e-6;
//! let cpu = CpuBackend::new();
//! let mut sim = Simulation::new(&cpu, config, &mut |b, a| block_jacobi(b, a))?;
//! let report = sim.run(50, &mut |_| {})?;
//! assert!((sim.time() - 5.0).abs() < 1e-9);
//! // The stimulated corner has fired, and v_m stays in the model's range.
//! let state = sim.state()?;
//! let fired = state.activation.iter().zip(sim.stimulated()).filter(|(t, &s)| s && !t.is_nan());
//! assert!(fired.count() > 0 && report.activated_fraction > 0.0);
//! assert!(state.vm.iter().all(|&v| v > -90.0 && v < 40.0));
//! # Ok::<(), gpuq_core::Error>(())
//! ```
//!
//! ## The model
//!
//! ```text
//!   chi (Cm dv_m/dt + I_ion(v_m, w)) = div(sigma_i grad(v_m + phi_e)) + I_stim
//!   0 = div((sigma_i + sigma_e) grad phi_e) + div(sigma_i grad v_m)
//!   dw/dt = g(v_m, w)
//! ```
//!
//! on a square sheet (P1 triangles) or a slab (trilinear hexahedra) of tissue
//! with no-flux (pure Neumann) boundaries, anisotropic conductivities
//! `sigma_i = 0.17 / 0.019`, `sigma_e = 0.62 / 0.24` mS/mm along / across the
//! fibres (along x by default), `chi = 140 /mm`, `Cm = 0.01 µF/mm²`. The
//! membrane is the two-variable Aliev-Panfilov model
//! ([`gpuq_kernels::ionic::AlievPanfilov`], resting at -80 mV, a 100 mV
//! upstroke, 12.9 ms per model time unit). Units: mm, ms, mV, mS/mm, µA/mm²
//! of membrane for `I_ion`, µA/mm³ of tissue for `I_stim`.
//!
//! ## One step (the splitting)
//!
//! First-order IMEX (semi-implicit Euler): the ionic current and the recovery
//! variable explicit at `t_n` (forward Euler, per node), both
//! diffusion operators and the elliptic constraint implicit at `t_{n+1}`, the
//! two PDEs solved together as one symmetric positive semidefinite system
//! (not the decoupled elliptic-then-parabolic splitting):
//!
//! ```text
//!   [ K_i + K_e   K_i           ] [ phi_e^{n+1} ]   [ 0                                           ]
//!   [ K_i         K_i + kappa M ] [ v_m^{n+1}   ] = [ M (kappa v^n - chi I_ion(v^n, w^n) + I_stim) ]
//! ```
//!
//! with `kappa = chi Cm / dt` and `M` the lumped mass; `w^{n+1} = w^n + dt
//! g(v^n, w^n)`. The matrix does not change from step to step, so it is
//! assembled and uploaded once and the preconditioner (AMG or the 2x2-block
//! Jacobi [`block_jacobi`], supplied by the caller through a
//! [`PrecondBuilder`]) is built once. Its null space is the constant `phi_e`
//! (`z = [1, 0, 1, 0, ...]`); the right-hand side's `phi_e` block is zero, so
//! every step's system is consistent, and after each solve `z` is projected out
//! on the backend (one dot product and one axpy), which fixes the gauge
//! `mean(phi_e) = 0`.
//!
//! The stimulus is a current injected for the first 2 ms into the nodes
//! within 0.6 mm of the corner at the origin ([`Stimulus`]); a node's activation time is
//! when `v_m` first reaches the threshold (-40 mV), linearly interpolated
//! within the step. Outputs ([`output`]): the activation map as a figure (PNG,
//! or SVG by the file name: axes in mm, a viridis colour bar in ms, the nodes
//! never activated in grey), VTK legacy snapshots, Matrix Market snapshots.
//!
//! ## Where it runs, and the cost per step
//!
//! The whole state (solution, right-hand side, recovery variable, previous
//! `v_m`, activation times) lives on the backend. A step is one per-node pass
//! for the ionic model and the right-hand side, the PCG iterations (each one
//! SpMV with the coupled matrix, one preconditioner application, a few vector
//! operations), one dot product and one axpy for the null space, one per-node
//! pass for the activation times and one norm (the blow-up check): no vector
//! crosses between host and device; only the solver's scalars do. The
//! per-node passes are the trait [`BidomainKernels`]: default bodies from
//! core backend operations (download, host loop, upload: any backend runs),
//! Rayon passes on the CPU, kernels on CUDA, all calling the same `no_std`
//! functions of [`gpuq_kernels::ionic`]. [`Simulation::state`] copies the
//! potentials and activation times to the host when output is wanted.
//!
//! ## Not done
//!
//! * Only the Aliev-Panfilov model; no physiological ionic models, no
//!   adaptive time stepping, no bath or extracellular stimulus, fibre
//!   directions constant over the tissue, structured grids only.
//! * The conduction velocity is not calibrated against measurements: the
//!   model's slow upstroke (12.9 ms per model time unit) and the literature
//!   conductivities give roughly 0.1-0.2 m/s along the fibres and a third of
//!   that across, slower than real tissue (about 0.6 and 0.2 m/s).
//!
//! An example run: `cargo run --release -p gpuq-bidomain --example
//! activation_map -- 128 600 activation.png`.

#![warn(missing_docs)]

pub mod calibrate;
mod config;
pub mod kernels;
pub mod output;
mod simulation;

pub use calibrate::{
    calibrate, measure_cv, sheet_cv, Calibration, CalibrationOptions, CvTarget, Direction,
};
pub use config::{BidomainConfig, Stimulus};
pub use gpuq_kernels::ionic::{AlievPanfilov, IonicModel, Membrane, MitchellSchaeffer};
pub use gpuq_sparse::bidomain::{Conductivity, Tissue};
pub use kernels::BidomainKernels;
pub use simulation::{
    amg, block_jacobi, PrecondBuilder, RunReport, SetupReport, Simulation, State, StepReport,
};
