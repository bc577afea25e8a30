//! Conduction velocity (CV): measured from activation times on a cable of
//! tissue, as openCARP's `tuneCV` does, and the conductivities calibrated so
//! that the CVs along and across the fibres match targets for the membrane
//! model, the time step and the grid spacing of a run.
//!
//! # The measurement
//!
//! [`cable_cv`]: a 1-D cable with the run's spacing `h`, the conductivities
//! of one direction, chi, Cm, membrane model, time step, threshold and
//! stimulus (over the cable's first `radius` mm), stepped exactly as
//! [`Simulation::step`] steps (the same per-node functions, the same
//! semi-implicit matrix) with a direct block-tridiagonal solve on the host. A
//! plane wave across the run's sheet (P1 triangles) or slab (Q1 hexahedra)
//! with the fibres along an axis solves these same 1-D equations, so the cable
//! gives the plane-wave CV of the run's discretisation. The activation time
//! of a node is the first crossing of the threshold (linearly interpolated
//! within the step), and the CV is `(x2 - x1) / (t2 - t1)` between the nodes
//! at a third and at two thirds of the cable, away from the stimulus and from
//! the far end; the run stops as soon as the second point has activated. In
//! mm/ms, which is m/s. [`strip_cv`] measures the same on a thin 2D strip
//! (one cell wide) run by [`Simulation`] on any backend: the check that the
//! backends' time stepping conducts at the cable's speed.
//!
//! The cable must be several wave fronts long: the stimulus and the sealed far
//! end speed the wave up within about a front's width, and a front is the CV
//! times the upstroke's duration: about 1.5 mm at 0.6 m/s for
//! Mitchell-Schaeffer, but several mm for the slow Aliev-Panfilov upstroke
//! (12.9 ms per model time unit). So the cable is
//! [`CalibrationOptions::cable_ms`] (100 ms) times the target CV long: 60 mm
//! along the fibres at 0.6 m/s, where the measured CV is within 0.3% of an
//! infinitely long cable's for both models.
//!
//! # The calibration
//!
//! The CV of a plane wave along the fibres depends only on the longitudinal
//! conductivities, the CV across them only on the transverse ones, and CV
//! grows like the square root of the conductivity. So each direction is
//! calibrated alone: the intra- and extracellular conductivities of that
//! direction are multiplied by one factor `s` (their ratio, the tissue's
//! anisotropy structure, is kept), starting from `s = 1` and updated by
//! `s <- s (cv_target / cv)^(1/p)`, with `p = 1/2` on the first update (the
//! square-root law: `sigma_new = sigma (cv_target / cv)^2`, `tuneCV`'s rule)
//! and then `p` the slope of `ln cv` over `ln s` between the last two runs
//! (a secant, which absorbs the grid's and the time step's departures from
//! the law), until the measured CV is within the tolerance (1% by default) of
//! the target (or, after [`CalibrationOptions::max_runs`] runs, the closest
//! run if within [`CalibrationOptions::accept`], 5%): usually 2 to 4 cable
//! runs per direction. A run with the
//! conductivities scaled by `s > 1` widens the stimulus by `sqrt(s)`, as
//! [`Calibration::apply`] does for the run.
//!
//! Cost: a cable run is O(nodes) per step, 600 nodes along at 0.6 m/s and
//! h = 0.1 mm, for the 70 ms or so the wave takes to pass two thirds of it:
//! a few ms in release builds, a few tenths of a second in debug builds.
//! Results are cached in memory for the process, keyed by every input bit
//! (model, spacing, time step, conductivities, chi, Cm, stimulus, threshold,
//! targets, options), so a second [`calibrate`] with the same inputs costs
//! nothing.

use crate::config::BidomainConfig;
use crate::kernels::BidomainKernels;
use crate::simulation::{amg, amg_options, Simulation};
use gpuq_amg::{AmgKernels, SetupKernels};
use gpuq_core::{Error, Result};
use gpuq_kernels::ionic::{activation_time, bidomain_rhs, BidomainStep, IonicModel};
use gpuq_sparse::bidomain::{Conductivity, Tissue};
use gpuq_sparse::Layout;
use serde::{Serialize, Serializer};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Along or across the fibres.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Along the fibre direction (the longitudinal conductivities).
    Along,
    /// Across it (the transverse conductivities).
    Across,
}

