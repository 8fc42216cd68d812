//! Workspace memory for CPU kernels (`TVMBackendAllocWorkspace` / `TVMBackendFreeWorkspace` with
//! `kDLCPU`, served by [`crate::device::cpu`]).
//!
//! Follows TVM's CPU workspace pool (`src/runtime/workspace_pool.cc`, used per thread by
//! `cpu_device_api.cc`): each thread keeps its own pool; requests are rounded up to whole 4 KiB
//! pages (a 0-byte request gets one page); freed blocks are kept, sorted by size, and the
//! smallest one that fits is reused; when none fits, the largest free block is released and a
//! bigger one allocated in its place. Blocks are aligned to 64 bytes (`kTempAllocaAlignment`),
//! which generated kernels assume. Kernels free in LIFO order, which is the fast path; any order
//! works. A pointer the pool does not know (never allocated here, already freed, or allocated
//! by another thread) is an error, as it is in TVM (a failed check there).

use std::cell::RefCell;
use std::ffi::c_void;
use std::ptr::NonNull;

use crate::device::cpu::{alloc_host, free_host};
use crate::error::{Error, Result};

/// TVM's `kWorkspacePageSize`: the granularity of workspace blocks.
pub const WORKSPACE_PAGE_BYTES: usize = 4 << 10;

/// TVM's `kTempAllocaAlignment` (and `kAllocAlignment`): the alignment kernels assume.
pub const WORKSPACE_ALIGN: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Block {
    data: NonNull<c_void>,
    bytes: usize,
}

/// One thread's pool.
#[derive(Default)]
struct Pool {
    /// Free blocks, ascending by size; among equal sizes the most recently freed comes first,
    /// so a kernel run again gets the same blocks back.
    free: Vec<Block>,
    /// Blocks handed out, in allocation order (LIFO frees pop from the end).
    live: Vec<Block>,
}

impl Pool {
    fn alloc(&mut self, nbytes: u64) -> Result<*mut c_void> {
        let bytes = usize::try_from(nbytes)
            .ok()
            .and_then(|n| n.max(1).checked_next_multiple_of(WORKSPACE_PAGE_BYTES))
            .filter(|&n| n <= isize::MAX as usize / 2)
            .ok_or_else(|| {
                Error::value(format!(
                    "alloc_workspace: {nbytes} bytes is more than can be allocated"
                ))
            })?;
        // Reserve bookkeeping room first so that a failure below cannot lose a block.
        self.live.try_reserve(1).map_err(|_| oom(nbytes))?;
        let fit = self.free.partition_point(|b| b.bytes < bytes);
        let block = if fit < self.free.len() {
            self.free.remove(fit)
        } else {
            // Nothing big enough. Like TVM, give back the largest free block (it is too small)
            // so the pool does not keep growing with blocks that never fit again.
            if let Some(old) = self.free.pop() {
                // SAFETY: free blocks came from alloc_host and are owned by the pool.
                unsafe { free_host(old.data.as_ptr()) };
            }
            let data = alloc_host(bytes, WORKSPACE_ALIGN).map_err(|_| oom(nbytes))?;
            Block {
                data: NonNull::new(data).ok_or_else(|| oom(nbytes))?,
                bytes,
            }
        };
        self.live.push(block);
        Ok(block.data.as_ptr())
    }

    fn free(&mut self, ptr: *mut c_void) -> Result<()> {
        let Some(index) = self.live.iter().rposition(|b| b.data.as_ptr() == ptr) else {
            let what = if self.free.iter().any(|b| b.data.as_ptr() == ptr) {
                "was already freed (double free)"
            } else {
                "was not allocated by this thread's workspace pool"
            };
            return Err(Error::value(format!(
                "free_workspace: pointer {ptr:p} {what}"
            )));
        };
        self.free.try_reserve(1).map_err(|_| {
            Error::runtime("free_workspace: out of memory for the pool's free list")
        })?;
        let block = self.live.remove(index);
        let at = self.free.partition_point(|b| b.bytes < block.bytes);
        self.free.insert(at, block);
        Ok(())
    }
}

impl Drop for Pool {
    /// Runs when the thread exits. Blocks still handed out are left alone: something may still
    /// use them, and a leak is safer than a dangling pointer (TVM's `Release` does the same).
    fn drop(&mut self) {
        for block in self.free.drain(..) {
            // SAFETY: free blocks came from alloc_host and nothing refers to them any more.
            unsafe { free_host(block.data.as_ptr()) };
        }
    }
}

