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
        // Requests started by the last release: a notice left over from a spell already
        // released (requests that ended while it was waiting) finds nothing new.
        let mut released_at = 0;
        loop {
            self.went_idle.notified().await;
            loop {
                let seen = self.started.load(Ordering::Acquire);
                tokio::time::sleep(quiet).await;
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

    const Q: Duration = Duration::from_millis(10);

    async fn settle() {
        tokio::time::sleep(Q * 3).await;
    }

    #[tokio::test(start_paused = true)]
    async fn releases_once_per_quiet_spell_and_never_while_busy() {
        let idle = Idle::new();
        let released = Arc::new(AtomicUsize::new(0));
        let r = released.clone();
        tokio::spawn(idle.clone().watch(Q, move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        // Nothing ran yet: nothing to release.
        settle().await;
        assert_eq!(released.load(Ordering::SeqCst), 0);
        // A request in flight through several quiet periods: no release while it runs.
        let long = idle.busy();
        settle().await;
        assert_eq!(released.load(Ordering::SeqCst), 0);
        drop(long);
        settle().await;
        assert_eq!(
            released.load(Ordering::SeqCst),
            1,
            "one release after it ended"
        );
        // Requests closer together than the quiet period, one after another: no release
        // between them, one after the last.
        for _ in 0..8 {
            drop(idle.busy());
            tokio::time::sleep(Q / 4).await;
            assert_eq!(
                released.load(Ordering::SeqCst),
                1,
                "released between requests"
            );
        }
        settle().await;
        assert_eq!(released.load(Ordering::SeqCst), 2);
        // Overlapping requests: the spell starts when the last ends.
        let a = idle.busy();
        let b = idle.busy();
        drop(a);
        settle().await;
        assert_eq!(
            released.load(Ordering::SeqCst),
            2,
            "released while one still ran"
        );
        drop(b);
        settle().await;
        assert_eq!(released.load(Ordering::SeqCst), 3);
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
