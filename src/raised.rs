//! The thread's raised error: the one slot both C doors report through.
//!
//! tvm-ffi keeps a thread-local "raised" error object (`TVMFFIErrorSetRaised`,
//! `TVMFFIErrorMoveFromRaised`); the classic API keeps a thread-local last-error string
//! (`TVMAPISetLastError`, `TVMGetLastError`). tvmrt keeps one error per thread so an error
//! raised through one door is seen through the other.

use std::cell::RefCell;
use std::ffi::CString;

use crate::error::Error;
use crate::object::error_obj::{error_from_object, new_error};
use crate::object::ObjectRef;

thread_local! {
    static RAISED: RefCell<Option<ObjectRef>> = const { RefCell::new(None) };
    static CLASSIC_TEXT: RefCell<CString> = RefCell::new(CString::default());
    /// The exact text `TVMAPISetLastError` was given, with the error object it raised: TVM
    /// returns that text unchanged from `TVMGetLastError`, whatever kind prefix it has.
    /// The error object is held, not just its address: a freed object's address can be
    /// reused by a later error, whose text must not be mistaken for this one.
    static CLASSIC_ORIGINAL: RefCell<Option<(ObjectRef, String)>> = const { RefCell::new(None) };
}

/// Raises an error given as classic text (`TVMAPISetLastError`); `TVMGetLastError` returns the
/// text exactly as given while this error stays raised.
pub fn set_raised_classic_text(text: &str) {
    let obj = new_error(&Error::from_classic_text(text));
    set_raised_object(obj.clone());
    let previous = CLASSIC_ORIGINAL.with(|c| c.borrow_mut().replace((obj, text.to_string())));
    drop(previous);
}

/// Raises `err` on this thread (replacing any earlier one).
pub fn set_raised(err: Error) {
    set_raised_object(new_error(&err));
}

/// Raises an error object (any producer) on this thread.
pub fn set_raised_object(obj: ObjectRef) {
    let previous = RAISED.with(|r| r.borrow_mut().replace(obj));
    drop(previous);
}

/// Whether an error is raised on this thread.
pub fn is_raised() -> bool {
    RAISED.with(|r| r.borrow().is_some())
}

/// Takes the raised error object, leaving none.
pub fn take_raised_object() -> Option<ObjectRef> {
    RAISED.with(|r| r.borrow_mut().take())
}

/// Takes the raised error as an [`Error`], leaving none.
pub fn take_raised() -> Option<Error> {
    take_raised_object().and_then(|o| error_from_object(&o))
}

/// The raised error as classic text, kept in thread-local storage that stays valid until the
/// next call to this function on the thread (`TVMGetLastError`). The error stays raised.
pub fn classic_text_ptr() -> *const std::ffi::c_char {
    let text = RAISED.with(|r| {
        let raised = r.borrow();
        let obj = raised.as_ref()?;
        let original = CLASSIC_ORIGINAL.with(|c| {
            c.borrow()
                .as_ref()
                .filter(|(original, _)| original.as_ptr() == obj.as_ptr())
                .map(|(_, text)| text.clone())
        });
        original.or_else(|| error_from_object(obj).map(|e| e.to_classic_text()))
    });
    let text = text.unwrap_or_default();
    let c = CString::new(text.replace('\0', "\\0")).unwrap_or_default();
    CLASSIC_TEXT.with(|t| {
        *t.borrow_mut() = c;
        t.borrow().as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_text_comes_back_verbatim() {
        set_raised_classic_text("RuntimeError: x");
        // SAFETY: valid until the next call on this thread.
        let text = unsafe { std::ffi::CStr::from_ptr(classic_text_ptr()) };
        assert_eq!(text.to_str().unwrap(), "RuntimeError: x");
        let e = take_raised().unwrap();
        assert_eq!((e.kind.as_str(), e.message.as_str()), ("RuntimeError", "x"));
    }

    #[test]
    fn an_old_classic_text_never_names_a_newer_error() {
        set_raised_classic_text("first failure");
        drop(take_raised());
        // Later errors, whichever address they get, render as themselves.
        for _ in 0..100 {
            set_raised(Error::value("second"));
            // SAFETY: valid until the next call on this thread.
            let text = unsafe { std::ffi::CStr::from_ptr(classic_text_ptr()) };
            assert_eq!(text.to_str().unwrap(), "ValueError: second");
            drop(take_raised());
        }
    }

    #[test]
    fn raise_and_take() {
        set_raised(Error::value("v"));
        // SAFETY: the pointer is valid until the next call on this thread.
        let text = unsafe { std::ffi::CStr::from_ptr(classic_text_ptr()) };
        assert_eq!(text.to_str().unwrap(), "ValueError: v");
        let e = take_raised().unwrap();
        assert_eq!(e.kind, "ValueError");
        assert!(take_raised().is_none());
    }
}
