//! Error objects: the header, then `TVMFFIErrorCell {kind, message, backtrace,
//! update_backtrace, cause_chain, extra_context}` (tvm-ffi `c_api.h`).
//!
//! An [`Error`] crosses the tvm-ffi door as one of these; readers go through the cell, so error
//! objects raised by other libraries convert back to [`Error`] the same way.

use std::cell::UnsafeCell;
use std::ffi::c_void;

use super::{new_object, ObjectPayload, ObjectRef};
use crate::abi::{type_index, TVMFFIByteArray, TVMFFIErrorCell};
use crate::error::Error;

/// Payload of a `ffi.Error` object (type index 67).
#[repr(C)]
pub struct ErrorObj {
    cell: UnsafeCell<TVMFFIErrorCell>,
    kind: Box<[u8]>,
    message: Box<[u8]>,
    backtrace: UnsafeCell<Box<[u8]>>,
    /// Owners of the references `cell.cause_chain` and `cell.extra_context` point to.
    _cause_chain: Option<ObjectRef>,
    _extra_context: Option<ObjectRef>,
}

// SAFETY: the cell is a prefix and matches `TVMFFIErrorCell`. Only `update_backtrace` mutates,
// and tvm-ffi documents it as called by the thread that owns the raised error.
unsafe impl ObjectPayload for ErrorObj {
    const TYPE_INDEX: i32 = type_index::ERROR;
}
// SAFETY: see above.
unsafe impl Sync for ErrorObj {}

fn nul_boxed(bytes: &[u8]) -> Box<[u8]> {
    let mut v = Vec::with_capacity(bytes.len() + 1);
    v.extend_from_slice(bytes);
    v.push(0);
    v.into_boxed_slice()
}

fn view(storage: &[u8]) -> TVMFFIByteArray {
    TVMFFIByteArray {
        data: storage.as_ptr().cast(),
        size: storage.len() - 1,
    }
}

impl ErrorObj {
    /// Replaces or appends to the backtrace (the cell's `update_backtrace`).
    ///
    /// # Safety
    /// No other thread reads this error's backtrace concurrently.
    pub unsafe fn update_backtrace(&self, text: &[u8], append: bool) {
        // SAFETY: exclusive access per the contract.
        let storage = unsafe { &mut *self.backtrace.get() };
        let mut next = Vec::with_capacity(storage.len() + text.len());
        if append {
            next.extend_from_slice(&storage[..storage.len() - 1]);
        }
        next.extend_from_slice(text);
        *storage = nul_boxed(&next);
        // SAFETY: as above; the cell view is refreshed to the new storage.
        unsafe { (*self.cell.get()).backtrace = view(storage) };
    }
}

/// Creates an error object from an [`Error`] (with the cause and extra context it carries).
pub fn new_error(err: &Error) -> ObjectRef {
    new_error_with_cause(err, err.cause.clone(), err.extra_context.clone())
}

/// Creates an error object that also holds a cause (an earlier error, whose own cause may chain
/// on) and an extra context object, both owned by the new error (tvm-ffi `c_api.h`,
/// `TVMFFIErrorCell::cause_chain` / `extra_context`).
pub fn new_error_with_cause(
    err: &Error,
    cause_chain: Option<ObjectRef>,
    extra_context: Option<ObjectRef>,
) -> ObjectRef {
    let kind = nul_boxed(err.kind.as_bytes());
    let message = nul_boxed(err.message.as_bytes());
    let backtrace = nul_boxed(err.backtrace.as_bytes());
    let raw = |o: &Option<ObjectRef>| o.as_ref().map_or(std::ptr::null_mut(), ObjectRef::as_ptr);
    let cell = TVMFFIErrorCell {
        kind: view(&kind),
        message: view(&message),
        backtrace: view(&backtrace),
        update_backtrace: Some(error_update_backtrace),
        cause_chain: raw(&cause_chain),
        extra_context: raw(&extra_context),
    };
    new_object(ErrorObj {
        cell: UnsafeCell::new(cell),
        kind,
        message,
        backtrace: UnsafeCell::new(backtrace),
        _cause_chain: cause_chain,
        _extra_context: extra_context,
    })
}

