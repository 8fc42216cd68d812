//! The CPU back end (`kDLCPU`, TVM's `src/runtime/cpu_device_api.cc`): aligned blocks from the
//! C allocator, copies with `memcpy`, no streams, and the per-thread workspace pool of
//! [`crate::backend::workspace`].
//!
//! Like TVM, data is allocated with `posix_memalign` and freed with `free`, so a block can be
//! released knowing only its address (`TVMDeviceFreeDataSpace` gets no size), and every block
//! is aligned to at least `kAllocAlignment` = 64 bytes, which TVM's kernels assume.

use std::ffi::c_void;

use super::api::{DataRef, DeviceApi, DeviceAttr, StreamHandle, ALLOC_ALIGNMENT};
use super::{BackEnd, DeviceModuleInfo};
use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::value::Any;

/// Allocates `nbytes` (0 still gives a unique, freeable block) aligned to
/// `max(alignment, 64)`; `alignment` must be 0 or a power of two. The memory is uninitialized;
/// free it with [`free_host`].
pub fn alloc_host(nbytes: usize, alignment: usize) -> Result<*mut c_void> {
    if alignment != 0 && !alignment.is_power_of_two() {
        return Err(Error::value(format!(
            "alignment {alignment} is not a power of two"
        )));
    }
    let align = alignment.max(ALLOC_ALIGNMENT);
    if nbytes > isize::MAX as usize - align {
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

/// Releases a block from [`alloc_host`] (null is a no-op).
///
/// # Safety
/// `ptr` is null or came from [`alloc_host`] and was not freed yet.
pub unsafe fn free_host(ptr: *mut c_void) {
    // SAFETY: per the contract, a posix_memalign block (or null).
    unsafe { libc::free(ptr) };
}

/// Tensors of at least this many bytes get fresh anonymous pages ([`alloc_host_zeroed`]).
pub const FRESH_PAGES_MIN: usize = 256 << 10;

/// Allocates `nbytes` of zeroed memory aligned to `alignment` (0 or a power of two) and at least
/// 64. Blocks of [`FRESH_PAGES_MIN`] bytes or more (aligned to at most a page) are fresh
/// anonymous pages,
/// which the kernel zeroes on first touch: a large tensor nothing has written yet (a KV cache's
/// pages, a model's planned storage) costs neither a fill nor resident memory, as on TVM,
/// whose allocations are not filled at all. Free it with [`free_host_zeroed`] and the same size.
pub fn alloc_host_zeroed(nbytes: usize, alignment: usize) -> Result<*mut c_void> {
    if !uses_fresh_pages(nbytes, alignment) {
        let ptr = alloc_host(nbytes, alignment)?;
        // SAFETY: a fresh block of at least `nbytes` writable bytes.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, nbytes) };
        return Ok(ptr);
    }
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing; the result
    // is checked below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            nbytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(Error::runtime(format!(
            "out of memory: cannot map {nbytes} bytes ({})",
            std::io::Error::last_os_error()
        )));
    }
    Ok(ptr)
}

/// Whether [`alloc_host_zeroed`] maps fresh pages for a block (page-aligned, so only for
/// alignments up to the smallest page size).
fn uses_fresh_pages(nbytes: usize, alignment: usize) -> bool {
    nbytes >= FRESH_PAGES_MIN && alignment <= 4096
}

/// Releases a block from [`alloc_host_zeroed`].
///
/// # Safety
/// `ptr` came from `alloc_host_zeroed(nbytes, alignment)` and is not used afterwards.
pub unsafe fn free_host_zeroed(ptr: *mut c_void, nbytes: usize, alignment: usize) {
    if !uses_fresh_pages(nbytes, alignment) {
        // SAFETY: per the contract, an `alloc_host` block.
        unsafe { free_host(ptr) };
    } else {
        // SAFETY: per the contract, a mapping of exactly `nbytes` made by `alloc_host_zeroed`.
        unsafe { libc::munmap(ptr, nbytes) };
    }
}

/// The CPU's device API.
pub struct CpuDeviceApi;

/// Total physical memory, as TVM's CPU `kTotalGlobalMemory` (`sysinfo`).
fn total_memory() -> i64 {
    // SAFETY: an all-zero `sysinfo` is a valid value for the call to fill.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid, writable struct.
    if unsafe { libc::sysinfo(&mut info) } == 0 {
        (info.totalram as i64).saturating_mul(info.mem_unit as i64)
    } else {
        -1
    }
}

impl DeviceApi for CpuDeviceApi {
    fn host_accessible(&self) -> bool {
        true
    }

    fn pointer_arithmetic(&self) -> bool {
        true
    }

    fn set_device(&self, _dev: DLDevice) -> Result<()> {
        Ok(())
    }

    fn get_attr(&self, _dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        Ok(match attr {
            DeviceAttr::Exist => Any::from(1i64),
            DeviceAttr::TotalGlobalMemory => Any::from(total_memory()),
            _ => Any::none(),
        })
    }

