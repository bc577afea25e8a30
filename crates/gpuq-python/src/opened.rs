//! The backends the module opens, kept for the process: opening the CUDA backend (the
//! driver, a context, the kernels' PTX) costs a tenth of a second or more, which every
//! call would otherwise pay.

use gpuq::core::Result;
use gpuq::{AnyBackend, BackendChoice};
use std::sync::Mutex;

/// The CUDA backend once opened (`None` until a call opened it).
static CUDA: Mutex<Option<AnyBackend>> = Mutex::new(None);

/// The backend `choice` names: the CPU backend (O(1)), or the CUDA backend opened on the
/// first call that asks for it and shared by the later ones (`auto` is CUDA when a device
/// is present, else the CPU, as [`gpuq::choose`] decides).
pub fn open(choice: BackendChoice) -> Result<AnyBackend> {
    if choice == BackendChoice::Cpu {
        return gpuq::choose(choice);
    }
    let mut cached = CUDA.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(b) = cached.as_ref() {
        return Ok(b.clone());
    }
    let b = gpuq::choose(choice)?;
    if b.is_cuda() {
        *cached = Some(b.clone());
    }
    Ok(b)
}
