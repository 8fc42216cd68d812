//! The classic module C API (`TVMModLoadFromFile`, `TVMModGetFunction`, `TVMModImport`,
//! `TVMModFree`) and `TVMBackendGetFuncFromEnv`.

use std::ffi::{c_char, c_int, c_void};

use crate::capi::boundary::{c_str, non_null, write_out};
use crate::error::Error;
use crate::module::{load_from_file, Module};
use crate::object::dec_ref_raw;

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
