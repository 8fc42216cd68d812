//! The parallel pool behind `TVMBackendParallelLaunch` / `TVMBackendParallelBarrier`, and
//! `TVMBackendRunOnce`.
//!
//! Generated kernels split a parallel loop into `num_task` tasks and call
//! `flambda(task_id, penv, cdata)` for each; they read `penv->num_task` to size their slice, so
//! any task count is correct for them, including 1. Facts mirrored from TVM
//! (`src/runtime/thread_pool.cc`, `include/tvm/runtime/c_backend_api.h`):
//! - `num_task == 0` means "one task per pool thread";
//! - the launching thread runs task 0 itself, pool workers run the others (here: the
//!   launching thread claims task 0, and every thread then claims the next task no one has
//!   started, see below);
//! - `penv->sync_handle` is private to the runtime and only handed back to the barrier;
//! - the pool size comes from `TVM_NUM_THREADS`, else `OMP_NUM_THREADS`, else the core count.
//!
//! Where tvmrt differs, on purpose:
//! - One process-wide pool, not one per launching thread. Launches from several application
//!   threads at once are serialized on it (the second waits for the first to finish). A launch
//!   from inside a task (a nested launch, on a worker or on the launching thread) does not touch
//!   the pool: it runs all its tasks inline, one after another, on the calling thread, and
//!   `num_task == 0` there means one task. TVM rejects a launch from a worker outright.
//! - More tasks than threads is allowed (TVM rejects it, and with a one-thread pool runs task 0
//!   alone): each of the P threads runs every P-th task. A barrier in such a launch, or in a
//!   nested launch of several tasks, returns an error instead of deadlocking, since its tasks do
//!   not all run at once.
//! - A task must not wait for another thread that itself launches: that launch waits for the
//!   pool, which the task's own launch holds.
//! - With no `TVM_NUM_THREADS` the pool uses every core the process may run on; TVM halves the
//!   count on x86 to skip hyper-threads.
//! - The barrier spins briefly, then sleeps; a task that returns without reaching a barrier the
//!   others wait at (it failed, or skipped it) releases them with an error rather than hanging.
//! - Tasks are claimed, not assigned: each thread of a launch takes the next task no thread has
//!   started. A worker that is asleep, descheduled by other load, or slow to wake thus never
//!   holds the launch up: the launching thread runs the tasks it has not reached and takes the
//!   launch back from it (a worker that never picked the launch up never touches it). Tasks
//!   that meet at a barrier still each get their own thread, since a thread waiting at the
//!   barrier claims nothing more.
//! - Idle workers spin for [`SPIN_BEFORE_PARK`] after a job, then sleep on a condition variable
//!   (TVM spins 300000 yields before sleeping, more than 100 ms of a core after every launch).
//! - Affinity: see [`super::affinity`] (`runtime.config_threadpool`; the workers start bound to
//!   the big cores, as TVM's do, unless `TVM_BIND_THREADS` is set to something other than 1).
//! - A process forked after the pool started gets a fresh set of workers on its first launch
//!   (unless another thread was in the middle of a launch when it forked).

//!
//! The parts, one file each: `config` (the pool size and the error hook), `barrier`
//! (`TVMBackendParallelBarrier`), `launch` (`TVMBackendParallelLaunch`: one launch, its tasks
//! claimed by every thread of it), `workers` (the process-wide crew of worker threads, their
//! affinity, and a fresh crew after a fork), `run_once` (`TVMBackendRunOnce`), and here the
//! shared types, the pool's global functions and the spin-then-park helper.

mod barrier;
mod config;
mod launch;
mod run_once;
#[cfg(test)]
mod test_support;
mod workers;

pub use barrier::parallel_barrier;
pub use config::{num_threads, set_num_threads, set_task_error_source};
pub use launch::parallel_launch;
pub use run_once::run_once;
pub use workers::{config_threadpool, fork_child_handler, note_fork_in_child, worker_thread_ids};

use std::ffi::c_void;
use std::thread;
use std::time::{Duration, Instant};

use super::affinity;
use crate::error::{Error, Result};

/// `TVMParallelGroupEnv` from `c_backend_api.h`: what every task of one launch shares.
#[repr(C)]
#[derive(Debug)]
pub struct ParallelGroupEnv {
    /// Runtime-private synchronization state, handed back to [`parallel_barrier`].
    pub sync_handle: *mut c_void,
    /// How many tasks this launch really runs (what kernels divide their work by).
    pub num_task: i32,
}

