//! A compiled function as a function object ([`LibraryFunction`]) and the trampolines that call
//! it through the tvm-ffi or the classic ABI.

use std::ffi::c_void;
use std::ptr::NonNull;

use super::Abi;
use crate::abi::{type_code, type_index, TVMBackendPackedCFunc, TVMFFIAny, TVMValue};
use crate::error::{Error, Result};
use crate::function::{Function, FunctionImpl, FunctionObj};
use crate::module::Module;
use crate::value::classic::{classic_to_raw, ClassicArgs};
use crate::value::{Any, AnyView};

/// A compiled function handed out as a function object (the `self` handle of its cell; see
/// [`library_ffi_safe_call`] and [`library_classic_safe_call`], the trampolines that call it).
pub struct LibraryFunction {
    /// The function's address.
    pub symbol: NonNull<c_void>,
    /// How to call it.
    pub abi: Abi,
    /// Identity of the [`LibraryState`](super::LibraryState) it comes from.
    pub(crate) state_id: usize,
    /// Keeps the module (and so the library) alive. `None` only for the entries of a library's
    /// own lookup cache, which the library outlives by construction.
    pub(crate) owner: Option<Module>,
    /// The name it was looked up by, for messages.
    pub name: Box<str>,
}

// SAFETY: the symbol is code in a library kept loaded by `owner` (or by the state that owns the
// cache holding this function); compiled functions are callable from any thread.
unsafe impl Send for LibraryFunction {}
// SAFETY: as above; nothing is mutated.
unsafe impl Sync for LibraryFunction {}

impl LibraryFunction {
    pub(super) fn into_function(self) -> Function {
        let safe_call = match self.abi {
            Abi::Ffi => library_ffi_safe_call,
            Abi::Classic => library_classic_safe_call,
        };
        Function::from_extern_c(
            Box::into_raw(Box::new(self)).cast(),
            safe_call,
            Some(library_function_free),
        )
    }

    /// Calls a classic function with tvm-ffi arguments (TVM's `WrapPackedFunc`).
    pub(crate) fn call_classic(&self, args: &[AnyView<'_>]) -> Result<Any> {
        let mut c = ClassicArgs::from_views(args)?;
        let f = self
            .classic_symbol()
            .ok_or_else(|| Error::runtime(format!("`{}` is not a classic function", self.name)))?;
        let (values, codes) = c.arrays_mut();
        // SAFETY: `ClassicArgs` holds one value and code per argument, alive for the call.
        unsafe { invoke_classic(f, values, codes, Some(&self.name)) }
    }

    /// The symbol as a classic backend function, when this is one: what `TVMFuncCall` calls
    /// with its caller's arrays unchanged, as TVM does.
    pub(crate) fn classic_symbol(&self) -> Option<TVMBackendPackedCFunc> {
        match self.abi {
            // SAFETY: the symbol was found as the classic function `name`; TVM's backend
            // signature.
            Abi::Classic => Some(unsafe {
                std::mem::transmute::<*mut c_void, TVMBackendPackedCFunc>(self.symbol.as_ptr())
            }),
            Abi::Ffi => None,
        }
    }
}

/// Calls classic compiled function `f` on `values`/`codes` and takes what it returned; a failure
/// takes the error it raised (naming the function, `name` where known, when it raised none).
///
/// # Safety
/// `values` and `codes` are the classic encoding of `f`'s arguments (any handles in them live
/// for the call); `f` is a loaded `TVMBackendPackedCFunc`.
#[inline(always)]
pub(crate) unsafe fn invoke_classic(
    f: TVMBackendPackedCFunc,
    values: &mut [TVMValue],
    codes: &mut [i32],
    name: Option<&str>,
) -> Result<Any> {
    let mut ret = TVMValue::default();
    let mut code = type_code::NULLPTR;
    // SAFETY: per the contract; the return slots are ours.
    let status = unsafe {
        f(
            values.as_mut_ptr(),
            codes.as_mut_ptr(),
            values.len() as i32,
            &mut ret,
            &mut code,
            std::ptr::null_mut(),
        )
    };
    if status != 0 {
        return Err(crate::raised::take_raised().unwrap_or_else(|| {
            let name = name.map(|n| format!(" `{n}`")).unwrap_or_default();
            Error::runtime(format!(
                "compiled function{name} returned {status} without setting an error"
            ))
        }));
    }
    // SAFETY: the callee wrote this value and code for us.
    unsafe { take_classic_result(ret, code) }
}

/// Takes the value a classic compiled function returned: objects move to the caller (TVM's
/// `TVMRetValue::MoveFromCHost`), plain values and strings are copied right away.
///
/// # Safety
/// `ret` and `code` are what the callee wrote, handing over any object.
pub(crate) unsafe fn take_classic_result(ret: TVMValue, code: i32) -> Result<Any> {
    if code == type_code::NULLPTR {
        return Ok(Any::none());
    }
    // SAFETY: per the contract.
    let raw = unsafe { classic_to_raw(ret, code)? };
    if raw.type_index >= type_index::STATIC_OBJECT_BEGIN {
        // SAFETY: the callee gave up its reference.
        crate::value::classic::owned_from_classic(unsafe { Any::from_raw(raw) })
    } else {
        // SAFETY: plain values and strings are copied before the callee's storage changes.
        Ok(unsafe { AnyView::from_raw(raw) }.to_owned_any())
    }
}

/// `safe_call` of a tvm-ffi compiled function: calls it with a NULL `self`, as tvm-ffi's
/// library module does.
///
/// # Safety
/// The tvm-ffi calling convention; `handle` is a `LibraryFunction` of a live function object.
pub(crate) unsafe extern "C" fn library_ffi_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    // SAFETY: per the contract.
    let lf = unsafe { &*handle.cast::<LibraryFunction>() };
    // SAFETY: the symbol is a tvm-ffi function of a library kept loaded by `lf`.
    let f: crate::abi::TVMFFISafeCallType = unsafe { std::mem::transmute(lf.symbol.as_ptr()) };
    // SAFETY: forwarding the caller's arguments; compiled code reports its own errors.
    unsafe { f(std::ptr::null_mut(), args, num_args, result) }
}