/// Target conduction velocities, m/s (= mm/ms).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CvTarget {
    /// Along the fibres.
    pub along: f64,
    /// Across them.
    pub across: f64,
}

impl Default for CvTarget {
    /// 0.6 m/s along and 0.2 m/s across the fibres: human ventricular
    /// myocardium.
    fn default() -> Self {
        CvTarget {
            along: 0.6,
            across: 0.2,
        }
    }
}

impl Direction {
    /// `along` or `across`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Along => "along",
            Direction::Across => "across",
        }
    }
}

impl CvTarget {
    /// Errors unless both velocities are positive and finite.
    pub fn validate(&self) -> Result<()> {
        for (what, v) in [("along", self.along), ("across", self.across)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::InvalidArgument(format!(
                    "the target conduction velocity {what} the fibres must be positive and \
                     finite (m/s), not {v}"
                )));
            }
        }
        Ok(())
    }

    /// The target in `direction`.
    pub fn get(&self, direction: Direction) -> f64 {
        match direction {
            Direction::Along => self.along,
            Direction::Across => self.across,
        }
    }
}

/// How the calibration iterates.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CalibrationOptions {
    /// Stop when `|cv / target - 1|` is at most this (default 0.01).
    pub tolerance: f64,
    /// After `max_runs` runs without meeting the tolerance, the closest run
    /// is kept when within this (default 0.05), else the calibration fails.
    pub accept: f64,
    /// Cable runs per direction (default 10).
    pub max_runs: usize,
    /// The cable's length is this many ms times the target CV (default 100
    /// ms: 60 mm along at 0.6 m/s, 20 mm across at 0.2 m/s); at least 30
    /// cells.
    pub cable_ms: f64,
}

impl Default for CalibrationOptions {
    /// 1%, 5% accepted after 10 runs, 100 ms.
    fn default() -> Self {
        CalibrationOptions {
            tolerance: 0.01,
            accept: 0.05,
            max_runs: 10,
            cable_ms: 100.0,
        }
    }
}

impl CalibrationOptions {
    /// Errors unless `0 < tolerance <= accept < 0.5`, there is at least one
    /// run and the cable time is positive and finite.
    pub fn validate(&self) -> Result<()> {
        let valid = self.tolerance > 0.0
            && self.tolerance <= self.accept
            && self.accept < 0.5
            && self.max_runs >= 1
            && self.cable_ms.is_finite()
            && self.cable_ms > 0.0;
        if !valid {
            return Err(Error::InvalidArgument(format!(
                "calibration options: 0 < tolerance <= accept < 0.5, max_runs at least 1 \
                 and cable_ms positive are needed ({self:?})"
            )));
        }
        Ok(())
    }
}

/// One cable run of a calibration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CvTrial {
    /// Which conductivities were scaled.
    pub direction: Direction,
    /// The factor on the starting conductivities of that direction.
    pub scale: f64,
    /// The measured CV, m/s; `None` when the wave did not reach the second
    /// point in time (conduction too slow, or blocked).
    pub cv_m_s: Option<f64>,
}

/// What [`calibrate`] found: the conductivities and the CVs measured with them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Calibration {
    /// The targets.
    pub target: CvTarget,
    /// The CV measured along the fibres on the cable with the calibrated
    /// conductivities, m/s.
    pub cv_along_m_s: f64,
    /// The CV measured across the fibres on the cable, m/s.
    pub cv_across_m_s: f64,
    /// Calibrated intracellular conductivities, mS/mm.
    #[serde(serialize_with = "conductivity")]
    pub sigma_i: Conductivity,
    /// Calibrated extracellular conductivities, mS/mm.
    #[serde(serialize_with = "conductivity")]
    pub sigma_e: Conductivity,
    /// The factor on the starting longitudinal conductivities.
    pub scale_along: f64,
    /// The factor on the starting transverse conductivities.
    pub scale_across: f64,
    /// Every cable run, in order.
    pub trials: Vec<CvTrial>,
    /// The cables' lengths along and across, mm.
    pub cable_mm: [f64; 2],
    /// Grid spacing, mm.
    pub dx_mm: f64,
    /// Time step, ms.
    pub dt_ms: f64,
    /// The membrane model.
    pub model: String,
    /// Wall time of the cable runs, s (of the call that filled the cache).
    pub time_s: f64,
    /// Whether this result came from the process's cache.
    pub cached: bool,
}

