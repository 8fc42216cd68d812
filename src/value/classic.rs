//! The classic door's values: `TVMValue` + type code, to and from [`Any`].
//!
//! Type codes from TVM 0.19 `c_runtime_api.h`. Compatibility facts kept here:
//! - a classic `NDArray` handle (code 13) is the `DLTensor*` inside the array object, which in
//!   tvmrt (as in TVM) is 24 bytes after the object header;
//! - `TVMFuncCall` returns strings, bytes and data types in thread-local storage valid until
//!   the next call on the thread, data types as their string form (TVM 0.19 `TVMFuncCall`);
//! - a bool is `uint1` on the classic side and `kDLBool` inside
//!   ([`crate::dtype::classic_bool`]): tensors, tensor descriptors and data types are
//!   converted here, both ways (a descriptor by a copy that lives for the call, a tensor by a
//!   view of the same bytes).

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CString};

use super::{Any, AnyView};
use crate::abi::{type_code as tc, type_index as ti, AnyPayload, TVMFFIAny, TVMFFIByteArray};
use crate::abi::{DLTensor, TVMValue};
use crate::dtype::classic_bool;
use crate::error::{Error, Result};
use crate::object::ObjectHeader;
use crate::tensor::Tensor;

const HEADER_BYTES: usize = std::mem::size_of::<ObjectHeader>();

/// The `DLTensor` of a tensor object (after its header).
///
/// # Safety
/// `obj` is a live tensor object.
unsafe fn tensor_cell(obj: *mut c_void) -> *const DLTensor {
    // SAFETY: tensor objects carry their descriptor right after the header.
    unsafe { obj.cast::<u8>().add(HEADER_BYTES).cast() }
}

/// Whether a pointer leaves bytes of the 8-byte payload unused (32-bit targets).
const POINTER_PADDING: bool = std::mem::size_of::<*mut c_void>() < 8;

fn raw(index: i32, payload: AnyPayload) -> TVMFFIAny {
    TVMFFIAny {
        type_index: index,
        small_str_len: 0,
        payload,
    }
}

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

/// The classic type code of each tvm-ffi type index below 10 as an argument: the values a
/// classic callee receives by copying their eight bytes (pointers are borrowed for the call).
const PLAIN_ARG_CODE: [i32; 10] = [
    tc::NULLPTR,          // None
    tc::INT,              // int
    tc::BOOL,             // bool
    tc::FLOAT,            // float
    tc::OPAQUE_HANDLE,    // opaque pointer
    tc::DATA_TYPE,        // DLDataType
    tc::DEVICE,           // DLDevice
    tc::DL_TENSOR_HANDLE, // DLTensor*
    tc::STR,              // const char*
    tc::BYTES,            // TVMFFIByteArray*
];

/// The classic form of an argument that needs no storage (None, int, bool, float, data type,
/// device and the borrowed pointers), or `None` for strings, bytes and objects. Shared by
/// [`ClassicArgs`] and the classic callback trampoline's fast path.
#[inline(always)]
pub fn plain_arg_to_classic(r: &TVMFFIAny) -> Option<(TVMValue, i32)> {
    let code = *PLAIN_ARG_CODE.get(r.type_index as u32 as usize)?;
    // A bool tensor descriptor or dtype is rewritten for the classic side (`ClassicArgs`).
    // SAFETY: the payload member the type index names; a descriptor pointer is readable.
    if (r.type_index == ti::DL_TENSOR_PTR && unsafe { is_ffi_bool_descriptor(r.payload.v_ptr) })
        || (r.type_index == ti::DATA_TYPE && classic_bool::is_ffi(unsafe { r.payload.v_dtype }))
    {
        return None;
    }
    let value = if r.type_index == ti::NONE {
        TVMValue::handle(std::ptr::null_mut())
    } else {
        // SAFETY: both unions are eight bytes with every member at offset 0; the classic
        // member the code names has the layout of the payload member the index names.
        unsafe { std::mem::transmute::<AnyPayload, TVMValue>(r.payload) }
    };
    Some((value, code))
}

