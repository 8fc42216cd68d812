//! `TVMBackendParallelLaunch`: one launch (the job its tasks share, each thread claiming the
//! next task no thread has started), run inline when nested, else shared with the workers.

use std::cell::{Cell, UnsafeCell};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::barrier::{Barrier, BarrierKind};
use super::config::{num_threads, task_error_detail};
use super::workers::{wait_for_workers, Crew, FORK_GENERATION, POOL};
use super::{ParallelGroupEnv, ParallelLambda};
use crate::error::{Error, Result};

struct Failure {
    task: usize,
    code: i32,
    detail: Option<Error>,
}

/// Everything the tasks of one launch share. It lives on the launching thread's stack; the
/// launcher does not return before every worker that picked the launch up has decremented
/// `pending`, and a worker does not touch the job after that.
pub(super) struct Job {
    f: ParallelLambda,
    cdata: *mut c_void,
    num_task: usize,
    env: UnsafeCell<ParallelGroupEnv>,
    barrier: Barrier,
    /// The next task no thread has claimed; every thread of the launch claims from it.
    next_task: AtomicUsize,
    /// Workers the launch was posted to that may still use the job: each decrements it once it
    /// is done with the job, and the launcher for each posting it takes back unseen.
    pub(super) pending: AtomicUsize,
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
    pub(super) fn run_tasks_guarded(&self) {
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
        crate::cold_sort::sort_by_key(&mut failures, |f| f.task);
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
    pub(super) static IN_TASK: Cell<bool> = const { Cell::new(false) };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::thread_pool::test_support::*;
    use crate::backend::thread_pool::{parallel_barrier, ParallelGroupEnv};
    use std::sync::atomic::AtomicI64;
    use std::thread;

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
}
