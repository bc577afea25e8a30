//! [`HugePageAlloc`]: the system allocator with its large blocks backed by
//! transparent huge pages.
//!
//! A setup over tens of millions of rows allocates arrays of hundreds of MB
//! and touches them once or twice; with 4 KiB pages every 4 KiB of a fresh
//! array costs a page fault, and the sparse products' scattered reads miss
//! the TLB. Linux backs a region with 2 MiB pages where the process asks for
//! them (`madvise(MADV_HUGEPAGE)`; the default `enabled` setting of
//! `/sys/kernel/mm/transparent_hugepage` is `madvise`), which is what this
//! allocator does for every block of at least [`HUGE_BLOCK`] bytes as it hands
//! it out: before the first touch of a fresh block (a grown block's copied
//! part and a reused, zeroed heap block were touched already; they stay as
//! they are and the rest of the block follows the advice). Where the kernel
//! has no transparent huge pages, or on another system, the advice is not
//! given or is ignored and the allocator is the system's. Costs: with the
//! kernel's `defrag` setting `madvise` (its default) a first touch may wait
//! for the kernel to compact memory into a huge page; unused capacity of an
//! advised block may take memory a page of 2 MiB at a time; a heap range
//! advised keeps the flag when smaller blocks reuse it.
//!
//! The advice is given where it was measured to pay: once a GPU backend is
//! in use ([`HugePageAlloc::gpu_in_use`], which the CUDA backend calls when
//! it starts; the host steps around a GPU setup). Without a GPU it is off:
//! on a 2-core virtual machine with the kernel's default `defrag` setting a
//! CPU setup was up to 65% slower with it (3D elasticity, docs/benchmarks.md).
//! [`HugePageAlloc::configure_from_env`] reads `GPUQ_HUGE_PAGES`: `0` turns
//! the advice off, `1` on, whatever the backend. The allocator never reads
//! the environment itself (no lock-free `getenv` racing a `setenv`).
//!
//! A program opts in with
//! `#[global_allocator] static ALLOC: gpuq_core::alloc::HugePageAlloc = gpuq_core::alloc::HugePageAlloc;`
//! and calls [`HugePageAlloc::configure_from_env`] first thing (the `gpuq`
//! CLI and the Python module do both).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// The size from which a block is advised to use huge pages: 8 MiB, four
/// huge pages (a smaller block gains little and could leave most of a huge
/// page unused).
pub const HUGE_BLOCK: usize = 8 << 20;

/// The size of a transparent huge page on x86-64 and most aarch64 kernels.
const HUGE_PAGE: usize = 2 << 20;

/// [`System`], with every block of at least [`HUGE_BLOCK`] bytes advised to
/// use transparent huge pages (its whole 2 MiB pages, on Linux). Cost: one
/// `madvise` system call per such allocation or reallocation, nothing for
/// smaller ones.
pub struct HugePageAlloc;

/// Whether blocks are advised now.
static ON: AtomicBool = AtomicBool::new(false);

/// Whether `GPUQ_HUGE_PAGES` decided (read by
/// [`HugePageAlloc::configure_from_env`]), so that a GPU backend starting
/// changes nothing.
static FORCED: AtomicBool = AtomicBool::new(false);

impl HugePageAlloc {
    /// Reads `GPUQ_HUGE_PAGES` (through `std::env`, under its lock): a value
    /// starting with `0` turns the advice off and one starting with `1` on,
    /// for the rest of the process; anything else (or nothing) leaves it to
    /// [`HugePageAlloc::gpu_in_use`]. O(1); call it before the large
    /// allocations, first thing in `main`.
    pub fn configure_from_env() {
        let forced =
            std::env::var_os("GPUQ_HUGE_PAGES").and_then(|v| match v.as_encoded_bytes().first() {
                Some(b'0') => Some(false),
                Some(b'1') => Some(true),
                _ => None,
            });
        if let Some(on) = forced {
            ON.store(on, Ordering::Relaxed);
        }
        FORCED.store(forced.is_some(), Ordering::Relaxed);
    }

    /// A GPU backend has started: from now on large blocks are advised,
    /// unless `GPUQ_HUGE_PAGES` decided otherwise. Called by the CUDA
    /// backend when it is made. O(1).
    pub fn gpu_in_use() {
        if !FORCED.load(Ordering::Relaxed) {
            ON.store(true, Ordering::Relaxed);
        }
    }

    /// Whether blocks of [`HUGE_BLOCK`] bytes or more are advised now.
    pub fn advising() -> bool {
        ON.load(Ordering::Relaxed)
    }
}

/// Advises the whole huge pages inside `size` bytes at `ptr` to be huge
/// pages (Linux, while [`HugePageAlloc::advising`]); nothing for a null or
/// small block, or elsewhere.
#[cfg(target_os = "linux")]
fn advise(ptr: *mut u8, size: usize) {
    if ptr.is_null() || size < HUGE_BLOCK || !ON.load(Ordering::Relaxed) {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize + size) & !(HUGE_PAGE - 1);
    if end > start {
        // SAFETY: [start, end) lies inside the block just allocated for the
        // caller, and MADV_HUGEPAGE changes only how its pages are backed,
        // never their contents; a failure (no THP support) changes nothing.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_ptr: *mut u8, _size: usize) {}

// SAFETY: every method forwards to `System` with the same arguments; the
// advice only changes how the pages of a block handed out are backed.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        advise(new, new_size);
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large and small blocks, zeroed or not, grown and shrunk: the contents
    /// are kept as `System` keeps them (advised or not).
    #[test]
    fn blocks_keep_their_contents() {
        HugePageAlloc::gpu_in_use();
        assert!(HugePageAlloc::advising() || FORCED.load(Ordering::Relaxed));
        let a = HugePageAlloc;
        for size in [64, HUGE_BLOCK - 1, HUGE_BLOCK, 3 * HUGE_BLOCK + 12345] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            unsafe {
                let z = a.alloc_zeroed(layout);
                assert!(!z.is_null());
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                a.dealloc(z, layout);
                let p = a.alloc(layout);
                assert!(!p.is_null());
                for i in (0..size).step_by(4093) {
                    *p.add(i) = (i % 251) as u8;
                }
                let grown = a.realloc(p, layout, 2 * size);
                assert!(!grown.is_null());
                for i in (0..size).step_by(4093) {
                    assert_eq!(*grown.add(i), (i % 251) as u8);
                }
                let big = Layout::from_size_align(2 * size, 64).unwrap();
                let shrunk = a.realloc(grown, big, size / 2 + 1);
                assert!(!shrunk.is_null());
                for i in (0..size / 2 + 1).step_by(4093) {
                    assert_eq!(*shrunk.add(i), (i % 251) as u8);
                }
                a.dealloc(shrunk, Layout::from_size_align(size / 2 + 1, 64).unwrap());
            }
        }
    }
}
