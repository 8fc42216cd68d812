//! Classic function calls (TVM 0.19 `c_runtime_api.h`): the global registry, calling, creating
//! functions from C callbacks and returning values from them.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};

use crate::abi::{TVMFFIAny, TVMPackedCFunc, TVMPackedCFuncFinalizer, TVMValue};
use crate::capi::boundary::{c_str, function_arg, non_null, write_out};
use crate::error::Error;
use crate::function::trampoline::invoke_classic_callback;
use crate::function::{registry, Function};
use crate::object::dec_ref_raw;
use crate::value::classic::{any_to_classic_return, classic_to_owned, ClassicInbound, INLINE_ARGS};
use crate::value::{Any, AnyView};

/// Looks up a global function. `*out` is a new handle (release with `TVMFuncFree`), or NULL
/// when no function has that name.
///
/// # Safety
/// `name` is a C string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncGetGlobal(name: *const c_char, out: *mut *mut c_void) -> c_int {
    ffi_try!("TVMFuncGetGlobal", {
        // SAFETY: per the contract.
        let name = unsafe { c_str(name, "name")? };
        let f = registry::get(name).map_or(std::ptr::null_mut(), |f| f.into_object().into_raw());
        // SAFETY: per the contract.
        unsafe { write_out(out, f, "out") }
    })
}

/// Registers `f` as a global function; the registry takes its own reference. Without
/// `override`, an existing name is an error.
///
/// # Safety
/// `name` is a C string; `f` is a live function handle.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncRegisterGlobal(
    name: *const c_char,
    f: *mut c_void,
    r#override: c_int,
) -> c_int {
    ffi_try!("TVMFuncRegisterGlobal", {
        // SAFETY: per the contract.
        let name = unsafe { c_str(name, "name")? };
        // SAFETY: per the contract.
        let f = unsafe { function_arg(f, "f")? };
        registry::register(name, f, r#override != 0)
    })
}

/// Removes a global function (an unknown name is an error naming it).
///
/// # Safety
/// `name` is a C string.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncRemoveGlobal(name: *const c_char) -> c_int {
    ffi_try!("TVMFuncRemoveGlobal", {
        // SAFETY: per the contract.
        let name = unsafe { c_str(name, "name")? };
        if registry::remove(name) {
            Ok(())
        } else {
            Err(Error::attribute(format!(
                "global function `{name}` is not registered"
            )))
        }
    })
}

thread_local! {
    static NAME_LIST: RefCell<(Vec<CString>, Vec<*const c_char>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Lists the global function names. The array and strings stay valid until the next call of
/// this function on the thread.
///
/// # Safety
/// `out_size` and `out_array` are writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncListGlobalNames(
    out_size: *mut c_int,
    out_array: *mut *mut *const c_char,
) -> c_int {
    ffi_try!("TVMFuncListGlobalNames", {
        non_null(out_size, "out_size")?;
        non_null(out_array, "out_array")?;
        let names: Vec<CString> = registry::list_names()
            .into_iter()
            .filter_map(|n| CString::new(n).ok())
            .collect();
        NAME_LIST.with(|slot| {
            let mut slot = slot.borrow_mut();
            slot.1 = names.iter().map(|c| c.as_ptr()).collect();
            slot.0 = names;
            // SAFETY: both out-pointers were checked; the storage lives in the thread-local.
            unsafe {
                *out_size = slot.1.len() as c_int;
                *out_array = slot.1.as_mut_ptr();
            }
        });
        Ok(())
    })
}

/// Calls a function with classic arguments. Object results are new handles the caller
/// releases; strings and bytes stay valid until the next call on this thread.
///
/// # Safety
/// `func` is a live function handle; `args`/`arg_type_codes` hold `num_args` entries;
/// `ret_val` and `ret_type_code` are writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncCall(
    func: *mut c_void,
    args: *mut TVMValue,
    arg_type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    // The fast path calls nothing that can unwind (only `extern "C"` functions), so this
    // boundary costs nothing on it; the general path has its own.
    crate::capi::boundary::guard("TVMFuncCall", || {
        // SAFETY: the caller's contract, checked by the fast path before any use.
        match unsafe {
            func_call_fast(func, args, arg_type_codes, num_args, ret_val, ret_type_code)
        } {
            Some(status) => status,
            // SAFETY: as above.
            None => unsafe {
                func_call_general(func, args, arg_type_codes, num_args, ret_val, ret_type_code)
            },
        }
    })
}

