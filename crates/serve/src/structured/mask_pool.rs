//! The threads a grammar's work runs on, off the engine's thread (see [`super::cursor`]), in
//! two lanes: jobs of grammars whose last job was slow wait in a lane of their own, which one
//! thread never serves. A few grammars slow at every step (a Lark sequence of thousands of
//! literals: 10-40 ms a mask) then fill at most the other threads, and every other grammar's
//! masks still start at once instead of queueing behind theirs.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// Work for a pool thread. A job that panics ends alone (its channels close unanswered).
pub type Job = Box<dyn FnOnce() + Send>;

/// Which queue a job waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Served by every thread.
    Fast,
    /// Served by every thread but one (where there are two or more).
    Slow,
}

impl Lane {
    /// The lane of a grammar's next job, from how long its last one took: slow past 2 ms, far
    /// above a mask's usual cost (tens to hundreds of microseconds) and about a small model's
    /// forward on a CPU.
    pub fn after(took: Duration) -> Lane {
        if took > Duration::from_millis(2) {
            Lane::Slow
        } else {
            Lane::Fast
        }
    }
}

/// Stack of a mask thread: llguidance's mask computation does not recurse with the grammar's
/// depth as its compilers do, but has headroom (pages are committed only as they are used).
const MASK_STACK: usize = 16 << 20;

/// The jobs waiting, each numbered in the order it came.
#[derive(Default)]
struct Queue {
    fast: VecDeque<(u64, Job)>,
    slow: VecDeque<(u64, Job)>,
    next: u64,
    closed: bool,
}

impl Queue {
    /// The oldest job a thread may take: of either lane, or of the fast lane only.
    fn take(&mut self, fast_only: bool) -> Option<Job> {
        let slow_is_older = match (self.fast.front(), self.slow.front()) {
            (Some((f, _)), Some((s, _))) => s < f,
            (None, Some(_)) => true,
            _ => false,
        };
        let lane = if slow_is_older && !fast_only {
            &mut self.slow
        } else {
            &mut self.fast
        };
        lane.pop_front().map(|(_, job)| job)
    }
}

/// The queue and its signal, shared with the threads.
#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    queued: Condvar,
}

/// The threads masks are computed on, and a signal of each job finished.
pub struct MaskPool {
    shared: Arc<Shared>,
    finished: Receiver<()>,
    /// Inside [`MaskPool::batch`]: whether a job was queued, its threads not woken yet.
    deferred: Cell<Option<bool>>,
}

/// Ends a [`MaskPool::batch`] (a panic in it too): the threads woken once for its jobs.
struct EndBatch<'a>(&'a MaskPool);

impl Drop for EndBatch<'_> {
    fn drop(&mut self) {
        if self.0.deferred.take() == Some(true) {
            self.0.shared.queued.notify_all();
        }
    }
}

impl MaskPool {
    /// A pool of `threads` threads (at least one); with two or more, the first serves only
    /// the fast lane. They end when the pool is dropped and the jobs queued before are done.
    pub fn new(threads: usize) -> std::io::Result<MaskPool> {
        let shared = Arc::new(Shared::default());
        let (finished_tx, finished) = mpsc::channel();
        let threads = threads.max(1);
        for n in 0..threads {
            let (shared, finished) = (shared.clone(), finished_tx.clone());
            let fast_only = n == 0 && threads > 1;
            std::thread::Builder::new()
                .name(format!("tvmrt-mask-{n}"))
                .stack_size(MASK_STACK)
                .spawn(move || serve(&shared, fast_only, &finished))?;
        }
        Ok(MaskPool {
            shared,
            finished,
            deferred: Cell::new(None),
        })
    }

    /// Runs `f`, the jobs it submits queued without waking the threads, then wakes them once:
    /// a step's jobs cost the engine's thread one wake-up, not one each (a system call, and
    /// on a VM an interrupt to each idle core), and the threads woken do not contend for the
    /// queue with the submits still to come (16 constrained GPU streams: 0.64x free ones
    /// with a wake-up per job, jump-forward off).
    pub fn batch<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.deferred.get().is_some() {
            return f(); // inside a batch already: its end wakes the threads
        }
        self.deferred.set(Some(false));
        let _end = EndBatch(self);
        f()
    }

    /// Queues `job` in `lane`.
    pub fn submit(&self, lane: Lane, job: Job) {
        let mut q = self.shared.queue.lock();
        let n = q.next;
        q.next += 1;
        match lane {
            Lane::Fast => q.fast.push_back((n, job)),
            Lane::Slow => q.slow.push_back((n, job)),
        }
        drop(q);
        if self.deferred.get().is_some() {
            self.deferred.set(Some(true));
            return;
        }
        // Every thread: the one woken must be one that may take the job.
        self.shared.queued.notify_all();
    }

    /// Waits until a job finishes (or one finished since the last wait), at most `timeout`.
    /// Returns whether one did.
    pub fn wait_any(&self, timeout: Duration) -> bool {
        let any = self.finished.recv_timeout(timeout).is_ok();
        while self.finished.try_recv().is_ok() {}
        any
    }
}

