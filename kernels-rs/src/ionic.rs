//! Per-node ionic models of cardiac membrane, shared by the host and the GPU
//! (`device/bidomain.rs`): pure arithmetic, no state outside the arguments,
//! the same operations in the same order everywhere.
//!
//! Every model is a two-variable model, a potential `v` (mV) and one gating
//! or recovery variable `w`, behind the trait [`IonicModel`]: its rest state
//! and one explicit (forward Euler) step that returns the ionic current at the
//! old state and the new `w`. [`Membrane`] holds one of the models and
//! dispatches by a match, so one device kernel runs any of them (the host
//! passes [`Membrane::params`], the kernel rebuilds it with
//! [`Membrane::from_params`]).
//!
//! [`AlievPanfilov`]: the two-variable model of Aliev and Panfilov (1996), in
//! its dimensionless form
//!
//! ```text
//!   du/dtau = k u (1 - u) (u - a) - u w
//!   dw/dtau = eps(u, w) (-w - k u (u - a - 1)),   eps = eps0 + mu1 w / (u + mu2)
//! ```
//!
//! mapped to physical units by `V = v_rest + v_amp u` (mV) and `t = t_scale tau`
//! (ms). The ionic current per unit membrane area that makes `Cm dV/dt =
//! -I_ion` reproduce the model is `I_ion = -Cm (v_amp / t_scale) du/dtau`
//! (µA/mm² for Cm in µF/mm²).
//!
//! [`MitchellSchaeffer`]: the two-current model of Mitchell and Schaeffer
//! (2003), with a realistic action potential shape (a fast upstroke, a
//! plateau, a repolarisation) and restitution of its duration through the gate
//! `h`, time in ms:
//!
//! ```text
//!   dv/dt = h v^2 (1 - v) / tau_in - v / tau_out
//!   dh/dt = (1 - h) / tau_open   if v < v_gate,   -h / tau_close   otherwise
//! ```
//!
//! with `v` in [0, 1] mapped to `V = v_rest + v_amp v` (mV), so `I_ion = -Cm
//! v_amp dv/dt`. It rests at `v = 0` with the gate open, `h = 1`.
/// Parameters of the Aliev-Panfilov model and its physical scaling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlievPanfilov {
    /// Excitation rate k.
    pub k: f64,
    /// Excitation threshold a (dimensionless).
    pub a: f64,
    /// Recovery rate far from the nullcline, eps0.
    pub eps0: f64,
    /// Recovery coupling mu1.
    pub mu1: f64,
    /// Recovery offset mu2.
    pub mu2: f64,
    /// Resting potential, mV (u = 0).
    pub v_rest: f64,
    /// Action-potential amplitude, mV (u = 1 at v_rest + v_amp).
    pub v_amp: f64,
    /// Time scale, ms per dimensionless time unit.
    pub t_scale: f64,
}

impl AlievPanfilov {
    /// The published parameters (k = 8, a = 0.15, eps0 = 0.002, mu1 = 0.2,
    /// mu2 = 0.3), resting at -80 mV with a 100 mV upstroke, 12.9 ms per unit
    /// of dimensionless time.
    pub const STANDARD: Self = Self {
        k: 8.0,
        a: 0.15,
        eps0: 0.002,
        mu1: 0.2,
        mu2: 0.3,
        v_rest: -80.0,
        v_amp: 100.0,
        t_scale: 12.9,
    };

    /// The dimensionless potential u of `v` (mV).
    #[inline]
    pub fn u(&self, v: f64) -> f64 {
        (v - self.v_rest) / self.v_amp
    }

    /// The dimensionless rates `(du/dtau, dw/dtau)` at `(u, w)`. The
    /// denominator `u + mu2` is kept at 1e-3 or more, so an undershoot below
    /// `u = -mu2` cannot divide by zero. O(1).
    #[inline]
    pub fn rates(&self, u: f64, w: f64) -> (f64, f64) {
        let du = self.k * u * (1.0 - u) * (u - self.a) - u * w;
        let denom = u + self.mu2;
        let denom = if denom > 1e-3 { denom } else { 1e-3 };
        let eps = self.eps0 + self.mu1 * w / denom;
        let dw = eps * (-w - self.k * u * (u - self.a - 1.0));
        (du, dw)
    }
}

