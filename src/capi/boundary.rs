//! The one panic/error boundary every C entry point goes through, and the argument checks the
//! doors share (null pointers, C strings, handles).

use std::any::Any as PanicPayload;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::ObjectRef;

fn panic_message(p: Box<dyn PanicPayload + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Runs `body` for the C function `name`: 0 on success; -1 with the error raised on this thread
/// on failure or panic.
pub fn run(name: &'static str, body: impl FnOnce() -> Result<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            crate::raised::set_raised(e);
            -1
        }
        Err(p) => {
            crate::raised::set_raised(Error::runtime(format!(
                "internal error in {name}: {}",
                panic_message(p)
            )));
            -1
        }
    }
}

/// The boundary for hot paths whose body already returns the C status itself: only panics
/// are caught (and raised as errors); no `Result` is built, so the body can stay a few
/// instructions long.
#[inline(always)]
pub fn guard(name: &'static str, body: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(status) => status,
        Err(p) => {
            crate::raised::set_raised(Error::runtime(format!(
                "internal error in {name}: {}",
                panic_message(p)
            )));
            -1
        }
    }
}

/// Runs `body` for a C function that returns a value rather than a status: a failure or panic
/// raises the error and returns `fallback`.
pub fn run_or<T>(name: &'static str, fallback: T, body: impl FnOnce() -> Result<T>) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            crate::raised::set_raised(e);
            fallback
        }
        Err(p) => {
            crate::raised::set_raised(Error::runtime(format!(
                "internal error in {name}: {}",
                panic_message(p)
            )));
            fallback
        }
    }
}

/// The boundary as a macro: `ffi_try!("Name", { ...; Ok(()) })`.
macro_rules! ffi_try {
    ($name:literal, $body:block) => {
        $crate::capi::boundary::run($name, || -> $crate::error::Result<()> { $body })
    };
}

/// Fails with a `ValueError` naming `what` when `p` is null.
pub fn non_null<T>(p: *const T, what: &str) -> Result<()> {
    if p.is_null() {
        Err(Error::value(format!("null pointer passed as `{what}`")))
    } else {
        Ok(())
    }
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
