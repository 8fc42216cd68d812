//! The remaining classic C API (TVM 0.19 `c_runtime_api.h` / `c_backend_api.h`): Python
//! errors, the last backtrace, `TVMThrowLastError`, type keys and derivation, and
//! `TVMBackendRegisterEnvCAPI`.
//!
//! Type indexes are tvm-ffi's in both doors (tvmrt's objects carry them), so the classic type
//! functions read [`crate::object::type_registry`]. Classic TVM's `runtime.*` keys for the
//! kinds tvmrt has are accepted by `TVMObjectTypeKey2Index` as aliases of the tvm-ffi keys.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};

use crate::capi::boundary::{c_str, run_or, write_out};
use crate::capi::ffi_misc::{env_capi, register_env_capi, with_host_lock};
use crate::error::{Error, Result};
use crate::object::error_obj::error_from_object;
use crate::object::type_registry;

/// Classic TVM (0.19) type keys of kinds tvmrt implements, and their tvm-ffi keys.
pub const CLASSIC_KEY_ALIASES: &[(&str, &str)] = &[
    ("runtime.Object", "ffi.Object"),
    ("runtime.String", "ffi.String"),
    ("runtime.NDArray", "ffi.Tensor"),
    ("runtime.Module", "ffi.Module"),
    ("runtime.PackedFunc", "ffi.Function"),
    ("runtime.ShapeTuple", "ffi.Shape"),
    ("runtime.Array", "ffi.Array"),
    ("runtime.Map", "ffi.Map"),
    ("Array", "ffi.Array"),
    ("Map", "ffi.Map"),
];

/// The type index of a tvm-ffi key or a classic alias of one.
pub fn classic_key_to_index(key: &str) -> Result<i32> {
    if let Some(i) = type_registry::lookup(key) {
        return Ok(i);
    }
    CLASSIC_KEY_ALIASES
        .iter()
        .find(|(classic, _)| *classic == key)
        .and_then(|(_, ffi)| type_registry::lookup(ffi))
        .ok_or_else(|| Error::value(format!("cannot find type `{key}`")))
}

/// Error kind of the marker error raised by `TVMAPISetLastPythonError`.
const PYTHON_ERROR_KIND: &str = "PythonError";

/// A Python exception recorded on this thread.
struct PythonError {
    object: *mut c_void,
    /// The marker error's message: the Python error is current while the thread's raised
    /// error still carries it (it survives being re-raised through tvmrt's call layers).
    marker: String,
    /// Whether tvmrt holds a reference (`Py_IncRef` was registered).
    owned: bool,
}

thread_local! {
    static PYTHON_ERROR: RefCell<Option<PythonError>> = const { RefCell::new(None) };
    static BACKTRACE_TEXT: RefCell<CString> = RefCell::new(CString::default());
}

/// The thread's raised error, left raised.
fn peek_raised() -> Option<Error> {
    let obj = crate::raised::take_raised_object()?;
    let err = error_from_object(&obj);
    crate::raised::set_raised_object(obj);
    err
}

/// Calls the host's `Py_IncRef`/`Py_DecRef` (named `name`) on `obj` under the host lock.
/// Returns false when the host did not register it.
fn py_ref(name: &str, obj: *mut c_void) -> bool {
    let Some(f) = env_capi(name) else {
        return false;
    };
    // SAFETY: registered under the Python C API name, with its signature `void (*)(void*)`.
    let f = unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(f) };
    // SAFETY: `obj` is the Python object the host handed us.
    with_host_lock(|| unsafe { f(obj) });
    true
}

fn release(p: PythonError) {
    if p.owned {
        py_ref("Py_DecRef", p.object);
    }
}

/// The recorded Python error if it is still the thread's current error; a stale one (replaced
/// by a later error) is released.
fn current_python_error() -> Option<*mut c_void> {
    let raised = peek_raised();
    PYTHON_ERROR.with(|slot| {
        let mut slot = slot.borrow_mut();
        let current = match (&*slot, &raised) {
            (Some(p), Some(e)) => e.kind == PYTHON_ERROR_KIND && e.message == p.marker,
            _ => false,
        };
        if current {
            slot.as_ref().map(|p| p.object)
        } else {
            if let Some(p) = slot.take() {
                release(p);
            }
            None
        }
    })
}

/// Records a Python exception object as this thread's last error (TVM's Python frontend does
/// this in callbacks before returning -1). The raised error becomes a `PythonError` naming the
/// object, so `TVMGetLastError` reports it too. tvmrt holds a reference when the host
/// registered `Py_IncRef`/`Py_DecRef` (`TVMBackendRegisterEnvCAPI`); otherwise the pointer is
/// kept as given and the caller keeps the object alive.
///
/// # Safety
/// `py_object` is null or a Python object pointer.
#[no_mangle]
pub unsafe extern "C" fn TVMAPISetLastPythonError(py_object: *mut c_void) {
    run_or("TVMAPISetLastPythonError", (), || {
        let previous = PYTHON_ERROR.with(|slot| slot.borrow_mut().take());
        if let Some(p) = previous {
            release(p);
        }
        let marker = format!("Python exception object {py_object:p} (see TVMGetLastPythonError)");
        let owned = !py_object.is_null() && env_capi("Py_DecRef").is_some() && {
            py_ref("Py_IncRef", py_object)
        };
        crate::raised::set_raised(Error::new(PYTHON_ERROR_KIND, marker.clone()));
        PYTHON_ERROR.with(|slot| {
            *slot.borrow_mut() = Some(PythonError {
                object: py_object,
                marker,
                owned,
            })
        });
        Ok(())
    })
}

