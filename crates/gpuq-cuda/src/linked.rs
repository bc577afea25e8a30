//! User integrands on the device: the user's code, which defines
//! `extern "C" __device__ double gpuq_integrand(const double *x, unsigned n)`,
//! linked at run time with the cubature kernels of `gpuq_user_cubature.ptx`
//! (built from `kernels-rs/src/device/user_cubature.rs`), which call it.
//!
//! * CUDA C ([`DeviceCode::CudaC`]: an expression's translation, or a user's
//!   source) is compiled to PTX by NVRTC (`--relocatable-device-code=true
//!   --fmad=false`, PTX for `compute_80`); PTX ([`DeviceCode::Ptx`], such as a
//!   Rust `no_std` crate built for `nvptx64`) is taken as it is.
//! * The driver's JIT linker (`cuLinkCreate`, `cuLinkAddData`,
//!   `cuLinkComplete`) compiles both PTX inputs for the device and links them
//!   into one cubin, which the context loads.
//! * Linked modules are cached in the backend (loaded, by the code's text, the
//!   device's compute capability and the driver's version), their cubins in
//!   the process (for other backends) and on disk, under
//!   `$GPUQ_CACHE_DIR`, else `$XDG_CACHE_HOME/gpuq`, else `~/.cache/gpuq`, one
//!   file per key holding the whole key (so a hash collision is detected) and
//!   the cubin; a new gpuq build changes the key through the hash of its PTX.
//!   A cache that cannot be read or written is skipped, not an error.
//!
//! Why a link and not a separate points-to-values kernel: the rule kernels then
//! evaluate the user's function in place, as they do the built-ins, instead of
//! writing every point's n coordinates to memory and reading n + 1 values back
//! (for f5 at n = 8, 72 bytes a point against about 250 flops: a memory-bound
//! pass). The call itself is not inlined across the link (the two PTX inputs
//! are compiled apart); `docs/benchmarks.md` measures what that costs against
//! the built-ins' fused path.

use crate::backend::{dev, CudaBackend};
use cudarc::driver::sys as cu;
use cudarc::driver::CudaFunction;
use gpuq_core::{Error, Result};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// The committed PTX of the user integrands' cubature kernels.
pub const USER_PTX: &str = include_str!("../ptx/gpuq_user_cubature.ptx");

/// The function every user integrand defines.
pub const ENTRY: &str = "gpuq_integrand";

/// A user integrand's device code.
#[derive(Clone, Copy, Debug)]
pub enum DeviceCode<'a> {
    /// CUDA C (NVRTC; no `#include` of host headers) defining
    /// `extern "C" __device__ double gpuq_integrand(const double *x, unsigned int n)`.
    CudaC(&'a str),
    /// PTX defining `gpuq_integrand` with the same signature as a `.visible .func`.
    Ptx(&'a str),
}

impl DeviceCode<'_> {
    fn kind(&self) -> &'static str {
        match self {
            DeviceCode::CudaC(_) => "cuda-c",
            DeviceCode::Ptx(_) => "ptx",
        }
    }

    fn text(&self) -> &str {
        match self {
            DeviceCode::CudaC(s) | DeviceCode::Ptx(s) => s,
        }
    }
}

/// Where a linked integrand came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkSource {
    /// Compiled and linked by this call.
    Compiled,
    /// Found in this process's cache.
    Process,
    /// Read from the disk cache.
    Disk,
}

impl LinkSource {
    /// "compiled", "process-cache" or "disk-cache".
    pub fn name(&self) -> &'static str {
        match self {
            LinkSource::Compiled => "compiled",
            LinkSource::Process => "process-cache",
            LinkSource::Disk => "disk-cache",
        }
    }
}

