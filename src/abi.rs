//! The C data layouts both of TVM's ABIs share with tvmrt: `TVMFFIAny`, the object header's
//! cells, the classic `TVMValue`, and the type codes and indexes.
//!
//! Sources of truth: tvm-ffi `include/tvm/ffi/c_api.h` (0.1.x) and TVM 0.19
//! `include/tvm/runtime/c_runtime_api.h`. DLPack types come from `dlpark`.

use std::ffi::{c_char, c_void};

pub use dlpark::ffi::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPackVersion, DLTensor,
};

/// tvm-ffi type indexes (`TVMFFITypeIndex`): PODs below 64, objects from 64.
pub mod type_index {
    pub const NONE: i32 = 0;
    pub const INT: i32 = 1;
    pub const BOOL: i32 = 2;
    pub const FLOAT: i32 = 3;
    pub const OPAQUE_PTR: i32 = 4;
    pub const DATA_TYPE: i32 = 5;
    pub const DEVICE: i32 = 6;
    pub const DL_TENSOR_PTR: i32 = 7;
    pub const RAW_STR: i32 = 8;
    pub const BYTE_ARRAY_PTR: i32 = 9;
    pub const OBJECT_RVALUE_REF: i32 = 10;
    pub const SMALL_STR: i32 = 11;
    pub const SMALL_BYTES: i32 = 12;
    pub const STATIC_OBJECT_BEGIN: i32 = 64;
    pub const OBJECT: i32 = 64;
    pub const STR: i32 = 65;
    pub const BYTES: i32 = 66;
    pub const ERROR: i32 = 67;
    pub const FUNCTION: i32 = 68;
    pub const SHAPE: i32 = 69;
    pub const TENSOR: i32 = 70;
    pub const ARRAY: i32 = 71;
    pub const MAP: i32 = 72;
    pub const MODULE: i32 = 73;
    /// First index handed out to object types registered at run time.
    pub const DYN_OBJECT_BEGIN: i32 = 128;
}

/// Classic type codes (`TVMArgTypeCode` with DLPack's first three).
pub mod type_code {
    pub const INT: i32 = 0;
    pub const UINT: i32 = 1;
    pub const FLOAT: i32 = 2;
    pub const OPAQUE_HANDLE: i32 = 3;
    pub const NULLPTR: i32 = 4;
    pub const DATA_TYPE: i32 = 5;
    pub const DEVICE: i32 = 6;
    pub const DL_TENSOR_HANDLE: i32 = 7;
    pub const OBJECT_HANDLE: i32 = 8;
    pub const MODULE_HANDLE: i32 = 9;
    pub const PACKED_FUNC_HANDLE: i32 = 10;
    pub const STR: i32 = 11;
    pub const BYTES: i32 = 12;
    pub const NDARRAY_HANDLE: i32 = 13;
    pub const OBJECT_RVALUE_REF_ARG: i32 = 14;
    pub const BOOL: i32 = 15;
}

/// Object deleter flags (`TVMFFIObjectDeleterFlagBitMask`).
pub mod deleter_flag {
    pub const STRONG: i32 = 1;
    pub const WEAK: i32 = 2;
    pub const BOTH: i32 = 3;
}

/// `void (*deleter)(void* self, int flags)` in the object header.
pub type ObjectDeleter = unsafe extern "C" fn(*mut c_void, i32);

/// `TVMFFISafeCallType`: the calling convention of every tvm-ffi function.
pub type TVMFFISafeCallType =
    unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, i32, *mut TVMFFIAny) -> i32;

/// The classic `TVMPackedCFunc` callback type (`TVMFuncCreateFromCFunc`).
pub type TVMPackedCFunc =
    unsafe extern "C" fn(*mut TVMValue, *mut i32, i32, *mut c_void, *mut c_void) -> i32;

/// The classic `TVMPackedCFuncFinalizer`.
pub type TVMPackedCFuncFinalizer = unsafe extern "C" fn(*mut c_void);

/// The classic backend signature of a compiled function in a TVM <= 0.20 library.
pub type TVMBackendPackedCFunc =
    unsafe extern "C" fn(*mut TVMValue, *mut i32, i32, *mut TVMValue, *mut i32, *mut c_void) -> i32;

/// The 8-byte payload of a `TVMFFIAny`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union AnyPayload {
    pub v_int64: i64,
    pub v_float64: f64,
    pub v_ptr: *mut c_void,
    pub v_c_str: *const c_char,
    pub v_obj: *mut c_void,
    pub v_dtype: DLDataType,
    pub v_device: DLDevice,
    pub v_bytes: [u8; 8],
    pub v_uint64: u64,
}

/// `TVMFFIAny`: type index, small-string length (or zero padding), payload. 16 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIAny {
    pub type_index: i32,
    pub small_str_len: u32,
    pub payload: AnyPayload,
}

impl AnyPayload {
    /// Eight zero bytes.
    pub const ZERO: AnyPayload = AnyPayload { v_uint64: 0 };

    /// A pointer (object, opaque, `DLTensor*`, `TVMFFIByteArray*`), the bytes past it zero.
    ///
    /// Maps, structural equality and hashing compare a POD payload's eight bytes as one
    /// `int64`, so the bytes a value does not fill must be zero, as tvm-ffi makes them
    /// (`TVM_FFI_CLEAR_PTR_PADDING_IN_FFI_ANY` on 32-bit targets, `result->v_uint64 = 0` before
    /// a `DLDataType`).
    pub fn ptr(p: *mut c_void) -> AnyPayload {
        let mut payload = AnyPayload::ZERO;
        payload.v_ptr = p;
        payload
    }

