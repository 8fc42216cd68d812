//! The `safe_call` trampolines behind tvmrt's function objects (Rust closures, `TVMFFIFunctionCreate`
//! callbacks, classic `TVMFuncCreateFromCFunc` callbacks), and the shared handling of a callee
//! that failed. C calls them through the function cell, so each runs behind the unwind guard.

use std::ffi::c_void;

use crate::abi::TVMFFIAny;
use crate::error::Error;
use crate::function::{FunctionImpl, FunctionObj};
use crate::object::ObjectBox;
use crate::unwind_guard::{guard, run};
use crate::value::classic::{ClassicArgs, INLINE_ARGS};
use crate::value::{Any, AnyView};

/// Returns the payload of a function object tvmrt allocated.
///
/// # Safety
/// `handle` is a live function object allocated by tvmrt.
unsafe fn function_payload<'a>(handle: *mut c_void) -> &'a FunctionObj {
    // SAFETY: tvmrt's function objects are `ObjectBox<FunctionObj>`; the trampolines below are
    // only ever installed in those, and the caller keeps the object alive during the call.
    unsafe { &(*handle.cast::<ObjectBox<FunctionObj>>()).payload }
}

/// The classic callback behind a function object whose cell holds
/// [`classic_function_safe_call`].
///
/// # Safety
/// `handle` is a live tvmrt function object with that trampoline.
pub(crate) unsafe fn classic_callback_of(
    handle: *mut c_void,
) -> Option<(crate::abi::TVMPackedCFunc, *mut c_void)> {
    // SAFETY: per the contract.
    match unsafe { &function_payload(handle).imp } {
        FunctionImpl::Classic {
            func,
            resource_handle,
            ..
        } => Some((*func, *resource_handle)),
        _ => None,
    }
}

/// The classic compiled function behind a function object whose cell holds
/// [`extern_c_function_safe_call`], when it is a classic-ABI library function.
///
/// # Safety
/// `handle` is a live tvmrt function object with that trampoline.
pub(crate) unsafe fn classic_kernel_of(
    handle: *mut c_void,
) -> Option<crate::abi::TVMBackendPackedCFunc> {
    // SAFETY: per the contract.
    match unsafe { &function_payload(handle).imp } {
        FunctionImpl::ExternC {
            handle, safe_call, ..
        } if *safe_call as usize
            == crate::module::library::library_classic_safe_call as *const () as usize =>
        {
            // SAFETY: that trampoline is only installed with a `LibraryFunction` as `self`,
            // kept alive by the function object.
            unsafe { (*handle.cast::<crate::module::library::LibraryFunction>()).classic_symbol() }
        }
        _ => None,
    }
}

/// Writes an owned result into a caller's slot.
///
/// # Safety
/// `result` is null or writable.
unsafe fn store_result(result: *mut TVMFFIAny, value: Any) {
    if !result.is_null() {
        // SAFETY: per the contract; the caller owns what we move in.
        unsafe { result.write(value.into_raw()) };
    }
}

/// `safe_call` of functions backed by a Rust closure.
///
/// # Safety
/// The tvm-ffi calling convention: `handle` is the function object, `args` holds `num_args`
/// values alive for the call, `result` is writable.
pub unsafe extern "C" fn rust_function_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    run("packed function call", || {
        // SAFETY: per the calling convention.
        let payload = unsafe { function_payload(handle) };
        let FunctionImpl::Rust(f) = &payload.imp else {
            return Err(Error::runtime("function object has no Rust implementation"));
        };
        // SAFETY: per the calling convention.
        let args = unsafe { AnyView::slice_from_raw(args, num_args.max(0) as usize) };
        let value = f(args)?;
        // SAFETY: per the calling convention.
        unsafe { store_result(result, value) };
        Ok(())
    })
}

/// `safe_call` of functions created by `TVMFFIFunctionCreate` with a `self` handle.
///
/// # Safety
/// As [`rust_function_safe_call`].
pub unsafe extern "C" fn extern_c_function_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    // SAFETY: per the calling convention.
    let payload = unsafe { function_payload(handle) };
    match &payload.imp {
        // SAFETY: forwarding the caller's arguments to the callback registered for them.
        FunctionImpl::ExternC {
            handle, safe_call, ..
        } => unsafe { safe_call(*handle, args, num_args, result) },
        _ => run("packed function call", || {
            Err(Error::runtime("function object has no C implementation"))
        }),
    }
}

/// Calls a classic C callback with classic arguments and collects the result it sets with
/// `TVMCFuncSetReturn`. A callback that fails without setting an error reports whatever error
/// the thread last raised, as in TVM (clearing it first would cost a thread-local access on
/// every call).
///
/// # Safety
/// `values`/`codes` hold `num_args` entries alive for the call; `func` accepts
/// `resource_handle`.
pub(crate) unsafe fn invoke_classic_callback(
    func: crate::abi::TVMPackedCFunc,
    resource_handle: *mut c_void,
    values: *mut crate::abi::TVMValue,
    codes: *mut i32,
    num_args: i32,
) -> crate::error::Result<Any> {
    let mut ret_slot = Any::none();
    // SAFETY: per the contract; `ret_slot` is the handle `TVMCFuncSetReturn` writes through,
    // alive for the call.
    let status = unsafe {
        func(
            values,
            codes,
            num_args,
            (&mut ret_slot as *mut Any).cast(),
            resource_handle,
        )
    };
    if status != 0 {
        return Err(crate::raised::take_raised().unwrap_or_else(|| {
            Error::runtime(format!(
                "callback returned {status} without setting an error (TVMAPISetLastError)"
            ))
        }));
    }
    Ok(ret_slot)
}

