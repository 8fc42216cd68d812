//! The boundary every C entry point goes through (`ffi_try!` over [`crate::unwind_guard`], which
//! the callbacks beside their types use too), and the argument checks the doors share (null
//! pointers, C strings, handles).

use std::ffi::{c_char, c_void, CStr};

pub use crate::error::non_null;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::ObjectRef;
pub use crate::unwind_guard::{guard, run, run_or};

/// The boundary as a macro: `ffi_try!("Name", { ...; Ok(()) })`.
macro_rules! ffi_try {
    ($name:literal, $body:block) => {
        $crate::capi::boundary::run($name, || -> $crate::error::Result<()> { $body })
    };
}

/// Writes `value` through an out-pointer, failing on null.
///
/// # Safety
/// `out` is null or writable.
pub unsafe fn write_out<T>(out: *mut T, value: T, what: &str) -> Result<()> {
    non_null(out, what)?;
    // SAFETY: checked non-null; writable per the contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Reads a NUL-terminated UTF-8 C string argument.
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for `'a`.
pub unsafe fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    non_null(p, what)?;
    // SAFETY: checked non-null; NUL-terminated per the contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::value(format!("`{what}` is not valid UTF-8")))
}

/// Borrows an object handle as a new reference.
///
/// # Safety
/// `h` is null or a live object handle.
pub unsafe fn object_arg(h: *mut c_void, what: &str) -> Result<ObjectRef> {
    // SAFETY: per the contract.
    unsafe { ObjectRef::from_raw_borrowed(h) }
        .ok_or_else(|| Error::value(format!("null handle passed as `{what}`")))
}

/// Borrows a function handle as a new reference, checking its kind.
///
/// # Safety
/// `h` is null or a live object handle.
pub unsafe fn function_arg(h: *mut c_void, what: &str) -> Result<Function> {
    // SAFETY: per the contract.
    let obj = unsafe { object_arg(h, what)? };
    Function::from_object(obj).map_err(|e| Error::type_error(format!("`{what}`: {}", e.message)))
}