fn conductivity<S: Serializer>(c: &Conductivity, s: S) -> std::result::Result<S::Ok, S::Error> {
    [c.longitudinal, c.transverse].serialize(s)
}

impl Calibration {
    /// How much [`Calibration::apply`] widens the stimulus: the square root
    /// of the larger conductivity factor, at least 1.
    pub fn stimulus_scale(&self) -> f64 {
        self.scale_along.max(self.scale_across).sqrt().max(1.0)
    }

    /// `config` with the calibrated conductivities and the stimulus radius
    /// multiplied by [`Calibration::stimulus_scale`] (everything else kept).
    /// Conductivities `s` times larger stretch every length of the
    /// solution, the space constant and the smallest region a stimulus must
    /// cover to start a wave (the liminal size) among them, by `sqrt(s)`: the
    /// wider stimulus excites the calibrated tissue as the given one excited
    /// the tissue it was chosen for. (With the Aliev-Panfilov model, 0.6 m/s
    /// takes about 25 times the literature conductivities, and the default 0.6
    /// mm corner stimulus alone no longer starts a wave.) O(1).
    pub fn apply(&self, config: BidomainConfig) -> BidomainConfig {
        let radius = config.stimulus.radius * self.stimulus_scale();
        BidomainConfig {
            tissue: Tissue {
                sigma_i: self.sigma_i,
                sigma_e: self.sigma_e,
                ..config.tissue
            },
            stimulus: crate::Stimulus {
                radius,
                ..config.stimulus
            },
            ..config
        }
    }
}

/// The conductivities of `tissue` with those of `direction` multiplied by `s`.
fn scaled(tissue: &Tissue, direction: Direction, s: f64) -> (Conductivity, Conductivity) {
    let scale = |c: Conductivity| match direction {
        Direction::Along => Conductivity {
            longitudinal: s * c.longitudinal,
            ..c
        },
        Direction::Across => Conductivity {
            transverse: s * c.transverse,
            ..c
        },
    };
    (scale(tissue.sigma_i), scale(tissue.sigma_e))
}

/// How a cable or strip run ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StripOutcome {
    /// The CV between the two points, m/s.
    Measured(f64),
    /// The stimulated end activated, but the wave did not reach the second
    /// point within the time allowed (too slow, or conduction block).
    TooSlow,
    /// The stimulus did not excite the tissue.
    NotExcited,
}