    fn alloc_data_space(
        &self,
        _dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        alloc_host(nbytes, alignment)
    }

    unsafe fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        // SAFETY: per the trait's contract, a block of `alloc_data_space` (or null).
        unsafe { free_host(ptr) };
        Ok(())
    }

    fn alloc_tensor_data(
        &self,
        dev: DLDevice,
        _shape: &[i64],
        dtype: DLDataType,
        mem_scope: Option<&str>,
        nbytes: usize,
    ) -> Result<*mut c_void> {
        super::api::check_global_scope(dev, mem_scope)?;
        alloc_host_zeroed(nbytes, super::api::data_alignment(dtype))
    }

    unsafe fn free_tensor_data(
        &self,
        _dev: DLDevice,
        ptr: *mut c_void,
        dtype: DLDataType,
        nbytes: usize,
    ) -> Result<()> {
        // SAFETY: per the trait's contract, `alloc_tensor_data`'s block of `nbytes` for `dtype`.
        unsafe { free_host_zeroed(ptr, nbytes, super::api::data_alignment(dtype)) };
        Ok(())
    }

    unsafe fn copy_bytes(
        &self,
        from: DataRef,
        to: DataRef,
        nbytes: usize,
        _type_hint: DLDataType,
        _stream: StreamHandle,
    ) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        // SAFETY: both sides hold `nbytes` from their offsets (trait contract); `copy` allows
        // overlap (a tensor copied onto itself).
        unsafe { std::ptr::copy(from.host_address().cast_const(), to.host_address(), nbytes) };
        Ok(())
    }

    fn stream_sync(&self, _dev: DLDevice, _stream: StreamHandle) -> Result<()> {
        Ok(())
    }

    fn alloc_workspace(
        &self,
        _dev: DLDevice,
        nbytes: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        crate::backend::workspace::alloc_workspace(nbytes as u64)
    }

    unsafe fn free_workspace(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        crate::backend::workspace::free_workspace(ptr)
    }
}

static CPU_API: CpuDeviceApi = CpuDeviceApi;

/// The CPU back end: `kDLCPU`.
pub static BACK_END: BackEnd = BackEnd {
    name: "cpu",
    devices: &[(super::CPU, &CPU_API)],
    globals: Vec::new,
    describe_module: no_device_module,
};

fn no_device_module(_: &crate::module::Module) -> Option<DeviceModuleInfo> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned() {
        for (n, align) in [(0usize, 0usize), (1, 64), (3, 0), (1000, 256), (4096, 4096)] {
            let p = alloc_host(n, align).unwrap();
            assert_eq!(p as usize % align.max(64), 0);
            // SAFETY: from alloc_host.
            unsafe { free_host(p) };
        }
    }

    #[test]
    fn zeroed_blocks() {
        for (n, align) in [
            (0usize, 0usize),
            (1, 64),
            (100, 128),
            (FRESH_PAGES_MIN - 1, 64),
            (FRESH_PAGES_MIN, 128),
            (3 << 20, 4096),
            (3 << 20, 8192),
        ] {
            let p = alloc_host_zeroed(n, align).unwrap();
            assert_eq!(p as usize % align.max(64), 0);
            // SAFETY: `n` readable and writable bytes at `p`.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) };
            assert!(bytes.iter().all(|&b| b == 0), "{n} bytes not zeroed");
            bytes.fill(7);
            // SAFETY: from alloc_host_zeroed with the same size and alignment.
            unsafe { free_host_zeroed(p, n, align) };
        }
    }

    #[test]
    fn large_zeroed_blocks_take_no_memory_until_touched() {
        let n = 4 << 20;
        let p = alloc_host_zeroed(n, 64).unwrap();
        let page = 4096;
        let mut resident = vec![0u8; n / page];
        // SAFETY: `p` is a page-aligned mapping of `n` bytes; `resident` has a byte per page.
        assert_eq!(unsafe { libc::mincore(p, n, resident.as_mut_ptr()) }, 0);
        assert!(
            resident.iter().all(|r| r & 1 == 0),
            "untouched pages are resident"
        );
        // SAFETY: from alloc_host_zeroed with the same size.
        unsafe { free_host_zeroed(p, n, 64) };
    }

    #[test]
    fn refuses_bad_requests() {
        assert!(alloc_host(8, 3).is_err());
        assert!(alloc_host(usize::MAX, 64).is_err());
    }

    #[test]
    fn attributes() {
        let dev = crate::device::cpu();
        assert_eq!(
            CPU_API
                .get_attr(dev, DeviceAttr::Exist)
                .unwrap()
                .view()
                .as_i64(),
            Some(1)
        );
        let mem = CPU_API
            .get_attr(dev, DeviceAttr::TotalGlobalMemory)
            .unwrap();
        assert!(mem.view().as_i64().unwrap() > 0);
        assert!(CPU_API
            .get_attr(dev, DeviceAttr::WarpSize)
            .unwrap()
            .view()
            .is_none());
    }
}