/// The Python exception recorded by `TVMAPISetLastPythonError` if it is still this thread's
/// last error, else NULL. The reference stays with tvmrt.
#[no_mangle]
pub extern "C" fn TVMGetLastPythonError() -> *mut c_void {
    run_or("TVMGetLastPythonError", std::ptr::null_mut(), || {
        Ok(current_python_error().unwrap_or(std::ptr::null_mut()))
    })
}

/// Forgets the recorded Python exception, clearing the last error if it is still the current
/// one (as TVM does); any other last error is left alone.
#[no_mangle]
pub extern "C" fn TVMDropLastPythonError() {
    run_or("TVMDropLastPythonError", (), || {
        if current_python_error().is_some() {
            drop(crate::raised::take_raised_object());
            if let Some(p) = PYTHON_ERROR.with(|slot| slot.borrow_mut().take()) {
                release(p);
            }
        }
        Ok(())
    })
}

/// The backtrace of this thread's last error, or NULL when there is no error or it has no
/// backtrace. The string stays valid until the next call on this thread.
#[no_mangle]
pub extern "C" fn TVMGetLastBacktrace() -> *const c_char {
    run_or("TVMGetLastBacktrace", std::ptr::null(), || {
        let Some(err) = peek_raised() else {
            return Ok(std::ptr::null());
        };
        if err.backtrace.is_empty() {
            return Ok(std::ptr::null());
        }
        let text = CString::new(err.backtrace.replace('\0', "\\0")).unwrap_or_default();
        Ok(BACKTRACE_TEXT.with(|t| {
            *t.borrow_mut() = text;
            t.borrow().as_ptr()
        }))
    })
}

/// In TVM this re-throws the last error as a C++ exception. tvmrt has no C++ and must not
/// unwind into its caller, so it returns normally and leaves the error raised: a caller reads
/// it with `TVMGetLastError` and fails on its own.
#[no_mangle]
pub extern "C" fn TVMThrowLastError() {
    run_or("TVMThrowLastError", (), || Ok(()))
}

/// `*is_derived` = whether `child_type_index` is `parent_type_index` or derives from it. Both
/// must be registered type indexes.
///
/// # Safety
/// `is_derived` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectDerivedFrom(
    child_type_index: u32,
    parent_type_index: u32,
    is_derived: *mut c_int,
) -> c_int {
    ffi_try!("TVMObjectDerivedFrom", {
        let as_index = |v: u32, what: &str| {
            i32::try_from(v).map_err(|_| Error::value(format!("{what} {v} is out of range")))
        };
        let child = as_index(child_type_index, "child_type_index")?;
        let parent = as_index(parent_type_index, "parent_type_index")?;
        let derived = type_registry::derived_from(child, parent)?;
        // SAFETY: per the contract.
        unsafe { write_out(is_derived, c_int::from(derived), "is_derived") }
    })
}

/// The type index of `type_key` (a tvm-ffi key, or a classic `runtime.*` alias).
///
/// # Safety
/// `type_key` is a C string; `out_tindex` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectTypeKey2Index(
    type_key: *const c_char,
    out_tindex: *mut u32,
) -> c_int {
    ffi_try!("TVMObjectTypeKey2Index", {
        // SAFETY: per the contract.
        let key = unsafe { c_str(type_key, "type_key")? };
        let index = classic_key_to_index(key)?;
        // SAFETY: per the contract.
        unsafe { write_out(out_tindex, index as u32, "out_tindex") }
    })
}

/// The type key of a type index, as a `malloc`ed C string: release it with `free()`. (TVM 0.19
/// `c_runtime_api.cc` allocates it with `malloc` the same way; a caller that never frees it
/// leaks only the key.)
///
/// # Safety
/// `out_type_key` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMObjectTypeIndex2Key(
    tindex: u32,
    out_type_key: *mut *mut c_char,
) -> c_int {
    ffi_try!("TVMObjectTypeIndex2Key", {
        crate::capi::boundary::non_null(out_type_key, "out_type_key")?;
        let index = i32::try_from(tindex)
            .map_err(|_| Error::value(format!("type index {tindex} is out of range")))?;
        let key = type_registry::index_to_key(index)?;
        // SAFETY: `malloc` of len + 1 bytes; checked for NULL below.
        let p = unsafe { libc::malloc(key.len() + 1) }.cast::<c_char>();
        if p.is_null() {
            return Err(Error::runtime("out of memory for the type key"));
        }
        // SAFETY: `p` has room for the key and its NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(key.as_ptr().cast::<c_char>(), p, key.len());
            *p.add(key.len()) = 0;
        }
        // SAFETY: checked non-null above.
        unsafe { write_out(out_type_key, p, "out_type_key") }
    })
}

/// Provides a host-environment C function (`PyErr_CheckSignals`, `PyGILState_Ensure`,
/// `PyGILState_Release`, `Py_IncRef`, `Py_DecRef`); the same table as `TVMFFIEnvRegisterCAPI`.
///
/// # Safety
/// `name` is a C string; `ptr` is NULL or a function with the signature its name implies.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRegisterEnvCAPI(name: *const c_char, ptr: *mut c_void) -> c_int {
    ffi_try!("TVMBackendRegisterEnvCAPI", {
        // SAFETY: per the contract.
        let name = unsafe { c_str(name, "name")? };
        register_env_capi(name, ptr)
    })
}