/// A user integrand loaded on the device: the three cubature kernels linked
/// with its code.
#[derive(Clone, Debug)]
pub struct LinkedIntegrand {
    pub(crate) evaluate: CudaFunction,
    pub(crate) local: CudaFunction,
    pub(crate) tensor: CudaFunction,
    /// Seconds spent compiling and linking (0 when a cache had it), and loading.
    pub compile_s: f64,
    /// Where the cubin came from.
    pub source: LinkSource,
}

/// Linked cubins of this process, by key (shared by every backend instance).
fn process_cubins() -> &'static Mutex<HashMap<String, Arc<Vec<u8>>>> {
    static CUBINS: OnceLock<Mutex<HashMap<String, Arc<Vec<u8>>>>> = OnceLock::new();
    CUBINS.get_or_init(Mutex::default)
}

/// 64-bit FNV-1a of `bytes`: the disk cache's file names (the file holds the
/// whole key, compared on load).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The disk cache's folder (see the module docs), if one can be named.
pub fn cache_dir() -> Option<PathBuf> {
    let from = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from("GPUQ_CACHE_DIR")
        .or_else(|| from("XDG_CACHE_HOME").map(|d| d.join("gpuq")))
        .or_else(|| from("HOME").map(|d| d.join(".cache/gpuq")))
}

/// First line of a disk cache file.
const CACHE_MAGIC: &[u8] = b"gpuq linked cubin v1\n";

/// The cubin stored under `key`, if the disk cache holds it.
fn disk_read(key: &str) -> Option<Vec<u8>> {
    let path = cache_dir()?.join(format!("{:016x}.cubin", fnv1a(key.as_bytes())));
    let bytes = std::fs::read(path).ok()?;
    let rest = bytes.strip_prefix(CACHE_MAGIC)?;
    let (len, rest) = rest.split_at_checked(8)?;
    let len = u64::from_le_bytes(len.try_into().ok()?) as usize;
    let (stored, cubin) = rest.split_at_checked(len)?;
    (stored == key.as_bytes() && !cubin.is_empty()).then(|| cubin.to_vec())
}

/// Stores `cubin` under `key` (write to a temporary file, then rename, so a
/// concurrent reader never sees half a file). Failures are ignored: the cache
/// is an optimisation.
fn disk_write(key: &str, cubin: &[u8]) {
    let Some(dir) = cache_dir() else { return };
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let name = format!("{:016x}.cubin", fnv1a(key.as_bytes()));
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    let mut bytes = CACHE_MAGIC.to_vec();
    bytes.extend_from_slice(&(key.len() as u64).to_le_bytes());
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(cubin);
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, dir.join(name)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// NVRTC's options for user CUDA C: relocatable device code (the integrand is
/// an external function the kernels call), no contraction of a * b + c into
/// one fused multiply-add (an expression then computes what the CPU computes),
/// PTX for compute capability 8.0 like the committed PTX.
const NVRTC_OPTIONS: [&str; 3] = [
    "--relocatable-device-code=true",
    "--fmad=false",
    "--gpu-architecture=compute_80",
];

/// CUDA C to PTX text with NVRTC. Cost: NVRTC's compile (tens of ms for an
/// expression).
fn nvrtc_compile(src: &str) -> Result<String> {
    if src.contains('\0') {
        return Err(Error::InvalidArgument(
            "CUDA C source contains a NUL character".into(),
        ));
    }
    // SAFETY: probing only tries to open the library by name.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::Compile(
            "NVRTC (libnvrtc.so, from the CUDA toolkit) was not found on the library path".into(),
        ));
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect(),
        name: Some("gpuq_integrand.cu".into()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => {
            Error::Compile(format!("NVRTC: {}", log.to_string_lossy().trim()))
        }
        other => Error::Compile(format!("NVRTC: {other:?}")),
    })?;
    Ok(ptx.to_src())
}

