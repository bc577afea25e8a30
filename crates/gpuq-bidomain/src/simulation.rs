//! The time loop: one semi-implicit step = the explicit ionic update, one PCG
//! solve of the coupled system (warm-started, with the preconditioner built
//! once), the null space projected out, the activation times updated; all on
//! the backend, with no vector crossing to the host.

use crate::config::BidomainConfig;
use crate::kernels::BidomainKernels;
use gpuq_amg::{Amg, AmgKernels, AmgOptions, CycleOptions, Hierarchy, SetupKernels};
use gpuq_core::{Error, LinearOperator, Result};
use gpuq_kernels::ionic::{BidomainStep, IonicModel};
use gpuq_krylov::{cg, KrylovBackend};
use gpuq_sparse::{Csr, Layout, MatrixOperator};
use serde::Serialize;
use std::time::Instant;

/// Builds the preconditioner of the coupled matrix (interleaved 2x2 blocks) on
/// the backend. [`Simulation::new`] calls it exactly once; every step reuses
/// what it returns.
pub type PrecondBuilder<'a, B> =
    dyn FnMut(&B, &Csr<f64>) -> Result<Box<dyn LinearOperator<B, f64>>> + 'a;

/// The block-Jacobi fallback preconditioner ([`gpuq_krylov::BlockJacobi2`]:
/// the inverse of each node's 2x2 block). O(nodes) setup and application.
pub fn block_jacobi<B: KrylovBackend>(
    backend: &B,
    a: &Csr<f64>,
) -> Result<Box<dyn LinearOperator<B, f64>>> {
    Ok(Box::new(gpuq_krylov::BlockJacobi2::new(backend, a)?))
}

/// The AMG options of the bidomain solves: one damped-Jacobi sweep, the
/// fastest smoother measured on this 2x2 system on both backends
/// (bidomain3d:200 on the H100: 0.047 s against 0.083 s with Gauss-Seidel
/// and Chebyshev), and [`AmgOptions::default`] otherwise ([`amg`] sets the
/// block size). O(1).
pub fn amg_options() -> AmgOptions {
    AmgOptions {
        smoother: Some(gpuq_amg::Smoother::Jacobi),
        ..AmgOptions::default()
    }
}

/// The AMG preconditioner of `gpuq-amg` for the coupled matrix: `options`
/// with the block size set to 2 (the `(phi_e, v_m)` pairs), the hierarchy built
/// by the backend ([`Hierarchy::build_on`]: on the device for CUDA), its
/// V-cycle uploaded to the backend in `layout`. Its
/// default near-null space (the constant of each block component) contains
/// the system's null space `[1, 0, 1, 0, ...]`. Setup O(nnz) per level plus the
/// coarsest dense inverse.
pub fn amg<B: KrylovBackend + AmgKernels + SetupKernels>(
    backend: &B,
    a: &Csr<f64>,
    options: &AmgOptions,
    layout: Layout,
) -> Result<Box<dyn LinearOperator<B, f64>>> {
    let options = AmgOptions {
        block: 2,
        ..options.clone()
    };
    let hierarchy = Hierarchy::build_on(backend, a, &options)?;
    Ok(Box::new(Amg::<B, f64>::new(
        backend,
        &hierarchy,
        &CycleOptions { layout },
    )?))
}

/// What setting a simulation up cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SetupReport {
    /// The backend's name.
    pub backend: String,
    /// The preconditioner's name.
    pub preconditioner: String,
    /// Nodes of the mesh.
    pub nodes: usize,
    /// Unknowns of the coupled system (2 per node).
    pub unknowns: usize,
    /// Nonzeros of the coupled matrix.
    pub nonzeros: usize,
    /// Assembling the matrix on the host, s.
    pub assembly_s: f64,
    /// Uploading the matrix, s.
    pub upload_s: f64,
    /// Building the preconditioner (once), s.
    pub precond_s: f64,
}

/// One time step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepReport {
    /// Step number, from 1.
    pub step: usize,
    /// Time at the end of the step, ms.
    pub time_ms: f64,
    /// PCG iterations of the step's solve.
    pub iterations: usize,
    /// Its final relative residual (true residual).
    pub relative_residual: f64,
    /// Issuing the ionic update and right-hand side (on the CPU: running it;
    /// on CUDA the kernel runs asynchronously and its time shows in
    /// `solve_s`), s.
    pub ionic_s: f64,
    /// The solve and the null-space projection, s.
    pub solve_s: f64,
    /// The whole step, the activation update and the blow-up check (a norm)
    /// included, s.
    pub step_s: f64,
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// The setup.
    pub setup: SetupReport,
    /// Every step.
    pub steps: Vec<StepReport>,
    /// Time stepped, s of wall clock (setup excluded).
    pub total_s: f64,
    /// PCG iterations over all steps.
    pub total_iterations: usize,
    /// Fraction of the nodes activated at the end.
    pub activated_fraction: f64,
    /// The latest activation time, ms (NaN when no node was activated).
    pub last_activation_ms: f64,
}

