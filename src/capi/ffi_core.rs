//! The tvm-ffi core C API (`tvm/ffi/c_api.h`): functions, objects, errors, strings, dtypes.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::abi::{
    type_index, DLDataType, TVMFFIAny, TVMFFIByteArray, TVMFFIFunctionCell, TVMFFISafeCallType,
    TVMFFIVersion,
};
use crate::capi::boundary::{function_arg, non_null, run_or, write_out};
use crate::error::Error;
use crate::function::{registry, Function};
use crate::object::error_obj::new_error;
use crate::object::{dec_ref_raw, inc_ref_raw, ObjectHeader, ObjectRef};
use crate::value::{Any, AnyView};

/// The tvm-ffi version tvmrt implements: the one its `tvm/ffi/c_api.h` declares
/// (`TVM_FFI_VERSION_MAJOR/MINOR/PATCH`, read by build.rs), so a program compiled against the
/// shipped header sees the version it was compiled for.
pub const FFI_VERSION: TVMFFIVersion = TVMFFIVersion {
    major: header_number(env!("TVMRT_FFI_VERSION_MAJOR")),
    minor: header_number(env!("TVMRT_FFI_VERSION_MINOR")),
    patch: header_number(env!("TVMRT_FFI_VERSION_PATCH")),
};

const fn header_number(text: &str) -> u32 {
    match u32::from_str_radix(text, 10) {
        Ok(v) => v,
        Err(_) => panic!("build.rs passes a decimal version number"),
    }
}

/// Reads a `TVMFFIByteArray*` argument as UTF-8.
///
/// # Safety
/// `p` is null or points to a valid byte array.
unsafe fn byte_array_str<'a>(
    p: *const TVMFFIByteArray,
    what: &str,
) -> crate::error::Result<&'a str> {
    non_null(p, what)?;
    // SAFETY: per the contract.
    std::str::from_utf8(unsafe { (*p).as_slice() })
        .map_err(|_| Error::value(format!("`{what}` is not valid UTF-8")))
}

/// Writes the tvm-ffi version tvmrt speaks.
///
/// # Safety
/// `out_version` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetVersion(out_version: *mut TVMFFIVersion) {
    run_or("TVMFFIGetVersion", (), || {
        // SAFETY: per the contract.
        unsafe { write_out(out_version, FFI_VERSION, "out_version") }
    })
}

/// Adds a strong reference.
///
/// # Safety
/// `obj` is null or a live object.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectIncRef(obj: *mut c_void) -> c_int {
    ffi_try!("TVMFFIObjectIncRef", {
        non_null(obj, "obj")?;
        // SAFETY: per the contract.
        unsafe { inc_ref_raw(obj) };
        Ok(())
    })
}

/// Releases a strong reference (null is a no-op).
///
/// # Safety
/// `obj` is null or an object on which the caller holds a reference.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectDecRef(obj: *mut c_void) -> c_int {
    ffi_try!("TVMFFIObjectDecRef", {
        if !obj.is_null() {
            // SAFETY: the caller gives up its reference.
            unsafe { dec_ref_raw(obj) };
        }
        Ok(())
    })
}

/// Creates a function from a C callback. With a null `self` and no deleter the callback is
/// called with the function object as `self`, as in tvm-ffi.
///
/// # Safety
/// `safe_call` is callable from any thread with `self_` until `deleter(self_)` runs.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCreate(
    self_: *mut c_void,
    safe_call: Option<TVMFFISafeCallType>,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIFunctionCreate", {
        non_null(out, "out")?;
        let safe_call =
            safe_call.ok_or_else(|| Error::value("null pointer passed as `safe_call`"))?;
        let f = Function::from_extern_c(self_, safe_call, deleter);
        // SAFETY: checked non-null.
        unsafe { write_out(out, f.into_object().into_raw(), "out") }
    })
}

/// Looks up a global function: `*out` is a new reference, or NULL when not found.
///
/// # Safety
/// `name` points to a valid byte array; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionGetGlobal(
    name: *const TVMFFIByteArray,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIFunctionGetGlobal", {
        // SAFETY: per the contract.
        let name = unsafe { byte_array_str(name, "name")? };
        let f = registry::get(name).map_or(std::ptr::null_mut(), |f| f.into_object().into_raw());
        // SAFETY: per the contract.
        unsafe { write_out(out, f, "out") }
    })
}

