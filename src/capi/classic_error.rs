//! Classic error and object calls: `TVMAPISetLastError`, `TVMGetLastError`,
//! `TVMObjectRetain`/`TVMObjectFree`, `TVMByteArrayFree`, `TVMObjectGetTypeIndex`.

use std::ffi::{c_char, c_int, c_void};

use crate::abi::TVMByteArray;
use crate::capi::boundary::{c_str, non_null, run_or, write_out};
use crate::error::Error;
use crate::object::{dec_ref_raw, inc_ref_raw, ObjectHeader};

/// Sets the thread's last error to `msg` (a leading `XxxError: ` names the kind).
///
/// # Safety
/// `msg` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn TVMAPISetLastError(msg: *const c_char) {
    run_or("TVMAPISetLastError", (), || {
        // SAFETY: per the contract.
        let text = unsafe { c_str(msg, "msg") }.unwrap_or("(null error message)");
        crate::raised::set_raised_classic_text(text);
        Ok(())
    })
}

/// The thread's last error message. The pointer stays valid until the next
/// `TVMGetLastError` call on this thread; the error stays set.
#[no_mangle]
pub extern "C" fn TVMGetLastError() -> *const c_char {
    run_or("TVMGetLastError", std::ptr::null(), || {
        Ok(crate::raised::classic_text_ptr())
    })
}

/// Adds a reference to an object handle.
///
/// # Safety
/// `obj` is null or a live object handle.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectRetain(obj: *mut c_void) -> c_int {
    ffi_try!("TVMObjectRetain", {
        non_null(obj, "obj")?;
        // SAFETY: a live handle per the contract.
        unsafe { inc_ref_raw(obj) };
        Ok(())
    })
}

/// Releases a reference to an object handle (null is a no-op, as in TVM).
///
/// # Safety
/// `obj` is null or a handle on which the caller holds a reference.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectFree(obj: *mut c_void) -> c_int {
    ffi_try!("TVMObjectFree", {
        if !obj.is_null() {
            // SAFETY: the caller gives up its reference.
            unsafe { dec_ref_raw(obj) };
        }
        Ok(())
    })
}

/// The type index of an object handle.
///
/// # Safety
/// `obj` is null or a live object handle; `out_tindex` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectGetTypeIndex(obj: *mut c_void, out_tindex: *mut u32) -> c_int {
    ffi_try!("TVMObjectGetTypeIndex", {
        non_null(obj, "obj")?;
        // SAFETY: a live handle per the contract.
        let index = unsafe { (*obj.cast::<ObjectHeader>()).type_index };
        // SAFETY: per the contract.
        unsafe { write_out(out_tindex, index as u32, "out_tindex") }
    })
}

/// Frees a byte array returned by tvmrt. Byte results live in thread-local storage (as in
/// TVM), so freeing that one is a no-op; any other pointer was not made by tvmrt.
///
/// # Safety
/// `arr` is null or a pointer returned by a tvmrt call.
#[no_mangle]
pub unsafe extern "C" fn TVMByteArrayFree(arr: *mut TVMByteArray) -> c_int {
    ffi_try!("TVMByteArrayFree", {
        if arr.is_null() || crate::value::classic::is_thread_return_bytes(arr) {
            return Ok(());
        }
        Err(Error::value(
            "TVMByteArrayFree: pointer is not a byte array returned by tvmrt on this thread",
        ))
    })
}
