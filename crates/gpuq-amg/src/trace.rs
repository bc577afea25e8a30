//! `GPUQ_AMG_TRACE`: with the variable set, the setup and the cycle's
//! construction print the host time of each of their steps to stderr (a tool
//! for finding where a setup's time goes; off, a step costs one branch).
//! Device work is asynchronous, so a step's time includes whatever the
//! device still had queued when the step's first read-back waited for it.

use std::time::Instant;

/// The steps' clock: `mark` prints the time since the previous mark.
pub struct Trace {
    last: Option<Instant>,
}

impl Default for Trace {
    /// [`Trace::new`].
    fn default() -> Self {
        Self::new()
    }
}

impl Trace {
    /// On when `GPUQ_AMG_TRACE` is set.
    pub fn new() -> Self {
        Self::when(true)
    }

    /// On when `on` and `GPUQ_AMG_TRACE` is set (one rank of a distributed
    /// setup prints, the others stay quiet).
    pub fn when(on: bool) -> Self {
        Trace {
            last: std::env::var_os("GPUQ_AMG_TRACE")
                .filter(|_| on)
                .map(|_| Instant::now()),
        }
    }

    /// Prints `what` and the milliseconds since the previous mark (when on).
    pub fn mark(&mut self, what: std::fmt::Arguments<'_>) {
        if let Some(last) = self.last.as_mut() {
            let now = Instant::now();
            eprintln!(
                "[amg-trace] {what}: {:.2} ms",
                (now - *last).as_secs_f64() * 1e3
            );
            *last = now;
        }
    }
}
