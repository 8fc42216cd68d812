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

use std::cell::{Cell, UnsafeCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::os::unix::thread::JoinHandleExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex, RwLock};

use super::affinity::{self, AffinityMode};
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

/// Stack size of pool workers: the pthread default on Linux, as TVM's `std::thread`s get.
const WORKER_STACK_BYTES: usize = 8 << 20;

// ---------------------------------------------------------------------------------------------
// Configuration

/// The configured pool size; 0 until first read.
static CONFIGURED_THREADS: AtomicUsize = AtomicUsize::new(0);

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

/// The CPUs pool threads are pinned to, as `runtime.config_threadpool` last decided (at start:
/// the big cores, as TVM's pool binds them, unless `TVM_BIND_THREADS` says otherwise): applied
/// to workers as they are spawned.
struct AffinityState {
    /// CPUs of worker `i + 1`, `None` where left alone.
    workers: Vec<Option<Vec<usize>>>,
}

impl AffinityState {
    fn worker_cpus(&self, index: usize) -> Option<Vec<usize>> {
        self.workers.get(index - 1).cloned().flatten()
    }
}

static AFFINITY: Lazy<RwLock<AffinityState>> = Lazy::new(|| {
    let mut state = AffinityState {
        workers: Vec::new(),
    };
    if affinity::binding_allowed() {
        // Worker i on the i-th big core, as TVM's pool binds them when it starts (its
        // `Configure(kBig, 0)`). A worker that cannot be preempted away from its core keeps the
        // scheduler from stacking the pool's threads on one core of a busy machine.
        let topo = affinity::Topology::detect();
        if let Ok(plan) = affinity::plan(
            &topo,
            AffinityMode::Big,
            0,
            &[],
            default_num_threads(),
            true,
        ) {
            state.workers = plan.workers;
        }
    }
    RwLock::new(state)
});

/// `runtime.config_threadpool(mode, nthreads, cpus)`: TVM's affinity modes (1 big cores, -1
/// little cores, -2 one listed CPU per worker, -3 every thread on all listed CPUs, 0 only the
/// thread count), the thread count later launches use (`nthreads`, 0 for the mode's count;
/// never more than the pool's default size), and the CPUs of the workers (pinned now, and as
/// they are spawned) and of the calling thread, which is the one that runs task 0 of its
/// launches (see [`super::affinity`]). Returns the thread count launches now use.
pub fn config_threadpool(mode: i64, nthreads: i64, cpus: &[usize]) -> Result<usize> {
    let mode = AffinityMode::from_code(mode)?;
    let nthreads = usize::try_from(nthreads).map_err(|_| {
        Error::value(format!(
            "config_threadpool: the thread count must be >= 0 (0: the mode's), got {nthreads}"
        ))
    })?;
    let topo = affinity::Topology::detect();
    let bind = affinity::binding_allowed();
    let pool_threads = default_num_threads();
    let plan = affinity::plan(&topo, mode, nthreads, cpus, pool_threads, bind)?;
    // Lock order: the pool, then the affinity state (as `ensure_workers` takes them).
    let crew = POOL.lock();
    {
        let mut state = AFFINITY.write();
        if mode != AffinityMode::Unchanged {
            state.workers = plan.workers.clone();
        }
    }
    if mode != AffinityMode::Unchanged {
        for (i, worker) in crew.slots.iter().enumerate() {
            if let Some(Some(cpus)) = plan.workers.get(i) {
                affinity::set_thread_affinity(worker.pthread, cpus)?;
            }
        }
    }
    drop(crew);
    if let Some(cpus) = &plan.launcher {
        // SAFETY: pthread_self has no preconditions.
        affinity::set_thread_affinity(unsafe { libc::pthread_self() }, cpus)?;
    }
    CONFIGURED_THREADS.store(plan.threads, Ordering::Relaxed);
    Ok(plan.threads)
}

/// The kernel thread ids of the pool's workers (worker 1 first), starting any that are not
/// running yet up to the configured size: what to read affinities back with
/// (`sched_getaffinity`).
pub fn worker_thread_ids() -> Vec<i32> {
    let threads = num_threads();
    let mut crew = POOL.lock();
    if crew.fork_generation != FORK_GENERATION.load(Ordering::SeqCst) {
        *crew = Crew::new();
    }
    crew.ensure_workers(threads.saturating_sub(1));
    crew.slots
        .iter()
        .map(|w| {
            // A worker records its id first thing; wait for it.
            let start = Instant::now();
            loop {
                let tid = w.tid.load(Ordering::SeqCst);
                if tid != 0 || start.elapsed() > Duration::from_secs(10) {
                    return tid;
                }
                thread::yield_now();
            }
        })
        .collect()
}

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

/// Installs (or removes) the hook that reads a failed task's error message on its own thread.
pub fn set_task_error_source(source: Option<TaskErrorSource>) {
    *ERROR_SOURCE.write() = source;
}