/// A two-variable membrane model: a potential `v` (mV) and one gating or
/// recovery variable `w`, stepped explicitly.
pub trait IonicModel {
    /// The rest state `(v, w)`: v in mV, the value every node starts from.
    fn rest(&self) -> (f64, f64);

    /// One explicit (forward Euler) step of `dt` ms at a node with potential
    /// `v` (mV) and variable `w`: returns the ionic current `I_ion` (µA/mm²,
    /// for the membrane capacitance `cm` in µF/mm²) evaluated at the old state,
    /// and the new `w`. O(1).
    fn step(&self, v: f64, w: f64, cm: f64, dt: f64) -> (f64, f64);
}

impl IonicModel for AlievPanfilov {
    /// `(v_rest, 0)`.
    #[inline]
    fn rest(&self) -> (f64, f64) {
        (self.v_rest, 0.0)
    }

    /// The rates at `(u(v), w)`, `I_ion = -Cm (v_amp / t_scale) du/dtau`,
    /// `w + dt / t_scale dw/dtau`.
    #[inline]
    fn step(&self, v: f64, w: f64, cm: f64, dt: f64) -> (f64, f64) {
        let (du, dw) = self.rates(self.u(v), w);
        let i_ion = -cm * (self.v_amp / self.t_scale) * du;
        (i_ion, w + dt / self.t_scale * dw)
    }
}

/// Parameters of the Mitchell-Schaeffer model (times in ms) and its scaling
/// to mV.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MitchellSchaeffer {
    /// Time constant of the inward (depolarising) current, ms.
    pub tau_in: f64,
    /// Time constant of the outward (repolarising) current, ms.
    pub tau_out: f64,
    /// Time constant of the gate's opening (recovery), ms.
    pub tau_open: f64,
    /// Time constant of the gate's closing (during the action potential), ms.
    pub tau_close: f64,
    /// The potential (dimensionless, in [0, 1]) where the gate switches.
    pub v_gate: f64,
    /// Resting potential, mV (v = 0).
    pub v_rest: f64,
    /// Action-potential amplitude, mV (v = 1 at v_rest + v_amp).
    pub v_amp: f64,
}

impl MitchellSchaeffer {
    /// The published parameters (tau_in = 0.3 ms, tau_out = 6 ms, tau_open =
    /// 120 ms, tau_close = 150 ms, v_gate = 0.13), resting at -80 mV with a
    /// 100 mV range.
    pub const STANDARD: Self = Self {
        tau_in: 0.3,
        tau_out: 6.0,
        tau_open: 120.0,
        tau_close: 150.0,
        v_gate: 0.13,
        v_rest: -80.0,
        v_amp: 100.0,
    };

    /// The dimensionless potential of `v` (mV).
    #[inline]
    pub fn v(&self, v: f64) -> f64 {
        (v - self.v_rest) / self.v_amp
    }

    /// The rates `(dv/dt, dh/dt)` (per ms) at the dimensionless potential `v`
    /// and gate `h`. O(1).
    #[inline]
    pub fn rates(&self, v: f64, h: f64) -> (f64, f64) {
        let dv = h * v * v * (1.0 - v) / self.tau_in - v / self.tau_out;
        let dh = if v < self.v_gate {
            (1.0 - h) / self.tau_open
        } else {
            -h / self.tau_close
        };
        (dv, dh)
    }
}

impl IonicModel for MitchellSchaeffer {
    /// `(v_rest, 1)`: at rest, the gate is open.
    #[inline]
    fn rest(&self) -> (f64, f64) {
        (self.v_rest, 1.0)
    }

