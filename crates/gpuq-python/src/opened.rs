//! The backends the module opens, kept for the process: opening the CUDA backend (the
//! driver, a context, the kernels' PTX) costs a tenth of a second or more, which every
//! call would otherwise pay. One CUDA backend per device: device 0 for `cuda` and `auto`,
//! and the device of the arrays for a solve on CUDA arrays ([`cuda`]).

use gpuq::core::Result;
use gpuq::cuda::CudaBackend;
use gpuq::{AnyBackend, BackendChoice};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The CUDA backends opened so far, by device ordinal.
static CUDA: Mutex<BTreeMap<usize, CudaBackend>> = Mutex::new(BTreeMap::new());

/// The backend `choice` names: the CPU backend (O(1)), or the CUDA backend of device 0
/// opened on the first call that asks for it and shared by the later ones (`auto` is CUDA
/// when a device is present, else the CPU, as [`gpuq::choose`] decides).
pub fn open(choice: BackendChoice) -> Result<AnyBackend> {
    if choice == BackendChoice::Cpu {
        return gpuq::choose(choice);
    }
    let mut cached = CUDA.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(b) = cached.get(&0) {
        return Ok(AnyBackend::Cuda(b.clone()));
    }
    let b = gpuq::choose(choice)?;
    if let AnyBackend::Cuda(c) = &b {
        cached.insert(c.info().ordinal, c.clone());
    }
    Ok(b)
}

/// The CUDA backend of device `ordinal`, opened on the first call that asks for it and
/// shared by the later ones (and by [`open`] for device 0).
pub fn cuda(ordinal: usize) -> Result<CudaBackend> {
    let mut cached = CUDA.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(b) = cached.get(&ordinal) {
        return Ok(b.clone());
    }
    let b = CudaBackend::new(ordinal)?;
    cached.insert(ordinal, b.clone());
    Ok(b)
}

/// Gives the memory that every opened CUDA backend's pool keeps for its next solves back
/// to the driver (each [`CudaBackend::release_cached_memory`], errors ignored): after a
/// device ran out of memory, the user's other libraries (CuPy, PyTorch) can allocate
/// again. One driver call per opened device.
pub fn release_cached_device_memory() {
    let cached = CUDA.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for b in cached.values() {
        let _ = b.release_cached_memory();
    }
}