/// The cause of an error object made by any producer (a new reference), if it has one.
pub fn error_cause(obj: &ObjectRef) -> Option<ObjectRef> {
    error_cell_ref(obj, |cell| cell.cause_chain)
}

/// The extra context of an error object made by any producer (a new reference), if any.
pub fn error_extra_context(obj: &ObjectRef) -> Option<ObjectRef> {
    error_cell_ref(obj, |cell| cell.extra_context)
}

fn error_cell_ref(
    obj: &ObjectRef,
    field: impl FnOnce(&TVMFFIErrorCell) -> *mut std::ffi::c_void,
) -> Option<ObjectRef> {
    if obj.type_index() != type_index::ERROR {
        return None;
    }
    // SAFETY: error objects carry a `TVMFFIErrorCell` after the header; the objects it points
    // to are owned by the error, which `obj` keeps alive while we take our own reference.
    unsafe {
        let cell = &*obj.cell_ptr().cast::<TVMFFIErrorCell>();
        ObjectRef::from_raw_borrowed(field(cell))
    }
}

/// Reads an error object made by any producer back into an [`Error`] (kind, message, backtrace,
/// cause and extra context).
pub fn error_from_object(obj: &ObjectRef) -> Option<Error> {
    if obj.type_index() != type_index::ERROR {
        return None;
    }
    // SAFETY: error objects carry a `TVMFFIErrorCell` after the header, valid while they live.
    let cell = unsafe { *obj.cell_ptr().cast::<TVMFFIErrorCell>() };
    // SAFETY: the cell's byte arrays are owned by the object.
    let text = |b: TVMFFIByteArray| String::from_utf8_lossy(unsafe { b.as_slice() }).into_owned();
    let mut err =
        Error::new(text(cell.kind), text(cell.message)).with_backtrace(text(cell.backtrace));
    err.cause = error_cause(obj);
    err.extra_context = error_extra_context(obj);
    Some(err)
}

/// `TVMFFIErrorCell::update_backtrace` for tvmrt's error objects.
///
/// # Safety
/// `obj` is a live tvmrt error object; `backtrace` is null or a valid byte array.
pub unsafe extern "C" fn error_update_backtrace(
    obj: *mut c_void,
    backtrace: *const TVMFFIByteArray,
    update_mode: i32,
) {
    crate::unwind_guard::run_or("TVMFFIErrorCell.update_backtrace", (), || {
        if obj.is_null() || backtrace.is_null() {
            return Ok(());
        }
        let payload = obj
            .cast::<u8>()
            .wrapping_add(std::mem::size_of::<super::ObjectHeader>())
            .cast::<ErrorObj>();
        // SAFETY: `obj` is one of our error objects (this callback is only installed in those);
        // the byte array is valid per the contract.
        unsafe { (*payload).update_backtrace((*backtrace).as_slice(), update_mode == 1) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_round_trips_through_object() {
        let e = Error::value("bad shape");
        let obj = new_error(&e);
        assert_eq!(obj.type_index(), type_index::ERROR);
        assert_eq!(error_from_object(&obj).unwrap(), e);
        let p = obj.downcast_ref::<ErrorObj>().unwrap();
        // SAFETY: single-threaded test.
        unsafe { p.update_backtrace(b"frame1", false) };
        // SAFETY: as above.
        unsafe { p.update_backtrace(b";frame2", true) };
        assert_eq!(error_from_object(&obj).unwrap().backtrace, "frame1;frame2");
        assert!(error_cause(&obj).is_none());
    }

    #[test]
    fn cause_chain_is_owned_and_readable() {
        let root = new_error(&Error::runtime("root cause"));
        let ctx = crate::object::string::new_str("ctx");
        let top = new_error_with_cause(&Error::value("top"), Some(root.clone()), Some(ctx.clone()));
        assert_eq!(root.strong_count(), 2);
        let cause = error_cause(&top).unwrap();
        assert_eq!(error_from_object(&cause).unwrap().message, "root cause");
        assert_eq!(error_extra_context(&top).unwrap().as_ptr(), ctx.as_ptr());
        drop(cause);
        drop(top);
        assert_eq!(root.strong_count(), 1);
        assert_eq!(ctx.strong_count(), 1);
    }
}
