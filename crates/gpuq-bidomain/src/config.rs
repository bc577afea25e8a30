//! What a simulation needs besides the backend and the preconditioner.

use gpuq_core::{Error, Result};
use gpuq_kernels::ionic::Membrane;
use gpuq_krylov::KrylovOptions;
use gpuq_sparse::bidomain::Tissue;
use gpuq_sparse::Layout;

/// The stimulus: a transmembrane current injected at t = 0 into the nodes
/// within `radius` of the corner at the origin (a quarter disc in 2D, a
/// quarter cylinder through the slab's thickness in 3D).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stimulus {
    /// Radius of the stimulated region around the corner (0, 0), mm.
    pub radius: f64,
    /// Current density, µA/mm³ of tissue.
    pub current: f64,
    /// How long it is applied from t = 0, ms.
    pub duration: f64,
}

impl Default for Stimulus {
    /// 0.6 mm, 200 µA/mm³ for 2 ms: the region must be larger than the
    /// tissue's liminal size (about the space constant, 0.5 mm here) and the
    /// current last long enough for the slow Aliev-Panfilov upstroke, or the
    /// excitation dies out; 0.35 mm for 1 ms does not start a wave.
    fn default() -> Self {
        Stimulus {
            radius: 0.6,
            current: 200.0,
            duration: 2.0,
        }
    }
}

/// A bidomain run: tissue, time step, membrane model, stimulus, activation
/// threshold and the linear solver's stopping rules.
#[derive(Clone, Debug, PartialEq)]
pub struct BidomainConfig {
    /// Geometry, conductivities, chi and Cm.
    pub tissue: Tissue,
    /// Time step, ms.
    pub dt: f64,
    /// The membrane model (every node starts from its rest state).
    pub ionic: Membrane,
    /// The stimulus.
    pub stimulus: Stimulus,
    /// A node is activated when v_m first reaches this potential, mV.
    pub threshold: f64,
    /// Stopping rules of each step's PCG solve (relative to the step's right-hand side).
    pub solver: KrylovOptions,
    /// How the backend stores the matrix.
    pub layout: Layout,
}

impl BidomainConfig {
    /// Defaults for the given tissue: dt = 0.05 ms, the standard
    /// Aliev-Panfilov model, [`Stimulus::default`], threshold -40 mV, PCG to a
    /// relative residual of 1e-8 without keeping residual histories, CSR.
    pub fn new(tissue: Tissue) -> Self {
        BidomainConfig {
            tissue,
            dt: 0.05,
            ionic: Membrane::default(),
            stimulus: Stimulus::default(),
            threshold: -40.0,
            solver: KrylovOptions {
                record_history: false,
                ..KrylovOptions::default()
            },
            layout: Layout::Csr,
        }
    }

    /// Checks the numbers are finite and in range (the tissue is checked when
    /// it is assembled).
    pub fn validate(&self) -> Result<()> {
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        let s = &self.stimulus;
        let valid = non_negative(self.dt)
            && self.dt > 0.0
            && non_negative(s.radius)
            && s.current.is_finite()
            && non_negative(s.duration)
            && self.threshold.is_finite();
        if !valid {
            return Err(Error::InvalidArgument(format!(
                "bidomain: dt must be positive, the stimulus and threshold finite (dt = {} ms, \
                 stimulus radius {} mm, current {}, duration {} ms, threshold {} mV)",
                self.dt, s.radius, s.current, s.duration, self.threshold
            )));
        }
        self.solver.validate()
    }
}