impl Drop for MaskPool {
    fn drop(&mut self) {
        self.shared.queue.lock().closed = true;
        self.shared.queued.notify_all();
    }
}

/// A pool thread: takes the oldest job it may, runs it and says so, until the pool is closed
/// and nothing it may take is left.
fn serve(shared: &Shared, fast_only: bool, finished: &Sender<()>) {
    loop {
        let job = {
            // The lock is held only to take a job, not while it runs.
            let mut q = shared.queue.lock();
            loop {
                if let Some(job) = q.take(fast_only) {
                    break job;
                }
                if q.closed {
                    return;
                }
                shared.queued.wait(&mut q);
            }
        };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let _ = finished.send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A job held until `release` is dropped, then it says so on `done`.
    fn held(release: &Arc<Mutex<()>>, done: &Sender<&'static str>, name: &'static str) -> Job {
        let (release, done) = (release.clone(), done.clone());
        Box::new(move || {
            drop(release.lock());
            let _ = done.send(name);
        })
    }

    /// Slow jobs fill every thread but one: a fast job queued after them runs at once, while
    /// they are held; they all run once released, oldest first.
    #[test]
    fn slow_jobs_leave_a_thread_to_fast_ones() {
        let pool = MaskPool::new(2).unwrap();
        let gate = Arc::new(Mutex::new(()));
        let closed = gate.lock();
        let (done, order) = mpsc::channel();
        for name in ["slow 1", "slow 2", "slow 3"] {
            pool.submit(Lane::Slow, held(&gate, &done, name));
        }
        let fast_done = done.clone();
        pool.submit(
            Lane::Fast,
            Box::new(move || {
                let _ = fast_done.send("fast");
            }),
        );
        assert_eq!(order.recv_timeout(Duration::from_secs(10)), Ok("fast"));
        assert!(order.recv_timeout(Duration::from_millis(50)).is_err());
        drop(closed);
        let rest: Vec<_> = (0..3)
            .map(|_| order.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        assert_eq!(rest, ["slow 1", "slow 2", "slow 3"]);
    }

    /// One thread serves both lanes, oldest job first; a panicking job ends alone; a dropped
    /// pool finishes what was queued.
    #[test]
    fn one_thread_serves_both_lanes_in_order() {
        let pool = MaskPool::new(1).unwrap();
        let gate = Arc::new(Mutex::new(()));
        let closed = gate.lock();
        let (done, order) = mpsc::channel();
        pool.submit(Lane::Fast, held(&gate, &done, "fast 1"));
        pool.submit(Lane::Slow, held(&gate, &done, "slow"));
        pool.submit(Lane::Fast, Box::new(|| panic!("a job's own panic")));
        pool.submit(Lane::Fast, held(&gate, &done, "fast 2"));
        drop(closed);
        drop(pool);
        let got: Vec<_> = order.iter().take(3).collect();
        assert_eq!(got, ["fast 1", "slow", "fast 2"]);
    }

    /// A batch's jobs wait until it ends, then all run (a nested batch ends with the outer).
    #[test]
    fn a_batch_s_jobs_start_when_it_ends() {
        let pool = MaskPool::new(2).unwrap();
        // The threads asleep, waiting for a wake-up.
        pool.submit(Lane::Fast, Box::new(|| {}));
        assert!(pool.wait_any(Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        let (done, finished) = mpsc::channel();
        pool.batch(|| {
            pool.batch(|| {
                for n in 0..3 {
                    let done = done.clone();
                    pool.submit(Lane::Fast, Box::new(move || done.send(n).unwrap()));
                }
            });
            assert!(
                finished.recv_timeout(Duration::from_millis(50)).is_err(),
                "no thread woken inside the batch"
            );
        });
        let mut got: Vec<i32> = (0..3)
            .map(|_| finished.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        got.sort();
        assert_eq!(got, [0, 1, 2]);
    }

    /// `wait_any` says whether a job finished within its wait.
    #[test]
    fn wait_any_sees_a_finished_job() {
        let pool = MaskPool::new(2).unwrap();
        let t = Instant::now();
        assert!(!pool.wait_any(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        pool.submit(Lane::Slow, Box::new(|| {}));
        assert!(pool.wait_any(Duration::from_secs(10)));
        assert_eq!(Lane::after(Duration::from_micros(300)), Lane::Fast);
        assert_eq!(Lane::after(Duration::from_millis(5)), Lane::Slow);
    }
}
