//! Classic arguments and values into tvm-ffi's: borrowed for a call, or owned.

use std::ffi::c_void;

use crate::abi::{type_code as tc, type_index as ti, AnyPayload, TVMFFIAny};
use crate::abi::{DLTensor, TVMValue};
use crate::dtype::classic_bool;
use crate::error::{Error, Result};
use crate::object::ObjectHeader;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

use super::{raw, tensor_cell, HEADER_BYTES, POINTER_PADDING};

/// The tvm-ffi type index of each classic type code whose value converts by copying its eight
/// bytes, or -1 where the code needs the general conversion (4-byte data types, handles whose
/// type index comes from the object, bytes, arrays, rvalue references, bools to normalize).
const PLAIN_CODE_INDEX: [i32; 16] = [
    ti::INT,           // kDLInt
    ti::INT,           // kDLUInt
    ti::FLOAT,         // kDLFloat
    ti::OPAQUE_PTR,    // kTVMOpaqueHandle
    ti::NONE,          // kTVMNullptr
    -1,                // kTVMDataType
    ti::DEVICE,        // kDLDevice
    ti::DL_TENSOR_PTR, // kTVMDLTensorHandle
    -1,                // kTVMObjectHandle
    -1,                // kTVMModuleHandle
    -1,                // kTVMPackedFuncHandle
    ti::RAW_STR,       // kTVMStr (a null string takes the general path)
    -1,                // kTVMBytes
    -1,                // kTVMNDArrayHandle
    -1,                // kTVMObjectRValueRefArg
    -1,                // kTVMArgBool
];

/// The borrowed tvm-ffi form of a classic argument that needs no check (int, uint, float,
/// opaque and DLTensor pointers, a device, a non-null string, null), or `None` for every other
/// type code. Shared by [`classic_to_raw`] and `TVMFuncCall`'s fast path: one table load and
/// two compares, no branch per type code.
///
/// # Safety
/// As [`classic_to_raw`].
#[inline(always)]
pub unsafe fn plain_classic_to_raw(value: TVMValue, code: i32) -> Option<TVMFFIAny> {
    let index = *PLAIN_CODE_INDEX.get(code as u32 as usize)?;
    if index < 0 {
        return None;
    }
    // SAFETY: both unions are eight bytes with every member at offset 0, and for each code the
    // table admits, the `TVMValue` member it names has the layout of the `AnyPayload` member
    // of the index (i64, f64, pointers, DLDevice); a union may hold any bytes.
    let mut payload = unsafe { std::mem::transmute::<TVMValue, AnyPayload>(value) };
    if index == ti::NONE {
        payload = AnyPayload { v_int64: 0 };
    } else if index == ti::RAW_STR && unsafe { value.v_str }.is_null() {
        return None;
    } else if index == ti::DL_TENSOR_PTR && unsafe { is_classic_bool_descriptor(value.v_handle) } {
        // A `uint1` descriptor is rewritten for the call (see `ClassicInbound`).
        return None;
    } else if POINTER_PADDING && index != ti::INT && index != ti::FLOAT && index != ti::DEVICE {
        // A 4-byte pointer: the caller may have left anything in the other four bytes.
        // SAFETY: the code names a pointer member.
        payload = AnyPayload::ptr(unsafe { value.v_handle });
    }
    Some(raw(index, payload))
}

/// Whether `t` is a non-null descriptor of TVM 0.19's `uint1` bool.
///
/// # Safety
/// `t` is null or points at a readable `DLTensor`.
#[inline(always)]
unsafe fn is_classic_bool_descriptor(t: *mut c_void) -> bool {
    // SAFETY: non-null pointers are readable descriptors per the contract.
    !t.is_null() && classic_bool::is_classic(unsafe { (*t.cast::<DLTensor>()).dtype })
}

/// Whether `code` is one of the classic type codes (`kTVMArgInt` .. `kTVMArgBool`).
pub fn is_known_classic_code(code: i32) -> bool {
    (tc::INT..=tc::BOOL).contains(&code)
}

/// Checks the type codes of classic arguments passed straight through to a classic callee: an
/// unknown code is a `TypeError` naming the argument.
///
/// # Safety
/// `codes` holds `num_args` entries (or `num_args` is 0).
pub unsafe fn check_classic_codes(codes: *const i32, num_args: usize) -> Result<()> {
    for i in 0..num_args {
        // SAFETY: per the contract.
        let code = unsafe { *codes.add(i) };
        if !is_known_classic_code(code) {
            return Err(Error::type_error(format!(
                "argument {i}: unknown classic type code {code}"
            )));
        }
    }
    Ok(())
}

