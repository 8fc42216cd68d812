//! A mutex for the LLM state objects that refuses re-entry instead of deadlocking: the state
//! is locked while the model's kernels run (they read and write the pages), and a kernel that
//! calls back into the same object from the same thread (a Python function handed in as a
//! kernel, say) gets an error. Other threads wait their turn, as with any mutex.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::error::{Error, Result};

thread_local! {
    static THREAD_TAG: u8 = const { 0 };
}

/// A per-thread token: the address of a thread-local (never 0).
fn this_thread() -> usize {
    THREAD_TAG.with(|t| t as *const u8 as usize)
}

/// `T` behind a mutex that knows which thread holds it.
pub struct Guarded<T> {
    owner: AtomicUsize,
    inner: Mutex<T>,
}

/// The locked value; unlocking clears the owner.
pub struct Locked<'a, T> {
    owner: &'a AtomicUsize,
    guard: MutexGuard<'a, T>,
}

impl<T> Guarded<T> {
    pub fn new(value: T) -> Self {
        Guarded {
            owner: AtomicUsize::new(0),
            inner: Mutex::new(value),
        }
    }

    /// Locks, or fails when this thread already holds the lock (`what` names the object).
    pub fn lock(&self, what: &str) -> Result<Locked<'_, T>> {
        let me = this_thread();
        if self.owner.load(Ordering::Acquire) == me {
            return Err(Error::runtime(format!(
                "re-entrant call into the {what} from one of the functions it is running"
            )));
        }
        let guard = self.inner.lock();
        self.owner.store(me, Ordering::Release);
        Ok(Locked {
            owner: &self.owner,
            guard,
        })
    }
}

impl<T> std::ops::Deref for Locked<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for Locked<'_, T> {
    fn drop(&mut self) {
        self.owner.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn re_entry_is_an_error_and_other_threads_wait() {
        let g = Arc::new(Guarded::new(0));
        {
            let mut a = g.lock("cache").unwrap();
            *a += 1;
            let e = g.lock("cache").err().unwrap();
            assert!(e.message.contains("re-entrant call into the cache"), "{e}");
            let g2 = g.clone();
            let t = std::thread::spawn(move || *g2.lock("cache").unwrap() + 10);
            std::thread::sleep(std::time::Duration::from_millis(20));
            *a += 1;
            drop(a);
            assert_eq!(t.join().unwrap(), 12);
        }
        assert_eq!(*g.lock("cache").unwrap(), 2);
    }
}