/// The pool size from the environment. TVM reads `TVM_NUM_THREADS`, then `OMP_NUM_THREADS`
/// (`threading_backend.cc`, `MaxConcurrency`); a value that is not a positive integer is skipped
/// here (TVM's `atoi` would turn it into 1).
fn default_num_threads() -> usize {
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

fn task_error_detail() -> Option<Error> {
    let source = (*ERROR_SOURCE.read())?;
    // The hook is foreign to the pool; a panic in it must not take a worker down.
    catch_unwind(source).ok().flatten()
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

// ---------------------------------------------------------------------------------------------
// The barrier

/// Marks a [`Barrier`] so [`parallel_barrier`] can reject a `sync_handle` it did not make.
const BARRIER_MAGIC: u64 = u64::from_le_bytes(*b"tvmrtbar");
/// Set in `Barrier::state` once a task of the launch has returned; low bits count arrivals.
const CLOSED: u64 = 1 << 63;

/// Why the tasks of a launch cannot meet at a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BarrierKind {
    /// Every task has its own thread: a real barrier.
    Concurrent,
    /// A nested launch runs its tasks one after another.
    Nested,
    /// More tasks than threads: some run after others.
    Oversubscribed { threads: usize },
}

/// What `sync_handle` points at: a reusable counting barrier for the tasks of one launch.
#[repr(C)]
struct Barrier {
    /// First field, so it can be checked before the rest is trusted.
    magic: u64,
    num_task: usize,
    kind: BarrierKind,
    /// Arrivals in the current phase, plus [`CLOSED`].
    state: AtomicU64,
    /// Bumped each time all tasks have arrived.
    generation: AtomicU32,
    sleepers: AtomicU32,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Barrier {
    fn new(num_task: usize, kind: BarrierKind) -> Self {
        Barrier {
            magic: BARRIER_MAGIC,
            num_task,
            kind,
            state: AtomicU64::new(0),
            generation: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    fn wait(&self, task_id: usize) -> Result<()> {
        let n = self.num_task;
        if n == 1 {
            return Ok(());
        }
        match self.kind {
            BarrierKind::Concurrent => {}
            BarrierKind::Nested => {
                return Err(Error::runtime(format!(
                    "parallel barrier (task {task_id} of {n}): this launch was made from inside \
                     a parallel task, so its {n} tasks run one after another on one thread and \
                     can never meet at a barrier; launch it with num_task 0 or 1"
                )));
            }
            BarrierKind::Oversubscribed { threads } => {
                return Err(Error::runtime(format!(
                    "parallel barrier (task {task_id} of {n}): the launch asked for {n} tasks but \
                     the pool runs them on {threads} thread(s), so they do not all run at once \
                     and can never meet at a barrier; launch at most {threads} tasks (or \
                     num_task 0)"
                )));
            }
        }
        // This phase cannot end before this task arrives, so the generation read here is the
        // one the last arrival will bump.
        let phase = self.generation.load(Ordering::SeqCst);
        let before = self.state.fetch_add(1, Ordering::SeqCst);
        if before & CLOSED != 0 {
            return Err(self.closed_error(task_id));
        }
        if (before & !CLOSED) as usize + 1 == n {
            // Last arrival: reset the count (keeping CLOSED), then open the next phase. The
            // AcqRel chain through `state` makes every task's writes visible to the others.
            self.state.fetch_sub(n as u64, Ordering::SeqCst);
            self.generation.fetch_add(1, Ordering::SeqCst);
            self.wake_sleepers();
            return Ok(());
        }
        let outcome = || -> Option<Result<()>> {
            if self.generation.load(Ordering::SeqCst) != phase {
                return Some(Ok(()));
            }
            if self.state.load(Ordering::SeqCst) & CLOSED != 0 {
                // A task that returned after this phase ended can close the barrier before this
                // waiter saw the new generation, so look again.
                return Some(if self.generation.load(Ordering::SeqCst) != phase {
                    Ok(())
                } else {
                    Err(self.closed_error(task_id))
                });
            }
            None
        };
        let mut result = None;
        if spin_until(|| {
            result = outcome();
            result.is_some()
        }) {
            return result.unwrap_or(Ok(()));
        }
        let mut guard = self.lock.lock();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            if let Some(r) = outcome() {
                break r;
            }
            self.cv.wait(&mut guard);
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Called whenever a task returns: it will not arrive at any later barrier, so tasks waiting
    /// at one (or arriving later) are released with an error instead of waiting forever.
    fn depart(&self) {
        if self.num_task == 1 || self.kind != BarrierKind::Concurrent {
            return;
        }
        let before = self.state.fetch_or(CLOSED, Ordering::SeqCst);
        if before & !CLOSED != 0 {
            self.wake_sleepers();
        }
    }

    fn wake_sleepers(&self) {
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            let _guard = self.lock.lock();
            self.cv.notify_all();
        }
    }

    fn closed_error(&self, task_id: usize) -> Error {
        Error::runtime(format!(
            "parallel barrier (task {task_id} of {}): another task of this launch returned \
             without reaching the barrier (it failed or skipped it), so the barrier can never \
             complete",
            self.num_task
        ))
    }
}

/// `TVMBackendParallelBarrier`: waits until every task of the launch `penv` belongs to has
/// reached this barrier. Writes made before it by any task are visible to all after it.
///
/// # Safety
/// `penv` must be null or the environment pointer a task of a launch still running received.
pub unsafe fn parallel_barrier(task_id: i32, penv: *mut ParallelGroupEnv) -> Result<()> {
    if penv.is_null() {
        return Err(Error::value(
            "parallel barrier: the group environment is null",
        ));
    }
    // SAFETY: non-null, and by the caller's contract a live environment of a running launch.
    let (sync, num_task) = unsafe { ((*penv).sync_handle, (*penv).num_task) };
    let barrier = sync as *const Barrier;
    if barrier.is_null() {
        return Err(Error::value(
            "parallel barrier: the group environment has no sync handle (it was not made by \
             this runtime's parallel launch)",
        ));
    }
    // SAFETY: a launch's sync handle points at its `Barrier`, whose first field is the magic;
    // it is only trusted further once the magic matches.
    if unsafe { (*barrier).magic } != BARRIER_MAGIC {
        return Err(Error::value(
            "parallel barrier: the sync handle was not made by this runtime's parallel launch",
        ));
    }
    // SAFETY: checked above; the barrier lives until every task of its launch has returned.
    let barrier = unsafe { &*barrier };
    if usize::try_from(num_task).ok() != Some(barrier.num_task) {
        return Err(Error::value(format!(
            "parallel barrier: penv->num_task is {num_task} but the launch runs {} tasks",
            barrier.num_task
        )));
    }
    let task = match usize::try_from(task_id) {
        Ok(t) if t < barrier.num_task => t,
        _ => {
            return Err(Error::index(format!(
                "parallel barrier: task id {task_id} is out of range for a launch of {} tasks",
                barrier.num_task
            )));
        }
    };
    barrier.wait(task)
}

// ---------------------------------------------------------------------------------------------
// One launch

struct Failure {
    task: usize,
    code: i32,
    detail: Option<Error>,
}

/// Everything the tasks of one launch share. It lives on the launching thread's stack; the
/// launcher does not return before every worker that picked the launch up has decremented
/// `pending`, and a worker does not touch the job after that.
struct Job {
    f: ParallelLambda,
    cdata: *mut c_void,
    num_task: usize,
    env: UnsafeCell<ParallelGroupEnv>,
    barrier: Barrier,
    /// The next task no thread has claimed; every thread of the launch claims from it.
    next_task: AtomicUsize,
    /// Workers the launch was posted to that may still use the job: each decrements it once it
    /// is done with the job, and the launcher for each posting it takes back unseen.
    pending: AtomicUsize,
    failures: Mutex<Vec<Failure>>,
}

impl Job {
    /// Built in place by the caller so that `env.sync_handle` can point into it.
    fn init(
        slot: &mut Option<Job>,
        f: ParallelLambda,
        cdata: *mut c_void,
        num_task: usize,
        posted: usize,
        kind: BarrierKind,
    ) -> &Job {
        let job: &Job = slot.insert(Job {
            f,
            cdata,
            num_task,
            env: UnsafeCell::new(ParallelGroupEnv {
                sync_handle: ptr::null_mut(),
                // `num_task` was checked to fit an i32 by the caller.
                num_task: num_task as i32,
            }),
            barrier: Barrier::new(num_task, kind),
            next_task: AtomicUsize::new(0),
            pending: AtomicUsize::new(posted),
            failures: Mutex::new(Vec::new()),
        });
        let sync = &job.barrier as *const Barrier as *mut c_void;
        // SAFETY: no task has been started yet, so nothing else accesses `env`.
        unsafe { (*job.env.get()).sync_handle = sync };
        job
    }

    /// Claims and runs tasks until none is left.
    fn run_tasks(&self) {
        loop {
            let task = self.next_task.fetch_add(1, Ordering::AcqRel);
            if task >= self.num_task {
                return;
            }
            // SAFETY: the launch's caller vouched that `f` may be called with `cdata` for every
            // task id below `num_task`, from any thread; `env` outlives the call.
            let code = unsafe { (self.f)(task as i32, self.env.get(), self.cdata) };
            if code != 0 {
                let detail = task_error_detail();
                self.failures.lock().push(Failure { task, code, detail });
            }
            self.barrier.depart();
        }
    }

    /// Runs tasks with this thread marked as inside a task, so that a launch from a task runs
    /// inline. A panic (only possible in tvmrt's own code or the error hook; task functions
    /// are C and do not unwind) becomes a failure of the launch.
    fn run_tasks_guarded(&self) {
        let outer = IN_TASK.with(|c| c.replace(true));
        let ran = catch_unwind(AssertUnwindSafe(|| self.run_tasks()));
        IN_TASK.with(|c| c.set(outer));
        if ran.is_err() {
            self.failures.lock().push(Failure {
                task: usize::MAX,
                code: -1,
                detail: Some(Error::runtime("tvmrt's parallel pool panicked")),
            });
        }
    }

    fn into_result(self) -> Result<()> {
        let mut failures = self.failures.into_inner();
        if failures.is_empty() {
            return Ok(());
        }
        failures.sort_by_key(|f| f.task);
        let kind = failures
            .iter()
            .find_map(|f| f.detail.as_ref().map(|e| e.kind.clone()))
            .unwrap_or_else(|| "RuntimeError".to_string());
        let parts: Vec<String> = failures
            .iter()
            .map(|f| match &f.detail {
                Some(e) if f.task == usize::MAX => e.message.clone(),
                Some(e) => format!("task {} returned {}: {}", f.task, f.code, e.message),
                None => format!("task {} returned {}", f.task, f.code),
            })
            .collect();
        Err(Error::new(
            kind,
            format!(
                "parallel launch of {} tasks failed: {}",
                self.num_task,
                parts.join("; ")
            ),
        ))
    }
}

thread_local! {
    /// True while this thread runs a task of some launch (always, on pool workers).
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

// ---------------------------------------------------------------------------------------------
// The pool

/// One worker's mailbox, on its own cache line so workers do not slow each other down.
#[repr(align(64))]
struct WorkerSlot {
    /// The job to run: set by the launcher when null; taken (reset to null) by the worker, or
    /// by the launcher if the worker has not taken it by the time every task is claimed.
    job: AtomicPtr<Job>,
    sleeping: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
    /// The worker's thread (for affinity), and its kernel thread id once it has started.
    pthread: libc::pthread_t,
    tid: AtomicI32,
}

impl WorkerSlot {
    fn post(&self, job: *const Job) {
        self.job.store(job as *mut Job, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            let _guard = self.lock.lock();
            self.cv.notify_one();
        }
    }

    /// Takes back a posting the worker has not picked up; false if it has.
    fn retract(&self, job: *const Job) -> bool {
        self.job
            .compare_exchange(
                job as *mut Job,
                ptr::null_mut(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Waits for a job and takes it: spins for [`SPIN_BEFORE_PARK`], then sleeps until a
    /// launch wakes it. A launch that finished before this worker woke has taken its job back;
    /// the worker then spins again rather than sleeping at once, so that when launches come
    /// back to back (a model's kernels) it is awake for the next one.
    fn take(&self) -> *const Job {
        loop {
            let mut job = ptr::null_mut();
            if !spin_until(|| {
                job = self.job.load(Ordering::Acquire);
                !job.is_null()
            }) {
                let mut guard = self.lock.lock();
                self.sleeping.store(true, Ordering::SeqCst);
                job = self.job.load(Ordering::SeqCst);
                if job.is_null() {
                    self.cv.wait(&mut guard);
                    job = self.job.load(Ordering::SeqCst);
                }
                self.sleeping.store(false, Ordering::SeqCst);
                if job.is_null() {
                    continue;
                }
            }
            // The launcher may have taken it back meanwhile; then wait for the next one.
            if self
                .job
                .compare_exchange(job, ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return job;
            }
        }
    }
}

/// Where the launcher sleeps while workers finish. Shared with the workers (not part of the
/// job) because the last worker touches it after the launcher may already have returned.
struct DoneSignal {
    waiting: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

/// The workers of the pool, replaced as a whole after a fork.
struct Crew {
    slots: Vec<Arc<WorkerSlot>>,
    done: Arc<DoneSignal>,
    fork_generation: u64,
}

impl Crew {
    fn new() -> Self {
        Crew {
            slots: Vec::new(),
            done: Arc::new(DoneSignal {
                waiting: AtomicBool::new(false),
                lock: Mutex::new(()),
                cv: Condvar::new(),
            }),
            fork_generation: FORK_GENERATION.load(Ordering::SeqCst),
        }
    }

    /// Grows the crew to `want` workers; a thread that cannot be spawned leaves it smaller.
    /// New workers get the CPUs the current affinity plan gives them.
    fn ensure_workers(&mut self, want: usize) {
        while self.slots.len() < want {
            let index = self.slots.len() + 1;
            let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Arc<WorkerSlot>>(1);
            let done = self.done.clone();
            let spawned = thread::Builder::new()
                .name(format!("tvmrt-worker-{index}"))
                .stack_size(WORKER_STACK_BYTES)
                .spawn(move || {
                    // The slot comes once the spawner knows this thread's handle.
                    if let Ok(slot) = ready_rx.recv() {
                        worker_main(&slot, &done);
                    }
                });
            let Ok(handle) = spawned else { break };
            let slot = Arc::new(WorkerSlot {
                job: AtomicPtr::new(ptr::null_mut()),
                sleeping: AtomicBool::new(false),
                lock: Mutex::new(()),
                cv: Condvar::new(),
                pthread: handle.as_pthread_t(),
                tid: AtomicI32::new(0),
            });
            if let Some(cpus) = AFFINITY.read().worker_cpus(index) {
                // Best effort, as in TVM: a worker that cannot be pinned still works.
                let _ = affinity::set_thread_affinity(slot.pthread, &cpus);
            }
            if ready_tx.send(slot.clone()).is_err() {
                break;
            }
            self.slots.push(slot);
        }
    }
}

/// Bumped in a forked child: the workers of the parent do not exist there.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Records that this process is a fork's child (run by [`fork_child_handler`]; only an atomic
/// add, async-signal-safe).
pub fn note_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// The process-wide pool. Its lock is held for the whole of a launch, which is what serializes
/// launches from different application threads.
static POOL: Lazy<Mutex<Crew>> = Lazy::new(|| {
    // SAFETY: registers a handler that only does an atomic add (async-signal-safe).
    unsafe {
        libc::pthread_atfork(None, None, Some(fork_child_handler));
    }
    Mutex::new(Crew::new())
});

fn worker_main(slot: &WorkerSlot, done: &DoneSignal) {
    IN_TASK.with(|c| c.set(true));
    // SAFETY: gettid has no preconditions.
    slot.tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
    loop {
        let job = slot.take();
        // SAFETY: the launcher keeps the job alive until `pending` reaches zero, which this
        // worker's decrement below is part of; the job is not touched after it.
        let job = unsafe { &*job };
        job.run_tasks_guarded();
        if job.pending.fetch_sub(1, Ordering::SeqCst) == 1 && done.waiting.load(Ordering::SeqCst) {
            let _guard = done.lock.lock();
            done.cv.notify_one();
        }
    }
}

/// `TVMBackendParallelLaunch`: runs `f(task_id, penv, cdata)` for `task_id` in `0..n` and
/// returns when all have returned. `num_task` 0 means one task per pool thread (one task in a
/// nested launch). A task returning nonzero makes the launch an error naming the task, with the
/// message the error hook finds on its thread.
///
/// # Safety
/// `f` must be safe to call with `cdata` and any task id of the launch, from any thread and
/// concurrently with the other tasks.
pub unsafe fn parallel_launch(f: ParallelLambda, cdata: *mut c_void, num_task: i32) -> Result<()> {
    let requested = usize::try_from(num_task).map_err(|_| {
        Error::value(format!(
            "parallel launch: num_task must be >= 0 (0 = one task per thread), got {num_task}"
        ))
    })?;
    let mut slot = None;
    if IN_TASK.with(Cell::get) {
        // Nested: run every task here, in order. The pool is busy with the outer launch (whose
        // tasks may be waiting on this one), so using it could deadlock.
        let num_task = requested.max(1);
        Job::init(&mut slot, f, cdata, num_task, 0, BarrierKind::Nested).run_tasks_guarded();
        return slot.take().map_or(Ok(()), Job::into_result);
    }
    let threads = num_threads();
    let num_task = if requested == 0 { threads } else { requested };
    if num_task == 1 || threads == 1 {
        // Nothing to share out: no need to wake (or wait for) the pool.
        let kind = BarrierKind::Oversubscribed { threads: 1 };
        Job::init(&mut slot, f, cdata, num_task, 0, kind).run_tasks_guarded();
        return slot.take().map_or(Ok(()), Job::into_result);
    }

    let mut crew = POOL.lock();
    if crew.fork_generation != FORK_GENERATION.load(Ordering::SeqCst) {
        // The parent's workers did not survive the fork; their slots are abandoned.
        *crew = Crew::new();
    }
    crew.ensure_workers(threads - 1);
    // The crew may be larger than configured (after `set_num_threads` lowered the size) or
    // smaller (a worker could not be spawned).
    let threads = threads.min(crew.slots.len() + 1).min(num_task);
    let kind = if num_task > threads {
        BarrierKind::Oversubscribed { threads }
    } else {
        BarrierKind::Concurrent
    };
    let posted = &crew.slots[..threads - 1];
    let job = Job::init(&mut slot, f, cdata, num_task, posted.len(), kind);
    for worker in posted {
        worker.post(job);
    }
    job.run_tasks_guarded();
    // Every task is claimed: postings no worker has picked up are taken back (those workers
    // never see the job), and the launch waits only for the workers that did.
    let unseen = posted.iter().filter(|w| w.retract(job)).count();
    if unseen > 0 {
        job.pending.fetch_sub(unseen, Ordering::SeqCst);
    }
    wait_for_workers(job, &crew.done);
    drop(crew);
    // Every worker is done with the job: it can be moved out now.
    slot.take().map_or(Ok(()), Job::into_result)
}

fn wait_for_workers(job: &Job, done: &DoneSignal) {
    if spin_until(|| job.pending.load(Ordering::Acquire) == 0) {
        return;
    }
    let mut guard = done.lock.lock();
    done.waiting.store(true, Ordering::SeqCst);
    while job.pending.load(Ordering::SeqCst) != 0 {
        done.cv.wait(&mut guard);
    }
    done.waiting.store(false, Ordering::Relaxed);
}

// ---------------------------------------------------------------------------------------------
// Run once

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

/// The `pthread_atfork` child handler of the parallel pool: the parent's workers do not exist
/// in a forked child. Only an atomic add: nothing here can panic or allocate.
pub extern "C" fn fork_child_handler() {
    note_fork_in_child();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::sync::atomic::AtomicI64;
    use std::sync::{mpsc, Once};

    /// Tests that change the pool size or measure CPU time take this for writing; the others
    /// share it. Every test sees a 4-thread pool.
    static CONFIG: RwLock<()> = RwLock::new(());
    const TEST_THREADS: usize = 4;

    thread_local! {
        static TASK_ERROR: RefCell<Option<String>> = const { RefCell::new(None) };
    }

    fn test_error_source() -> Option<Error> {
        TASK_ERROR
            .with(|e| e.borrow_mut().take())
            .map(|t| Error::from_classic_text(&t))
    }

    fn setup() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            set_num_threads(TEST_THREADS).unwrap();
            set_task_error_source(Some(test_error_source));
        });
    }

    fn shared() -> parking_lot::RwLockReadGuard<'static, ()> {
        setup();
        CONFIG.read()
    }

    fn exclusive() -> parking_lot::RwLockWriteGuard<'static, ()> {
        setup();
        CONFIG.write()
    }

    /// Runs `f` on its own thread and fails the test if it takes longer than `secs`, so a
    /// deadlock is a failure rather than a hung test run.
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(secs))
            .expect("timed out: the pool deadlocked or hung")
    }

    fn launch<T>(f: ParallelLambda, data: &T, num_task: i32) -> Result<()> {
        // SAFETY: the test task functions only read `data` (as `&T`) and shared atomics.
        unsafe { parallel_launch(f, data as *const T as *mut c_void, num_task) }
    }

    // ---- each task writes its slice, barrier, reads everyone's slices ----------------------

    const PER_TASK: usize = 257;

    struct Slices {
        data: *mut u64,
        max_tasks: usize,
        runs: Vec<AtomicUsize>,
        seen_num_task: AtomicI64,
        bad: AtomicUsize,
    }

    impl Slices {
        fn new(buf: &mut [u64], max_tasks: usize) -> Self {
            assert!(buf.len() >= max_tasks * PER_TASK);
            Slices {
                data: buf.as_mut_ptr(),
                max_tasks,
                runs: (0..max_tasks).map(|_| AtomicUsize::new(0)).collect(),
                seen_num_task: AtomicI64::new(-1),
                bad: AtomicUsize::new(0),
            }
        }
        fn runs(&self) -> Vec<usize> {
            self.runs.iter().map(|r| r.load(Ordering::SeqCst)).collect()
        }
    }

    fn value(round: usize, task: usize, i: usize) -> u64 {
        ((round as u64) << 40) | ((task as u64) << 20) | i as u64
    }

    unsafe extern "C" fn slice_task(
        task: i32,
        penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: `cdata` is the `Slices` the test launched with; `penv` is the launch's env.
        let (s, n) = unsafe { (&*(cdata as *const Slices), (*penv).num_task as usize) };
        let t = task as usize;
        if n > s.max_tasks || t >= n {
            s.bad.fetch_add(1, Ordering::SeqCst);
            return -1;
        }
        s.seen_num_task.store(n as i64, Ordering::SeqCst);
        s.runs[t].fetch_add(1, Ordering::SeqCst);
        for round in 0..3 {
            for i in 0..PER_TASK {
                // SAFETY: each task writes only its own slice of the buffer.
                unsafe { *s.data.add(t * PER_TASK + i) = value(round, t, i) };
            }
            // SAFETY: `penv` is this launch's environment.
            if unsafe { parallel_barrier(task, penv) }.is_err() {
                s.bad.fetch_add(1, Ordering::SeqCst);
                return -2;
            }
            for other in 0..n {
                for i in 0..PER_TASK {
                    // SAFETY: every slice was written before the barrier and is not written
                    // again until after the next one.
                    let v = unsafe { *s.data.add(other * PER_TASK + i) };
                    if v != value(round, other, i) {
                        s.bad.fetch_add(1, Ordering::SeqCst);
                        return -3;
                    }
                }
            }
            // SAFETY: as above.
            if unsafe { parallel_barrier(task, penv) }.is_err() {
                s.bad.fetch_add(1, Ordering::SeqCst);
                return -4;
            }
        }
        0
    }

    #[test]
    fn tasks_share_slices_across_barriers() {
        let _g = shared();
        within(60, || {
            for num_task in [2, 3, 4] {
                let mut buf = vec![0u64; 4 * PER_TASK];
                let s = Slices::new(&mut buf, 4);
                launch(slice_task, &s, num_task).unwrap();
                assert_eq!(s.bad.load(Ordering::SeqCst), 0);
                let mut expect = vec![1; num_task as usize];
                expect.resize(4, 0);
                assert_eq!(s.runs(), expect);
                assert_eq!(s.seen_num_task.load(Ordering::SeqCst), num_task as i64);
            }
        });
    }

    #[test]
    fn num_task_zero_uses_the_pool_size() {
        let _g = shared();
        within(60, || {
            let mut buf = vec![0u64; TEST_THREADS * PER_TASK];
            let s = Slices::new(&mut buf, TEST_THREADS);
            launch(slice_task, &s, 0).unwrap();
            assert_eq!(s.bad.load(Ordering::SeqCst), 0);
            assert_eq!(s.runs(), vec![1; TEST_THREADS]);
            assert_eq!(s.seen_num_task.load(Ordering::SeqCst), TEST_THREADS as i64);
        });
    }

    #[test]
    fn repeated_launches_are_correct() {
        let _g = shared();
        within(120, || {
            let mut buf = vec![0u64; TEST_THREADS * PER_TASK];
            let s = Slices::new(&mut buf, TEST_THREADS);
            for i in 0..300 {
                launch(slice_task, &s, 0).unwrap();
                assert_eq!(s.bad.load(Ordering::SeqCst), 0, "launch {i}");
            }
            assert_eq!(s.runs(), vec![300; TEST_THREADS]);
        });
    }

    #[test]
    fn negative_num_task_is_an_error() {
        let _g = shared();
        let mut buf = vec![0u64; PER_TASK];
        let s = Slices::new(&mut buf, 1);
        let e = launch(slice_task, &s, -2).unwrap_err();
        assert_eq!(e.kind, "ValueError");
        assert!(e.message.contains("-2"), "{}", e.message);
        assert_eq!(s.runs(), vec![0]);
    }

    // ---- counting tasks ----------------------------------------------------------------------

    struct Count {
        runs: Vec<AtomicUsize>,
        barrier_errors: AtomicUsize,
        num_task_seen: AtomicI64,
        call_barrier: bool,
    }

    impl Count {
        fn new(n: usize, call_barrier: bool) -> Self {
            Count {
                runs: (0..n).map(|_| AtomicUsize::new(0)).collect(),
                barrier_errors: AtomicUsize::new(0),
                num_task_seen: AtomicI64::new(-1),
                call_barrier,
            }
        }
        fn runs(&self) -> Vec<usize> {
            self.runs.iter().map(|r| r.load(Ordering::SeqCst)).collect()
        }
    }

    unsafe extern "C" fn count_task(
        task: i32,
        penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: `cdata` is the test's `Count`, `penv` the launch's env.
        let c = unsafe { &*(cdata as *const Count) };
        // SAFETY: as above.
        c.num_task_seen
            .store(unsafe { (*penv).num_task } as i64, Ordering::SeqCst);
        c.runs[task as usize].fetch_add(1, Ordering::SeqCst);
        // SAFETY: as above.
        if c.call_barrier && unsafe { parallel_barrier(task, penv) }.is_err() {
            c.barrier_errors.fetch_add(1, Ordering::SeqCst);
        }
        0
    }

    #[test]
    fn more_tasks_than_threads_all_run_and_a_barrier_errs() {
        let _g = shared();
        within(60, || {
            let c = Count::new(10, false);
            launch(count_task, &c, 10).unwrap();
            assert_eq!(c.runs(), vec![1; 10]);
            assert_eq!(c.num_task_seen.load(Ordering::SeqCst), 10);
            let c = Count::new(10, true);
            launch(count_task, &c, 10).unwrap();
            assert_eq!(c.runs(), vec![1; 10]);
            assert_eq!(c.barrier_errors.load(Ordering::SeqCst), 10);
        });
    }

    #[test]
    fn single_task_runs_on_the_caller() {
        let _g = shared();
        let c = Count::new(1, true);
        launch(count_task, &c, 1).unwrap();
        assert_eq!(c.runs(), vec![1]);
        assert_eq!(c.barrier_errors.load(Ordering::SeqCst), 0);
        assert_eq!(c.num_task_seen.load(Ordering::SeqCst), 1);
    }

    // ---- errors --------------------------------------------------------------------------------

    unsafe extern "C" fn failing_task(
        task: i32,
        penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: `cdata` is the test's `Count`, `penv` the launch's env.
        let c = unsafe { &*(cdata as *const Count) };
        c.runs[task as usize].fetch_add(1, Ordering::SeqCst);
        if task == 2 {
            TASK_ERROR.with(|e| *e.borrow_mut() = Some("ValueError: slice 2 is bad".into()));
            return -7;
        }
        // The others wait at a barrier task 2 never reaches: they must be released.
        // SAFETY: as above.
        if c.call_barrier && unsafe { parallel_barrier(task, penv) }.is_err() {
            c.barrier_errors.fetch_add(1, Ordering::SeqCst);
        }
        0
    }

    #[test]
    fn a_failing_task_is_reported_by_id() {
        let _g = shared();
        within(60, || {
            let c = Count::new(4, false);
            let e = launch(failing_task, &c, 4).unwrap_err();
            assert_eq!(e.kind, "ValueError");
            assert!(
                e.message.contains("task 2 returned -7: slice 2 is bad"),
                "{}",
                e.message
            );
            assert_eq!(c.runs(), vec![1; 4]);
            // The pool still works afterwards.
            let c = Count::new(4, true);
            launch(count_task, &c, 4).unwrap();
            assert_eq!(c.runs(), vec![1; 4]);
        });
    }

    #[test]
    fn a_failing_task_releases_barrier_waiters() {
        let _g = shared();
        within(60, || {
            let c = Count::new(4, true);
            let e = launch(failing_task, &c, 4).unwrap_err();
            assert!(e.message.contains("task 2 returned -7"), "{}", e.message);
            assert_eq!(c.barrier_errors.load(Ordering::SeqCst), 3);
            // Inline (more tasks than threads) failures are reported the same way.
            let c = Count::new(8, false);
            let e = launch(failing_task, &c, 8).unwrap_err();
            assert!(e.message.contains("task 2 returned -7"), "{}", e.message);
            assert_eq!(c.runs(), vec![1; 8]);
        });
    }

    // ---- nested launches ---------------------------------------------------------------------

    thread_local! {
        static INNER_RUNS: Cell<usize> = const { Cell::new(0) };
    }

    struct Nest {
        inner_num_task: i32,
        inner_seen: AtomicI64,
        inner_barrier_ok: AtomicUsize,
        inner_barrier_err: AtomicUsize,
        outer_ok: AtomicUsize,
    }

    unsafe extern "C" fn inner_task(
        _task: i32,
        penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: `cdata` is the test's `Nest`, `penv` the launch's env.
        let n = unsafe { &*(cdata as *const Nest) };
        INNER_RUNS.with(|r| r.set(r.get() + 1));
        // SAFETY: as above.
        n.inner_seen
            .store(unsafe { (*penv).num_task } as i64, Ordering::SeqCst);
        // SAFETY: as above.
        match unsafe { parallel_barrier(_task, penv) } {
            Ok(()) => n.inner_barrier_ok.fetch_add(1, Ordering::SeqCst),
            Err(_) => n.inner_barrier_err.fetch_add(1, Ordering::SeqCst),
        };
        0
    }

    unsafe extern "C" fn outer_task(
        _task: i32,
        _penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: `cdata` is the test's `Nest`.
        let n = unsafe { &*(cdata as *const Nest) };
        let before = INNER_RUNS.with(Cell::get);
        // SAFETY: `inner_task` only reads the shared `Nest`.
        if unsafe { parallel_launch(inner_task, cdata, n.inner_num_task) }.is_err() {
            return -1;
        }
        let ran_here = INNER_RUNS.with(Cell::get) - before;
        let expected = n.inner_num_task.max(1) as usize;
        if ran_here == expected {
            n.outer_ok.fetch_add(1, Ordering::SeqCst);
        }
        0
    }

    #[test]
    fn nested_launch_runs_inline() {
        let _g = shared();
        within(60, || {
            // num_task 0 inside a task: one task, penv->num_task 1, the barrier passes.
            let n = Nest {
                inner_num_task: 0,
                inner_seen: AtomicI64::new(-1),
                inner_barrier_ok: AtomicUsize::new(0),
                inner_barrier_err: AtomicUsize::new(0),
                outer_ok: AtomicUsize::new(0),
            };
            launch(outer_task, &n, 4).unwrap();
            assert_eq!(n.outer_ok.load(Ordering::SeqCst), 4);
            assert_eq!(n.inner_seen.load(Ordering::SeqCst), 1);
            assert_eq!(n.inner_barrier_ok.load(Ordering::SeqCst), 4);
            assert_eq!(n.inner_barrier_err.load(Ordering::SeqCst), 0);
            // num_task 3 inside a task: all three run here in turn; a barrier errs, no hang.
            let n = Nest {
                inner_num_task: 3,
                inner_seen: AtomicI64::new(-1),
                inner_barrier_ok: AtomicUsize::new(0),
                inner_barrier_err: AtomicUsize::new(0),
                outer_ok: AtomicUsize::new(0),
            };
            launch(outer_task, &n, 0).unwrap();
            assert_eq!(n.outer_ok.load(Ordering::SeqCst), TEST_THREADS);
            assert_eq!(n.inner_seen.load(Ordering::SeqCst), 3);
            assert_eq!(n.inner_barrier_ok.load(Ordering::SeqCst), 0);
            assert_eq!(n.inner_barrier_err.load(Ordering::SeqCst), 3 * TEST_THREADS);
        });
    }

    // ---- concurrency from several application threads ------------------------------------------

    #[test]
    fn launches_from_four_threads_at_once() {
        let _g = shared();
        within(120, || {
            let handles: Vec<_> = (0..4)
                .map(|k| {
                    thread::spawn(move || {
                        let mut buf = vec![0u64; TEST_THREADS * PER_TASK];
                        let s = Slices::new(&mut buf, TEST_THREADS);
                        let launches = 150;
                        for _ in 0..launches {
                            // Mix pool-wide launches with smaller ones.
                            let num_task = if k % 2 == 0 { 0 } else { 2 };
                            launch(slice_task, &s, num_task).unwrap();
                        }
                        assert_eq!(s.bad.load(Ordering::SeqCst), 0);
                        let total: usize = s.runs().iter().sum();
                        let per = if k % 2 == 0 { TEST_THREADS } else { 2 };
                        assert_eq!(total, launches * per);
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        });
    }

    // ---- configuration and idleness ----------------------------------------------------------

    #[test]
    fn set_num_threads_applies_to_later_launches() {
        let _g = exclusive();
        within(60, || {
            set_num_threads(2).unwrap();
            assert_eq!(num_threads(), 2);
            let c = Count::new(8, false);
            launch(count_task, &c, 0).unwrap();
            assert_eq!(c.runs(), vec![1, 1, 0, 0, 0, 0, 0, 0]);
            // An explicit count above the (lowered) size runs on 2 threads, not on all the
            // workers spawned earlier: a barrier then errs.
            let c = Count::new(4, true);
            launch(count_task, &c, 4).unwrap();
            assert_eq!(c.runs(), vec![1; 4]);
            assert_eq!(c.barrier_errors.load(Ordering::SeqCst), 4);
            set_num_threads(1).unwrap();
            let c = Count::new(8, true);
            launch(count_task, &c, 0).unwrap();
            assert_eq!(c.runs(), vec![1, 0, 0, 0, 0, 0, 0, 0]);
            assert_eq!(c.barrier_errors.load(Ordering::SeqCst), 0);
            let e = set_num_threads(MAX_THREADS + 1).unwrap_err();
            assert!(e.message.contains("at most"), "{}", e.message);
            set_num_threads(0).unwrap();
            assert_eq!(num_threads(), default_num_threads());
            set_num_threads(TEST_THREADS).unwrap();
            assert_eq!(num_threads(), TEST_THREADS);
        });
    }

    /// CPU time the pool's worker threads (named `tvmrt-worker-N`) have used, from
    /// `/proc/self/task/*/stat`: other tests running in this process at the same time do not
    /// count.
    fn workers_cpu_time() -> Duration {
        // SAFETY: sysconf has no preconditions.
        let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        let mut ticks = 0u64;
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if !comm.starts_with("tvmrt-worker") {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                continue; // the thread ended
            };
            // Fields after the parenthesized name: state is field 3, utime 14, stime 15.
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            let fields: Vec<&str> = rest.split(' ').collect();
            ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        }
        Duration::from_millis(ticks * 1000 / ticks_per_s)
    }

    #[test]
    fn idle_workers_sleep() {
        let _g = exclusive();
        let mut buf = vec![0u64; TEST_THREADS * PER_TASK];
        let s = Slices::new(&mut buf, TEST_THREADS);
        launch(slice_task, &s, 0).unwrap();
        let before = workers_cpu_time();
        thread::sleep(Duration::from_millis(200));
        let used = workers_cpu_time() - before;
        // Three workers spinning all along would burn far more than this.
        assert!(
            used < Duration::from_millis(40),
            "idle pool used {used:?} of CPU in 200 ms"
        );
        // And sleeping workers wake up for the next launch.
        within(30, move || {
            let mut buf = vec![0u64; TEST_THREADS * PER_TASK];
            let s = Slices::new(&mut buf, TEST_THREADS);
            launch(slice_task, &s, 0).unwrap();
            assert_eq!(s.runs(), vec![1; TEST_THREADS]);
        });
    }

    thread_local! {
        /// Tasks run on this thread.
        static RAN_HERE: Cell<usize> = const { Cell::new(0) };
    }

    unsafe extern "C" fn tally_task(
        task: i32,
        _penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: `cdata` is the test's `Count`.
        let c = unsafe { &*(cdata as *const Count) };
        c.runs[task as usize].fetch_add(1, Ordering::SeqCst);
        RAN_HERE.with(|r| r.set(r.get() + 1));
        0
    }

    #[test]
    fn launches_do_not_wait_for_sleeping_workers() {
        let _g = exclusive();
        within(60, || {
            for round in 0..50 {
                // Let the workers go to sleep, then launch work the caller can do alone in
                // far less time than a sleeping thread takes to wake up.
                if round % 10 == 0 {
                    thread::sleep(SPIN_BEFORE_PARK * 4);
                }
                let c = Count::new(TEST_THREADS, false);
                launch(tally_task, &c, 0).unwrap();
                // Every task ran exactly once, wherever it ran.
                assert_eq!(c.runs(), vec![1; TEST_THREADS], "round {round}");
            }
            // With the workers asleep, the caller ran tasks itself instead of waiting.
            assert!(RAN_HERE.with(Cell::get) > 0);
            // Workers that woke after their launch was over are still good for the next one:
            // a barrier needs every task on its own thread at once.
            let mut buf = vec![0u64; TEST_THREADS * PER_TASK];
            let s = Slices::new(&mut buf, TEST_THREADS);
            for _ in 0..20 {
                launch(slice_task, &s, 0).unwrap();
            }
            assert_eq!(s.bad.load(Ordering::SeqCst), 0);
            assert_eq!(s.runs(), vec![20; TEST_THREADS]);
        });
    }

    #[test]
    fn forked_child_gets_fresh_workers() {
        let _g = exclusive();
        let c = Count::new(TEST_THREADS, false);
        launch(count_task, &c, 0).unwrap();
        // SAFETY: the child only launches on the pool and leaves with `_exit`; no other pool
        // launch is in flight (exclusive lock).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let c = Count::new(TEST_THREADS, true);
            let ok = launch(count_task, &c, 0).is_ok()
                && c.runs() == vec![1; TEST_THREADS]
                && c.barrier_errors.load(Ordering::SeqCst) == 0;
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if Instant::now() > deadline {
                // SAFETY: kills and reaps our own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                panic!("the forked child's launch hung");
            }
            thread::sleep(Duration::from_millis(5));
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }

    #[test]
    fn env_layout_matches_c() {
        // `typedef struct { void* sync_handle; int32_t num_task; } TVMParallelGroupEnv;`
        let ptr = std::mem::size_of::<*mut c_void>();
        assert_eq!(std::mem::offset_of!(ParallelGroupEnv, num_task), ptr);
        assert_eq!(std::mem::size_of::<ParallelGroupEnv>(), 2 * ptr);
    }

    // ---- barrier argument checks --------------------------------------------------------------

    #[test]
    fn barrier_rejects_bad_environments() {
        // SAFETY: null is allowed and rejected.
        let e = unsafe { parallel_barrier(0, ptr::null_mut()) }.unwrap_err();
        assert!(e.message.contains("null"), "{}", e.message);
        let mut env = ParallelGroupEnv {
            sync_handle: ptr::null_mut(),
            num_task: 2,
        };
        // SAFETY: a valid env whose sync handle is null.
        let e = unsafe { parallel_barrier(0, &mut env) }.unwrap_err();
        assert!(e.message.contains("no sync handle"), "{}", e.message);
        let mut fake = [0u64; 16];
        env.sync_handle = fake.as_mut_ptr() as *mut c_void;
        // SAFETY: the handle points at readable memory without the magic.
        let e = unsafe { parallel_barrier(0, &mut env) }.unwrap_err();
        assert!(e.message.contains("not made by"), "{}", e.message);
        let barrier = Barrier::new(2, BarrierKind::Concurrent);
        env.sync_handle = &barrier as *const Barrier as *mut c_void;
        // SAFETY: a real barrier; both calls fail before waiting.
        let e = unsafe { parallel_barrier(2, &mut env) }.unwrap_err();
        assert_eq!(e.kind, "IndexError");
        env.num_task = 3;
        // SAFETY: as above.
        let e = unsafe { parallel_barrier(0, &mut env) }.unwrap_err();
        assert!(e.message.contains("num_task is 3"), "{}", e.message);
    }

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
