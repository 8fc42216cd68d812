//! The backend services generated kernels call into: the parallel pool
//! (`TVMBackendParallelLaunch`, `TVMBackendParallelBarrier`, `TVMBackendRunOnce`) and the
//! workspace allocator (`TVMBackendAllocWorkspace`, `TVMBackendFreeWorkspace`). Safe Rust only;
//! the C entry points live in `capi/backend.rs`.

pub mod affinity;
pub mod thread_pool;
pub mod workspace;

pub use thread_pool::run_once;

/// The backend's global functions (the pool's configuration).
pub(crate) fn builtins() -> Vec<(&'static str, crate::function::Function)> {
    thread_pool::builtins()
}