/// Whether `t` is a non-null descriptor of a `kDLBool` tensor.
///
/// # Safety
/// `t` is null or points at a readable `DLTensor`.
#[inline(always)]
unsafe fn is_ffi_bool_descriptor(t: *mut c_void) -> bool {
    // SAFETY: non-null pointers are readable descriptors per the contract.
    !t.is_null() && classic_bool::is_ffi(unsafe { (*t.cast::<DLTensor>()).dtype })
}

/// Arguments up to this count convert on the stack, without a heap allocation (here and in
/// the C API's fast paths).
pub const INLINE_ARGS: usize = 8;

/// Classic arguments built from tvm-ffi values, with the storage their pointers need.
pub struct ClassicArgs {
    len: usize,
    inline_values: [TVMValue; INLINE_ARGS],
    inline_codes: [i32; INLINE_ARGS],
    heap_values: Vec<TVMValue>,
    heap_codes: Vec<i32>,
    strings: Vec<CString>,
    // Boxed so each array keeps its address while the Vec grows: the values point at them.
    #[allow(clippy::vec_box)]
    byte_arrays: Vec<Box<TVMFFIByteArray>>,
    /// `uint1` copies of `kDLBool` descriptors, boxed for the same reason.
    #[allow(clippy::vec_box)]
    descriptors: Vec<Box<DLTensor>>,
    /// `uint1` views of `kDLBool` tensors.
    views: Vec<Tensor>,
}

impl Default for ClassicArgs {
    fn default() -> Self {
        ClassicArgs {
            len: 0,
            inline_values: [TVMValue::default(); INLINE_ARGS],
            inline_codes: [0; INLINE_ARGS],
            heap_values: Vec::new(),
            heap_codes: Vec::new(),
            strings: Vec::new(),
            byte_arrays: Vec::new(),
            descriptors: Vec::new(),
            views: Vec::new(),
        }
    }
}