/// Links PTX inputs (name, text) into one cubin with the driver's JIT linker
/// (the context must be current). Cost: the driver's PTX compile of every input.
fn jit_link(inputs: &[(&str, &str)]) -> Result<Vec<u8>> {
    let mut log = vec![0u8; 1 << 14];
    let mut options = [
        cu::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        cu::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
    let mut state: cu::CUlinkState = std::ptr::null_mut();
    let log_text = |log: &[u8]| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        String::from_utf8_lossy(&log[..end]).trim().to_string()
    };
    // SAFETY: two options with their values (a buffer and its size, which
    // outlive the link state: destroyed below before `log` is dropped).
    unsafe { cu::cuLinkCreate_v2(2, options.as_mut_ptr(), values.as_mut_ptr(), &mut state) }
        .result()
        .map_err(|e| Error::Compile(format!("cuLinkCreate: {e}")))?;
    let result = (|| {
        for (name, text) in inputs {
            let data = CString::new(*text)
                .map_err(|_| Error::InvalidArgument(format!("{name} contains a NUL character")))?;
            let cname = CString::new(*name).unwrap_or_default();
            let bytes = data.as_bytes_with_nul();
            // SAFETY: NUL-terminated PTX of `bytes.len()` bytes and a
            // NUL-terminated name, both alive during the call; no options.
            unsafe {
                cu::cuLinkAddData_v2(
                    state,
                    cu::CUjitInputType::CU_JIT_INPUT_PTX,
                    bytes.as_ptr() as *mut c_void,
                    bytes.len(),
                    cname.as_ptr(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            }
            .result()
            .map_err(|e| Error::Compile(format!("linking {name}: {e}: {}", log_text(&log))))?;
        }
        let mut cubin: *mut c_void = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: the state holds the inputs added above; on success the
        // driver writes a pointer to `size` bytes owned by the state.
        unsafe { cu::cuLinkComplete(state, &mut cubin, &mut size) }
            .result()
            .map_err(|e| Error::Compile(format!("cuLinkComplete: {e}: {}", log_text(&log))))?;
        if cubin.is_null() || size == 0 {
            return Err(Error::Compile("the linker produced no cubin".into()));
        }
        // SAFETY: `cubin` points to `size` bytes, valid until the state is destroyed.
        Ok(unsafe { std::slice::from_raw_parts(cubin.cast::<u8>(), size) }.to_vec())
    })();
    // SAFETY: `state` was created above and is destroyed once.
    unsafe { cu::cuLinkDestroy(state) };
    result
}

/// The part of every cache key that does not depend on the code: the CUDA
/// driver's version (its JIT compiles the PTX), the hash of the committed user
/// PTX (a new gpuq build) and NVRTC's options; computed once per process.
fn key_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let mut v = 0;
        // SAFETY: writes one int.
        let _ = unsafe { cu::cuDriverGetVersion(&mut v) };
        format!(
            "driver {v}\ngpuq ptx {:016x}\n{}",
            fnv1a(USER_PTX.as_bytes()),
            NVRTC_OPTIONS.join(" ")
        )
    })
}

