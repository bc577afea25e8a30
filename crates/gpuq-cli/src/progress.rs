//! A progress line on stderr for long solves.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Prints `iteration N  residual R` on stderr, overwriting itself, once the solve has
/// run for more than a second, at most every 200 ms, and only when stderr is a terminal.
pub struct Progress {
    start: Instant,
    last: Option<Instant>,
    enabled: bool,
}

impl Progress {
    /// A progress reporter starting now.
    pub fn new() -> Self {
        Progress {
            start: Instant::now(),
            last: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Called after each iteration.
    pub fn update(&mut self, iteration: usize, residual: f64) {
        if !self.enabled || self.start.elapsed() < Duration::from_secs(1) {
            return;
        }
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_millis(200))
        {
            return;
        }
        self.last = Some(Instant::now());
        let _ = write!(
            std::io::stderr(),
            "\r  iteration {iteration:>8}  relative residual {residual:.3e}  ({:.1} s)",
            self.start.elapsed().as_secs_f64()
        );
    }

    /// Ends the progress line, if one was printed.
    pub fn finish(&self) {
        if self.last.is_some() {
            let _ = writeln!(std::io::stderr());
        }
    }
}