/// Measures the CV in `direction` on a thin 2D strip (one cell wide, the
/// fibres along x, the wave started at one end) of `config`'s tissue (spacing,
/// conductivities, chi, Cm) about `length_mm` long, with `config`'s membrane
/// model, time step, stimulus, threshold and solver, run by [`Simulation`] on
/// `backend` for at most `max_ms` of simulated time, the PCG solves
/// preconditioned by AMG; the CV between a third and two thirds of the strip,
/// each time the mean of the strip's two nodes there. What [`cable_cv`]
/// measures, through the backend's time stepping.
///
/// Errors when the strip or the configuration is invalid or a solve fails.
/// Cost: one simulation of about `2 length_mm / h` nodes until the wave passes
/// two thirds of the strip (or `max_ms`), one activation download every 10
/// steps.
pub fn strip_cv<B: BidomainKernels + AmgKernels + SetupKernels>(
    backend: &B,
    config: &BidomainConfig,
    direction: Direction,
    length_mm: f64,
    max_ms: f64,
) -> Result<StripOutcome> {
    let h = config.tissue.h;
    check_length(length_mm, max_ms)?;
    let n = ((length_mm / h).round() as usize).max(6);
    let cells = match direction {
        Direction::Along => [n, 1, 0],
        Direction::Across => [1, n, 0],
    };
    let tissue = Tissue {
        cells,
        fibre_angle: 0.0,
        ..config.tissue
    };
    let config = BidomainConfig {
        tissue,
        layout: Layout::Csr,
        ..config.clone()
    };
    let mut sim = Simulation::new(backend, config, &mut |b, a| {
        amg(b, a, &amg_options(), Layout::Csr)
    })?;
    // The two nodes across the strip at position i (in cells from the
    // stimulated end).
    let nodes = |i: usize| match direction {
        Direction::Along => [i, n + 1 + i],
        Direction::Across => [2 * i, 2 * i + 1],
    };
    let (i1, i2) = (n / 3, (2 * n) / 3);
    let time = |act: &[f64], i: usize| {
        let [a, b] = nodes(i);
        0.5 * (act[a] + act[b])
    };
    let steps = (max_ms / sim.config().dt).ceil() as usize;
    for k in 1..=steps {
        sim.step()?;
        if k % 10 != 0 && k != steps {
            continue;
        }
        let act = sim.activation()?;
        let (t1, t2) = (time(&act, i1), time(&act, i2));
        if !t2.is_nan() && !t1.is_nan() {
            return Ok(StripOutcome::Measured((i2 - i1) as f64 * h / (t2 - t1)));
        }
    }
    let act = sim.activation()?;
    Ok(if time(&act, 0).is_nan() {
        StripOutcome::NotExcited
    } else {
        StripOutcome::TooSlow
    })
}

/// A 1-D bidomain cable of `n + 1` nodes `h` apart with the conductivities
/// `si`, `se` along it: the semi-implicit step's matrix (the 1-D linear
/// elements of [`gpuq_sparse::bidomain`] with the lumped mass, per unit of
/// cross-section), grounded at `phi_e[0] = 0` (which removes the null space
/// and changes `v_m` not at all), factored once by block LU: the inverses of
/// the pivots' 2x2 blocks.
struct Cable {
    /// Inverse of each node's pivot block, row-major.
    pivots: Vec<[f64; 4]>,
    /// The block coupling node j (rows) to node j + 1 (columns).
    upper: Vec<[f64; 4]>,
    /// Lumped mass per node, mm.
    mass: Vec<f64>,
}

fn mul(a: &[f64; 4], b: &[f64; 4]) -> [f64; 4] {
    [
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
    ]
}

fn apply(a: &[f64; 4], x: [f64; 2]) -> [f64; 2] {
    [a[0] * x[0] + a[1] * x[1], a[2] * x[0] + a[3] * x[1]]
}

fn transpose(a: &[f64; 4]) -> [f64; 4] {
    [a[0], a[2], a[1], a[3]]
}

impl Cable {
    /// Assembles and factors the cable's matrix for `kappa = chi Cm / dt`.
    /// O(n).
    fn new(n: usize, h: f64, si: f64, se: f64, kappa: f64) -> Cable {
        let nodes = n + 1;
        let mass: Vec<f64> = (0..nodes)
            .map(|j| if j == 0 || j == n { 0.5 * h } else { h })
            .collect();
        let (ki, ke) = (si / h, se / h);
        let mut upper = vec![[-(ki + ke), -ki, -ki, -ki]; n];
        // Grounding phi_e[0]: its row and column vanish but for the diagonal.
        upper[0][0] = 0.0;
        upper[0][1] = 0.0;
        let mut pivots = Vec::with_capacity(nodes);
        for j in 0..nodes {
            let links = if j == 0 || j == n { 1.0 } else { 2.0 };
            let mut d = [
                links * (ki + ke),
                links * ki,
                links * ki,
                links * ki + kappa * mass[j],
            ];
            if j == 0 {
                d = [1.0, 0.0, 0.0, d[3]];
            } else {
                // d - U^T C U with C the previous pivot's inverse.
                let u = &upper[j - 1];
                let s = mul(&transpose(u), &mul(&pivots[j - 1], u));
                for (a, b) in d.iter_mut().zip(s) {
                    *a -= b;
                }
            }
            let det = d[0] * d[3] - d[1] * d[2];
            pivots.push([d[3] / det, -d[1] / det, -d[2] / det, d[0] / det]);
        }
        Cable {
            pivots,
            upper,
            mass,
        }
    }