fn oom(nbytes: u64) -> Error {
    Error::runtime(format!(
        "alloc_workspace: out of memory allocating {nbytes} bytes"
    ))
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

fn with_pool<T>(what: &str, f: impl FnOnce(&mut Pool) -> Result<T>) -> Result<T> {
    POOL.try_with(|pool| match pool.try_borrow_mut() {
        Ok(mut pool) => f(&mut pool),
        Err(_) => Err(Error::runtime(format!(
            "{what}: the workspace pool is already in use on this thread"
        ))),
    })
    .unwrap_or_else(|_| {
        Err(Error::runtime(format!(
            "{what}: this thread is exiting and its workspace pool is gone"
        )))
    })
}

/// `TVMBackendAllocWorkspace` for the CPU: `nbytes` of scratch memory, 64-byte aligned, from
/// this thread's pool. Free it on the same thread with [`free_workspace`].
pub fn alloc_workspace(nbytes: u64) -> Result<*mut c_void> {
    with_pool("alloc_workspace", |pool| pool.alloc(nbytes))
}

/// `TVMBackendFreeWorkspace` for the CPU: returns a block from [`alloc_workspace`] to this
/// thread's pool for reuse. An unknown pointer or a double free is an error and changes
/// nothing.
pub fn free_workspace(ptr: *mut c_void) -> Result<()> {
    with_pool("free_workspace", |pool| pool.free(ptr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(p: *mut c_void) -> usize {
        p as usize
    }

    #[test]
    fn aligned_and_writable() {
        for nbytes in [0u64, 1, 63, 64, 65, 4095, 4096, 4097, 100_000] {
            let p = alloc_workspace(nbytes).unwrap();
            assert_eq!(addr(p) % WORKSPACE_ALIGN, 0, "{nbytes} bytes");
            // SAFETY: the block holds at least max(nbytes, 1) bytes rounded up to a page.
            unsafe { std::ptr::write_bytes(p as *mut u8, 0xab, (nbytes as usize).max(1)) };
            free_workspace(p).unwrap();
        }
    }

    #[test]
    fn zero_bytes_is_one_page() {
        let p = alloc_workspace(0).unwrap();
        assert!(!p.is_null());
        // TVM rounds 0 up to one page, so a one-page request reuses that block.
        free_workspace(p).unwrap();
        let q = alloc_workspace(WORKSPACE_PAGE_BYTES as u64).unwrap();
        assert_eq!(p, q);
        free_workspace(q).unwrap();
    }

    #[test]
    fn lifo_reuse_gives_the_same_pointers_back() {
        let run = || {
            let a = alloc_workspace(1000).unwrap();
            let b = alloc_workspace(5000).unwrap();
            let c = alloc_workspace(1000).unwrap();
            free_workspace(c).unwrap();
            free_workspace(b).unwrap();
            free_workspace(a).unwrap();
            (a, b, c)
        };
        let first = run();
        assert_ne!(first.0, first.2);
        assert_eq!(run(), first);
        assert_eq!(run(), first);
    }

    #[test]
    fn smallest_fit_and_sizes_by_page() {
        let small = alloc_workspace(100).unwrap();
        let big = alloc_workspace(3 * 4096).unwrap();
        free_workspace(small).unwrap();
        free_workspace(big).unwrap();
        // 4000 bytes fits in the one-page block; 5000 needs the three-page one.
        let a = alloc_workspace(4000).unwrap();
        assert_eq!(a, small);
        let b = alloc_workspace(5000).unwrap();
        assert_eq!(b, big);
        free_workspace(a).unwrap();
        free_workspace(b).unwrap();
        POOL.with(|p| {
            let sizes: Vec<usize> = p.borrow().free.iter().map(|b| b.bytes).collect();
            assert_eq!(sizes, vec![4096, 3 * 4096]);
        });
    }

    #[test]
    fn growing_request_replaces_the_largest_free_block() {
        let a = alloc_workspace(4096).unwrap();
        free_workspace(a).unwrap();
        let b = alloc_workspace(10 * 4096).unwrap();
        POOL.with(|p| {
            let p = p.borrow();
            assert!(p.free.is_empty(), "the too-small block was released");
            assert_eq!(p.live.len(), 1);
            assert_eq!(p.live[0].bytes, 10 * 4096);
        });
        free_workspace(b).unwrap();
    }

    #[test]
    fn non_lifo_frees() {
        let ptrs: Vec<_> = (1..=6)
            .map(|i| alloc_workspace(i * 3000).unwrap())
            .collect();
        for &i in &[2usize, 0, 5, 1, 4, 3] {
            free_workspace(ptrs[i]).unwrap();
        }
        POOL.with(|p| {
            let p = p.borrow();
            assert!(p.live.is_empty());
            let sizes: Vec<usize> = p.free.iter().map(|b| b.bytes).collect();
            let mut sorted = sizes.clone();
            sorted.sort();
            assert_eq!(sizes, sorted);
            assert_eq!(sizes.len(), 6);
        });
        // Every block is reused, none allocated anew.
        let again: Vec<_> = (1..=6)
            .map(|i| alloc_workspace(i * 3000).unwrap())
            .collect();
        let mut a: Vec<usize> = ptrs.iter().map(|&p| addr(p)).collect();
        let mut b: Vec<usize> = again.iter().map(|&p| addr(p)).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        for p in again.into_iter().rev() {
            free_workspace(p).unwrap();
        }
    }

    #[test]
    fn unknown_pointer_and_double_free_are_errors() {
        let mut local = 0u64;
        let e = free_workspace(&mut local as *mut u64 as *mut c_void).unwrap_err();
        assert!(e.message.contains("not allocated"), "{}", e.message);
        let e = free_workspace(std::ptr::null_mut()).unwrap_err();
        assert!(e.message.contains("not allocated"), "{}", e.message);
        let p = alloc_workspace(10).unwrap();
        free_workspace(p).unwrap();
        let e = free_workspace(p).unwrap_err();
        assert!(e.message.contains("double free"), "{}", e.message);
        assert_eq!(e.kind, "ValueError");
        // The pool is still consistent: the block comes back.
        let q = alloc_workspace(10).unwrap();
        assert_eq!(p, q);
        free_workspace(q).unwrap();
    }

    #[test]
    fn freeing_on_another_thread_is_an_error() {
        let p = alloc_workspace(64).unwrap() as usize;
        let e = std::thread::spawn(move || free_workspace(p as *mut c_void).unwrap_err())
            .join()
            .unwrap();
        assert!(e.message.contains("this thread"), "{}", e.message);
        free_workspace(p as *mut c_void).unwrap();
    }

    #[test]
    fn huge_requests_are_errors() {
        let e = alloc_workspace(u64::MAX).unwrap_err();
        assert!(
            e.message.contains("more than can be allocated"),
            "{}",
            e.message
        );
        let e = alloc_workspace(u64::MAX / 2).unwrap_err();
        assert!(e.message.contains("bytes"), "{}", e.message);
    }

    #[test]
    fn many_sizes_stack_like() {
        // A pseudo-random mix of sizes, allocated as nested kernel scopes would and freed in
        // LIFO order, twice: the second round must reuse blocks, not allocate.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut sizes = Vec::new();
        for _ in 0..200 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            sizes.push(seed % 70_000);
        }
        for round in 0..2 {
            let mut held = Vec::new();
            for (i, &n) in sizes.iter().enumerate() {
                let p = alloc_workspace(n).unwrap();
                assert_eq!(addr(p) % WORKSPACE_ALIGN, 0);
                // SAFETY: the block holds at least max(n, 1) bytes.
                unsafe { std::ptr::write_bytes(p as *mut u8, i as u8, (n as usize).max(1)) };
                held.push((p, n, i as u8));
                if i % 3 == 2 {
                    let (p, n, tag) = held.pop().unwrap();
                    // SAFETY: reading back bytes written above into a live block.
                    let s =
                        unsafe { std::slice::from_raw_parts(p as *const u8, (n as usize).max(1)) };
                    assert!(s.iter().all(|&b| b == tag), "block {tag} was overwritten");
                    free_workspace(p).unwrap();
                }
            }
            while let Some((p, _, _)) = held.pop() {
                free_workspace(p).unwrap();
            }
            POOL.with(|p| {
                let p = p.borrow();
                assert!(p.live.is_empty());
                if round == 1 {
                    assert!(p.free.len() >= 100, "blocks kept for reuse");
                }
            });
        }
    }
}
