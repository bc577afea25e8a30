//! Host memory checks made before allocations whose size comes from input
//! (a generated problem's size, a file's header), so that a request the
//! machine cannot hold is a clear [`Error::HostMemory`] rather than an abort
//! of the process.

use crate::{Error, Result};

/// Bytes of host memory available to a new allocation: `MemAvailable` of
/// `/proc/meminfo` on Linux; `None` where it cannot be read. O(1).
pub fn host_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Errors with [`Error::HostMemory`] when `what` needs more than `bytes` of
/// host memory than is available (or more than an allocation can address);
/// `Ok` when the available memory cannot be read and the size is
/// addressable. O(1).
pub fn check_host_memory(what: &str, bytes: u128) -> Result<()> {
    let available = host_available_bytes();
    let limit = available.map_or(isize::MAX as u128, |a| a as u128);
    if bytes <= limit {
        return Ok(());
    }
    Err(Error::HostMemory {
        what: what.to_string(),
        needed: u64::try_from(bytes).unwrap_or(u64::MAX),
        available: available.unwrap_or(isize::MAX as u64),
    })
}

/// A vector of `len` copies of `value`, allocated fallibly: an
/// [`Error::HostMemory`] naming `what` when the allocation fails. O(len).
pub fn try_filled<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::HostMemory {
        what: what.to_string(),
        needed: (len as u64).saturating_mul(std::mem::size_of::<T>() as u64),
        available: host_available_bytes().unwrap_or(0),
    })?;
    v.resize(len, value);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impossible_size_is_an_error_naming_it() {
        let e = check_host_memory("a test matrix", 1u128 << 80).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("a test matrix") && text.contains("host memory"),
            "{text}"
        );
        assert!(check_host_memory("a small vector", 1 << 10).is_ok());
        assert!(try_filled(usize::MAX / 2, 0u64, "a huge vector").is_err());
        assert_eq!(try_filled(3, 1.5f64, "three").unwrap(), [1.5; 3]);
    }
}
