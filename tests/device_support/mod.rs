//! Helpers every GPU back end's device tests share (`opencl_support`, `vulkan_support` include
//! this): the classic C API's last error, a copy the back end must refuse, a float32 descriptor
//! over device or host memory, and float32 bytes.
#![allow(dead_code)]

use std::ffi::c_void;
use std::ptr::null_mut;

use tvmrt::abi::{DLDevice, DLTensor};
use tvmrt::capi::classic_error::TVMGetLastError;
use tvmrt::capi::tensor::TVMDeviceCopyDataFromTo;
use tvmrt::dtype::dtypes;

/// The thread's last error from the classic C API.
pub fn last_error() -> String {
    // SAFETY: TVMGetLastError returns a NUL-terminated string owned by the thread.
    unsafe { std::ffi::CStr::from_ptr(TVMGetLastError()) }
        .to_string_lossy()
        .into_owned()
}

/// `TVMDeviceCopyDataFromTo(from, to)` returns -1 with `want` in the error: the back end
/// refuses the descriptors without reading through them.
pub fn copy_refused(from: &mut DLTensor, to: &mut DLTensor, want: &str) {
    // SAFETY: both are descriptors whose validity is what the call checks; a refused copy
    // reads no data.
    assert_eq!(unsafe { TVMDeviceCopyDataFromTo(from, to, null_mut()) }, -1);
    let e = last_error();
    assert!(e.contains(want), "{e}");
}

/// A descriptor over `data` (a device pointer or host memory) of `shape[0]` float32 elements.
pub fn desc(data: *mut c_void, dev: DLDevice, shape: &mut [i64; 1], byte_offset: u64) -> DLTensor {
    DLTensor {
        data,
        device: dev,
        ndim: 1,
        dtype: dtypes::FLOAT32,
        shape: shape.as_mut_ptr(),
        strides: null_mut(),
        byte_offset,
    }
}

/// Little-endian bytes of f32s.
pub fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// f32s of little-endian bytes.
pub fn to_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
