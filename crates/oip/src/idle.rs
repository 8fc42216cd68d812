//! Memory back to the system when the server goes quiet.
//!
//! A burst of requests leaves the C allocator holding the buffers it freed (request bodies,
//! stacked batches, encoded answers): glibc's malloc gives back only the top of each arena, and
//! keeps the rest of its free chunks resident for reuse; with a thread per model instance and
//! the protocol threads, that was 1.2-1.4 MiB after the benchmark's load (BENCHMARKS.md), about
//! a tenth of the whole server. [`Idle`] counts the requests in flight; once none has run for
//! [`QUIET`], it asks the allocator to release its free pages (`malloc_trim`), once per quiet
//! spell. Under steady load the server is never quiet that long, so requests never pay for it.
//! Memory that models keep on purpose (weights, the Relax VM's pooled blocks) is not touched.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// How long no request may run before the free memory is released: far longer than a
/// client's turn between two requests, far shorter than a pause between bursts.
pub const QUIET: Duration = Duration::from_millis(10);

/// Requests in flight, and the task that releases memory after they stop.
pub struct Idle {
    running: AtomicUsize,
    /// Requests started so far: a quiet spell is one in which this did not move.
    started: AtomicU64,
    went_idle: Notify,
}

/// A request in flight: dropping it may start a quiet spell.
pub struct Busy<'a>(&'a Idle);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.went_idle.notify_one();
        }
    }
}

impl Idle {
    /// A tracker; [`Idle::watch`] releases memory after each quiet spell.
    pub fn new() -> Arc<Idle> {
        Arc::new(Idle {
            running: AtomicUsize::new(0),
            started: AtomicU64::new(0),
            went_idle: Notify::new(),
        })
    }

    /// Marks a request in flight until the guard drops.
    pub fn busy(&self) -> Busy<'_> {
        self.started.fetch_add(1, Ordering::AcqRel);
        self.running.fetch_add(1, Ordering::AcqRel);
        Busy(self)
    }

    /// Runs forever: each time the requests stop, waits until none has started for `quiet`,
    /// then calls `release` once.
    pub async fn watch(self: Arc<Self>, quiet: Duration, release: impl Fn()) {
        self.watch_with(|| tokio::time::sleep(quiet), release).await
    }

    /// [`Idle::watch`] with the wait for one quiet period given (the tests' own clock).
    async fn watch_with<F: Future<Output = ()>>(
        self: Arc<Self>,
        quiet_period: impl Fn() -> F,
        release: impl Fn(),
    ) {
        // Requests started by the last release: a notice left over from a spell already
        // released (requests that ended while it was waiting) finds nothing new.
        let mut released_at = 0;
        loop {
            self.went_idle.notified().await;
            loop {
                let seen = self.started.load(Ordering::Acquire);
                quiet_period().await;
                if self.running.load(Ordering::Acquire) > 0 {
                    // Busy again: its end notifies anew.
                    break;
                }
                if self.started.load(Ordering::Acquire) == seen {
                    if seen != released_at {
                        release();
                        released_at = seen;
                    }
                    break;
                }
            }
        }
    }
}

/// Gives the C allocator's free pages back to the system (glibc's `malloc_trim`; nothing
/// elsewhere).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it takes the allocator's own locks, and only
    // returns pages of chunks that are free.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::watch;

    /// Ticks of the tests' clock in one quiet period.
    const QUIET_TICKS: u64 = 4;

    /// A clock the test moves by hand: the watcher (spawned on the test's one thread) runs
    /// only while the test yields, so every step is deterministic.
    struct Clock(watch::Sender<u64>);

    impl Clock {
        fn quiet_period(&self) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
            let tx = self.0.clone();
            move || {
                let mut rx = tx.subscribe();
                Box::pin(async move {
                    let start = *rx.borrow();
                    let _ = rx.wait_for(|t| *t >= start + QUIET_TICKS).await;
                })
            }
        }

        async fn run_others() {
            for _ in 0..16 {
                tokio::task::yield_now().await;
            }
        }

        async fn advance(&self, ticks: u64) {
            for _ in 0..ticks {
                Clock::run_others().await;
                self.0.send_modify(|t| *t += 1);
                Clock::run_others().await;
            }
        }
    }

    #[tokio::test]
    async fn releases_once_per_quiet_spell_and_never_while_busy() {
        let idle = Idle::new();
        let clock = Clock(watch::channel(0).0);
        let released = Arc::new(AtomicUsize::new(0));
        let r = released.clone();
        tokio::spawn(idle.clone().watch_with(clock.quiet_period(), move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        let count = || released.load(Ordering::SeqCst);
        let settle = || clock.advance(3 * QUIET_TICKS);
        // Nothing ran yet: nothing to release.
        settle().await;
        assert_eq!(count(), 0);
        // A request in flight through several quiet periods: no release while it runs.
        let long = idle.busy();
        settle().await;
        assert_eq!(count(), 0);
        drop(long);
        clock.advance(QUIET_TICKS - 1).await;
        assert_eq!(count(), 0, "released before a whole quiet period");
        clock.advance(1).await;
        assert_eq!(count(), 1, "one release after a quiet period");
        settle().await;
        assert_eq!(count(), 1, "released again with nothing new");
        // Requests closer together than the quiet period, one after another: no release
        // between them, one after the last.
        for _ in 0..8 {
            drop(idle.busy());
            clock.advance(QUIET_TICKS / 2).await;
            assert_eq!(count(), 1, "released between requests");
        }
        settle().await;
        assert_eq!(count(), 2);
        // Overlapping requests: the spell starts when the last ends.
        let a = idle.busy();
        let b = idle.busy();
        drop(a);
        settle().await;
        assert_eq!(count(), 2, "released while one still ran");
        drop(b);
        settle().await;
        assert_eq!(count(), 3);
    }

    #[tokio::test]
    async fn the_real_clock_releases_after_the_quiet_period() {
        let idle = Idle::new();
        let released = Arc::new(AtomicUsize::new(0));
        let r = released.clone();
        tokio::spawn(idle.clone().watch(Duration::from_millis(5), move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        drop(idle.busy());
        // Bounded: a release within 5 s, however loaded the machine.
        for _ in 0..500 {
            if released.load(Ordering::SeqCst) == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no release 5 s after the last request");
    }

    #[test]
    fn releasing_free_memory_keeps_live_memory() {
        let kept: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 100_000]).collect();
        let freed: Vec<Vec<u8>> = (0..64).map(|_| vec![7u8; 100_000]).collect();
        drop(freed);
        release_free_memory();
        for (i, v) in kept.iter().enumerate() {
            assert!(v.iter().all(|&b| b == i as u8));
        }
    }
}
