//! `TVMBackendRunOnce`: an initializer run once per handle, thread-safe and re-entrant.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::thread::{self, ThreadId};

use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex};

use super::config::task_error_detail;
use super::RunOnceFn;
use crate::error::{Error, Result};

/// Handles whose initializer is running, and the thread running it.
static RUN_ONCE_ACTIVE: Lazy<(Mutex<HashMap<usize, ThreadId>>, Condvar)> =
    Lazy::new(|| (Mutex::new(HashMap::new()), Condvar::new()));

/// `TVMBackendRunOnce`: calls `f(cdata)` the first time it is called with `handle` (while
/// `*handle` is null) and then sets `*handle` to a non-null marker. Like TVM
/// (`c_runtime_api.cc`) the handle is marked even when `f` fails, so `f` runs at most once, and
/// a call made from inside `f` for the same handle returns at once. Unlike TVM it is
/// thread-safe: a second thread arriving while `f` runs waits for it to finish.
///
/// # Safety
/// `handle` must be null or point at a pointer-sized, pointer-aligned variable that is only
/// accessed through this function; `f` must be safe to call with `cdata`.
pub unsafe fn run_once(handle: *mut *mut c_void, f: RunOnceFn, cdata: *mut c_void) -> Result<()> {
    if handle.is_null() {
        return Err(Error::value("run_once: the handle pointer is null"));
    }
    // SAFETY: `AtomicPtr` has the layout of a raw pointer; the caller guarantees the variable
    // is valid and only accessed through this function.
    let cell = unsafe { AtomicPtr::from_ptr(handle) };
    if !cell.load(Ordering::Acquire).is_null() {
        return Ok(());
    }
    let key = handle as usize;
    let me = thread::current().id();
    let (active, cv) = &*RUN_ONCE_ACTIVE;
    {
        let mut map = active.lock();
        loop {
            if !cell.load(Ordering::Acquire).is_null() {
                return Ok(());
            }
            match map.get(&key) {
                None => {
                    map.insert(key, me);
                    break;
                }
                // Re-entered from inside `f` on this thread: TVM has already marked the handle
                // at this point, so the nested call does nothing.
                Some(owner) if *owner == me => return Ok(()),
                Some(_) => cv.wait(&mut map),
            }
        }
    }
    // SAFETY: the caller vouched for `f` and `cdata`.
    let code = unsafe { f(cdata) };
    let detail = if code != 0 { task_error_detail() } else { None };
    cell.store(std::ptr::dangling_mut::<c_void>(), Ordering::Release);
    active.lock().remove(&key);
    cv.notify_all();
    if code == 0 {
        return Ok(());
    }
    let message = match &detail {
        Some(e) => format!("run_once: the initializer returned {code}: {}", e.message),
        None => format!("run_once: the initializer returned {code}"),
    };
    Err(Error::new(
        detail.map_or_else(|| "RuntimeError".to_string(), |e| e.kind.clone()),
        message,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::thread_pool::test_support::*;
    use std::ptr;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    // ---- run once ------------------------------------------------------------------------------

    struct Once1 {
        calls: AtomicUsize,
        sleep_ms: u64,
        code: i32,
        reenter: bool,
        handle: *mut *mut c_void,
    }

    unsafe extern "C" fn once_fn(cdata: *mut c_void) -> i32 {
        // SAFETY: `cdata` is the test's `Once1`.
        let o = unsafe { &*(cdata as *const Once1) };
        o.calls.fetch_add(1, Ordering::SeqCst);
        if o.reenter {
            // SAFETY: same handle and closure, re-entered from inside the initializer.
            if unsafe { run_once(o.handle, once_fn, cdata) }.is_err() {
                return -100;
            }
        }
        thread::sleep(Duration::from_millis(o.sleep_ms));
        if o.code != 0 {
            TASK_ERROR.with(|e| *e.borrow_mut() = Some("init failed".into()));
        }
        o.code
    }

    #[test]
    fn run_once_calls_once_across_threads() {
        setup();
        let mut handle: *mut c_void = ptr::null_mut();
        let o = Once1 {
            calls: AtomicUsize::new(0),
            sleep_ms: 50,
            code: 0,
            reenter: false,
            handle: ptr::null_mut(),
        };
        let (h, od) = (
            &mut handle as *mut *mut c_void as usize,
            &o as *const Once1 as usize,
        );
        within(30, move || {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    thread::spawn(move || {
                        // SAFETY: the handle and closure outlive the joined threads.
                        unsafe { run_once(h as *mut *mut c_void, once_fn, od as *mut c_void) }
                            .unwrap();
                        // Nobody returns before the initializer has finished.
                        // SAFETY: as above.
                        let o = unsafe { &*(od as *const Once1) };
                        assert_eq!(o.calls.load(Ordering::SeqCst), 1);
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        });
        assert_eq!(o.calls.load(Ordering::SeqCst), 1);
        assert!(!handle.is_null());
    }

    #[test]
    fn run_once_failure_and_reentry() {
        setup();
        let mut handle: *mut c_void = ptr::null_mut();
        let o = Once1 {
            calls: AtomicUsize::new(0),
            sleep_ms: 0,
            code: -5,
            reenter: false,
            handle: ptr::null_mut(),
        };
        let od = &o as *const Once1 as *mut c_void;
        // SAFETY: handle and closure are live locals.
        let e = unsafe { run_once(&mut handle, once_fn, od) }.unwrap_err();
        assert!(
            e.message.contains("returned -5: init failed"),
            "{}",
            e.message
        );
        // Like TVM, the handle is marked anyway: the initializer is not retried.
        // SAFETY: as above.
        unsafe { run_once(&mut handle, once_fn, od) }.unwrap();
        assert_eq!(o.calls.load(Ordering::SeqCst), 1);

        let mut handle2: *mut c_void = ptr::null_mut();
        let o2 = Once1 {
            calls: AtomicUsize::new(0),
            sleep_ms: 0,
            code: 0,
            reenter: true,
            handle: &mut handle2,
        };
        // SAFETY: as above; the re-entrant call returns at once instead of deadlocking.
        unsafe { run_once(&mut handle2, once_fn, &o2 as *const Once1 as *mut c_void) }.unwrap();
        assert_eq!(o2.calls.load(Ordering::SeqCst), 1);

        // SAFETY: null is allowed and rejected.
        assert!(unsafe { run_once(ptr::null_mut(), once_fn, od) }.is_err());
    }
}