/// `safe_call` of a classic compiled function: converts to `TVMValue` + type codes.
///
/// # Safety
/// As [`library_ffi_safe_call`].
pub(crate) unsafe extern "C" fn library_classic_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    crate::unwind_guard::run("compiled function call", || {
        // SAFETY: per the contract.
        let lf = unsafe { &*handle.cast::<LibraryFunction>() };
        // SAFETY: per the calling convention.
        let views = unsafe { AnyView::slice_from_raw(args, num_args.max(0) as usize) };
        let value = lf.call_classic(views)?;
        if !result.is_null() {
            // SAFETY: the caller's writable result slot receives an owned value.
            unsafe { result.write(value.into_raw()) };
        }
        Ok(())
    })
}

/// Releases the `LibraryFunction` behind a function object.
///
/// # Safety
/// `handle` came from `Box::into_raw` of a `LibraryFunction`, released once.
pub(crate) unsafe extern "C" fn library_function_free(handle: *mut c_void) {
    crate::unwind_guard::run_or("library function deleter", (), || {
        // SAFETY: per the contract.
        drop(unsafe { Box::from_raw(handle.cast::<LibraryFunction>()) });
        Ok(())
    })
}

/// Whether `safe_call` is one of the library trampolines above.
pub(crate) fn is_library_trampoline(safe_call: crate::abi::TVMFFISafeCallType) -> bool {
    let p = safe_call as usize;
    p == library_ffi_safe_call as *const () as usize
        || p == library_classic_safe_call as *const () as usize
}

/// The library function behind `f`, if `f` is one.
pub(crate) fn library_function_of(f: &Function) -> Option<&LibraryFunction> {
    let obj = f.object().downcast_ref::<FunctionObj>()?;
    match &obj.imp {
        FunctionImpl::ExternC {
            handle, safe_call, ..
        } if is_library_trampoline(*safe_call) => {
            // SAFETY: only library functions use these trampolines, with a `LibraryFunction`
            // handle that lives as long as the function object `f` keeps alive.
            Some(unsafe { &*handle.cast::<LibraryFunction>() })
        }
        _ => None,
    }
}
