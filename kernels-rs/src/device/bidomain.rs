//! The bidomain time step's per-node work on the device (launched from
//! `gpuq-cuda/src/bidomain.rs`), the same arithmetic as the CPU through
//! [`crate::ionic`]: one thread per node, grid-stride.
//!
//! `bidomain_ionic_f64`: from the interleaved solution `x = (phi_e, v_m)` of
//! the last step, the new recovery (or gating) variable `w` and the
//! right-hand side `rhs = (0, mass (kappa v - chi I_ion + stim current))` of
//! the next solve, for the membrane model given by its id and parameters
//! ([`crate::ionic::Membrane::params`]): one kernel runs every model.
//!
//! `bidomain_activation_f64`: after a solve, the activation times (first
//! threshold crossing between `v_old` and the new `v_m`, see
//! [`crate::ionic::activation_time`]) and `v_old = v_m`.
//!
//! Safety contract: `x` and `rhs` are valid for `2 n` elements, the other
//! pointers for `n`; `rhs` and `w` do not alias the inputs.

use super::prelude::{global_id, grid_threads};
use crate::ionic::{activation_time, bidomain_rhs, BidomainStep, Membrane};

/// See the module notes. The membrane model is `Membrane::from_params(model,
/// [p0, ..., p7])` (any model of [`crate::ionic::Membrane`]: the match is the
/// same for every thread); an unknown id writes nothing.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bidomain_ionic_f64(
    n: usize,
    model: u32,
    p0: f64,
    p1: f64,
    p2: f64,
    p3: f64,
    p4: f64,
    p5: f64,
    p6: f64,
    p7: f64,
    cm: f64,
    chi: f64,
    dt: f64,
    kappa: f64,
    current: f64,
    x: *const f64,
    w: *mut f64,
    mass: *const f64,
    stim: *const f64,
    rhs: *mut f64,
) {
    let Some(model) = Membrane::from_params(model, [p0, p1, p2, p3, p4, p5, p6, p7]) else {
        return;
    };
    let p = BidomainStep {
        model,
        cm,
        chi,
        dt,
        kappa,
        current,
    };
    let t = grid_threads();
    let mut i = global_id();
    while i < n {
        let (b, w_new) = bidomain_rhs(&p, *x.add(2 * i + 1), *w.add(i), *mass.add(i), *stim.add(i));
        *w.add(i) = w_new;
        *rhs.add(2 * i) = 0.0;
        *rhs.add(2 * i + 1) = b;
        i += t;
    }
}

/// See the module notes.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bidomain_activation_f64(
    n: usize,
    t_old: f64,
    dt: f64,
    threshold: f64,
    x: *const f64,
    v_old: *mut f64,
    act: *mut f64,
) {
    let t = grid_threads();
    let mut i = global_id();
    while i < n {
        let v = *x.add(2 * i + 1);
        *act.add(i) = activation_time(*act.add(i), t_old, dt, threshold, *v_old.add(i), v);
        *v_old.add(i) = v;
        i += t;
    }
}
