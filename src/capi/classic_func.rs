//! Classic function calls (TVM 0.19 `c_runtime_api.h`): the global registry, calling, creating
//! functions from C callbacks and returning values from them.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};

use crate::abi::{TVMPackedCFunc, TVMPackedCFuncFinalizer, TVMValue};
use crate::capi::boundary::{c_str, function_arg, non_null, write_out};
use crate::error::Error;
use crate::function::{registry, Function};
use crate::object::dec_ref_raw;
use crate::value::classic::{any_to_classic_return, classic_to_owned, classic_to_raw};
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
    ffi_try!("TVMFuncCall", {
        // SAFETY: per the contract.
        let f = unsafe { function_arg(func, "func")? };
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
        let mut raws = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: the arrays hold `num_args` entries; handles live during the call.
            let raw = unsafe { classic_to_raw(*args.add(i), *arg_type_codes.add(i)) }
                .map_err(|e| Error::new(e.kind.clone(), format!("argument {i}: {}", e.message)))?;
            raws.push(raw);
        }
        // SAFETY: the raw values borrow the caller's arguments for the call.
        let views: Vec<AnyView<'_>> = raws
            .into_iter()
            .map(|r| unsafe { AnyView::from_raw(r) })
            .collect();
        let result = f.call(&views)?;
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
