//! The bidomain time step's per-node work on the device (launched from
//! `gpuq-cuda/src/bidomain.rs`), the same arithmetic as the CPU through
//! [`crate::ionic`]: one thread per node, grid-stride.
//!
//! `bidomain_ionic_f64`: from the interleaved solution `x = (phi_e, v_m)` of
//! the last step, the new recovery variable `w` and the right-hand side
//! `rhs = (0, mass (kappa v - chi I_ion + stim current))` of the next solve.
//!
//! `bidomain_activation_f64`: after a solve, the activation times (first
//! threshold crossing between `v_old` and the new `v_m`, see
//! [`crate::ionic::activation_time`]) and `v_old = v_m`.
//!
//! Safety contract: `x` and `rhs` are valid for `2 n` elements, the other
//! pointers for `n`; `rhs` and `w` do not alias the inputs.

use super::prelude::{global_id, grid_threads};
use crate::ionic::{activation_time, bidomain_rhs, AlievPanfilov, BidomainStep};

/// See the module notes.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bidomain_ionic_f64(
    n: usize,
    k: f64,
    a: f64,
    eps0: f64,
    mu1: f64,
    mu2: f64,
    v_rest: f64,
    v_amp: f64,
    t_scale: f64,
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
    let p = BidomainStep {
        model: AlievPanfilov {
            k,
            a,
            eps0,
            mu1,
            mu2,
            v_rest,
            v_amp,
            t_scale,
        },
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