    #[inline]
    fn step(&self, v: f64, h: f64, cm: f64, dt: f64) -> (f64, f64) {
        let (dv, dh) = self.rates(self.v(v), h);
        (-cm * self.v_amp * dv, h + dt * dh)
    }
}

/// One of the membrane models, the one every node of a simulation runs: a
/// plain enum, so the host and the device dispatch by a match (the same for
/// every node: no divergence on the GPU).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Membrane {
    /// [`AlievPanfilov`].
    AlievPanfilov(AlievPanfilov),
    /// [`MitchellSchaeffer`].
    MitchellSchaeffer(MitchellSchaeffer),
}

impl Default for Membrane {
    /// The standard Aliev-Panfilov model.
    fn default() -> Self {
        Membrane::AlievPanfilov(AlievPanfilov::STANDARD)
    }
}

impl Membrane {
    /// The model's id as the device kernel takes it: 0 Aliev-Panfilov, 1
    /// Mitchell-Schaeffer.
    pub fn id(&self) -> u32 {
        match self {
            Membrane::AlievPanfilov(_) => 0,
            Membrane::MitchellSchaeffer(_) => 1,
        }
    }

    /// The model's name: `aliev-panfilov` or `mitchell-schaeffer`.
    pub fn name(&self) -> &'static str {
        match self {
            Membrane::AlievPanfilov(_) => "aliev-panfilov",
            Membrane::MitchellSchaeffer(_) => "mitchell-schaeffer",
        }
    }

    /// The id and the parameters in declaration order, padded with zeros to
    /// eight: what the device kernel receives. O(1).
    pub fn params(&self) -> (u32, [f64; 8]) {
        let p = match *self {
            Membrane::AlievPanfilov(m) => {
                [m.k, m.a, m.eps0, m.mu1, m.mu2, m.v_rest, m.v_amp, m.t_scale]
            }
            Membrane::MitchellSchaeffer(m) => [
                m.tau_in,
                m.tau_out,
                m.tau_open,
                m.tau_close,
                m.v_gate,
                m.v_rest,
                m.v_amp,
                0.0,
            ],
        };
        (self.id(), p)
    }

    /// The model of [`Membrane::params`]; `None` for an unknown id. O(1).
    pub fn from_params(id: u32, p: [f64; 8]) -> Option<Self> {
        match id {
            0 => Some(Membrane::AlievPanfilov(AlievPanfilov {
                k: p[0],
                a: p[1],
                eps0: p[2],
                mu1: p[3],
                mu2: p[4],
                v_rest: p[5],
                v_amp: p[6],
                t_scale: p[7],
            })),
            1 => Some(Membrane::MitchellSchaeffer(MitchellSchaeffer {
                tau_in: p[0],
                tau_out: p[1],
                tau_open: p[2],
                tau_close: p[3],
                v_gate: p[4],
                v_rest: p[5],
                v_amp: p[6],
            })),
            _ => None,
        }
    }
}

impl IonicModel for Membrane {
    #[inline]
    fn rest(&self) -> (f64, f64) {
        match self {
            Membrane::AlievPanfilov(m) => m.rest(),
            Membrane::MitchellSchaeffer(m) => m.rest(),
        }
    }

    #[inline]
    fn step(&self, v: f64, w: f64, cm: f64, dt: f64) -> (f64, f64) {
        match self {
            Membrane::AlievPanfilov(m) => m.step(v, w, cm, dt),
            Membrane::MitchellSchaeffer(m) => m.step(v, w, cm, dt),
        }
    }
}

impl From<AlievPanfilov> for Membrane {
    fn from(m: AlievPanfilov) -> Self {
        Membrane::AlievPanfilov(m)
    }
}

impl From<MitchellSchaeffer> for Membrane {
    fn from(m: MitchellSchaeffer) -> Self {
        Membrane::MitchellSchaeffer(m)
    }
}