/// Registers a global function (the registry takes its own reference).
///
/// # Safety
/// `name` points to a valid byte array; `f` is a live function object.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobal(
    name: *const TVMFFIByteArray,
    f: *mut c_void,
    allow_override: c_int,
) -> c_int {
    ffi_try!("TVMFFIFunctionSetGlobal", {
        // SAFETY: per the contract.
        let name = unsafe { byte_array_str(name, "name")? };
        // SAFETY: per the contract.
        let f = unsafe { function_arg(f, "f")? };
        registry::register(name, f, allow_override != 0)
    })
}

/// Calls a function through its cell. On failure returns non-zero with the error raised.
///
/// # Safety
/// `func` is a live function object; `args` holds `num_args` values; `result` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionCall(
    func: *mut c_void,
    args: *mut TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    crate::capi::boundary::guard("TVMFFIFunctionCall", || {
        // Valid arguments go straight to the cell's safe_call, as in tvm-ffi; anything else
        // is reported by the out-of-line checker.
        // The four checks as arithmetic and one branch, on the top bit: `p - 1` has it set
        // exactly when `p` is null (user-space pointers are below 2^63), a sign-extended count
        // when it is negative, `n | -n` when it is not zero.
        let null = |p: usize| p.wrapping_sub(1);
        let count = num_args as i64 as usize;
        let bad = null(func as usize)
            | null(result as usize)
            | count
            | (null(args as usize) & (count | count.wrapping_neg()));
        let plausible = (bad as isize) >= 0;
        // SAFETY: `func` is non-null and a live object per the contract.
        if plausible && unsafe { (*func.cast::<ObjectHeader>()).type_index } == type_index::FUNCTION
        {
            let cell = func
                .cast::<u8>()
                .wrapping_add(std::mem::size_of::<ObjectHeader>())
                .cast::<TVMFFIFunctionCell>();
            // SAFETY: function objects carry their cell after the header; the callee follows
            // the tvm-ffi calling convention and raises its own errors.
            return unsafe { ((*cell).safe_call)(func, args, num_args, result) };
        }
        // SAFETY: per the contract.
        unsafe { report_bad_call(func, args, num_args, result) }
    })
}

/// Names what is wrong with a `TVMFFIFunctionCall`. Out of line and `extern "C"` (it cannot
/// unwind: its own boundary catches panics), so the fast path has nothing to unwind from and
/// its boundary compiles to nothing.
///
/// # Safety
/// `func` is null or a live object.
#[cold]
#[inline(never)]
unsafe extern "C" fn report_bad_call(
    func: *mut c_void,
    args: *mut TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> c_int {
    ffi_try!("TVMFFIFunctionCall", {
        non_null(func, "func")?;
        non_null(result, "result")?;
        if num_args < 0 || (num_args > 0 && args.is_null()) {
            return Err(Error::value(format!(
                "invalid arguments: num_args={num_args}, args={args:p}"
            )));
        }
        // SAFETY: a live object per the contract.
        let index = unsafe { (*func.cast::<ObjectHeader>()).type_index };
        Err(Error::type_error(format!(
            "TVMFFIFunctionCall: handle is a {}, not a function",
            crate::value::type_name(index)
        )))
    })
}

/// Converts a borrowed value into an owned one (raw strings and byte arrays are copied into
/// objects; objects gain a reference).
///
/// # Safety
/// `any_view` is readable and its contents alive; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIAnyViewToOwnedAny(
    any_view: *const TVMFFIAny,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_try!("TVMFFIAnyViewToOwnedAny", {
        non_null(any_view, "any_view")?;
        // SAFETY: per the contract.
        let owned = unsafe { AnyView::from_raw(*any_view) }.to_owned_any();
        // SAFETY: per the contract.
        unsafe { write_out(out, owned.into_raw(), "out") }
    })
}

/// Moves the thread's raised error out (`*result` is NULL when none is raised).
///
/// # Safety
/// `result` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorMoveFromRaised(result: *mut *mut c_void) {
    run_or("TVMFFIErrorMoveFromRaised", (), || {
        let obj = crate::raised::take_raised_object();
        let ptr = obj.map_or(std::ptr::null_mut(), ObjectRef::into_raw);
        // SAFETY: per the contract.
        if let Err(e) = unsafe { write_out(result, ptr, "result") } {
            if !ptr.is_null() {
                // SAFETY: nobody received the reference; release it.
                unsafe { dec_ref_raw(ptr) };
            }
            return Err(e);
        }
        Ok(())
    })
}

