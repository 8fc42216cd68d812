//! The pool size (`TVM_NUM_THREADS`, `OMP_NUM_THREADS`, the core count, or what
//! `set_num_threads` last set) and the hook that reads a failed task's error on its thread.

use std::panic::catch_unwind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use parking_lot::RwLock;

use super::{TaskErrorSource, MAX_THREADS};
use crate::error::{Error, Result};

/// The configured pool size; 0 until first read.
pub(super) static CONFIGURED_THREADS: AtomicUsize = AtomicUsize::new(0);

static ERROR_SOURCE: RwLock<Option<TaskErrorSource>> = RwLock::new(None);

/// The number of threads a launch uses (the launching thread included): set by
/// [`set_num_threads`], else `TVM_NUM_THREADS`, else `OMP_NUM_THREADS`, else the core count.
pub fn num_threads() -> usize {
    match CONFIGURED_THREADS.load(Ordering::Relaxed) {
        0 => {
            let n = default_num_threads();
            // Another thread may have configured a size meanwhile; its value wins.
            match CONFIGURED_THREADS.compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => n,
                Err(current) => current,
            }
        }
        n => n,
    }
}

/// Sets the number of threads later launches use (`--threads`); 0 restores the default from the
/// environment. Launches already running keep their size.
pub fn set_num_threads(n: usize) -> Result<()> {
    if n > MAX_THREADS {
        return Err(Error::value(format!(
            "set_num_threads: {n} threads requested, at most {MAX_THREADS} are supported"
        )));
    }
    let n = if n == 0 { default_num_threads() } else { n };
    CONFIGURED_THREADS.store(n, Ordering::Relaxed);
    Ok(())
}

/// Installs (or removes) the hook that reads a failed task's error message on its own thread.
pub fn set_task_error_source(source: Option<TaskErrorSource>) {
    *ERROR_SOURCE.write() = source;
}

/// The pool size from the environment. TVM reads `TVM_NUM_THREADS`, then `OMP_NUM_THREADS`
/// (`threading_backend.cc`, `MaxConcurrency`); a value that is not a positive integer is skipped
/// here (TVM's `atoi` would turn it into 1).
pub(super) fn default_num_threads() -> usize {
    for var in ["TVM_NUM_THREADS", "OMP_NUM_THREADS"] {
        if let Some(n) = std::env::var(var)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
        {
            return n.min(MAX_THREADS);
        }
    }
    thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(MAX_THREADS)
}

pub(super) fn task_error_detail() -> Option<Error> {
    let source = (*ERROR_SOURCE.read())?;
    // The hook is foreign to the pool; a panic in it must not take a worker down.
    catch_unwind(source).ok().flatten()
}