    /// Solves for the interleaved `(phi_e, v_m)` with the right-hand side of
    /// `b` (`b[j]` the pair of node j), in place. O(n).
    fn solve(&self, b: &mut [[f64; 2]]) {
        let n = b.len();
        for j in 1..n {
            let y = apply(&self.pivots[j - 1], b[j - 1]);
            let t = apply(&transpose(&self.upper[j - 1]), y);
            b[j] = [b[j][0] - t[0], b[j][1] - t[1]];
        }
        b[n - 1] = apply(&self.pivots[n - 1], b[n - 1]);
        for j in (0..n - 1).rev() {
            let t = apply(&self.upper[j], b[j + 1]);
            b[j] = apply(&self.pivots[j], [b[j][0] - t[0], b[j][1] - t[1]]);
        }
    }
}

/// Measures the CV in `direction` on a 1-D cable about `length_mm` long with
/// `config`'s spacing, conductivities of that direction, chi, Cm, membrane
/// model, time step, threshold and stimulus (over the cable's first `radius`
/// mm), running at most `max_ms` of simulated time: the plane-wave limit of
/// the run's discretisation (a wave uniform across a sheet or a slab of the
/// run's elements solves the same 1-D equations), stepped as
/// [`Simulation::step`] steps (the same per-node functions of
/// [`gpuq_kernels::ionic`]) with a direct block-tridiagonal solve on the host
/// in place of PCG. The CV is taken between the nodes at a third and at two
/// thirds of the cable.
///
/// Errors when the length, time or configuration is invalid. Cost: O(nodes)
/// per step, `length_mm / h` nodes, until the wave passes two thirds of the
/// cable (or `max_ms`).
pub fn cable_cv(
    config: &BidomainConfig,
    direction: Direction,
    length_mm: f64,
    max_ms: f64,
) -> Result<StripOutcome> {
    config.validate()?;
    check_length(length_mm, max_ms)?;
    let t = &config.tissue;
    let h = t.h;
    let n = ((length_mm / h).round() as usize).max(6);
    let (si, se) = match direction {
        Direction::Along => (t.sigma_i.longitudinal, t.sigma_e.longitudinal),
        Direction::Across => (t.sigma_i.transverse, t.sigma_e.transverse),
    };
    if !([si, se].iter().all(|s| s.is_finite() && *s > 0.0) && h.is_finite() && h > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "cable_cv: the spacing ({h} mm) and conductivities ({si}, {se} mS/mm) must be \
             positive and finite"
        )));
    }
    let kappa = t.kappa(config.dt);
    let cable = Cable::new(n, h, si, se, kappa);
    let nodes = n + 1;
    let r2 = config.stimulus.radius * config.stimulus.radius * (1.0 + 1e-12);
    let stim: Vec<f64> = (0..nodes)
        .map(|j| f64::from(u8::from((j as f64 * h).powi(2) <= r2)))
        .collect();
    let (rest, w_rest) = config.ionic.rest();
    let mut v = vec![rest; nodes];
    let mut w = vec![w_rest; nodes];
    let mut act = vec![f64::NAN; nodes];
    let mut b = vec![[0.0; 2]; nodes];
    let (i1, i2) = (n / 3, (2 * n) / 3);
    let steps = (max_ms / config.dt).ceil() as usize;
    for k in 0..steps {
        let time = k as f64 * config.dt;
        let p = BidomainStep {
            model: config.ionic,
            cm: t.cm,
            chi: t.chi,
            dt: config.dt,
            kappa,
            current: if time < config.stimulus.duration {
                config.stimulus.current
            } else {
                0.0
            },
        };
        for j in 0..nodes {
            let (bv, w_new) = bidomain_rhs(&p, v[j], w[j], cable.mass[j], stim[j]);
            w[j] = w_new;
            b[j] = [0.0, bv];
        }
        cable.solve(&mut b);
        for j in 0..nodes {
            let new = b[j][1];
            if !new.is_finite() {
                return Err(Error::NonFinite {
                    what: "v_m of the CV cable (index: the node)".into(),
                    index: j,
                });
            }
            act[j] = activation_time(act[j], time, config.dt, config.threshold, v[j], new);
            v[j] = new;
        }
        if !act[i2].is_nan() && !act[i1].is_nan() {
            return Ok(StripOutcome::Measured(
                (i2 - i1) as f64 * h / (act[i2] - act[i1]),
            ));
        }
    }
    Ok(if act[0].is_nan() {
        StripOutcome::NotExcited
    } else {
        StripOutcome::TooSlow
    })
}