/// The per-step constants of the bidomain right-hand side
/// ([`bidomain_rhs`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BidomainStep {
    /// The membrane model.
    pub model: Membrane,
    /// Membrane capacitance Cm, µF/mm².
    pub cm: f64,
    /// Surface-to-volume ratio chi, 1/mm.
    pub chi: f64,
    /// Time step, ms.
    pub dt: f64,
    /// Membrane scaling kappa = chi Cm / dt, mS/mm³.
    pub kappa: f64,
    /// Stimulus current density during this step, µA/mm³ (0 once it is off).
    pub current: f64,
}

/// One node's share of a semi-implicit bidomain step: from its transmembrane
/// potential `v` (mV), recovery variable `w`, lumped mass `mass` and stimulus
/// weight `stimulated` (1 inside the stimulus region, 0 outside), returns the
/// `v_m` entry of the right-hand side, `mass (kappa v - chi I_ion + stimulated
/// current)` (the `phi_e` entry is 0), and the new `w`. O(1).
#[inline]
pub fn bidomain_rhs(p: &BidomainStep, v: f64, w: f64, mass: f64, stimulated: f64) -> (f64, f64) {
    let (i_ion, w_new) = p.model.step(v, w, p.cm, p.dt);
    let b = mass * (p.kappa * v - p.chi * i_ion + stimulated * p.current);
    (b, w_new)
}

