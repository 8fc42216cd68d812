//! `TVMBackendParallelBarrier`: the counting barrier the tasks of one launch meet at, and the
//! checks that the environment a kernel hands back is one a launch of this runtime made.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};

use super::{spin_until, ParallelGroupEnv};
use crate::error::{Error, Result};

/// Marks a [`Barrier`] so [`parallel_barrier`] can reject a `sync_handle` it did not make.
const BARRIER_MAGIC: u64 = u64::from_le_bytes(*b"tvmrtbar");
/// Set in `Barrier::state` once a task of the launch has returned; low bits count arrivals.
const CLOSED: u64 = 1 << 63;

/// Why the tasks of a launch cannot meet at a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BarrierKind {
    /// Every task has its own thread: a real barrier.
    Concurrent,
    /// A nested launch runs its tasks one after another.
    Nested,
    /// More tasks than threads: some run after others.
    Oversubscribed { threads: usize },
}

/// What `sync_handle` points at: a reusable counting barrier for the tasks of one launch.
#[repr(C)]
pub(super) struct Barrier {
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
    pub(super) fn new(num_task: usize, kind: BarrierKind) -> Self {
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

    pub(super) fn wait(&self, task_id: usize) -> Result<()> {
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
    pub(super) fn depart(&self) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;
    use std::ptr;

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
}