/// The potentials and activation times of a simulation, copied to the host.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    /// Transmembrane potential per node, mV.
    pub vm: Vec<f64>,
    /// Extracellular potential per node, mV, with zero mean (the gauge the
    /// null-space projection fixes).
    pub phi_e: Vec<f64>,
    /// Activation time per node, ms: when v_m first reached the threshold
    /// (linearly interpolated within the step), NaN if it has not.
    pub activation: Vec<f64>,
}

/// A bidomain simulation on backend `B`: the matrix, the preconditioner and
/// the whole state (potentials, recovery variable, activation times) live on
/// the backend; [`Simulation::state`] copies what users look at to the host.
pub struct Simulation<B: BidomainKernels> {
    backend: B,
    config: BidomainConfig,
    kappa: f64,
    stimulated: Vec<bool>,
    op: MatrixOperator<B, f64>,
    precond: Box<dyn LinearOperator<B, f64>>,
    /// The normalised null-space vector z / ||z||, z = [1, 0, 1, 0, ...].
    null: B::Vector<f64>,
    /// The interleaved solution (phi_e, v_m), the next solve's first guess.
    x: B::Vector<f64>,
    /// The right-hand side, rewritten every step.
    rhs: B::Vector<f64>,
    /// Lumped mass per node.
    mass: B::Vector<f64>,
    /// 1 on stimulated nodes, 0 elsewhere.
    stim: B::Vector<f64>,
    /// Recovery variable per node.
    w: B::Vector<f64>,
    /// v_m of the previous step per node.
    v_old: B::Vector<f64>,
    /// Activation time per node (NaN: not yet).
    activation: B::Vector<f64>,
    steps_done: usize,
    setup: SetupReport,
}

