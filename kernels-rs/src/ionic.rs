//! Per-node ionic models of cardiac membrane, shared by the host and (when a
//! device kernel is written) the GPU: pure arithmetic, no state outside the
//! arguments, the same operations in the same order everywhere.
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

    /// One explicit (forward Euler) step of `dt` ms at a node with potential
    /// `v` (mV) and recovery variable `w`: returns the ionic current `I_ion`
    /// (µA/mm², for the membrane capacitance `cm` in µF/mm²) evaluated at the
    /// old state, and the new `w`. O(1).
    #[inline]
    pub fn step(&self, v: f64, w: f64, cm: f64, dt: f64) -> (f64, f64) {
        let (du, dw) = self.rates(self.u(v), w);
        let i_ion = -cm * (self.v_amp / self.t_scale) * du;
        (i_ion, w + dt / self.t_scale * dw)
    }
}

/// The per-step constants of the bidomain right-hand side
/// ([`bidomain_rhs`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BidomainStep {
    /// The membrane model.
    pub model: AlievPanfilov,
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
            model: AlievPanfilov::STANDARD,
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
}