    /// A C string pointer, the bytes past it zero (see [`AnyPayload::ptr`]).
    pub fn c_str(p: *const c_char) -> AnyPayload {
        AnyPayload::ptr(p.cast_mut().cast())
    }

    /// A data type in the first four bytes, the other four zero (see [`AnyPayload::ptr`]).
    pub fn dtype(d: DLDataType) -> AnyPayload {
        let mut payload = AnyPayload::ZERO;
        payload.v_dtype = d;
        payload
    }

    /// A device (all eight bytes; built on zeros like the others).
    pub fn device(d: DLDevice) -> AnyPayload {
        let mut payload = AnyPayload::ZERO;
        payload.v_device = d;
        payload
    }
}

impl TVMFFIAny {
    /// The `None` value.
    pub const NONE: TVMFFIAny = TVMFFIAny {
        type_index: type_index::NONE,
        small_str_len: 0,
        payload: AnyPayload { v_int64: 0 },
    };
}

/// `TVMFFIByteArray` (and the classic `TVMByteArray`, same layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TVMFFIByteArray {
    pub data: *const c_char,
    pub size: usize,
}

impl TVMFFIByteArray {
    /// A byte array viewing `bytes` (valid while `bytes` is).
    pub fn from_slice(bytes: &[u8]) -> Self {
        TVMFFIByteArray {
            data: bytes.as_ptr().cast(),
            size: bytes.len(),
        }
    }
    /// The bytes viewed.
    ///
    /// # Safety
    /// `data` must point to `size` readable bytes (or `size` is 0) for the returned lifetime.
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.size == 0 || self.data.is_null() {
            &[]
        } else {
            // SAFETY: the caller guarantees `data[..size]` is readable.
            unsafe { std::slice::from_raw_parts(self.data.cast(), self.size) }
        }
    }
}

/// The classic `TVMByteArray`: the same layout as `TVMFFIByteArray`, a distinct C type.
pub type TVMByteArray = TVMFFIByteArray;

/// `TVMFFIFunctionCell`: what follows the header of a function object.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIFunctionCell {
    pub safe_call: TVMFFISafeCallType,
    pub cpp_call: *mut c_void,
}

/// `TVMFFIErrorCell`: what follows the header of an error object.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIErrorCell {
    pub kind: TVMFFIByteArray,
    pub message: TVMFFIByteArray,
    pub backtrace: TVMFFIByteArray,
    pub update_backtrace: Option<unsafe extern "C" fn(*mut c_void, *const TVMFFIByteArray, i32)>,
    pub cause_chain: *mut c_void,
    pub extra_context: *mut c_void,
}

/// `TVMFFIShapeCell`: what follows the header of a shape object.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIShapeCell {
    pub data: *const i64,
    pub size: usize,
}

/// `TVMFFIVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TVMFFIVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// The classic `TVMValue` union (8 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union TVMValue {
    pub v_int64: i64,
    pub v_float64: f64,
    pub v_handle: *mut c_void,
    pub v_str: *const c_char,
    pub v_type: DLDataType,
    pub v_device: DLDevice,
}

impl Default for TVMValue {
    fn default() -> Self {
        TVMValue { v_int64: 0 }
    }
}

impl TVMValue {
    /// A handle, the bytes past it zero on 32-bit targets (as [`AnyPayload::ptr`]).
    pub fn handle(p: *mut c_void) -> TVMValue {
        let mut value = TVMValue::default();
        value.v_handle = p;
        value
    }

    /// A C string, the bytes past it zero on 32-bit targets.
    pub fn c_str(p: *const c_char) -> TVMValue {
        let mut value = TVMValue::default();
        value.v_str = p;
        value
    }

    /// A data type in the first four bytes, the other four zero.
    pub fn dtype(d: DLDataType) -> TVMValue {
        let mut value = TVMValue::default();
        value.v_type = d;
        value
    }

    /// A device.
    pub fn device(d: DLDevice) -> TVMValue {
        let mut value = TVMValue::default();
        value.v_device = d;
        value
    }
}

// Layout checks against the C headers: a wrong size here would silently corrupt every call.
// Pointers and `size_t` are 4 bytes on 32-bit targets (armv7) and 8 on 64-bit ones, while
// `int64_t` and `double` stay 8-byte aligned on every target tvmrt supports (the ARM EABI
// included), so `TVMFFIAny` and the object header keep their 16 and 24 bytes everywhere.
// `tests/layouts/` holds what a C compiler gives each target, checked by `layout_tests`.
const _: () = {
    use std::mem::{offset_of, size_of};
    const P: usize = size_of::<*const c_void>();
    assert!(size_of::<TVMFFIAny>() == 16);
    assert!(offset_of!(TVMFFIAny, payload) == 8);
    assert!(size_of::<TVMValue>() == 8);
    assert!(size_of::<TVMFFIByteArray>() == 2 * P);
    assert!(size_of::<TVMFFIFunctionCell>() == 2 * P);
    assert!(size_of::<TVMFFIErrorCell>() == 9 * P);
    assert!(size_of::<TVMFFIShapeCell>() == 2 * P);
    // data, device, ndim, dtype, shape, strides, then the 8-byte-aligned byte_offset.
    assert!(offset_of!(DLTensor, byte_offset) == (3 * P + 16).next_multiple_of(8));
    assert!(size_of::<DLTensor>() == (3 * P + 16).next_multiple_of(8) + 8);
};

#[cfg(all(test, feature = "reflection"))]
mod layout_tests;