/// The common case of `TVMFuncCall` without allocation, `Result` or anything that can unwind:
/// up to eight plain arguments (ints, floats, handles, devices, tensors, strings) to any
/// function, a plain result (int, float, bool, None) written directly, any other result handed
/// to [`finish_call_general`]. Returns `None` to hand the call to [`func_call_general`] before
/// anything ran.
///
/// # Safety
/// As [`TVMFuncCall`].
#[inline(always)]
unsafe fn func_call_fast(
    func: *mut c_void,
    args: *mut TVMValue,
    codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> Option<c_int> {
    use crate::abi::type_index as ti;
    if func.is_null() || ret_val.is_null() || ret_type_code.is_null() {
        return None;
    }
    // A negative count becomes huge and goes the general way, which names it.
    let n = num_args as u32 as usize;
    if n > INLINE_ARGS || (n > 0 && (args.is_null() || codes.is_null())) {
        return None;
    }
    // SAFETY: non-null and live per the contract.
    if unsafe { (*func.cast::<crate::object::ObjectHeader>()).type_index } != ti::FUNCTION {
        return None;
    }
    // SAFETY: function objects carry their cell after the 24-byte header.
    let cell = unsafe {
        *func
            .cast::<u8>()
            .add(std::mem::size_of::<crate::object::ObjectHeader>())
            .cast::<crate::abi::TVMFFIFunctionCell>()
    };
    let classic_trampoline: crate::abi::TVMFFISafeCallType =
        crate::function::trampoline::classic_function_safe_call;
    let extern_c_trampoline: crate::abi::TVMFFISafeCallType =
        crate::function::trampoline::extern_c_function_safe_call;
    // Classic callees get the caller's arrays unchanged, as in TVM, once their codes are known
    // ones (an unknown code goes the general way, which reports it).
    // SAFETY: the codes array holds `num_args` entries.
    let known_codes =
        || (0..n).all(|i| crate::value::classic::is_known_classic_code(unsafe { *codes.add(i) }));
    if cell.safe_call as *const () == extern_c_trampoline as *const () {
        // SAFETY: the trampoline identifies the payload as a tvmrt extern-C function.
        if let Some(kernel) = unsafe { crate::function::trampoline::classic_kernel_of(func) } {
            if !known_codes() {
                return None;
            }
            // SAFETY: as above.
            return Some(unsafe {
                call_classic_kernel(kernel, args, codes, num_args, ret_val, ret_type_code)
            });
        }
    }
    // The result slot, owned here: the callee (or `TVMCFuncSetReturn`) moves a value in.
    let mut result = TVMFFIAny::NONE;
    let status = if cell.safe_call as *const () == classic_trampoline as *const () {
        // A classic callback: the trampoline is only installed in tvmrt's classic function
        // objects.
        if !known_codes() {
            return None;
        }
        // SAFETY: the trampoline identifies the payload as a classic function.
        let (callback, resource) =
            unsafe { crate::function::trampoline::classic_callback_of(func) }?;
        // SAFETY: the arrays hold `num_args` entries; `result` is the `Any` slot
        // `TVMCFuncSetReturn` writes through, alive for the call.
        unsafe {
            callback(
                args,
                codes,
                num_args,
                (&mut result as *mut TVMFFIAny).cast(),
                resource,
            )
        }
    } else {
        let mut raws = [std::mem::MaybeUninit::<TVMFFIAny>::uninit(); INLINE_ARGS];
        for (i, slot) in raws.iter_mut().enumerate().take(n) {
            // SAFETY: the arrays hold `num_args` entries.
            let (value, code) = unsafe { (*args.add(i), *codes.add(i)) };
            // SAFETY: the value and its code come from the caller's arrays, as for
            // `classic_to_raw`; any other code takes the general path.
            slot.write(unsafe { crate::value::classic::plain_classic_to_raw(value, code) }?);
        }
        // SAFETY: the first `n` slots are initialized; the callee follows the tvm-ffi
        // convention and raises its own errors (seen by `TVMGetLastError`).
        unsafe { (cell.safe_call)(func, raws.as_ptr().cast(), n as i32, &mut result) }
    };
    if status != 0 {
        // SAFETY: `result` is the slot the callee wrote (or left None).
        return Some(unsafe { crate::function::trampoline::callee_failed(status, result) });
    }
    if let Some((value, code)) = crate::value::classic::plain_to_classic(&result) {
        // SAFETY: both checked non-null; a plain value owns nothing, so nothing is dropped.
        unsafe {
            *ret_val = value;
            *ret_type_code = code;
        }
        return Some(0);
    }
    // SAFETY: `result` holds the owned value the callee moved in; both out-pointers checked.
    Some(unsafe { finish_call_general(result, ret_val, ret_type_code) })
}

/// Calls a classic compiled function (TVM <= 0.20 library) with the caller's arrays unchanged,
/// as TVM's classic `TVMFuncCall` did. Plain results (int, float, None) are written directly;
/// any other goes through [`finish_kernel_result`].
///
/// # Safety
/// As [`TVMFuncCall`], with the codes checked and both out-pointers non-null.
#[inline(always)]
unsafe fn call_classic_kernel(
    kernel: crate::abi::TVMBackendPackedCFunc,
    args: *mut TVMValue,
    codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    use crate::abi::type_code as tc;
    let mut ret = TVMValue { v_int64: 0 };
    let mut code = tc::NULLPTR;
    // SAFETY: the arrays hold `num_args` entries; the return slots are ours; the kernel
    // reports its errors through the context pointers (raised on this thread).
    let status = unsafe {
        kernel(
            args,
            codes,
            num_args,
            &mut ret,
            &mut code,
            std::ptr::null_mut(),
        )
    };
    if status != 0 {
        // SAFETY: nothing was set in a `TVMFFIAny` slot.
        return unsafe { crate::function::trampoline::callee_failed(status, TVMFFIAny::NONE) };
    }
    if matches!(code, tc::INT | tc::FLOAT | tc::NULLPTR) {
        // SAFETY: both checked non-null; these own nothing.
        unsafe {
            *ret_val = if code == tc::NULLPTR {
                TVMValue::handle(std::ptr::null_mut())
            } else {
                ret
            };
            *ret_type_code = code;
        }
        return 0;
    }
    // SAFETY: the kernel wrote `ret` and `code` for us.
    unsafe { finish_kernel_result(ret, code, ret_val, ret_type_code) }
}

/// A classic compiled function's result that is not plain (string, object, ...), converted
/// for the classic caller the way every other result is (strings into this thread's storage,
/// objects handed over).
///
/// # Safety
/// `ret`/`code` are what the kernel wrote, handing over any object; both out-pointers are
/// writable.
#[cold]
unsafe extern "C" fn finish_kernel_result(
    ret: TVMValue,
    code: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    ffi_try!("TVMFuncCall", {
        // SAFETY: per the contract.
        let value = unsafe { crate::module::library::take_classic_result(ret, code)? };
        let (v, c) = any_to_classic_return(value)?;
        // SAFETY: per the contract.
        unsafe {
            *ret_val = v;
            *ret_type_code = c;
        }
        Ok(())
    })
}

/// Converts a result that owns something (object, string, bytes, ...) for the classic caller,
/// or raises why it cannot: the status to return. `extern "C"`, so the fast path's boundary
/// has nothing to unwind from; this one has its own.
///
/// # Safety
/// `result` is an owned value, moved in; `ret_val` and `ret_type_code` are writable.
#[cold]
unsafe extern "C" fn finish_call_general(
    result: TVMFFIAny,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    // SAFETY: the caller moved an owned value in.
    let result = unsafe { Any::from_raw(result) };
    ffi_try!("TVMFuncCall", {
        let (v, code) = any_to_classic_return(result)?;
        // SAFETY: checked non-null by the fast path.
        unsafe {
            *ret_val = v;
            *ret_type_code = code;
        }
        Ok(())
    })
}

/// `TVMFuncCall` for every case: checks each argument with a message, passes classic
/// arguments straight to classic callbacks, converts any value.
///
/// # Safety
/// As [`TVMFuncCall`].
#[cold]
unsafe extern "C" fn func_call_general(
    func: *mut c_void,
    args: *mut TVMValue,
    arg_type_codes: *mut c_int,
    num_args: c_int,
    ret_val: *mut TVMValue,
    ret_type_code: *mut c_int,
) -> c_int {
    ffi_try!("TVMFuncCall", {
        // SAFETY: per the contract the handle is live during the call.
        let Some(f) = (unsafe { Function::borrow_handle(func) }) else {
            // SAFETY: as above; names what is wrong with the handle.
            return unsafe { function_arg(func, "func") }.map(drop);
        };
        non_null(ret_val, "ret_val")?;
        non_null(ret_type_code, "ret_type_code")?;
        if num_args < 0 {
            return Err(Error::value(format!(
                "num_args must be >= 0, got {num_args}"
            )));
        }
        let n = num_args as usize;
        if n > 0 {
            non_null(args, "args")?;
            non_null(arg_type_codes, "arg_type_codes")?;
        }
        let result = if let Some((callback, resource)) = f.classic_callback() {
            // Classic to classic: the caller's arrays pass through unchanged, as in TVM, once
            // their type codes are checked.
            // SAFETY: the arrays hold `num_args` entries alive for the call.
            unsafe {
                crate::value::classic::check_classic_codes(arg_type_codes, n)?;
                invoke_classic_callback(callback, resource, args, arg_type_codes, num_args)?
            }
        } else {
            // Up to eight arguments convert on the stack.
            let mut inline = [TVMFFIAny::NONE; INLINE_ARGS];
            let mut spilled = Vec::new();
            let raws: &mut [TVMFFIAny] = if n <= INLINE_ARGS {
                &mut inline[..n]
            } else {
                spilled.resize(n, TVMFFIAny::NONE);
                &mut spilled
            };
            // `uint1` bools become `kDLBool` for the call (held here).
            let mut inbound = ClassicInbound::default();
            for (i, slot) in raws.iter_mut().enumerate() {
                // SAFETY: the arrays hold `num_args` entries; handles live during the call.
                *slot = unsafe { inbound.convert(*args.add(i), *arg_type_codes.add(i)) }.map_err(
                    |e| Error::new(e.kind.clone(), format!("argument {i}: {}", e.message)),
                )?;
            }
            // SAFETY: the values borrow the caller's arguments for the call.
            let views = unsafe { AnyView::slice_from_raw(raws.as_ptr(), n) };
            f.call(views)?
        };
        let (v, code) = any_to_classic_return(result)?;
        // SAFETY: both checked non-null.
        unsafe {
            *ret_val = v;
            *ret_type_code = code;
        }
        Ok(())
    })
}

/// Releases a function handle.
///
/// # Safety
/// `func` is null or a handle on which the caller holds a reference.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncFree(func: *mut c_void) -> c_int {
    ffi_try!("TVMFuncFree", {
        non_null(func, "func")?;
        // SAFETY: the caller gives up its reference.
        unsafe { dec_ref_raw(func) };
        Ok(())
    })
}

