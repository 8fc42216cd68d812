//! The tvm-ffi environment API that compiled libraries use (`tvm/ffi/extra/c_env_api.h`,
//! `tvm/ffi/c_api.h`): function lookup from a library's context, context symbols, and
//! thread-safe one-time handle initialization.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use parking_lot::ReentrantMutex;

use crate::capi::boundary::{c_str, non_null, write_out};
use crate::error::Error;

/// Finds `func_name` for compiled code: in the imports of the module behind `library_ctx`
/// (the value tvmrt stored in the library's `__tvm_ffi__library_ctx`, or a module handle),
/// then in the global registry. `*out` is a borrowed handle that stays valid while the library
/// is loaded (tvm-ffi returns one borrowed from its module's cache).
///
/// # Safety
/// `library_ctx` is a library context or a live module handle; `func_name` a C string; `out`
/// writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModLookupFromImports(
    library_ctx: *mut c_void,
    func_name: *const c_char,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIEnvModLookupFromImports", {
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let name = unsafe { c_str(func_name, "func_name")? };
        // SAFETY: per the contract.
        let f = unsafe { crate::module::library::env_lookup(library_ctx, name)? };
        // SAFETY: checked non-null.
        unsafe { write_out(out, f, "out") }
    })
}

/// Registers a pointer that is stored into the variable `name` of every library loaded
/// afterwards (when it defines one), next to the runtime's own context functions.
///
/// # Safety
/// `name` is a C string; `symbol` stays valid while such libraries are loaded.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModRegisterContextSymbol(
    name: *const c_char,
    symbol: *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIEnvModRegisterContextSymbol", {
        // SAFETY: per the contract.
        let name = unsafe { c_str(name, "name")? };
        if name.is_empty() {
            return Err(Error::value("context symbol name must not be empty"));
        }
        crate::module::library::register_context_symbol(name, symbol);
        Ok(())
    })
}

/// Serializes the slow path of [`TVMFFIHandleInitOnce`] (as tvm-ffi: one process-wide lock).
/// Re-entrant, so an `init_func` that runs code initializing another handle on the same thread
/// does not deadlock.
static INIT_ONCE: ReentrantMutex<()> = ReentrantMutex::new(());

/// Initializes `*handle_addr` once with `init_func` (thread-safe): nothing happens when it is
/// already non-NULL; otherwise `init_func(&result)` runs under a lock and a non-NULL result is
/// published. Generated code caches looked-up functions this way.
///
/// # Safety
/// `handle_addr` points to a pointer-sized, pointer-aligned slot that outlives the call and is
/// only accessed atomically by others; `init_func` is callable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleInitOnce(
    handle_addr: *mut *mut c_void,
    init_func: Option<unsafe extern "C" fn(*mut *mut c_void) -> c_int>,
) -> c_int {
    let mut status = 0;
    let checked = ffi_try!("TVMFFIHandleInitOnce", {
        non_null(handle_addr, "handle_addr")?;
        // SAFETY: a valid, aligned pointer slot per the contract, accessed atomically.
        let slot = unsafe { AtomicPtr::from_ptr(handle_addr) };
        if !slot.load(Ordering::Acquire).is_null() {
            return Ok(());
        }
        let init = init_func.ok_or_else(|| Error::value("null pointer passed as `init_func`"))?;
        let _guard = INIT_ONCE.lock();
        if !slot.load(Ordering::Acquire).is_null() {
            return Ok(());
        }
        let mut result: *mut c_void = std::ptr::null_mut();
        // SAFETY: per the contract; the callee reports its own errors.
        let ret = unsafe { init(&mut result) };
        if ret != 0 {
            // The error was raised by `init_func`; pass its status through.
            status = ret;
            return Ok(());
        }
        if result.is_null() {
            return Err(Error::runtime("init_func must return a non-NULL handle"));
        }
        slot.store(result, Ordering::Release);
        Ok(())
    });
    if checked != 0 {
        checked
    } else {
        status
    }
}

/// Resets `*handle_addr` to NULL and, if it was set, calls `deinit_func` on the old value.
///
/// # Safety
/// As [`TVMFFIHandleInitOnce`].
#[no_mangle]
pub unsafe extern "C" fn TVMFFIHandleDeinitOnce(
    handle_addr: *mut *mut c_void,
    deinit_func: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
) -> c_int {
    let mut status = 0;
    let checked = ffi_try!("TVMFFIHandleDeinitOnce", {
        non_null(handle_addr, "handle_addr")?;
        // SAFETY: as in TVMFFIHandleInitOnce.
        let slot = unsafe { AtomicPtr::from_ptr(handle_addr) };
        let old = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !old.is_null() {
            let deinit =
                deinit_func.ok_or_else(|| Error::value("null pointer passed as `deinit_func`"))?;
            // SAFETY: per the contract.
            status = unsafe { deinit(old) };
        }
        Ok(())
    });
    if checked != 0 {
        checked
    } else {
        status
    }
}