/// Raises an error object on this thread (the thread takes its own reference; NULL clears).
///
/// # Safety
/// `error` is null or a live error object.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaised(error: *mut c_void) {
    run_or("TVMFFIErrorSetRaised", (), || {
        // SAFETY: per the contract.
        match unsafe { ObjectRef::from_raw_borrowed(error) } {
            Some(obj) => crate::raised::set_raised_object(obj),
            None => drop(crate::raised::take_raised_object()),
        }
        Ok(())
    })
}

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn lossy(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: per the contract.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Raises an error of `kind` with `message`.
///
/// # Safety
/// Both are null or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStr(kind: *const c_char, message: *const c_char) {
    run_or("TVMFFIErrorSetRaisedFromCStr", (), || {
        // SAFETY: per the contract.
        let (kind, message) = unsafe { (lossy(kind), lossy(message)) };
        crate::raised::set_raised(Error::new(kind, message));
        Ok(())
    })
}

/// Raises an error of `kind` whose message is the concatenation of `num_parts` strings (what
/// TVM's generated assertions call).
///
/// # Safety
/// `kind` is a C string; `message_parts` holds `num_parts` C strings (null entries skipped).
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorSetRaisedFromCStrParts(
    kind: *const c_char,
    message_parts: *mut *const c_char,
    num_parts: i32,
) {
    run_or("TVMFFIErrorSetRaisedFromCStrParts", (), || {
        let mut message = String::new();
        if !message_parts.is_null() {
            for i in 0..num_parts.max(0) as usize {
                // SAFETY: the array holds `num_parts` entries.
                message.push_str(&unsafe { lossy(*message_parts.add(i)) });
            }
        }
        // SAFETY: per the contract.
        let kind = unsafe { lossy(kind) };
        crate::raised::set_raised(Error::new(kind, message));
        Ok(())
    })
}

/// Creates an error object.
///
/// # Safety
/// The byte arrays are valid; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorCreate(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIErrorCreate", {
        // SAFETY: per the contract.
        let text = |p: *const TVMFFIByteArray| -> String {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: per the contract.
                String::from_utf8_lossy(unsafe { (*p).as_slice() }).into_owned()
            }
        };
        let mut err = Error::new(text(kind), text(message));
        err.backtrace = text(backtrace);
        // SAFETY: per the contract.
        unsafe { write_out(out, new_error(&err).into_raw(), "out") }
    })
}

/// Makes a string value (`ffi.String`) from bytes.
///
/// # Safety
/// `input` is a valid byte array; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIStringFromByteArray(
    input: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_try!("TVMFFIStringFromByteArray", {
        // SAFETY: per the contract.
        let s = unsafe { byte_array_str(input, "input")? };
        // SAFETY: per the contract.
        unsafe { write_out(out, Any::string_compact(s).into_raw(), "out") }
    })
}

/// Makes a bytes value (`ffi.Bytes`).
///
/// # Safety
/// `input` is a valid byte array; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBytesFromByteArray(
    input: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_try!("TVMFFIBytesFromByteArray", {
        non_null(input, "input")?;
        // SAFETY: per the contract.
        let b = unsafe { (*input).as_slice() };
        // SAFETY: per the contract.
        unsafe { write_out(out, Any::bytes_compact(b).into_raw(), "out") }
    })
}

/// Parses a dtype string (`"float32"`, `"int8x4"`, ...).
///
/// # Safety
/// `str` is a valid byte array; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIDataTypeFromString(
    str: *const TVMFFIByteArray,
    out: *mut DLDataType,
) -> c_int {
    ffi_try!("TVMFFIDataTypeFromString", {
        // SAFETY: per the contract.
        let s = unsafe { byte_array_str(str, "str")? };
        let t = crate::dtype::dtype_from_str(s)?;
        // SAFETY: per the contract.
        unsafe { write_out(out, t, "out") }
    })
}

/// Formats a dtype as a string value.
///
/// # Safety
/// `dtype` is readable; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIDataTypeToString(
    dtype: *const DLDataType,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_try!("TVMFFIDataTypeToString", {
        non_null(dtype, "dtype")?;
        // SAFETY: per the contract.
        let s = crate::dtype::dtype_to_string(unsafe { *dtype })?;
        // SAFETY: per the contract.
        unsafe { write_out(out, Any::string_compact(&s).into_raw(), "out") }
    })
}