/// Wraps a C callback as a function. `fin(resource_handle)` runs exactly once, when the last
/// reference goes. Release the handle with `TVMFuncFree`.
///
/// # Safety
/// `func` is callable from any thread with `resource_handle` until `fin` runs; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFuncCreateFromCFunc(
    func: Option<TVMPackedCFunc>,
    resource_handle: *mut c_void,
    fin: Option<TVMPackedCFuncFinalizer>,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFuncCreateFromCFunc", {
        non_null(out, "out")?;
        let func = func.ok_or_else(|| Error::value("null pointer passed as `func`"))?;
        let f = Function::from_classic_c(func, resource_handle, fin);
        // SAFETY: checked non-null.
        unsafe { write_out(out, f.into_object().into_raw(), "out") }
    })
}

/// Sets the return value from inside a C callback. The value is copied (objects gain a
/// reference), as in TVM.
///
/// # Safety
/// `ret` is the handle the callback received; `value`/`type_code` hold `num_ret` entries.
#[no_mangle]
pub unsafe extern "C" fn TVMCFuncSetReturn(
    ret: *mut c_void,
    value: *mut TVMValue,
    type_code: *mut c_int,
    num_ret: c_int,
) -> c_int {
    // The fast path calls nothing that can unwind, so this boundary costs nothing on it.
    crate::capi::boundary::guard("TVMCFuncSetReturn", || {
        // Plain values (the common case) over a slot that owns nothing are written directly.
        if !ret.is_null() && !value.is_null() && !type_code.is_null() && num_ret == 1 {
            let slot = ret.cast::<TVMFFIAny>();
            // SAFETY: one entry each per the contract; `ret` is the `TVMFFIAny` slot the
            // caller passed to the callback, holding an owned value.
            unsafe {
                if (*slot).type_index < crate::abi::type_index::STATIC_OBJECT_BEGIN {
                    if let Some(plain) =
                        crate::value::classic::plain_classic_to_raw(*value, *type_code)
                    {
                        // Ints, floats, devices and opaque pointers own nothing; a raw
                        // string or DLTensor* borrows, so those are copied the general way.
                        if plain.type_index <= crate::abi::type_index::DEVICE {
                            *slot = plain;
                            return 0;
                        }
                    }
                }
            }
        }
        // SAFETY: as above.
        unsafe { set_return_general(ret, value, type_code, num_ret) }
    })
}