/// `FTVMParallelLambda`: one task of a parallel launch; returns 0 on success.
pub type ParallelLambda =
    unsafe extern "C" fn(task_id: i32, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32;

/// The callback type of `TVMBackendRunOnce`: returns 0 on success.
pub type RunOnceFn = unsafe extern "C" fn(cdata: *mut c_void) -> i32;

/// Reads the error a failed task (or run-once initializer) left on its own thread, e.g. the
/// thread's last-error text set through `TVMAPISetLastError`. Installed by the C door.
pub type TaskErrorSource = fn() -> Option<Error>;

/// Upper bound on the pool size, so a stray `TVM_NUM_THREADS=1000000` cannot spawn a million
/// threads.
pub const MAX_THREADS: usize = 1024;

/// How long an idle worker, a waiting launcher or a barrier waiter polls before it sleeps.
/// Kernels of one model run back to back, so a short spin saves the wake-up latency of a
/// sleeping thread (tens of microseconds) at a bounded CPU cost.
pub const SPIN_BEFORE_PARK: Duration = Duration::from_micros(500);

/// The global functions of the pool: `runtime.config_threadpool`, `runtime.NumThreads` and
/// `tvm.runtime.threading.set_current_thread_affinity`, as TVM registers them.
pub(crate) fn builtins() -> Vec<(&'static str, crate::function::Function)> {
    use crate::function::Function;
    use crate::value::Any;
    vec![
        (
            "runtime.config_threadpool",
            Function::from_fn(|args| {
                if args.len() < 2 || args.len() > 3 {
                    crate::bail_type!(
                        "runtime.config_threadpool expects (mode, nthreads[, cpus]), got {} arguments",
                        args.len()
                    );
                }
                let mode = args[0].expect_i64("mode")?;
                let nthreads = args[1].expect_i64("nthreads")?;
                let cpus = match args.get(2) {
                    None => Vec::new(),
                    Some(v) if v.is_none() => Vec::new(),
                    Some(v) => cpu_list(v)?,
                };
                config_threadpool(mode, nthreads, &cpus)?;
                Ok(Any::none())
            }),
        ),
        (
            "runtime.NumThreads",
            Function::from_fn(|_| Ok(Any::from(num_threads() as i64))),
        ),
        (
            "tvm.runtime.threading.set_current_thread_affinity",
            Function::from_fn(|args| {
                let v = args.first().ok_or_else(|| {
                    Error::type_error("set_current_thread_affinity expects a tuple of CPU ids")
                })?;
                let cpus = cpu_list(v)?;
                let allowed = affinity::allowed_cpus();
                if let Some(bad) = cpus.iter().find(|c| !allowed.contains(c)) {
                    crate::bail_value!(
                        "set_current_thread_affinity: CPU {bad} is not one this process may run on ({allowed:?})"
                    );
                }
                // SAFETY: pthread_self has no preconditions.
                affinity::set_thread_affinity(unsafe { libc::pthread_self() }, &cpus)?;
                Ok(Any::none())
            }),
        ),
    ]
}

/// CPU ids from an array of numeric strings (TVM's `Array<String>`), of ints, or a shape.
fn cpu_list(v: &crate::value::AnyView<'_>) -> Result<Vec<usize>> {
    let mismatch = || v.type_mismatch("cpus", "an array of CPU ids (strings or ints)");
    let obj = v.as_object().ok_or_else(mismatch)?;
    let items: Vec<crate::value::Any> = if let Some(dims) = crate::object::shape::shape_dims(&obj) {
        dims.iter().map(|&d| crate::value::Any::from(d)).collect()
    } else {
        crate::object::containers::array::array_items(&obj)
            .ok_or_else(mismatch)?
            .iter()
            .map(|item| item.to_owned_any())
            .collect()
    };
    items
        .iter()
        .map(|item| {
            let item = item.view();
            let id = if let Some(text) = item.as_str() {
                text.trim().parse::<i64>().map_err(|_| {
                    Error::value(format!(
                        "The CPU core information '{text}' is not a number."
                    ))
                })?
            } else {
                item.expect_i64("cpu id")?
            };
            usize::try_from(id).map_err(|_| Error::value(format!("CPU id {id} is negative")))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Spinning and parking

/// Polls `ready` for up to [`SPIN_BEFORE_PARK`]; true if it turned true in time.
#[inline]
fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    let mut start: Option<Instant> = None;
    let mut i: u32 = 0;
    loop {
        if ready() {
            return true;
        }
        i = i.wrapping_add(1);
        if i < 64 {
            std::hint::spin_loop();
        } else {
            // Yielding lets a descheduled task run when there are more threads than cores.
            thread::yield_now();
            if i.is_multiple_of(16)
                && start.get_or_insert_with(Instant::now).elapsed() > SPIN_BEFORE_PARK
            {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_layout_matches_c() {
        // `typedef struct { void* sync_handle; int32_t num_task; } TVMParallelGroupEnv;`
        let ptr = std::mem::size_of::<*mut c_void>();
        assert_eq!(std::mem::offset_of!(ParallelGroupEnv, num_task), ptr);
        assert_eq!(std::mem::size_of::<ParallelGroupEnv>(), 2 * ptr);
    }
}
