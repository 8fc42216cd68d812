//! What the pool's unit tests share: a 4-thread pool, a lock for the tests that resize it,
//! a deadlock timeout, and the task functions most tests launch.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{mpsc, Once};
use std::thread;
use std::time::Duration;

use parking_lot::RwLock;

use super::*;
use crate::error::{Error, Result};

/// Tests that change the pool size or measure CPU time take this for writing; the others
/// share it. Every test sees a 4-thread pool.
pub(crate) static CONFIG: RwLock<()> = RwLock::new(());
pub(crate) const TEST_THREADS: usize = 4;

thread_local! {
    pub(crate) static TASK_ERROR: RefCell<Option<String>> = const { RefCell::new(None) };
}

pub(crate) fn test_error_source() -> Option<Error> {
    TASK_ERROR
        .with(|e| e.borrow_mut().take())
        .map(|t| Error::from_classic_text(&t))
}

pub(crate) fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        set_num_threads(TEST_THREADS).unwrap();
        set_task_error_source(Some(test_error_source));
    });
}

pub(crate) fn shared() -> parking_lot::RwLockReadGuard<'static, ()> {
    setup();
    CONFIG.read()
}

pub(crate) fn exclusive() -> parking_lot::RwLockWriteGuard<'static, ()> {
    setup();
    CONFIG.write()
}

/// Runs `f` on its own thread and fails the test if it takes longer than `secs`, so a
/// deadlock is a failure rather than a hung test run.
pub(crate) fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("timed out: the pool deadlocked or hung")
}

pub(crate) fn launch<T>(f: ParallelLambda, data: &T, num_task: i32) -> Result<()> {
    // SAFETY: the test task functions only read `data` (as `&T`) and shared atomics.
    unsafe { parallel_launch(f, data as *const T as *mut c_void, num_task) }
}

// ---- each task writes its slice, barrier, reads everyone's slices ----------------------

pub(crate) const PER_TASK: usize = 257;

pub(crate) struct Slices {
    pub(crate) data: *mut u64,
    pub(crate) max_tasks: usize,
    pub(crate) runs: Vec<AtomicUsize>,
    pub(crate) seen_num_task: AtomicI64,
    pub(crate) bad: AtomicUsize,
}

impl Slices {
    pub(crate) fn new(buf: &mut [u64], max_tasks: usize) -> Self {
        assert!(buf.len() >= max_tasks * PER_TASK);
        Slices {
            data: buf.as_mut_ptr(),
            max_tasks,
            runs: (0..max_tasks).map(|_| AtomicUsize::new(0)).collect(),
            seen_num_task: AtomicI64::new(-1),
            bad: AtomicUsize::new(0),
        }
    }
    pub(crate) fn runs(&self) -> Vec<usize> {
        self.runs.iter().map(|r| r.load(Ordering::SeqCst)).collect()
    }
}

pub(crate) fn value(round: usize, task: usize, i: usize) -> u64 {
    ((round as u64) << 40) | ((task as u64) << 20) | i as u64
}

pub(crate) unsafe extern "C" fn slice_task(
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

// ---- counting tasks ----------------------------------------------------------------------

pub(crate) struct Count {
    pub(crate) runs: Vec<AtomicUsize>,
    pub(crate) barrier_errors: AtomicUsize,
    pub(crate) num_task_seen: AtomicI64,
    pub(crate) call_barrier: bool,
}

impl Count {
    pub(crate) fn new(n: usize, call_barrier: bool) -> Self {
        Count {
            runs: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            barrier_errors: AtomicUsize::new(0),
            num_task_seen: AtomicI64::new(-1),
            call_barrier,
        }
    }
    pub(crate) fn runs(&self) -> Vec<usize> {
        self.runs.iter().map(|r| r.load(Ordering::SeqCst)).collect()
    }
}

pub(crate) unsafe extern "C" fn count_task(
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
