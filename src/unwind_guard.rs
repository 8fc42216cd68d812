//! Keeps panics from unwinding across `extern "C"` functions. Every function tvmrt hands to C
//! runs its body through one of these: the exports (in `capi`, through `ffi_try!`) and the
//! deleters, trampolines and hooks that live beside the types they serve. A panic or an error
//! becomes the thread's raised error and the C status -1 (or the function's fallback value).

use std::any::Any as PanicPayload;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, Result};

fn panic_message(p: Box<dyn PanicPayload + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Raises the error a caught panic in the C function `name` becomes. Out of line and not
/// generic: every export instantiates `run`/`guard`/`run_or` with its own body, and this part
/// would otherwise be copied into each (about 30 KB of the library).
#[cold]
#[inline(never)]
fn raise_panic(name: &'static str, p: Box<dyn PanicPayload + Send>) {
    crate::raised::set_raised(Error::runtime(format!(
        "internal error in {name}: {}",
        panic_message(p)
    )));
}

/// Raises `e` on this thread (out of line, for the same reason as [`raise_panic`]).
#[cold]
#[inline(never)]
fn raise(e: Error) {
    crate::raised::set_raised(e);
}

/// Runs `body` for the C function `name`: 0 on success; -1 with the error raised on this thread
/// on failure or panic.
pub fn run(name: &'static str, body: impl FnOnce() -> Result<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            raise(e);
            -1
        }
        Err(p) => {
            raise_panic(name, p);
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
            raise_panic(name, p);
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
            raise(e);
            fallback
        }
        Err(p) => {
            raise_panic(name, p);
            fallback
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raised::take_raised;

    /// Each boundary catches a panic in its body, returns its failure value and raises the
    /// panic's message as a runtime error naming the C function. (The deployment build that
    /// rebuilds std without its backtrace printer runs these too: `benches/lib_size.sh`.)
    #[test]
    fn a_panic_becomes_the_raised_error() {
        let cases: [(&dyn Fn() -> i32, i32, &str); 3] = [
            (&|| run("TVMFFIRunA", || panic!("boom {}", 1)), -1, "boom 1"),
            (
                &|| guard("TVMFFIGuardB", || panic!("static text")),
                -1,
                "static text",
            ),
            (
                &|| {
                    run_or("TVMFFIRunOrC", -7, || -> Result<i32> {
                        std::panic::panic_any(42_u8)
                    })
                },
                -7,
                "unknown panic payload",
            ),
        ];
        for (call, expected, payload) in cases {
            assert_eq!(call(), expected);
            let e = take_raised().expect("an error is raised");
            assert_eq!(e.kind, "RuntimeError");
            assert!(e.message.ends_with(payload), "{}", e.message);
            assert!(
                e.message.starts_with("internal error in TVMFFI"),
                "{}",
                e.message
            );
        }
        assert_eq!(run("TVMFFIRunD", || Ok(())), 0);
        assert!(take_raised().is_none());
    }

    #[test]
    fn an_error_is_raised_as_it_is() {
        assert_eq!(run("TVMFFIRunE", || Err(Error::value("bad shape"))), -1);
        let e = take_raised().unwrap();
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            ("ValueError", "bad shape")
        );
    }
}
