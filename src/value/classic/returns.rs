//! Results returned to a classic caller: plain values, and strings and bytes in the
//! thread's storage.

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CString};

use crate::abi::TVMValue;
use crate::abi::{type_code as tc, type_index as ti, TVMFFIAny, TVMFFIByteArray};
use crate::dtype::classic_bool;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::value::Any;

use super::{plain_arg_to_classic, tensor_cell, ClassicArgs, HEADER_BYTES};

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
