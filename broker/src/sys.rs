//! The broker's only `unsafe`: tuning the C allocator at start-up.
//!
//! Why: glibc raises its mmap threshold each time a large block is freed,
//! after which multi-megabyte buffers (a job's output in a status reply, a
//! JSON body) come from per-thread heaps that keep their pages. A fixed
//! threshold sends every large buffer back to the kernel on free, so the
//! broker's resident size follows what it holds, not what it once held.
#![allow(unsafe_code)]

/// Blocks at least this large are mmapped and unmapped on free.
const MMAP_THRESHOLD: libc::c_int = 256 * 1024;
/// Free memory kept at the top of a heap before it is returned: enough
/// that a stream of 64 KiB frames does not fault in fresh pages per frame.
const TRIM_THRESHOLD: libc::c_int = 4 * 1024 * 1024;

/// Fixes the allocator's mmap threshold; call once, before other threads start.
pub fn bound_heap() {
    // SAFETY: mallopt only sets allocator parameters; it is called before
    // any other thread exists and takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}
