//! The process-wide crew of pool workers: each one's mailbox (spin, then sleep), spawning
//! them, pinning them to CPUs (`runtime.config_threadpool`), and a fresh crew after a fork.

use std::os::unix::thread::JoinHandleExt;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex, RwLock};

use super::config::{default_num_threads, num_threads, CONFIGURED_THREADS};
use super::launch::{Job, IN_TASK};
use super::spin_until;
use crate::backend::affinity::{self, AffinityMode};
use crate::error::{Error, Result};

/// Stack size of pool workers: the pthread default on Linux, as TVM's `std::thread`s get.
const WORKER_STACK_BYTES: usize = 8 << 20;

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
/// launches (see [`affinity`]). Returns the thread count launches now use.
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

/// One worker's mailbox, on its own cache line so workers do not slow each other down.
#[repr(align(64))]
pub(super) struct WorkerSlot {
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
    pub(super) fn post(&self, job: *const Job) {
        self.job.store(job as *mut Job, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            let _guard = self.lock.lock();
            self.cv.notify_one();
        }
    }

    /// Takes back a posting the worker has not picked up; false if it has.
    pub(super) fn retract(&self, job: *const Job) -> bool {
        self.job
            .compare_exchange(
                job as *mut Job,
                ptr::null_mut(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Waits for a job and takes it: spins for [`super::SPIN_BEFORE_PARK`], then sleeps until a
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
pub(super) struct DoneSignal {
    waiting: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

/// The workers of the pool, replaced as a whole after a fork.
pub(super) struct Crew {
    pub(super) slots: Vec<Arc<WorkerSlot>>,
    pub(super) done: Arc<DoneSignal>,
    pub(super) fork_generation: u64,
}

impl Crew {
    pub(super) fn new() -> Self {
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
    pub(super) fn ensure_workers(&mut self, want: usize) {
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
pub(super) static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Records that this process is a fork's child (run by [`fork_child_handler`]; only an atomic
/// add, async-signal-safe).
pub fn note_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// The process-wide pool. Its lock is held for the whole of a launch, which is what serializes
/// launches from different application threads.
pub(super) static POOL: Lazy<Mutex<Crew>> = Lazy::new(|| {
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

/// Waits until every worker that picked `job` up is done with it.
pub(super) fn wait_for_workers(job: &Job, done: &DoneSignal) {
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

/// The `pthread_atfork` child handler of the parallel pool: the parent's workers do not exist
/// in a forked child. Only an atomic add: nothing here can panic or allocate.
pub extern "C" fn fork_child_handler() {
    note_fork_in_child();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::thread_pool::test_support::*;
    use crate::backend::thread_pool::{
        set_num_threads, ParallelGroupEnv, MAX_THREADS, SPIN_BEFORE_PARK,
    };
    use std::cell::Cell;
    use std::ffi::c_void;

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
}