/// `TVMCFuncSetReturn` for any value, with a message for bad arguments.
///
/// # Safety
/// As [`TVMCFuncSetReturn`].
#[cold]
unsafe extern "C" fn set_return_general(
    ret: *mut c_void,
    value: *mut TVMValue,
    type_code: *mut c_int,
    num_ret: c_int,
) -> c_int {
    ffi_try!("TVMCFuncSetReturn", {
        non_null(ret, "ret")?;
        non_null(value, "value")?;
        non_null(type_code, "type_code")?;
        if num_ret != 1 {
            return Err(Error::value(format!(
                "TVMCFuncSetReturn: num_ret must be 1, got {num_ret}"
            )));
        }
        // SAFETY: one entry per the contract; the value is copied.
        let v = unsafe { classic_to_owned(*value, *type_code)? };
        // SAFETY: `ret` is the `Any` slot the trampoline passed to the callback.
        unsafe { *ret.cast::<Any>() = v };
        Ok(())
    })
}

/// Turns a callback argument into a value the caller owns (objects gain a reference; an
/// rvalue reference becomes a plain object handle).
///
/// # Safety
/// `value` and `code` point to one argument of the running callback.
#[no_mangle]
pub unsafe extern "C" fn TVMCbArgToReturn(value: *mut TVMValue, code: *mut c_int) -> c_int {
    ffi_try!("TVMCbArgToReturn", {
        non_null(value, "value")?;
        non_null(code, "code")?;
        // SAFETY: per the contract.
        let owned = unsafe { classic_to_owned(*value, *code)? };
        let (v, c) = any_to_classic_return(owned)?;
        // SAFETY: checked non-null.
        unsafe {
            *value = v;
            *code = c;
        }
        Ok(())
    })
}
