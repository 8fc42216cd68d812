//! The virtual machine module (`relax.VirtualMachine`) and its interpreter
//! (TVM `src/runtime/vm/vm.cc`).
//!
//! `vm_load_executable` on an executable module makes a VM module; `vm_initialization`
//! (device type, device id, allocator kind, per device) builds the [`VmState`]: the constant
//! pool, and the function pool, where every packed-function entry of the table is bound once
//! to a kernel found through the executable's imports, a builtin, or a global function (TVM's
//! `InitFuncPool` order: imports, then the registry). After that the state is immutable, so
//! calls are reentrant and may run on several threads at once; each call has its own register
//! file.
//!
//! Closures (`relax.vm.Closure` in TVM) are objects naming a VM function of one executable,
//! possibly with arguments bound at the end (`vm.builtin.make_closure`). Like TVM's they hold
//! no reference to the VM (so a VM and its function pool form no cycle); the VM running them
//! passes itself.
//!
//! The parts: `state` (an initialized VM: its pools, devices and allocators), `run` (the
//! interpreter: running a VM function or a closure on one register file per call), `closure`
//! (the closure object), `profiled` (the profiler VM's recording) and `module` (the `relax.VirtualMachine` module and its functions).

mod closure;
mod module;
#[cfg(feature = "profiling")]
mod profiled;
mod run;
mod state;

pub use closure::{closure_obj, new_bound_closure, ClosureObj};
#[cfg(feature = "profiling")]
pub use module::load_profiler_vm;
pub use module::{load_vm, VmModule};
pub use state::{live_vm, VmState};

/// Deepest nesting of VM calls (VM functions calling VM functions or closures) before a call
/// fails instead of exhausting the native stack.
pub const MAX_CALL_DEPTH: usize = 256;

/// `Send`/`Sync` wrapper for values the VM shares between threads.
///
/// tvm-ffi values are shared across threads in TVM's model (atomic reference counts); raw
/// pointers inside them (opaque handles, `DLTensor*`) are the caller's contract, as in TVM.
struct Shared<T>(T);
// SAFETY: see the type's documentation.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: see the type's documentation.
unsafe impl<T> Sync for Shared<T> {}