impl<B: BidomainKernels> Simulation<B> {
    /// Assembles the coupled matrix for `config.dt`, uploads it, builds the
    /// preconditioner with `build_precond` (once) and starts from rest (v_m
    /// and w at the membrane model's rest state, phi_e = 0).
    ///
    /// Errors on an invalid configuration or tissue, and whatever the upload or
    /// the builder return. O(nnz) plus the builder's cost.
    pub fn new(
        backend: &B,
        config: BidomainConfig,
        build_precond: &mut PrecondBuilder<'_, B>,
    ) -> Result<Self> {
        config.validate()?;
        let t0 = Instant::now();
        let system = config.tissue.system::<f64>(config.dt)?;
        let assembly_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let op = MatrixOperator::new(backend, &system.matrix, config.layout)?;
        let upload_s = t1.elapsed().as_secs_f64();
        let t2 = Instant::now();
        let precond = build_precond(backend, &system.matrix)?;
        let precond_s = t2.elapsed().as_secs_f64();
        let tissue = &config.tissue;
        let n = tissue.nodes();
        let stimulated = tissue.corner_nodes(config.stimulus.radius);
        let stim: Vec<f64> = stimulated.iter().map(|&s| f64::from(u8::from(s))).collect();
        let (rest, w_rest) = config.ionic.rest();
        let scale = 1.0 / (n as f64).sqrt();
        let null: Vec<f64> = (0..2 * n)
            .map(|i| if i % 2 == 0 { scale } else { 0.0 })
            .collect();
        let start: Vec<f64> = (0..2 * n)
            .map(|i| if i % 2 == 0 { 0.0 } else { rest })
            .collect();
        let setup = SetupReport {
            backend: backend.name(),
            preconditioner: precond.name().to_string(),
            nodes: n,
            unknowns: 2 * n,
            nonzeros: system.matrix.nnz(),
            assembly_s,
            upload_s,
            precond_s,
        };
        Ok(Simulation {
            backend: backend.clone(),
            null: backend.upload(&null)?,
            x: backend.upload(&start)?,
            rhs: backend.zeros(2 * n)?,
            mass: backend.upload(&system.mass)?,
            stim: backend.upload(&stim)?,
            w: backend.upload(&vec![w_rest; n])?,
            v_old: backend.upload(&vec![rest; n])?,
            activation: backend.upload(&vec![f64::NAN; n])?,
            kappa: system.kappa,
            stimulated,
            op,
            precond,
            steps_done: 0,
            setup,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BidomainConfig {
        &self.config
    }

    /// What the setup cost.
    pub fn setup(&self) -> &SetupReport {
        &self.setup
    }

    /// Simulated time, ms.
    pub fn time(&self) -> f64 {
        self.steps_done as f64 * self.config.dt
    }

    /// Steps taken.
    pub fn steps_done(&self) -> usize {
        self.steps_done
    }

    /// Copies v_m, phi_e and the activation times to the host: two
    /// downloads, O(nodes).
    pub fn state(&self) -> Result<State> {
        let x = self.backend.download(&self.x)?;
        Ok(State {
            vm: x.iter().skip(1).step_by(2).copied().collect(),
            phi_e: x.iter().step_by(2).copied().collect(),
            activation: self.backend.download(&self.activation)?,
        })
    }

    /// Copies the activation times (ms, NaN where not yet activated) to the
    /// host: one download, O(nodes).
    pub fn activation(&self) -> Result<Vec<f64>> {
        self.backend.download(&self.activation)
    }

    /// Nodes inside the stimulus region.
    pub fn stimulated(&self) -> &[bool] {
        &self.stimulated
    }

    /// Advances one step of `dt`, all on the backend:
    ///
    /// 1. per node ([`BidomainKernels::bidomain_ionic`]): the membrane
    ///    model's current at the old state, its new variable w, and the
    ///    right-hand side `b = [0, m_k (kappa v_k - chi I_ion + I_stim)]`;
    /// 2. PCG from the previous solution with the stored preconditioner, then
    ///    `x -= (z^T x) z` (zero-mean phi_e);
    /// 3. per node ([`BidomainKernels::bidomain_activation`]): activation
    ///    times; and `||x||` as a blow-up check.
    ///
    /// Errors when the solve does not converge ([`Error::NotConverged`]) or
    /// breaks down, and with [`Error::NonFinite`] (index: the step) if the
    /// solution blows up. O(nnz) per PCG iteration plus O(nodes); no vector is
    /// transferred.
    pub fn step(&mut self) -> Result<StepReport> {
        let start = Instant::now();
        let t = self.time();
        let c = &self.config;
        let p = BidomainStep {
            model: c.ionic,
            cm: c.tissue.cm,
            chi: c.tissue.chi,
            dt: c.dt,
            kappa: self.kappa,
            current: if t < c.stimulus.duration {
                c.stimulus.current
            } else {
                0.0
            },
        };
        let (dt, threshold) = (c.dt, c.threshold);
        self.backend.bidomain_ionic(
            &p,
            &self.x,
            &mut self.w,
            &self.mass,
            &self.stim,
            &mut self.rhs,
        )?;
        let ionic_s = start.elapsed().as_secs_f64();
        let solve_start = Instant::now();
        let report = cg(
            &self.backend,
            &self.op,
            Some(self.precond.as_ref()),
            &self.rhs,
            &mut self.x,
            &self.config.solver,
        )?;
        if !report.converged {
            return Err(Error::NotConverged(Box::new(report)));
        }
        let s = self.backend.dotc(&self.null, &self.x)?;
        self.backend.axpy(-s, &self.null, &mut self.x)?;
        let solve_s = solve_start.elapsed().as_secs_f64();
        self.backend.bidomain_activation(
            t,
            dt,
            threshold,
            &self.x,
            &mut self.v_old,
            &mut self.activation,
        )?;
        self.steps_done += 1;
        let norm = self.backend.nrm2(&self.x)?;
        if !norm.is_finite() {
            return Err(Error::NonFinite {
                what: "norm of the bidomain solution (index: the step)".into(),
                index: self.steps_done,
            });
        }
        Ok(StepReport {
            step: self.steps_done,
            time_ms: self.time(),
            iterations: report.iterations,
            relative_residual: report.relative_residual,
            ionic_s,
            solve_s,
            step_s: start.elapsed().as_secs_f64(),
        })
    }

    /// Takes `steps` steps, calling `on_step` after each, and summarises them.
    /// Errors as [`Simulation::step`] and [`Simulation::summarize`].
    pub fn run(&mut self, steps: usize, on_step: &mut dyn FnMut(&StepReport)) -> Result<RunReport> {
        let start = Instant::now();
        let mut reports = Vec::with_capacity(steps);
        for _ in 0..steps {
            let r = self.step()?;
            on_step(&r);
            reports.push(r);
        }
        self.summarize(reports, start.elapsed().as_secs_f64())
    }

    /// The report of a run made of `steps` that took `total_s` seconds, with
    /// the activation summary of the current state (one download). O(nodes).
    pub fn summarize(&self, steps: Vec<StepReport>, total_s: f64) -> Result<RunReport> {
        let activation = self.backend.download(&self.activation)?;
        let activated = activation.iter().filter(|t| !t.is_nan());
        let (count, last) = activated.fold((0usize, f64::NAN), |(c, m), &t| (c + 1, t.max(m)));
        Ok(RunReport {
            setup: self.setup.clone(),
            total_iterations: steps.iter().map(|r| r.iterations).sum(),
            steps,
            total_s,
            activated_fraction: count as f64 / activation.len() as f64,
            last_activation_ms: last,
        })
    }
}
