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
//! with no-flux (pure Neumann) boundaries, anisotropic conductivities (the
//! literature's `sigma_i = 0.17 / 0.019`, `sigma_e = 0.62 / 0.24` mS/mm along
//! / across the fibres by default, or calibrated to conduction velocities:
//! [`calibrate()`]), fibres along x by default, `chi = 140 /mm`, `Cm = 0.01
//! µF/mm²`. The membrane model ([`Membrane`], through the trait
//! [`IonicModel`]) is the two-variable Aliev-Panfilov model
//! ([`AlievPanfilov`], the default: resting at -80 mV, a 100 mV upstroke,
//! 12.9 ms per model time unit) or the Mitchell-Schaeffer model
//! ([`MitchellSchaeffer`]: tau_in = 0.3, tau_out = 6, tau_open = 120,
//! tau_close = 150 ms, v_gate = 0.13; a fast upstroke, a plateau and
//! restitution of the action potential's duration; v in [0, 1] shown as -80
//! to +20 mV). Units: mm, ms, mV, mS/mm, µA/mm² of membrane for `I_ion`,
//! µA/mm³ of tissue for `I_stim`.
//!
//! ## One step (the splitting)
//!
//! First-order IMEX (semi-implicit Euler): the ionic current and the recovery
//! (or gating) variable explicit at `t_n` (forward Euler, per node), both
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
//! g(v^n, w^n)`; every node starts from the model's rest state. The matrix does not change from step to step, so it is
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
//! ## Conduction velocity
//!
//! [`calibrate()`] (module [`mod@calibrate`]) scales the
//! conductivities until the plane-wave conduction velocities along and across
//! the fibres match targets (by default 0.6 and 0.2 m/s, human ventricle)
//! within 1%, for the membrane model, the time step and the grid spacing of the
//! run: measured as openCARP's `tuneCV` measures them, from the first
//! threshold crossings at a third and two thirds of a 1-D cable run on the host
//! with the run's discretisation and per-node functions; the along- and
//! across-fibre pairs (sigma_i, sigma_e) are scaled separately, keeping each
//! pair's ratio (CV ~ sqrt(sigma)). A few milliseconds in release builds,
//! cached per input for the process. [`Calibration::apply`] sets the
//! conductivities and widens the stimulus by the square root of the larger
//! factor (every length of the solution stretches by it, the smallest region
//! a stimulus must cover among them). [`measure_cv`] measures the cable's
//! velocities of any conductivities, [`sheet_cv`] those of a run's own sheet
//! from its activation times (on the edges through the corner stimulus: near
//! the stimulus and the far edge the wave runs faster or, curved, slower than
//! a plane wave), and [`calibrate::strip_cv`] those of a thin strip through the
//! backend's time stepping. With the literature conductivities the
//! Aliev-Panfilov model conducts at 0.12 / 0.04 m/s and Mitchell-Schaeffer at
//! 0.33 / 0.12 m/s; 0.6 / 0.2 m/s take about 25 / 21 and 3.3 / 2.9 times them.
//! The Aliev-Panfilov upstroke is slow, so at 0.6 m/s its wave front is several
//! mm wide: on a sheet of a few mm the whole sheet is front.
//!
//! ## Not done
//!
//! * No physiological (many-current) ionic models, no adaptive time stepping,
//!   no bath or extracellular stimulus, fibre directions constant over the
//!   tissue, structured grids only.
//! * The CV calibration holds for plane waves with the fibres along a grid
//!   axis; with the fibres at an angle to the grid, P1 triangles conduct a
//!   little differently (the cable does not see the grid's diagonal).
//!
//! An example run: `cargo run --release -p gpuq-bidomain --example
//! activation_map -- 128 600 activation.png` (calibrated, 30 ms).

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
    amg, amg_options, block_jacobi, PrecondBuilder, RunReport, SetupReport, Simulation, State,
    StepReport,
};