impl CudaBackend {
    /// Compiles (CUDA C through NVRTC) and links `code` with the cubature
    /// kernels of user integrands, or takes the linked cubin from this
    /// process's cache or the disk cache (see the module docs), and loads it.
    /// Errors: [`Error::Compile`] with the compiler's or linker's log (NVRTC
    /// missing, a syntax error, `gpuq_integrand` undefined or of another
    /// signature), [`Error::Device`] when the module cannot be loaded. Cost:
    /// NVRTC plus the driver's compile of about 300 KB of PTX (a fraction of a
    /// second to a few seconds) on the first use of a code on a machine; a cubin
    /// load (milliseconds) after.
    pub fn link_integrand(&self, code: DeviceCode<'_>) -> Result<LinkedIntegrand> {
        let start = Instant::now();
        let (major, minor) = self.inner.info.compute_capability;
        let key = format!(
            "{}\nsm_{major}{minor}\n{}\n{}",
            code.kind(),
            key_prefix(),
            code.text()
        );
        if let Some(loaded) = self
            .inner
            .linked
            .lock()
            .map_err(|_| Error::Device("the linked-module cache is poisoned".into()))?
            .get(&key)
        {
            return Ok(LinkedIntegrand {
                compile_s: 0.0,
                source: LinkSource::Process,
                ..loaded.clone()
            });
        }
        let cached = process_cubins()
            .lock()
            .map_err(|_| Error::Device("the linked-module cache is poisoned".into()))?
            .get(&key)
            .cloned();
        let (cubin, source) = match cached {
            Some(c) => (c, LinkSource::Process),
            None => {
                let (cubin, source) = match disk_read(&key) {
                    Some(c) => (c, LinkSource::Disk),
                    None => {
                        let user_ptx = match code {
                            DeviceCode::CudaC(src) => nvrtc_compile(src)?,
                            DeviceCode::Ptx(ptx) => ptx.to_string(),
                        };
                        self.inner
                            .stream
                            .context()
                            .bind_to_thread()
                            .map_err(dev("binding the context"))?;
                        let cubin = jit_link(&[
                            ("gpuq_user_cubature.ptx", USER_PTX),
                            ("gpuq_integrand.ptx", &user_ptx),
                        ])?;
                        disk_write(&key, &cubin);
                        (cubin, LinkSource::Compiled)
                    }
                };
                let cubin = Arc::new(cubin);
                process_cubins()
                    .lock()
                    .map_err(|_| Error::Device("the linked-module cache is poisoned".into()))?
                    .insert(key.clone(), cubin.clone());
                (cubin, source)
            }
        };
        let module = self
            .inner
            .stream
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_binary(cubin.to_vec()))
            .map_err(dev("loading a linked integrand"))?;
        let function = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| Error::Device(format!("kernel {name} of a linked integrand: {e}")))
        };
        let linked = LinkedIntegrand {
            evaluate: function("cubu_evaluate")?,
            local: function("cubu_local")?,
            tensor: function("cubu_tensor")?,
            compile_s: start.elapsed().as_secs_f64(),
            source,
        };
        self.inner
            .linked
            .lock()
            .map_err(|_| Error::Device("the linked-module cache is poisoned".into()))?
            .insert(key, linked.clone());
        Ok(linked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_ptx_calls_only_the_integrand() {
        let externs: Vec<&str> = USER_PTX
            .lines()
            .filter(|l| l.starts_with(".extern"))
            .collect();
        assert_eq!(externs.len(), 1, "{externs:?}");
        assert!(externs[0].ends_with(ENTRY), "{}", externs[0]);
        for k in ["cubu_evaluate", "cubu_local", "cubu_tensor", "gpuq_cos"] {
            assert!(USER_PTX.contains(k), "{k} missing");
        }
    }

    #[test]
    fn the_disk_cache_round_trips_and_checks_its_key() {
        let dir = std::env::temp_dir().join(format!("gpuq-cache-test-{}", std::process::id()));
        // Only this test sets the variable.
        std::env::set_var("GPUQ_CACHE_DIR", &dir);
        assert_eq!(disk_read("key one"), None);
        disk_write("key one", b"cubin bytes");
        assert_eq!(disk_read("key one").as_deref(), Some(&b"cubin bytes"[..]));
        // Another key with the same file name would be refused: simulate by
        // rewriting the file with another stored key.
        let path = dir.join(format!("{:016x}.cubin", fnv1a(b"key one")));
        let mut bytes = CACHE_MAGIC.to_vec();
        bytes.extend_from_slice(&7u64.to_le_bytes());
        bytes.extend_from_slice(b"key two");
        bytes.extend_from_slice(b"other");
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(disk_read("key one"), None);
        std::fs::write(&path, b"garbage").unwrap();
        assert_eq!(disk_read("key one"), None);
        let _ = std::fs::remove_dir_all(&dir);
        std::env::remove_var("GPUQ_CACHE_DIR");
    }
}
