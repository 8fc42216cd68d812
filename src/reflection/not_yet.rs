//! The global functions tvm-ffi's library registers that tvmrt does not provide yet.
//!
//! Each is registered as a function that raises a `RuntimeError` naming it, so a client that
//! only looks a name up at start-up (tvm-ffi's Python package binds every `ffi.*` global into
//! `tvm_ffi._ffi_api` and reads some of them while defining its classes) loads, and a call fails
//! with a clear message instead of an `AttributeError` far from the cause. Real implementations
//! registered by other modules replace these (they come later in [`crate::builtins::all`]).

use crate::error::Error;
use crate::function::Function;

/// tvm-ffi 0.1.15's `ffi.*` global names that tvmrt does not implement yet.
pub const NOT_YET: &[&str] = &["ffi.VisitErrorContext.FindAccessPaths"];

/// A placeholder for each name of [`NOT_YET`].
pub fn builtins() -> Vec<(&'static str, Function)> {
    NOT_YET
        .iter()
        .map(|&name| {
            let f = Function::from_fn(move |_| {
                Err(Error::runtime(format!(
                    "`{name}` is a tvm-ffi global function that tvmrt does not implement yet"
                )))
            });
            (name, f)
        })
        .collect()
}
