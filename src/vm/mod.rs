//! The Relax virtual machine: runs models that TVM 0.21+ compiles with `tvm.compile` and
//! exports, whose blob root is a `relax.VMExecutable` importing the compiled kernels.
//!
//! - [`exec`]: the executable format, decoded and checked at load time, and its module
//!   (`ffi.Module.load_from_bytes.relax.VMExecutable`; functions `vm_load_executable`,
//!   `stats`, `as_text`, `has_function`).
//! - [`interp`]: the VM module (`vm_initialization`, every VM function by name, `set_input`,
//!   `set_input_with_param_module`, `invoke_stateful`, `get_output`, `get_output_arity`,
//!   `get_function_arity`, `get_function_param_name`, `save_function`, `invoke_closure`) and
//!   the interpreter.
//! - [`builtin`]: the `vm.builtin.*` functions generated code calls.
//! - [`storage`]: allocators (naive, pooled) and storage objects.
//! - [`array`](mod@array): `ffi.Array`, the VM's tuples.
//!
//! To run a model from Rust: load the library, call `vm_load_executable` on the root module,
//! then `vm_initialization(1, 0, 2)` (CPU, device 0, pooled allocator) on the VM, and call its
//! `main`. tvmrt runs Relax models on the CPU only.

/// The VM's tuples are tvm-ffi's arrays: [`crate::object::containers::array`].
pub use crate::object::containers::array;
pub mod builtin;
pub mod exec;
pub mod interp;
pub mod storage;

use crate::abi::DLDevice;
use crate::function::Function;
use crate::module::Module;
use crate::value::{Any, AnyView};

pub use exec::{load_executable, Executable, ExecutableModule};
#[cfg(feature = "profiling")]
pub use interp::load_profiler_vm;
pub use interp::{load_vm, VmModule, VmState};

/// TVM's `VirtualMachine.POOLED_ALLOCATOR`, the allocator `vm_initialization` is given.
pub const POOLED_ALLOCATOR: i64 = 2;

/// A VM over an executable module (a loaded Relax model), initialized for `device` as TVM's
/// `relax.VirtualMachine` does (TVM 0.27 `python/tvm/runtime/vm.py`): `vm_load_executable()`,
/// then `vm_initialization(device, pooled)` on a host-accessible device, or
/// `(device, pooled, kDLCPU, 0, pooled)` with the CPU as the host of another device. Errors
/// say which of the two steps failed.
pub fn initialized_vm(exec: &Module, device: DLDevice) -> crate::Result<Module> {
    let load = exec
        .get_function("vm_load_executable", false)?
        .ok_or_else(|| crate::Error::type_error("the module is not a Relax VM executable"))?;
    let vm = load
        .call(&[])
        .map_err(|e| e.context("creating the Relax VM"))?;
    let vm = Module::from_view(&vm.view(), "the result of vm_load_executable")?;
    let init = vm
        .get_function("vm_initialization", false)?
        .ok_or_else(|| crate::Error::runtime("the Relax VM has no `vm_initialization` function"))?;
    let mut args = vec![
        Any::from(device.device_type.0 as i64),
        Any::from(device.device_id as i64),
        Any::from(POOLED_ALLOCATOR),
    ];
    if !crate::device::is_host_accessible(device) {
        args.extend([
            Any::from(crate::tensor::layout::CPU as i64),
            Any::from(0i64),
            Any::from(POOLED_ALLOCATOR),
        ]);
    }
    init.call_values(&args)
        .map_err(|e| e.context("initializing the Relax VM"))?;
    Ok(vm)
}

/// Global functions of the VM: the executable loaders and the builtins.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    fn load_bytes(args: &[AnyView<'_>]) -> crate::Result<Any> {
        let v = args
            .first()
            .ok_or_else(|| crate::Error::type_error("expected 1 argument (bytes)"))?;
        let bytes = v
            .as_byte_slice()
            .ok_or_else(|| v.type_mismatch("bytes", "bytes"))?;
        Ok(load_executable(bytes)?.into())
    }
    fn load_file(args: &[AnyView<'_>]) -> crate::Result<Any> {
        let path = args
            .first()
            .ok_or_else(|| crate::Error::type_error("expected argument `file_name`"))?
            .expect_str("file_name")?;
        let bytes = std::fs::read(path)
            .map_err(|e| crate::Error::value(format!("cannot read `{path}`: {e}")))?;
        Ok(load_executable(&bytes)?.into())
    }
    let mut v = vec![
        (
            "ffi.Module.load_from_bytes.relax.VMExecutable",
            Function::from_fn(load_bytes),
        ),
        (
            "ffi.Module.load_from_file.relax.VMExecutable",
            Function::from_fn(load_file),
        ),
    ];
    v.extend(builtin::globals());
    v
}