/// Converts a classic argument into a borrowed tvm-ffi value.
///
/// # Safety
/// Pointers and handles in `value` are valid for the duration of the returned view's use.
pub unsafe fn classic_to_raw(value: TVMValue, code: i32) -> Result<TVMFFIAny> {
    // SAFETY: per this function's contract.
    if let Some(plain) = unsafe { plain_classic_to_raw(value, code) } {
        return Ok(plain);
    }
    // SAFETY: each arm reads the union member the type code names.
    unsafe {
        Ok(match code {
            tc::BOOL => raw(
                ti::BOOL,
                AnyPayload {
                    v_int64: (value.v_int64 != 0) as i64,
                },
            ),
            tc::DATA_TYPE => raw(
                ti::DATA_TYPE,
                AnyPayload::dtype(classic_bool::from_classic(value.v_type)),
            ),
            tc::DEVICE => raw(ti::DEVICE, AnyPayload::device(value.v_device)),
            // A non-null string is plain (above); a null one is None.
            tc::STR => TVMFFIAny::NONE,
            tc::BYTES => {
                if value.v_handle.is_null() {
                    return Err(Error::value("null TVMByteArray* passed as bytes argument"));
                }
                raw(ti::BYTE_ARRAY_PTR, AnyPayload::ptr(value.v_handle))
            }
            tc::OBJECT_HANDLE | tc::MODULE_HANDLE | tc::PACKED_FUNC_HANDLE => {
                let obj = value.v_handle;
                if obj.is_null() {
                    TVMFFIAny::NONE
                } else {
                    let index = (*obj.cast::<ObjectHeader>()).type_index;
                    raw(index, AnyPayload::ptr(obj))
                }
            }
            tc::NDARRAY_HANDLE => {
                let t = value.v_handle;
                if t.is_null() {
                    TVMFFIAny::NONE
                } else {
                    let obj = t.cast::<u8>().sub(HEADER_BYTES).cast::<c_void>();
                    raw(ti::TENSOR, AnyPayload::ptr(obj))
                }
            }
            tc::OBJECT_RVALUE_REF_ARG => {
                raw(ti::OBJECT_RVALUE_REF, AnyPayload::ptr(value.v_handle))
            }
            other => {
                return Err(Error::type_error(format!(
                    "unknown classic type code {other}"
                )));
            }
        })
    }
}

/// What classic arguments converted for a tvm-ffi callee need kept for the call: rewritten
/// descriptors and tensor views of `uint1` bools (see [`classic_bool`]). Empty, and free, for
/// every other argument.
#[derive(Default)]
pub struct ClassicInbound {
    // Boxed so each descriptor keeps its address while the Vec grows: the values point at them.
    #[allow(clippy::vec_box)]
    descriptors: Vec<Box<DLTensor>>,
    views: Vec<Tensor>,
}

impl ClassicInbound {
    /// Converts a classic argument as [`classic_to_raw`] does, turning a `uint1` descriptor or
    /// array into a `kDLBool` one held by `self` for the call.
    ///
    /// # Safety
    /// As [`classic_to_raw`].
    pub unsafe fn convert(&mut self, value: TVMValue, code: i32) -> Result<TVMFFIAny> {
        // SAFETY: per the contract, the handle is null or a readable descriptor.
        if code == tc::DL_TENSOR_HANDLE && unsafe { is_classic_bool_descriptor(value.v_handle) } {
            // SAFETY: as above.
            let mut copy = Box::new(unsafe { *value.v_handle.cast::<DLTensor>() });
            copy.dtype = classic_bool::from_classic(copy.dtype);
            let ptr = &mut *copy as *mut DLTensor;
            self.descriptors.push(copy);
            return Ok(raw(ti::DL_TENSOR_PTR, AnyPayload { v_ptr: ptr.cast() }));
        }
        // SAFETY: per the contract.
        let r = unsafe { classic_to_raw(value, code)? };
        if r.type_index == ti::TENSOR {
            // SAFETY: a tensor handle stays alive for the call.
            let t = Tensor::from_any_view(&unsafe { AnyView::from_raw(r) }, "argument")?;
            if classic_bool::is_classic(t.dtype()) {
                let view = t.from_classic()?;
                let out = raw(
                    ti::TENSOR,
                    AnyPayload {
                        v_obj: view.object().as_ptr(),
                    },
                );
                self.views.push(view);
                return Ok(out);
            }
        }
        Ok(r)
    }
}

/// Converts a classic value into an owned [`Any`], taking a new reference to objects (the
/// semantics of `TVMCFuncSetReturn`, which copies its argument).
///
/// # Safety
/// As [`classic_to_raw`].
pub unsafe fn classic_to_owned(value: TVMValue, code: i32) -> Result<Any> {
    // SAFETY: per the contract.
    let raw = unsafe { classic_to_raw(value, code)? };
    // SAFETY: the view is used only within this call.
    owned_from_classic(unsafe { AnyView::from_raw(raw) }.to_owned_any())
}

/// An owned value that came from the classic side, with a `uint1` tensor turned into a
/// `kDLBool` view of the same bytes.
pub fn owned_from_classic(v: Any) -> Result<Any> {
    if v.raw().type_index == ti::TENSOR {
        // SAFETY: a live tensor object.
        if classic_bool::is_classic(unsafe { (*tensor_cell(v.raw().payload.v_obj)).dtype }) {
            return Ok(Any::from(
                Tensor::from_any_view(&v.view(), "value")?.from_classic()?,
            ));
        }
    }
    Ok(v)
}
