//! The classic module C API (`TVMModLoadFromFile`, `TVMModGetFunction`, `TVMModImport`,
//! `TVMModFree`), `TVMBackendGetFuncFromEnv`, and the trampolines behind the functions of a
//! library module.

use std::ffi::{c_char, c_int, c_void};

use crate::abi::TVMFFIAny;
use crate::capi::boundary::{c_str, non_null, run, run_or, write_out};
use crate::error::Error;
use crate::module::library::LibraryFunction;
use crate::module::{load_from_file, Module};
use crate::object::dec_ref_raw;
use crate::value::AnyView;

/// Loads a module from a file (`format` may be NULL or empty: the extension decides).
///
/// # Safety
/// `file_name` is a C string; `format` is NULL or a C string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMModLoadFromFile(
    file_name: *const c_char,
    format: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMModLoadFromFile", {
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let path = unsafe { c_str(file_name, "file_name")? };
        let format = if format.is_null() {
            ""
        } else {
            // SAFETY: per the contract.
            unsafe { c_str(format, "format")? }
        };
        let m = load_from_file(path, format)?;
        // SAFETY: checked non-null; the caller owns the new handle (TVMModFree).
        unsafe { write_out(out, m.into_object().into_raw(), "out") }
    })
}

/// Looks a function up in a module (and its imports when `query_imports` is non-zero).
/// `*out` is NULL when it is not found, as in TVM.
///
/// # Safety
/// `mod_` is a live module handle; `func_name` a C string; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMModGetFunction(
    mod_: *mut c_void,
    func_name: *const c_char,
    query_imports: c_int,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMModGetFunction", {
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let m = unsafe { Module::from_handle_borrowed(mod_, "mod")? };
        // SAFETY: per the contract.
        let name = unsafe { c_str(func_name, "func_name")? };
        let f = m.get_function(name, query_imports != 0)?;
        let handle = f.map_or(std::ptr::null_mut(), |f| f.into_object().into_raw());
        // SAFETY: checked non-null; the caller owns the handle (TVMFuncFree).
        unsafe { write_out(out, handle, "out") }
    })
}

/// Makes `mod_` import `dep`.
///
/// # Safety
/// Both are live module handles.
#[no_mangle]
pub unsafe extern "C" fn TVMModImport(mod_: *mut c_void, dep: *mut c_void) -> c_int {
    ffi_try!("TVMModImport", {
        // SAFETY: per the contract.
        let m = unsafe { Module::from_handle_borrowed(mod_, "mod")? };
        // SAFETY: per the contract.
        let d = unsafe { Module::from_handle_borrowed(dep, "dep")? };
        m.import(&d)
    })
}

/// Releases a module handle. Functions obtained from it stay valid.
///
/// # Safety
/// `mod_` is a module handle on which the caller holds a reference.
#[no_mangle]
pub unsafe extern "C" fn TVMModFree(mod_: *mut c_void) -> c_int {
    ffi_try!("TVMModFree", {
        non_null(mod_, "mod")?;
        // SAFETY: a live object per the contract (checked to be a module before release).
        let header = unsafe { &*mod_.cast::<crate::object::ObjectHeader>() };
        if header.type_index != crate::abi::type_index::MODULE {
            return Err(Error::type_error(format!(
                "TVMModFree: handle is a {}, not a module",
                crate::value::type_name(header.type_index)
            )));
        }
        // SAFETY: the caller gives up its reference.
        unsafe { dec_ref_raw(mod_) };
        Ok(())
    })
}

/// Finds `func_name` for compiled classic code: in the imports of the module its
/// `__tvm_module_ctx` names, then in the global registry. `*out` is a borrowed handle that
/// stays valid while the library is loaded (TVM returns a pointer into its module's cache).
///
/// # Safety
/// `mod_node` is the library's context pointer or a live module handle; `func_name` a C
/// string; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendGetFuncFromEnv(
    mod_node: *mut c_void,
    func_name: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMBackendGetFuncFromEnv", {
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let name = unsafe { c_str(func_name, "func_name")? };
        // SAFETY: per the contract.
        let f = unsafe { crate::module::library::env_lookup(mod_node, name)? };
        // SAFETY: checked non-null.
        unsafe { write_out(out, f, "out") }
    })
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
    run("compiled function call", || {
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
    run_or("library function deleter", (), || {
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