/// The activation time of a node after a step from `t_old` to `t_old + dt`
/// (ms) that took its potential from `v_old` to `v_new`: unchanged when it is
/// already set (not NaN) or `v_new` is below `threshold`; otherwise the time
/// the straight line between the two potentials crosses the threshold (the
/// end of the step if `v_old` was already above it). O(1).
#[inline]
pub fn activation_time(
    act: f64,
    t_old: f64,
    dt: f64,
    threshold: f64,
    v_old: f64,
    v_new: f64,
) -> f64 {
    if !act.is_nan() || v_new < threshold {
        return act;
    }
    let frac = if v_old < threshold {
        (threshold - v_old) / (v_new - v_old)
    } else {
        1.0
    };
    t_old + frac * dt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_is_a_fixed_point_and_the_threshold_splits() {
        let m = AlievPanfilov::STANDARD;
        assert_eq!(m.step(-80.0, 0.0, 0.01, 0.1), (0.0, 0.0));
        // Below threshold the current repolarises (positive outward current),
        // above it depolarises.
        let below = m.v_rest + 0.5 * m.a * m.v_amp;
        let above = m.v_rest + 2.0 * m.a * m.v_amp;
        assert!(m.step(below, 0.0, 0.01, 0.1).0 > 0.0);
        assert!(m.step(above, 0.0, 0.01, 0.1).0 < 0.0);
        // Recovery grows during the plateau.
        let (_, w) = m.step(m.v_rest + 0.9 * m.v_amp, 0.0, 0.01, 0.1);
        assert!(w > 0.0);
        // The guard keeps an undershoot finite.
        let (i, w) = m.step(m.v_rest - 0.4 * m.v_amp, 1.0, 0.01, 0.1);
        assert!(i.is_finite() && w.is_finite());
    }

    #[test]
    fn right_hand_side_and_activation() {
        let p = BidomainStep {
            model: AlievPanfilov::STANDARD.into(),
            cm: 0.01,
            chi: 140.0,
            dt: 0.1,
            kappa: 14.0,
            current: 200.0,
        };
        // At rest only the membrane term and the stimulus remain.
        assert_eq!(
            bidomain_rhs(&p, -80.0, 0.0, 0.5, 0.0),
            (0.5 * 14.0 * -80.0, 0.0)
        );
        assert_eq!(
            bidomain_rhs(&p, -80.0, 0.0, 0.5, 1.0).0,
            0.5 * (14.0 * -80.0 + 200.0)
        );
        let nan = f64::NAN;
        assert!(activation_time(nan, 1.0, 0.1, -40.0, -80.0, -50.0).is_nan());
        assert_eq!(activation_time(0.3, 1.0, 0.1, -40.0, -80.0, 0.0), 0.3);
        let t = activation_time(nan, 1.0, 0.1, -40.0, -60.0, -20.0);
        assert!((t - 1.05).abs() < 1e-12);
        assert_eq!(activation_time(nan, 1.0, 0.1, -40.0, -30.0, -20.0), 1.1);
    }

    #[test]
    fn mitchell_schaeffer_rests_fires_and_recovers() {
        let m = MitchellSchaeffer::STANDARD;
        // Rest (v = 0, gate open) is a fixed point.
        assert_eq!(m.rest(), (-80.0, 1.0));
        assert_eq!(m.step(-80.0, 1.0, 0.01, 0.05), (0.0, 1.0));
        // Below the excitation threshold (v (1 - v) = tau_in / tau_out, v
        // about 0.053) the current repolarises, above it depolarises.
        assert!(m.step(-80.0 + 100.0 * 0.04, 1.0, 0.01, 0.05).0 > 0.0);
        assert!(m.step(-80.0 + 100.0 * 0.1, 1.0, 0.01, 0.05).0 < 0.0);
        // The gate closes above v_gate and opens below it.
        assert!(m.step(-80.0 + 100.0 * 0.5, 0.8, 0.01, 0.05).1 < 0.8);
        assert!(m.step(-80.0 + 100.0 * 0.1, 0.8, 0.01, 0.05).1 > 0.8);
        // A membrane patch kicked above threshold: a fast upstroke, a plateau,
        // repolarisation back to rest, the potential staying in [v_rest, v_rest
        // + v_amp]. dv/dt = -I_ion / Cm.
        let (cm, dt) = (0.01, 0.01);
        let (mut v, mut h) = (-60.0, 1.0);
        let (mut peak, mut t_peak, mut t_up, mut t_end) = (v, 0.0, f64::NAN, f64::NAN);
        for k in 0..100_000 {
            let (i, h_new) = m.step(v, h, cm, dt);
            v -= dt * i / cm;
            h = h_new;
            let t = (k + 1) as f64 * dt;
            if v > peak {
                (peak, t_peak) = (v, t);
            }
            if t_up.is_nan() && v > 0.0 {
                t_up = t;
            }
            if t_end.is_nan() && t > t_peak + 10.0 && v < -70.0 {
                t_end = t;
            }
            assert!((-80.0..=20.0).contains(&v), "v = {v} at {t} ms");
        }
        assert!(
            peak > 10.0 && t_up < 3.0,
            "0 mV at {t_up} ms, peak {peak} mV"
        );
        // The action potential lasts a few hundred ms (APD90 about
        // tau_close ln(1 / (4 tau_in / tau_out)) = 240 ms).
        assert!(t_end > 150.0 && t_end < 400.0, "repolarised at {t_end} ms");
        assert!((v + 80.0).abs() < 0.1);
    }

    #[test]
    fn membrane_dispatches_and_round_trips_its_parameters() {
        let ap = Membrane::from(AlievPanfilov::STANDARD);
        let ms = Membrane::from(MitchellSchaeffer::STANDARD);
        assert_eq!(Membrane::default(), ap);
        for m in [ap, ms] {
            let (id, p) = m.params();
            assert_eq!(Membrane::from_params(id, p), Some(m));
        }
        assert_eq!((ap.id(), ms.id()), (0, 1));
        assert_eq!(ms.name(), "mitchell-schaeffer");
        assert_eq!(Membrane::from_params(7, [0.0; 8]), None);
        assert_eq!(ms.rest(), (-80.0, 1.0));
        assert_eq!(ap.rest(), (-80.0, 0.0));
        let v = -50.0;
        assert_eq!(
            ms.step(v, 0.7, 0.01, 0.05),
            MitchellSchaeffer::STANDARD.step(v, 0.7, 0.01, 0.05)
        );
        assert_eq!(
            ap.step(v, 0.7, 0.01, 0.05),
            AlievPanfilov::STANDARD.step(v, 0.7, 0.01, 0.05)
        );
    }
}
