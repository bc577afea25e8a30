//! Ctrl-C during a long call: the work runs on a thread of its own while the calling thread
//! (the one Python delivers signals to) waits with the GIL released and looks at Python's
//! signals every 50 ms. On KeyboardInterrupt it asks the library to stop
//! ([`gpuq::core::interrupt`]: the iterative methods, cubature and the Monte Carlo batches
//! end at their next step), waits for the work to end, and raises the KeyboardInterrupt.

use pyo3::prelude::*;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

/// How often the waiting thread looks at Python's signals.
const POLL: Duration = Duration::from_millis(50);

/// `work()` with the GIL released, stoppable by Ctrl-C (see the module docs). Cost: one
/// thread per call.
pub fn run<R: Send>(py: Python<'_>, work: impl FnOnce() -> R + Send) -> PyResult<R> {
    std::thread::scope(|scope| {
        let (sender, receiver) = channel();
        scope.spawn(move || {
            // The receiver outlives the scope's threads: a failed send cannot happen.
            // On a worker of Rayon's pool: the parallel steps fork from it.
            let _ = sender.send(gpuq::cpu::on_pool_worker(work));
        });
        // Shared with the closures that release the GIL (a receiver alone is not Sync).
        let receiver = Mutex::new(receiver);
        let wait = |timeout: Option<Duration>| {
            let receiver = receiver
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match timeout {
                Some(t) => receiver.recv_timeout(t),
                None => receiver.recv().map_err(|_| RecvTimeoutError::Disconnected),
            }
        };
        loop {
            match py.detach(|| wait(Some(POLL))) {
                Ok(result) => return Ok(result),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        gpuq::core::interrupt::request();
                        let _ = py.detach(|| wait(None));
                        gpuq::core::interrupt::clear();
                        return Err(signal);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(
                        "gpuq's work ended without a result",
                    ))
                }
            }
        }
    })
}