/// A callee returned `status != 0`: releases what it may have set as the result and makes
/// sure an error is raised (a classic callback may fail without one; the error a callee did
/// raise stays as it is). Returns -1. `extern "C"` so that fast paths calling it have nothing
/// to unwind from.
///
/// # Safety
/// `result` is an owned value (None when the callee set nothing).
#[cold]
pub(crate) unsafe extern "C" fn callee_failed(status: i32, result: TVMFFIAny) -> i32 {
    guard("packed function call", || {
        // SAFETY: the caller moved an owned value in.
        drop(unsafe { Any::from_raw(result) });
        if !crate::raised::is_raised() {
            crate::raised::set_raised(Error::runtime(format!(
                "the called function returned {status} without setting an error \
                 (TVMAPISetLastError or TVMFFIErrorSetRaised*)"
            )));
        }
        -1
    })
}

/// `safe_call` of functions created by the classic `TVMFuncCreateFromCFunc`: converts the
/// arguments to `TVMValue` + type codes and collects the result set by `TVMCFuncSetReturn`.
/// Up to eight arguments that need no storage (see `plain_arg_to_classic`) convert on the
/// stack with nothing that can unwind; anything else takes [`classic_safe_call_general`].
///
/// # Safety
/// As [`rust_function_safe_call`].
pub unsafe extern "C" fn classic_function_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    guard("packed function call", || {
        // SAFETY: per the calling convention (both paths).
        match unsafe { classic_safe_call_fast(handle, args, num_args, result) } {
            Some(status) => status,
            None => unsafe { classic_safe_call_general(handle, args, num_args, result) },
        }
    })
}

/// The fast path of [`classic_function_safe_call`]: `None` hands the call to
/// [`classic_safe_call_general`] before anything ran.
///
/// # Safety
/// As [`rust_function_safe_call`].
#[inline(always)]
unsafe fn classic_safe_call_fast(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> Option<i32> {
    // A negative count becomes huge and goes the general way.
    let n = num_args as u32 as usize;
    if n > INLINE_ARGS || (n > 0 && args.is_null()) || result.is_null() {
        return None;
    }
    // SAFETY: per the calling convention.
    let FunctionImpl::Classic {
        func,
        resource_handle,
        ..
    } = (unsafe { &function_payload(handle).imp })
    else {
        return None;
    };
    let mut values = [std::mem::MaybeUninit::<crate::abi::TVMValue>::uninit(); INLINE_ARGS];
    let mut codes = [std::mem::MaybeUninit::<i32>::uninit(); INLINE_ARGS];
    // An index loop: the zipped iterators compiled to twice the instructions.
    for i in 0..n {
        // SAFETY: `args` holds `num_args` values.
        let (v, c) = crate::value::classic::plain_arg_to_classic(unsafe { &*args.add(i) })?;
        values[i].write(v);
        codes[i].write(c);
    }
    let mut slot = TVMFFIAny::NONE;
    // SAFETY: the first `n` entries are initialized and borrow the caller's values for the
    // call; `slot` is the `TVMFFIAny` `TVMCFuncSetReturn` writes through.
    let status = unsafe {
        func(
            values.as_mut_ptr().cast(),
            codes.as_mut_ptr().cast(),
            num_args,
            (&mut slot as *mut TVMFFIAny).cast(),
            *resource_handle,
        )
    };
    if status != 0 {
        // SAFETY: `slot` holds what the callback set, if anything.
        return Some(unsafe { callee_failed(status, slot) });
    }
    // SAFETY: the result slot is writable; the value moves to the caller.
    unsafe { result.write(slot) };
    Some(0)
}

/// [`classic_function_safe_call`] for any arguments: strings and bytes get temporary storage,
/// objects pass as handles, bad values are errors naming the argument.
///
/// # Safety
/// As [`rust_function_safe_call`].
#[cold]
unsafe extern "C" fn classic_safe_call_general(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    run("packed function call", || {
        // SAFETY: per the calling convention.
        let payload = unsafe { function_payload(handle) };
        let FunctionImpl::Classic {
            func,
            resource_handle,
            ..
        } = &payload.imp
        else {
            return Err(Error::runtime(
                "function object has no classic implementation",
            ));
        };
        // SAFETY: per the calling convention.
        let views = unsafe { AnyView::slice_from_raw(args, num_args.max(0) as usize) };
        let mut classic = ClassicArgs::from_views(views)?;
        let n = classic.len() as i32;
        // SAFETY: the arrays hold `n` entries and live in `classic` during the call.
        let value = unsafe {
            invoke_classic_callback(
                *func,
                *resource_handle,
                classic.values_mut().as_mut_ptr(),
                classic.codes_mut().as_mut_ptr(),
                n,
            )?
        };
        // SAFETY: per the calling convention.
        unsafe { store_result(result, value) };
        Ok(())
    })
}
