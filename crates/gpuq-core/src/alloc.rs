//! [`HugePageAlloc`]: the system allocator with its large blocks backed by
//! transparent huge pages.
//!
//! A setup over tens of millions of rows allocates arrays of hundreds of MB
//! and touches them once or twice; with 4 KiB pages every 4 KiB of a fresh
//! array costs a page fault, and the sparse products' scattered reads miss
//! the TLB. Linux backs a region with 2 MiB pages where the process asks for
//! them (`madvise(MADV_HUGEPAGE)`; the default `enabled` setting of
//! `/sys/kernel/mm/transparent_hugepage` is `madvise`), which is what this
//! allocator does for every block of at least [`HUGE_BLOCK`] bytes, before
//! the block is first touched. Where the kernel has no transparent huge
//! pages, or on another system, the advice is not given or is ignored and
//! the allocator is the system's. `GPUQ_HUGE_PAGES=0` in the environment
//! turns the advice off (read once, at the first large allocation): on a
//! virtual machine whose host backs its memory with small pages the huge
//! pages only cost their zeroing (docs/benchmarks.md measures both).
//!
//! A program opts in with
//! `#[global_allocator] static ALLOC: gpuq_core::alloc::HugePageAlloc = gpuq_core::alloc::HugePageAlloc;`
//! (the `gpuq` CLI and the Python module do).

use std::alloc::{GlobalAlloc, Layout, System};
#[cfg(target_os = "linux")]
use std::sync::atomic::{AtomicU8, Ordering};

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

/// Whether the advice is given: 0 not read yet, 1 yes, 2 no
/// (`GPUQ_HUGE_PAGES=0`).
#[cfg(target_os = "linux")]
static ADVICE: AtomicU8 = AtomicU8::new(0);

/// Whether `GPUQ_HUGE_PAGES` leaves the advice on (anything but a value
/// starting with `0`), read once without allocating.
#[cfg(target_os = "linux")]
fn advice_on() -> bool {
    match ADVICE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            // SAFETY: getenv reads the environment without allocating; the
            // name is a NUL-terminated literal, and a non-null result points
            // to a NUL-terminated value (whose first byte is read).
            let off = unsafe {
                let v = libc::getenv(c"GPUQ_HUGE_PAGES".as_ptr());
                !v.is_null() && *v == b'0' as libc::c_char
            };
            ADVICE.store(if off { 2 } else { 1 }, Ordering::Relaxed);
            !off
        }
    }
}

/// Advises the whole huge pages inside `size` bytes at `ptr` to be huge
/// pages (Linux, unless `GPUQ_HUGE_PAGES=0`); nothing for a null or small
/// block, or elsewhere.
#[cfg(target_os = "linux")]
fn advise(ptr: *mut u8, size: usize) {
    if ptr.is_null() || size < HUGE_BLOCK || !advice_on() {
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
    /// are kept as `System` keeps them.
    #[test]
    fn blocks_keep_their_contents() {
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
                for i in (0..size / 2 + 1).step_by(4093) {
                    assert_eq!(*shrunk.add(i), (i % 251) as u8);
                }
                a.dealloc(shrunk, Layout::from_size_align(size / 2 + 1, 64).unwrap());
            }
        }
    }
}