fn check_length(length_mm: f64, max_ms: f64) -> Result<()> {
    if !(length_mm.is_finite() && length_mm > 0.0 && max_ms.is_finite() && max_ms > 0.0) {
        return Err(Error::InvalidArgument(format!(
            "the strip's length ({length_mm} mm) and time ({max_ms} ms) must be positive and \
             finite"
        )));
    }
    Ok(())
}

/// The plane-wave CVs `[along, across]` of `config`'s tissue as it is (m/s),
/// each measured by [`cable_cv`] on the cable [`calibrate`] would use for
/// the default targets ([`CvTarget::default`], `options.cable_ms`), waiting
/// up to ten times as long as the default target's crossing takes; `None`
/// where the wave does not cross (slower than a tenth of the default target,
/// or blocked).
///
/// Errors on invalid options or configuration, and with
/// [`Error::Precondition`] when the stimulus does not excite a cable. Cost:
/// two cable runs.
pub fn measure_cv(
    config: &BidomainConfig,
    options: &CalibrationOptions,
) -> Result<[Option<f64>; 2]> {
    options.validate()?;
    let goal = CvTarget::default();
    let mut out = [None; 2];
    for (k, direction) in [Direction::Along, Direction::Across]
        .into_iter()
        .enumerate()
    {
        let g = goal.get(direction);
        let length = cable_length(config, g, options);
        let max_ms = config.stimulus.duration + 10.0 * (2.0 * length / 3.0) / g + 5.0;
        out[k] = match cable_cv(config, direction, length, max_ms)? {
            StripOutcome::Measured(cv) => Some(cv),
            StripOutcome::TooSlow => None,
            StripOutcome::NotExcited => return Err(not_excited(config, direction, 1.0)),
        };
    }
    Ok(out)
}

/// The cable's length for the target `goal` (m/s), mm.
fn cable_length(config: &BidomainConfig, goal: f64, options: &CalibrationOptions) -> f64 {
    (goal * options.cable_ms).max(30.0 * config.tissue.h)
}

/// The error of a stimulus that does not excite the cable in `direction`
/// with its conductivities scaled by `s`.
fn not_excited(config: &BidomainConfig, direction: Direction, s: f64) -> Error {
    Error::Precondition {
        method: "conduction velocity calibration",
        reason: format!(
            "the stimulus (radius {} mm, current {}, {} ms) does not excite the cable {} \
             the fibres with the conductivities scaled by {s:.4}: raise its current, radius \
             or duration",
            config.stimulus.radius,
            config.stimulus.current,
            config.stimulus.duration,
            direction.name()
        ),
    }
}

