//! tvm-ffi arguments into classic ones, for a classic callee.

use std::ffi::{c_void, CString};

use crate::abi::{type_code as tc, type_index as ti, AnyPayload, TVMFFIAny, TVMFFIByteArray};
use crate::abi::{DLTensor, TVMValue};
use crate::dtype::classic_bool;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::value::AnyView;

use super::{tensor_cell, HEADER_BYTES};

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

    pub(super) fn convert(&mut self, a: &AnyView<'_>) -> Result<(TVMValue, i32)> {
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
