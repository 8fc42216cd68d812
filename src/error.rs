//! The runtime's error type: a TVM error kind (`ValueError`, `TypeError`, ...) and a message.
//!
//! Both C doors report errors from this one type: the classic door as the thread's last-error
//! string, the tvm-ffi door as an error object (see `object::ErrorObj`) whose cell holds the kind,
//! the message and a backtrace.

use std::fmt;

use crate::object::ObjectRef;

/// A runtime error with TVM's error kind and a human-readable message.
///
/// The fields live behind one box (read them through `Deref`: `err.kind`, `err.message`), so
/// `Result<()>` is a single word and the success path of every C entry point stays cheap.
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<ErrorData>);

/// The contents of an [`Error`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorData {
    /// TVM's error kind, e.g. `ValueError`, `TypeError`, `RuntimeError`.
    pub kind: String,
    /// What went wrong, naming the bad input.
    pub message: String,
    /// A backtrace text (may be empty); kept so errors crossing the FFI keep theirs.
    pub backtrace: String,
    /// The error this one was raised from (an error object's `cause_chain`), kept so an error
    /// that passes through tvmrt keeps it.
    pub cause: Option<ObjectRef>,
    /// The error object's `extra_context` (for instance the `ffi.VisitErrorContext` a
    /// structural traversal records), kept likewise.
    pub extra_context: Option<ObjectRef>,
}

impl std::ops::Deref for Error {
    type Target = ErrorData;
    fn deref(&self) -> &ErrorData {
        &self.0
    }
}

impl std::ops::DerefMut for Error {
    fn deref_mut(&mut self) -> &mut ErrorData {
        &mut self.0
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The result type used throughout tvmrt.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of the given kind.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Error(Box::new(ErrorData {
            kind: kind.into(),
            message: message.into(),
            backtrace: String::new(),
            cause: None,
            extra_context: None,
        }))
    }

    /// An error with a backtrace text.
    pub fn with_backtrace(mut self, backtrace: impl Into<String>) -> Self {
        self.0.backtrace = backtrace.into();
        self
    }

    /// The same error with its message prefixed by `context` (`"{context}: {message}"`).
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.0.message = format!("{context}: {}", self.0.message);
        self
    }
    /// `ValueError`: a value of the right type but wrong content (shape, size, name, ...).
    pub fn value(message: impl Into<String>) -> Self {
        Self::new("ValueError", message)
    }
    /// `TypeError`: a value of the wrong type (type code, dtype, ...).
    pub fn type_error(message: impl Into<String>) -> Self {
        Self::new("TypeError", message)
    }
    /// `IndexError`: an index out of range.
    pub fn index(message: impl Into<String>) -> Self {
        Self::new("IndexError", message)
    }
    /// `RuntimeError`: anything else.
    pub fn runtime(message: impl Into<String>) -> Self {
        Self::new("RuntimeError", message)
    }
    /// `AttributeError`: a name that is not found (function, symbol, loader).
    pub fn attribute(message: impl Into<String>) -> Self {
        Self::new("AttributeError", message)
    }

    /// Parses a classic-ABI error string (`TVMAPISetLastError`). TVM's frontends treat a leading
    /// `XxxError: ` as the error kind (python/tvm/_ffi/base.py, `c2pyerror`); anything else is a
    /// `RuntimeError` with the whole text as message.
    pub fn from_classic_text(text: &str) -> Self {
        if let Some((head, rest)) = text.split_once(": ") {
            let is_kind = !head.is_empty()
                && head.ends_with("Error")
                && head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if is_kind {
                return Self::new(head, rest);
            }
        }
        Self::runtime(text)
    }

    /// The classic-ABI rendering: `Kind: message`, the inverse of [`Error::from_classic_text`]
    /// except that a plain `RuntimeError` keeps its bare message, so a string set with
    /// `TVMAPISetLastError` comes back from `TVMGetLastError` unchanged.
    pub fn to_classic_text(&self) -> String {
        if self.kind == "RuntimeError" && Self::from_classic_text(&self.message).kind == self.kind {
            self.message.clone()
        } else {
            format!("{}: {}", self.kind, self.message)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

/// Returns early with a `ValueError` built from a format string.
#[macro_export]
macro_rules! bail_value {
    ($($arg:tt)*) => { return Err($crate::error::Error::value(format!($($arg)*))) };
}

/// Returns early with a `TypeError` built from a format string.
#[macro_export]
macro_rules! bail_type {
    ($($arg:tt)*) => { return Err($crate::error::Error::type_error(format!($($arg)*))) };
}

/// Fails with a `ValueError` naming `what` when `p` is null.
pub fn non_null<T>(p: *const T, what: &str) -> Result<()> {
    if p.is_null() {
        Err(Error::value(format!("null pointer passed as `{what}`")))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_text_round_trip() {
        let e = Error::from_classic_text("ValueError: shape mismatch");
        assert_eq!(e.kind, "ValueError");
        assert_eq!(e.message, "shape mismatch");
        assert_eq!(e.to_classic_text(), "ValueError: shape mismatch");
        let plain = Error::from_classic_text("boom: it failed");
        assert_eq!(plain.kind, "RuntimeError");
        assert_eq!(plain.to_classic_text(), "boom: it failed");
    }
}
