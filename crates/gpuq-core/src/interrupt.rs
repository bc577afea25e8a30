//! A process-wide request to stop long work early (Ctrl-C in the CLI): the
//! iterative solvers look at it between iterations and end with the status
//! `interrupted` and the report of the work done.

use std::sync::atomic::{AtomicBool, Ordering};

/// The quantity named by the [`crate::Error::Breakdown`] a solve stopped by
/// [`request`] ends with (its report's status is `interrupted`).
pub const INTERRUPTED: &str = "interrupted: a stop was requested (Ctrl-C)";

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every running solve to stop at its next iteration (safe to call from
/// a signal handler's thread). O(1).
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop has been requested. O(1).
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Withdraws a request (for a caller that handled it and goes on). O(1).
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}