impl ClassicArgs {
    /// Converts tvm-ffi arguments for a classic callee (a `TVMPackedCFunc` or a compiled
    /// backend function). Small strings and bytes get temporary storage owned by `self`; up to
    /// eight arguments need no allocation.
    pub fn from_views(args: &[AnyView<'_>]) -> Result<ClassicArgs> {
        let mut out = ClassicArgs {
            len: args.len(),
            ..Default::default()
        };
        if args.len() > INLINE_ARGS {
            out.heap_values = vec![TVMValue::default(); args.len()];
            out.heap_codes = vec![0; args.len()];
        }
        for (i, a) in args.iter().enumerate() {
            let (v, c) = out
                .convert(a)
                .map_err(|e| Error::new(e.kind.clone(), format!("argument {i}: {}", e.message)))?;
            out.values_mut()[i] = v;
            out.codes_mut()[i] = c;
        }
        Ok(out)
    }

    /// The number of arguments.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Both arrays at once (values, codes), as a classic call takes them.
    pub fn arrays_mut(&mut self) -> (&mut [TVMValue], &mut [i32]) {
        if self.len > INLINE_ARGS {
            (&mut self.heap_values, &mut self.heap_codes)
        } else {
            (
                &mut self.inline_values[..self.len],
                &mut self.inline_codes[..self.len],
            )
        }
    }

    /// The `TVMValue` array.
    pub fn values_mut(&mut self) -> &mut [TVMValue] {
        if self.len > INLINE_ARGS {
            &mut self.heap_values
        } else {
            &mut self.inline_values[..self.len]
        }
    }

    /// The type code array.
    pub fn codes_mut(&mut self) -> &mut [i32] {
        if self.len > INLINE_ARGS {
            &mut self.heap_codes
        } else {
            &mut self.inline_codes[..self.len]
        }
    }

    fn convert(&mut self, a: &AnyView<'_>) -> Result<(TVMValue, i32)> {
        let r = a.raw();
        if let Some(plain) = plain_arg_to_classic(r) {
            return Ok(plain);
        }
        // SAFETY: each arm reads the payload member the type index names.
        let p = unsafe {
            match r.type_index {
                // Only a non-null `kDLBool` descriptor gets here (`plain_arg_to_classic`).
                ti::DL_TENSOR_PTR if !r.payload.v_ptr.is_null() => {
                    let mut copy = Box::new(*r.payload.v_ptr.cast::<DLTensor>());
                    copy.dtype = classic_bool::to_classic(copy.dtype);
                    let ptr = &mut *copy as *mut DLTensor;
                    self.descriptors.push(copy);
                    (
                        TVMValue {
                            v_handle: ptr.cast(),
                        },
                        tc::DL_TENSOR_HANDLE,
                    )
                }
                ti::DATA_TYPE => (
                    TVMValue {
                        v_type: classic_bool::to_classic(r.payload.v_dtype),
                    },
                    tc::DATA_TYPE,
                ),
                ti::TENSOR if classic_bool::is_ffi((*tensor_cell(r.payload.v_obj)).dtype) => {
                    let t = Tensor::from_any_view(a, "argument")?.into_classic()?;
                    let handle = t.dltensor();
                    self.views.push(t);
                    (
                        TVMValue {
                            v_handle: handle.cast(),
                        },
                        tc::NDARRAY_HANDLE,
                    )
                }
                ti::SMALL_STR | ti::STR => {
                    let bytes = a.as_byte_slice().unwrap_or(&[]);
                    let c = CString::new(bytes).map_err(|_| {
                        Error::value("string with an interior NUL cannot be passed as a C string")
                    })?;
                    let ptr = c.as_ptr();
                    self.strings.push(c);
                    (TVMValue::c_str(ptr), tc::STR)
                }
                ti::SMALL_BYTES | ti::BYTES => {
                    let arr = Box::new(TVMFFIByteArray::from_slice(
                        a.as_byte_slice().unwrap_or(&[]),
                    ));
                    let ptr = &*arr as *const TVMFFIByteArray as *mut c_void;
                    self.byte_arrays.push(arr);
                    (TVMValue::handle(ptr), tc::BYTES)
                }
                ti::TENSOR => {
                    let t = r.payload.v_obj.cast::<u8>().add(HEADER_BYTES);
                    (TVMValue::handle(t.cast()), tc::NDARRAY_HANDLE)
                }
                ti::FUNCTION => (TVMValue::handle(r.payload.v_obj), tc::PACKED_FUNC_HANDLE),
                ti::MODULE => (TVMValue::handle(r.payload.v_obj), tc::MODULE_HANDLE),
                ti::OBJECT_RVALUE_REF => {
                    (TVMValue::handle(r.payload.v_ptr), tc::OBJECT_RVALUE_REF_ARG)
                }
                i if i >= ti::STATIC_OBJECT_BEGIN => {
                    (TVMValue::handle(r.payload.v_obj), tc::OBJECT_HANDLE)
                }
                other => {
                    return Err(Error::type_error(format!(
                        "type index {other} has no classic type code"
                    )))
                }
            }
        };
        Ok(p)
    }
}

thread_local! {
    static RET_STR: RefCell<CString> = RefCell::new(CString::default());
    static RET_BYTES: RefCell<(Vec<u8>, TVMFFIByteArray)> = const {
        RefCell::new((Vec::new(), TVMFFIByteArray { data: std::ptr::null(), size: 0 }))
    };
}

/// The thread-local `TVMByteArray` that bytes results are returned in (for `TVMByteArrayFree`).
pub fn is_thread_return_bytes(ptr: *const TVMFFIByteArray) -> bool {
    RET_BYTES.with(|b| std::ptr::eq(&b.borrow().1, ptr))
}

fn return_str(s: &[u8]) -> *const c_char {
    let c = CString::new(s.iter().copied().filter(|&b| b != 0).collect::<Vec<u8>>())
        .unwrap_or_default();
    RET_STR.with(|slot| {
        *slot.borrow_mut() = c;
        slot.borrow().as_ptr()
    })
}

fn return_bytes(b: &[u8]) -> *mut c_void {
    RET_BYTES.with(|slot| {
        let mut slot = slot.borrow_mut();
        slot.0 = b.to_vec();
        slot.1 = TVMFFIByteArray::from_slice(&slot.0);
        &slot.1 as *const TVMFFIByteArray as *mut c_void
    })
}

/// The classic form of a value that owns nothing (int, float, bool, None), or `None` for
/// every other value: [`plain_arg_to_classic`] for the type indices below 4. Shared by
/// [`any_to_classic_return`] and `TVMFuncCall`'s fast path.
#[inline(always)]
pub fn plain_to_classic(r: &TVMFFIAny) -> Option<(TVMValue, i32)> {
    if r.type_index as u32 > ti::FLOAT as u32 {
        return None;
    }
    plain_arg_to_classic(r)
}

/// Converts a result for a classic caller (`TVMFuncCall`). Object results move to the caller,
/// who releases them with `TVMFuncFree`/`TVMModFree`/`TVMArrayFree`/`TVMObjectFree`.
pub fn any_to_classic_return(value: Any) -> Result<(TVMValue, i32)> {
    // Plain values first: they own nothing and need no thread-local storage.
    if let Some(plain) = plain_to_classic(value.raw()) {
        return Ok(plain);
    }
    let v = value.view();
    let r = *v.raw();
    // SAFETY: each arm reads the payload member the type index names.
    let out = unsafe {
        match r.type_index {
            ti::SMALL_STR | ti::STR | ti::RAW_STR => (
                TVMValue::c_str(return_str(v.as_byte_slice().unwrap_or(&[]))),
                tc::STR,
            ),
            ti::SMALL_BYTES | ti::BYTES | ti::BYTE_ARRAY_PTR => (
                TVMValue::handle(return_bytes(v.as_byte_slice().unwrap_or(&[]))),
                tc::BYTES,
            ),
            ti::DATA_TYPE => {
                let s = crate::dtype::dtype_to_string(r.payload.v_dtype)?;
                (TVMValue::c_str(return_str(s.as_bytes())), tc::STR)
            }
            ti::TENSOR => {
                // A bool tensor leaves as TVM 0.19's `uint1`, a view of the same bytes.
                let value = if classic_bool::is_ffi((*tensor_cell(r.payload.v_obj)).dtype) {
                    Any::from(Tensor::from_any_view(&v, "result")?.into_classic()?)
                } else {
                    value
                };
                let obj = value.into_raw().payload.v_obj;
                (
                    TVMValue::handle(obj.cast::<u8>().add(HEADER_BYTES).cast()),
                    tc::NDARRAY_HANDLE,
                )
            }
            ti::FUNCTION => (
                TVMValue::handle(value.into_raw().payload.v_obj),
                tc::PACKED_FUNC_HANDLE,
            ),
            ti::MODULE => (
                TVMValue::handle(value.into_raw().payload.v_obj),
                tc::MODULE_HANDLE,
            ),
            i if i >= ti::STATIC_OBJECT_BEGIN => (
                TVMValue::handle(value.into_raw().payload.v_obj),
                tc::OBJECT_HANDLE,
            ),
            ti::OBJECT_RVALUE_REF => {
                let obj = v
                    .as_object()
                    .map(|o| o.into_raw())
                    .unwrap_or(std::ptr::null_mut());
                (TVMValue::handle(obj), tc::OBJECT_HANDLE)
            }
            _ => {
                let mut args = ClassicArgs::default();
                args.convert(&v)?
            }
        }
    };
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::string::new_str;

    #[test]
    fn plain_classic_arguments_convert_by_table() {
        let text = c"text";
        // A real descriptor: a `DLTensor*` argument is read (for its dtype) on the way.
        let mut tensor_slot = DLTensor {
            data: std::ptr::null_mut(),
            device: crate::tensor::layout::cpu(),
            ndim: 0,
            dtype: crate::dtype::dtypes::FLOAT32,
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let tensor = (&mut tensor_slot as *mut DLTensor).cast::<c_void>();
        let device = crate::abi::DLDevice {
            device_type: crate::abi::DLDeviceType::CUDA,
            device_id: 3,
        };
        let cases: [(TVMValue, i32, i32); 8] = [
            (TVMValue { v_int64: -7 }, tc::INT, ti::INT),
            (TVMValue { v_int64: 9 }, tc::UINT, ti::INT),
            (TVMValue { v_float64: 2.5 }, tc::FLOAT, ti::FLOAT),
            (TVMValue::handle(tensor), tc::OPAQUE_HANDLE, ti::OPAQUE_PTR),
            (TVMValue { v_int64: 77 }, tc::NULLPTR, ti::NONE),
            (TVMValue::device(device), tc::DEVICE, ti::DEVICE),
            (
                TVMValue::handle(tensor),
                tc::DL_TENSOR_HANDLE,
                ti::DL_TENSOR_PTR,
            ),
            (TVMValue::c_str(text.as_ptr()), tc::STR, ti::RAW_STR),
        ];
        for (value, code, index) in cases {
            // SAFETY: the pointers are alive for the test.
            let raw = unsafe { plain_classic_to_raw(value, code) }.expect("plain code");
            assert_eq!(raw.type_index, index, "code {code}");
            assert_eq!(raw.small_str_len, 0);
            // SAFETY: reading the member the index names.
            unsafe {
                match index {
                    ti::NONE => assert_eq!(raw.payload.v_int64, 0, "None has a zero payload"),
                    ti::FLOAT => assert_eq!(raw.payload.v_float64, 2.5),
                    ti::DEVICE => {
                        assert_eq!(raw.payload.v_device.device_id, 3);
                        assert_eq!(
                            raw.payload.v_device.device_type,
                            crate::abi::DLDeviceType::CUDA
                        );
                    }
                    _ => assert_eq!(raw.payload.v_int64, value.v_int64, "code {code}"),
                }
            }
            // And back the way a classic callee receives it.
            let (back, back_code) = plain_arg_to_classic(&raw).expect("plain index");
            let expected_code = match code {
                tc::UINT => tc::INT,
                other => other,
            };
            assert_eq!(back_code, expected_code);
            if code != tc::NULLPTR {
                // SAFETY: eight-byte members on both sides.
                unsafe { assert_eq!(back.v_int64, value.v_int64, "code {code}") };
            }
        }
        // Codes that need the general conversion, and a null string.
        for code in [
            tc::DATA_TYPE,
            tc::OBJECT_HANDLE,
            tc::MODULE_HANDLE,
            tc::PACKED_FUNC_HANDLE,
            tc::BYTES,
            tc::NDARRAY_HANDLE,
            tc::OBJECT_RVALUE_REF_ARG,
            tc::BOOL,
            16,
            -1,
            i32::MAX,
        ] {
            // SAFETY: refused before any member is read.
            assert!(unsafe { plain_classic_to_raw(TVMValue { v_int64: 1 }, code) }.is_none());
        }
        let null_str = TVMValue::c_str(std::ptr::null());
        // SAFETY: the null string is refused, not read.
        assert!(unsafe { plain_classic_to_raw(null_str, tc::STR) }.is_none());
        // Results: only values that own nothing are plain.
        let int = Any::from(41i64);
        assert_eq!(plain_to_classic(int.raw()).map(|(_, c)| c), Some(tc::INT));
        let s = Any::from("a string long enough to be an object");
        assert!(plain_to_classic(s.raw()).is_none());
        assert!(plain_arg_to_classic(s.raw()).is_none());
    }

    #[test]
    fn bools_are_uint1_on_the_classic_side() {
        use crate::dtype::{dtype, dtypes};
        let mut shape = [3i64];
        let mut data = [1u8, 0, 1];
        let mut classic = DLTensor {
            data: data.as_mut_ptr().cast(),
            device: crate::tensor::layout::cpu(),
            ndim: 1,
            dtype: classic_bool::CLASSIC,
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let value = TVMValue {
            v_handle: (&mut classic as *mut DLTensor).cast(),
        };
        // SAFETY: a live descriptor.
        assert!(unsafe { plain_classic_to_raw(value, tc::DL_TENSOR_HANDLE) }.is_none());
        let mut inbound = ClassicInbound::default();
        // SAFETY: as above.
        let r = unsafe { inbound.convert(value, tc::DL_TENSOR_HANDLE) }.unwrap();
        // SAFETY: the converted descriptor lives in `inbound`.
        let seen = unsafe { *r.payload.v_ptr.cast::<DLTensor>() };
        assert_eq!(seen.dtype, dtypes::BOOL);
        assert_eq!(seen.data, classic.data, "same bytes");
        assert_eq!(
            classic.dtype,
            classic_bool::CLASSIC,
            "the caller's descriptor is unchanged"
        );
        // Data types: uint1 in, kDLBool out; uint8 unchanged.
        let dt = |t| TVMValue { v_type: t };
        // SAFETY: data type values.
        let r = unsafe { classic_to_raw(dt(classic_bool::CLASSIC), tc::DATA_TYPE) }.unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { r.payload.v_dtype }, dtypes::BOOL);
        // SAFETY: as above.
        let r = unsafe { classic_to_raw(dt(dtypes::UINT8), tc::DATA_TYPE) }.unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { r.payload.v_dtype }, dtypes::UINT8);
        // The other way: a kDLBool tensor, descriptor and dtype reach a classic callee as uint1.
        let t = Tensor::empty(&[3], dtypes::BOOL, crate::tensor::layout::cpu()).unwrap();
        let mut ffi_desc = *t.dl();
        let values = [
            Any::from(t.clone()),
            Any::dltensor_ptr(&mut ffi_desc),
            Any::from(dtypes::BOOL),
            Any::from(dtype(0, 8, 1)),
        ];
        let views: Vec<AnyView<'_>> = values.iter().map(Any::view).collect();
        assert!(plain_arg_to_classic(views[1].raw()).is_none());
        let mut c = ClassicArgs::from_views(&views).unwrap();
        let codes = c.codes_mut().to_vec();
        assert_eq!(
            codes,
            [
                tc::NDARRAY_HANDLE,
                tc::DL_TENSOR_HANDLE,
                tc::DATA_TYPE,
                tc::DATA_TYPE
            ]
        );
        let v = c.values_mut();
        // SAFETY: the handles live in `c` (views and descriptor copies) for its lifetime.
        unsafe {
            let array = &*v[0].v_handle.cast::<DLTensor>();
            assert_eq!(array.dtype, classic_bool::CLASSIC);
            assert_eq!(array.data, t.data_ptr(), "a view of the same bytes");
            assert_eq!(
                (*v[1].v_handle.cast::<DLTensor>()).dtype,
                classic_bool::CLASSIC
            );
            assert_eq!(v[2].v_type, classic_bool::CLASSIC);
            assert_eq!(v[3].v_type, dtype(0, 8, 1));
        }
        assert_eq!(t.dtype(), dtypes::BOOL, "the tensor itself is unchanged");
        assert_eq!(ffi_desc.dtype, dtypes::BOOL);
        // A bool result leaves for a classic caller as a uint1 view, and comes back as kDLBool.
        let (ret, code) = any_to_classic_return(Any::from(t.clone())).unwrap();
        assert_eq!(code, tc::NDARRAY_HANDLE);
        // SAFETY: the returned handle owns a reference to the view.
        let back = unsafe { classic_to_owned(ret, code) }.unwrap();
        // SAFETY: as above.
        assert_eq!(
            unsafe { (*ret.v_handle.cast::<DLTensor>()).dtype },
            classic_bool::CLASSIC
        );
        let back = Tensor::from_any_view(&back.view(), "back").unwrap();
        assert_eq!(back.dtype(), dtypes::BOOL);
        assert_eq!(back.data_ptr(), t.data_ptr());
        // SAFETY: releases the reference the classic return handed over.
        unsafe { crate::object::dec_ref_raw(ret.v_handle.cast::<u8>().sub(HEADER_BYTES).cast()) };
    }

    #[test]
    fn pods_round_trip_through_classic() {
        let values = [
            Any::from(5i64),
            Any::from(1.5f64),
            Any::from(true),
            Any::none(),
        ];
        let views: Vec<AnyView<'_>> = values.iter().map(Any::view).collect();
        let mut c = ClassicArgs::from_views(&views).unwrap();
        assert_eq!(c.codes_mut(), &[tc::INT, tc::FLOAT, tc::BOOL, tc::NULLPTR]);
        for (i, v) in values.iter().enumerate() {
            let (value, code) = (c.values_mut()[i], c.codes_mut()[i]);
            // SAFETY: plain values.
            let back = unsafe { classic_to_owned(value, code) }.unwrap();
            assert_eq!(back.view().type_index(), v.view().type_index());
        }
        // SAFETY: the FLOAT member of a float value.
        assert_eq!(unsafe { c.values_mut()[1].v_float64 }, 1.5);
    }

    #[test]
    fn strings_become_c_strings() {
        let s = Any::from_object(new_str("hi"));
        let mut c = ClassicArgs::from_views(&[s.view()]).unwrap();
        assert_eq!(c.codes_mut()[0], tc::STR);
        // SAFETY: the CString lives in `c`.
        let text = unsafe { std::ffi::CStr::from_ptr(c.values_mut()[0].v_str) };
        assert_eq!(text.to_str().unwrap(), "hi");
        let (v, code) = any_to_classic_return(Any::from("ret")).unwrap();
        assert_eq!(code, tc::STR);
        // SAFETY: valid until the next return on this thread.
        assert_eq!(
            unsafe { std::ffi::CStr::from_ptr(v.v_str) }
                .to_str()
                .unwrap(),
            "ret"
        );
        let (v, code) = any_to_classic_return(Any::from(crate::dtype::dtypes::FLOAT32)).unwrap();
        assert_eq!(code, tc::STR);
        // SAFETY: as above.
        assert_eq!(
            unsafe { std::ffi::CStr::from_ptr(v.v_str) }
                .to_str()
                .unwrap(),
            "float32"
        );
    }

    #[test]
    fn more_than_eight_arguments_use_the_heap() {
        let values: Vec<Any> = (0..11i64).map(Any::from).collect();
        let views: Vec<AnyView<'_>> = values.iter().map(Any::view).collect();
        let mut c = ClassicArgs::from_views(&views).unwrap();
        assert_eq!(c.len(), 11);
        // SAFETY: int values.
        let ints: Vec<i64> = c
            .values_mut()
            .iter()
            .map(|v| unsafe { v.v_int64 })
            .collect();
        assert_eq!(ints, (0..11).collect::<Vec<i64>>());
    }

    #[test]
    fn unknown_code_is_type_error() {
        // SAFETY: the value is not dereferenced for an unknown code.
        let e = unsafe { classic_to_raw(TVMValue::default(), 99) }
            .err()
            .unwrap();
        assert!(e.message.contains("unknown classic type code 99"));
    }
}