/// The CVs `[along, across]` (m/s) on a run's sheet or slab from its
/// activation times (`activation`, one per node, NaN where not activated):
/// along the fibres between the nodes at a third and at two thirds of the
/// edge y = 0 (z = 0), across them on the edge x = 0, the edges through the
/// corner stimulus; the same first-crossing times and points as the cable's.
/// Both `None` unless the fibres run along x (`fibre_angle == 0`); each
/// `None` until both of its points have activated, and when the first point
/// lies within `stimulus_radius` (mm) of the corner (the stimulus excites
/// both points at once: no wave travels between them). Near the stimulus and the
/// far edge the wave runs faster than a plane wave (by much when the sheet is
/// only a few wave fronts wide), so these are the run's own velocities, not
/// the tissue's.
///
/// Errors when `activation` does not have one value per node. O(1) after the
/// check.
pub fn sheet_cv(
    tissue: &Tissue,
    activation: &[f64],
    stimulus_radius: f64,
) -> Result<[Option<f64>; 2]> {
    gpuq_core::check_same_len("sheet_cv (activation)", tissue.nodes(), activation.len())?;
    if tissue.fibre_angle != 0.0 {
        return Ok([None; 2]);
    }
    let [gx, _, _] = tissue.grid();
    let cv = |cells: usize, node: &dyn Fn(usize) -> usize| {
        let (i1, i2) = (cells / 3, (2 * cells) / 3);
        let (t1, t2) = (activation[node(i1)], activation[node(i2)]);
        let outside = i1 as f64 * tissue.h > stimulus_radius;
        (outside && i2 > i1 && t2 > t1).then(|| (i2 - i1) as f64 * tissue.h / (t2 - t1))
    };
    Ok([
        cv(tissue.cells[0], &|i| i),
        cv(tissue.cells[1], &|j| j * gx),
    ])
}

/// The process-wide cache of [`calibrate`]: input bits to result.
fn cache() -> &'static Mutex<HashMap<Vec<u64>, Calibration>> {
    static CACHE: std::sync::OnceLock<Mutex<HashMap<Vec<u64>, Calibration>>> =
        std::sync::OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Every input a calibration depends on, as bits.
fn key(config: &BidomainConfig, target: &CvTarget, options: &CalibrationOptions) -> Vec<u64> {
    let t = &config.tissue;
    let s = &config.stimulus;
    let (id, p) = config.ionic.params();
    let mut bits: Vec<u64> = vec![u64::from(id), options.max_runs as u64];
    let values = [
        t.h,
        t.chi,
        t.cm,
        t.sigma_i.longitudinal,
        t.sigma_i.transverse,
        t.sigma_e.longitudinal,
        t.sigma_e.transverse,
        config.dt,
        config.threshold,
        s.radius,
        s.current,
        s.duration,
        target.along,
        target.across,
        options.tolerance,
        options.accept,
        options.cable_ms,
    ];
    bits.extend(p.iter().chain(&values).map(|v| v.to_bits()));
    bits
}

/// Calibrates the conductivities of `config.tissue` so that the CVs along and
/// across the fibres match `target` for `config`'s membrane model, time step,
/// grid spacing, stimulus and threshold (see the module notes): returns the
/// conductivities (apply them with [`Calibration::apply`]), the CVs measured
/// with them on the cables, and every cable run ([`cable_cv`], on the host);
/// the tissue's grid and fibre angle do not matter.
///
/// Errors on an invalid target, options or configuration; with
/// [`Error::Precondition`] when the stimulus does not excite a cable or a
/// target is not reached within `max_runs` runs (a CV the model cannot reach
/// at this spacing and time step: conduction blocks on a grid too coarse for
/// the wave front). Cost: 2 to 4 cable runs per direction, or nothing when the
/// same inputs were calibrated before in this process.
pub fn calibrate(
    config: &BidomainConfig,
    target: CvTarget,
    options: &CalibrationOptions,
) -> Result<Calibration> {
    target.validate()?;
    options.validate()?;
    config.validate()?;
    let cache_key = key(config, &target, options);
    if let Some(c) = cache().lock().ok().and_then(|m| m.get(&cache_key).cloned()) {
        return Ok(Calibration { cached: true, ..c });
    }
    let start = Instant::now();
    let mut trials = Vec::new();
    let mut found = [(1.0, 0.0); 2];
    let mut cable_mm = [0.0; 2];
    for (k, direction) in [Direction::Along, Direction::Across]
        .into_iter()
        .enumerate()
    {
        let goal = target.get(direction);
        let length = cable_length(config, goal, options);
        cable_mm[k] = length;
        found[k] = calibrate_direction(config, direction, goal, length, options, &mut trials)?;
    }
    let (i_along, e_along) = scaled(&config.tissue, Direction::Along, found[0].0);
    let (i_across, e_across) = scaled(&config.tissue, Direction::Across, found[1].0);
    let calibration = Calibration {
        target,
        cv_along_m_s: found[0].1,
        cv_across_m_s: found[1].1,
        sigma_i: Conductivity {
            longitudinal: i_along.longitudinal,
            transverse: i_across.transverse,
        },
        sigma_e: Conductivity {
            longitudinal: e_along.longitudinal,
            transverse: e_across.transverse,
        },
        scale_along: found[0].0,
        scale_across: found[1].0,
        trials,
        cable_mm,
        dx_mm: config.tissue.h,
        dt_ms: config.dt,
        model: config.ionic.name().to_string(),
        time_s: start.elapsed().as_secs_f64(),
        cached: false,
    };
    if let Ok(mut m) = cache().lock() {
        m.insert(cache_key, calibration.clone());
    }
    Ok(calibration)
}

