//! CPU data space: aligned blocks from the C allocator.
//!
//! TVM's CPU device API allocates with `posix_memalign` and frees with `free`
//! (`src/runtime/cpu_device_api.cc`), and its kernels assume tensor data is aligned to
//! `kAllocAlignment` = 64 bytes. tvmrt does the same, so a block can be released knowing
//! only its address (`TVMDeviceFreeDataSpace` gets no size).

use std::ffi::c_void;

use crate::error::{Error, Result};

/// Alignment of every block tvmrt allocates (TVM's `kAllocAlignment`).
pub const ALLOC_ALIGNMENT: usize = 64;

/// Allocates `nbytes` aligned to `max(alignment, 64)`. Zero bytes still give a unique,
/// freeable block. `alignment` must be 0 or a power of two.
pub fn alloc_data(nbytes: usize, alignment: usize) -> Result<*mut c_void> {
    if alignment != 0 && !alignment.is_power_of_two() {
        return Err(Error::value(format!(
            "alignment {alignment} is not a power of two"
        )));
    }
    let align = alignment.max(ALLOC_ALIGNMENT);
    if nbytes > isize::MAX as usize {
        return Err(Error::value(format!(
            "cannot allocate {nbytes} bytes: more than the address space allows"
        )));
    }
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid out-pointer; `align` is a power of two and a multiple of
    // `sizeof(void*)`, as posix_memalign requires.
    let rc = unsafe { libc::posix_memalign(&mut ptr, align, nbytes.max(1)) };
    if rc != 0 || ptr.is_null() {
        return Err(Error::runtime(format!(
            "out of memory: cannot allocate {nbytes} bytes aligned to {align}"
        )));
    }
    Ok(ptr)
}

/// Releases a block from [`alloc_data`] (null is a no-op).
///
/// # Safety
/// `ptr` is null or came from [`alloc_data`] and was not freed yet.
pub unsafe fn free_data(ptr: *mut c_void) {
    // SAFETY: per the contract, a posix_memalign block (or null).
    unsafe { libc::free(ptr) };
}

/// An owned, zero-filled block of 64-byte-aligned memory, freed on drop.
///
/// It comes from `calloc` (with room to align), not from [`alloc_data`] and a fill: the C
/// allocator hands out large blocks as fresh pages the kernel zeroes on first touch, so a big
/// tensor nothing has written yet (a KV cache's pages) costs no resident memory.
pub struct AlignedBlock {
    /// What `calloc` returned (freed on drop).
    base: *mut c_void,
    /// `base` rounded up to the alignment.
    ptr: *mut c_void,
    len: usize,
}

// SAFETY: the block is plain memory owned by this value; access is synchronized by its owners.
unsafe impl Send for AlignedBlock {}
// SAFETY: as above.
unsafe impl Sync for AlignedBlock {}

impl AlignedBlock {
    /// Allocates `len` bytes, 64-byte aligned, zero-filled (so no uninitialized byte is ever
    /// read back through `copy_to_bytes`).
    pub fn zeroed(len: usize) -> Result<AlignedBlock> {
        let total = len
            .checked_add(ALLOC_ALIGNMENT)
            .filter(|&t| t <= isize::MAX as usize)
            .ok_or_else(|| {
                Error::value(format!(
                    "cannot allocate {len} bytes: more than the address space allows"
                ))
            })?;
        // SAFETY: calloc of a positive size; the result is checked for null.
        let base = unsafe { libc::calloc(1, total) };
        if base.is_null() {
            return Err(Error::runtime(format!(
                "out of memory: cannot allocate {len} bytes aligned to {ALLOC_ALIGNMENT}"
            )));
        }
        let skip = (ALLOC_ALIGNMENT - base as usize % ALLOC_ALIGNMENT) % ALLOC_ALIGNMENT;
        // SAFETY: `skip < ALLOC_ALIGNMENT`, so `ptr..ptr + len` lies inside the `total` bytes.
        let ptr = unsafe { base.cast::<u8>().add(skip) }.cast::<c_void>();
        Ok(AlignedBlock { base, ptr, len })
    }

    /// The block's address.
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// The block's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBlock {
    fn drop(&mut self) {
        // SAFETY: `base` came from calloc in `zeroed` and is freed once, here.
        unsafe { libc::free(self.base) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned() {
        for n in [0usize, 1, 3, 64, 1000, 4096] {
            let b = AlignedBlock::zeroed(n).unwrap();
            assert_eq!(b.as_ptr() as usize % 64, 0);
            assert_eq!(b.len(), n);
        }
        let p = alloc_data(10, 256).unwrap();
        assert_eq!(p as usize % 256, 0);
        // SAFETY: from alloc_data.
        unsafe { free_data(p) };
    }

    #[test]
    fn blocks_are_zeroed() {
        for n in [1usize, 100, 1 << 20, 3 << 20] {
            let b = AlignedBlock::zeroed(n).unwrap();
            // SAFETY: `n` readable bytes at `as_ptr`.
            let bytes = unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<u8>(), n) };
            assert!(bytes.iter().all(|&x| x == 0));
        }
        assert!(AlignedBlock::zeroed(usize::MAX - 8).is_err());
    }

    #[test]
    fn refuses_bad_requests() {
        assert!(alloc_data(8, 3).is_err());
        assert!(alloc_data(usize::MAX, 64).is_err());
    }
}