/// The factor on `direction`'s conductivities that gives `goal` m/s on a
/// cable of `length` mm, and the CV measured with it; every run appended to
/// `trials`.
fn calibrate_direction(
    config: &BidomainConfig,
    direction: Direction,
    goal: f64,
    length: f64,
    options: &CalibrationOptions,
    trials: &mut Vec<CvTrial>,
) -> Result<(f64, f64)> {
    // Time for the wave to pass two thirds of the cable at a quarter of the
    // target, after the stimulus.
    let max_ms = config.stimulus.duration + 4.0 * (2.0 * length / 3.0) / goal + 5.0;
    let what = direction.name();
    let mut s = 1.0f64;
    let mut last: Option<(f64, f64)> = None;
    let mut best: Option<(f64, f64)> = None;
    for _ in 0..options.max_runs {
        let (sigma_i, sigma_e) = scaled(&config.tissue, direction, s);
        // The stimulus widened as `Calibration::apply` widens it, so that the
        // cable stays excitable as the conductivities grow.
        let trial = BidomainConfig {
            tissue: Tissue {
                sigma_i,
                sigma_e,
                ..config.tissue
            },
            stimulus: crate::Stimulus {
                radius: config.stimulus.radius * s.sqrt().max(1.0),
                ..config.stimulus
            },
            ..config.clone()
        };
        let outcome = cable_cv(&trial, direction, length, max_ms)?;
        let cv = match outcome {
            StripOutcome::Measured(cv) => Some(cv),
            _ => None,
        };
        trials.push(CvTrial {
            direction,
            scale: s,
            cv_m_s: cv,
        });
        match outcome {
            StripOutcome::NotExcited => return Err(not_excited(config, direction, s)),
            // Far too slow: nine times the conductivity, three times the CV.
            StripOutcome::TooSlow => s *= 9.0,
            StripOutcome::Measured(cv) => {
                if best.is_none_or(|(_, b)| (cv / goal).ln().abs() < (b / goal).ln().abs()) {
                    best = Some((s, cv));
                }
                if (cv / goal - 1.0).abs() <= options.tolerance {
                    return Ok((s, cv));
                }
                let p = match last {
                    Some((ls, lc)) if (s.ln() - ls).abs() > 1e-9 => {
                        ((cv.ln() - lc) / (s.ln() - ls)).clamp(0.2, 1.0)
                    }
                    _ => 0.5,
                };
                last = Some((s.ln(), cv.ln()));
                s *= (goal / cv).powf(1.0 / p);
            }
        }
        if !(s.is_finite() && (1e-8..=1e8).contains(&s)) {
            break;
        }
    }
    if let Some((s, cv)) = best.filter(|(_, cv)| (cv / goal - 1.0).abs() <= options.accept) {
        return Ok((s, cv));
    }
    let closest = best.map_or("the wave never crossed the cable".to_string(), |(s, cv)| {
        format!("the closest was {cv:.4} m/s with the conductivities scaled by {s:.4}")
    });
    Err(Error::Precondition {
        method: "conduction velocity calibration",
        reason: format!(
            "{goal} m/s {what} the fibres is not reached within {:.1}% in {} cable runs with \
             dx = {} mm, dt = {} ms and the {} model: {closest}",
            100.0 * options.accept,
            options.max_runs,
            config.tissue.h,
            config.dt,
            config.ionic.name()
        ),
    })
}
