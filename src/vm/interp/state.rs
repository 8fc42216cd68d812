//! An initialized VM ([`VmState`]): its devices, allocators, constant pool and function pool
//! (each entry bound once, in TVM's `InitFuncPool` order), and the registry of live VMs that
//! builtins find theirs in.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Weak};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::abi::{DLDevice, TVMFFIAny};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::Module;
use crate::object::new_object;
use crate::value::Any;

use super::closure::{ClosureImpl, ClosureObj};
use super::module::move_to_device;
use super::Shared;
use crate::vm::builtin::Builtin;
use crate::vm::exec::{Executable, FuncKind};
use crate::vm::storage::{Allocator, AllocatorKind};

/// What a function-pool entry runs.
pub(super) enum Callee {
    /// A builtin, called directly.
    Native(Builtin),
    /// A kernel or any other packed function.
    Packed(Function),
    /// A VM function of this executable.
    VmFunc(usize),
    /// A function of a kind tvmrt cannot run (named for the error).
    Unsupported(String),
}

/// Live VMs by context-pointer address, so builtins called through the registry with TVM's
/// `void*` context can find theirs safely.
static LIVE: Lazy<Mutex<HashMap<usize, Weak<VmState>>>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// The VM whose context pointer is `p`, if it is alive.
pub fn live_vm(p: *mut c_void) -> Option<Arc<VmState>> {
    LIVE.lock().get(&(p as usize)).and_then(Weak::upgrade)
}

/// An initialized VM: devices, allocators, constant and function pools.
pub struct VmState {
    pub(super) exec: Arc<Executable>,
    pub(super) devices: Vec<DLDevice>,
    pub(super) allocators: Vec<Allocator>,
    pub(super) consts: Shared<Vec<Any>>,
    pub(super) funcs: Vec<Callee>,
    /// The function pool as values (functions and closures), for function arguments.
    pub(super) func_values: Shared<Vec<Any>>,
    /// The `%vm` register: an opaque pointer to this state.
    pub(super) vm_raw: Shared<TVMFFIAny>,
    /// Set while `profile` records calls (the VM of `vm_profiler_load_executable`); the
    /// interpreter looks at nothing else of profiling when it is clear (see `invoke_func`).
    #[cfg(feature = "profiling")]
    pub(super) profiling: std::sync::atomic::AtomicBool,
    #[cfg(feature = "profiling")]
    pub(super) profiler: Mutex<Option<crate::profiling::Profiler>>,
}

impl Drop for VmState {
    fn drop(&mut self) {
        LIVE.lock().remove(&(self as *const VmState as usize));
    }
}

impl VmState {
    pub(super) fn new(
        exec: Arc<Executable>,
        imports: &[Module],
        devices: Vec<DLDevice>,
        kinds: Vec<AllocatorKind>,
    ) -> Result<Arc<VmState>> {
        let mut funcs = Vec::with_capacity(exec.funcs.len());
        let mut func_values = Vec::with_capacity(exec.funcs.len());
        for (i, info) in exec.funcs.iter().enumerate() {
            match info.kind {
                FuncKind::PackedFunc => {
                    let found = lookup_imports(imports, &info.name)?;
                    let callee = match found {
                        Some(f) => Callee::Packed(f),
                        None => match Builtin::from_name(&info.name) {
                            Some(b) => Callee::Native(b),
                            None => match crate::function::registry::get(&info.name) {
                                Some(f) => Callee::Packed(f),
                                None => {
                                    return Err(Error::new(
                                        "InternalError",
                                        format!(
                                            "Error: Cannot find ffi::Function {} in either Relax \
                                             VM kernel library, or in TVM runtime ffi::Function \
                                             registry, or in global Relax functions of the VM \
                                             executable",
                                            info.name
                                        ),
                                    ))
                                }
                            },
                        },
                    };
                    let value = match &callee {
                        Callee::Packed(f) => Any::from(f.clone()),
                        Callee::Native(b) => crate::function::registry::get(b.name())
                            .map(Any::from)
                            .unwrap_or_default(),
                        _ => Any::none(),
                    };
                    funcs.push(callee);
                    func_values.push(value);
                }
                FuncKind::VMFunc => {
                    funcs.push(Callee::VmFunc(i));
                    func_values.push(Any::from_object(new_object(ClosureObj {
                        func_name: info.name.clone(),
                        imp: ClosureImpl::VmFunc {
                            exec: Arc::downgrade(&exec),
                            index: i,
                        },
                    })));
                }
                FuncKind::VMTIRFunc => {
                    funcs.push(Callee::Unsupported(info.name.clone()));
                    func_values.push(Any::none());
                }
            }
        }
        // Constants move to device 0 once, in their memory scope (TVM's `Init`); on the CPU
        // they stay where they are (in place in the library when it can).
        let dev0 = devices[0];
        let consts: Vec<Any> = exec
            .constants
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let scope = exec
                    .memory_scopes
                    .iter()
                    .find(|(at, _)| *at == i as i64)
                    .map(|(_, s)| s.as_str());
                move_to_device(&c.view(), dev0, scope)
                    .map_err(|e| e.context(format!("constant {i}")))
            })
            .collect::<Result<_>>()?;
        let allocators = kinds
            .into_iter()
            .zip(&devices)
            .map(|(k, d)| Allocator::new(k, *d))
            .collect();
        let state = Arc::new_cyclic(|weak: &Weak<VmState>| {
            let ptr = weak.as_ptr() as *mut c_void;
            VmState {
                exec,
                devices,
                allocators,
                consts: Shared(consts),
                funcs,
                func_values: Shared(func_values),
                vm_raw: Shared(Any::opaque_ptr(ptr).into_raw()),
                #[cfg(feature = "profiling")]
                profiling: std::sync::atomic::AtomicBool::new(false),
                #[cfg(feature = "profiling")]
                profiler: Mutex::new(None),
            }
        });
        LIVE.lock()
            .insert(Arc::as_ptr(&state) as usize, Arc::downgrade(&state));
        Ok(state)
    }

    /// The executable.
    pub fn executable(&self) -> &Arc<Executable> {
        &self.exec
    }

    /// The devices given to `vm_initialization`.
    pub fn devices(&self) -> &[DLDevice] {
        &self.devices
    }

    /// The allocator of device `index` (-1: the host, the last device), as
    /// `vm.builtin.alloc_storage` picks it.
    pub fn allocator(&self, index: i64) -> Result<&Allocator> {
        let n = self.allocators.len();
        let i = if index == -1 { n as i64 - 1 } else { index };
        usize::try_from(i)
            .ok()
            .and_then(|i| self.allocators.get(i))
            .ok_or_else(|| {
                Error::new(
                    "InternalError",
                    format!(
                        "Check failed: device_index < vm->devices.size() ({index} vs. {n}) : \
                         The device index is out of VM physical devices list"
                    ),
                )
            })
    }
}

pub(super) fn unsupported_tir(name: &str) -> Error {
    Error::runtime(format!(
        "`{name}` is a VMTIR function (compiled with exec_mode=\"compiled\"), which tvmrt does \
         not run; compile with the default bytecode mode"
    ))
}

/// TVM's `GetFuncFromImports`: each import, depth-first.
pub(super) fn lookup_imports(imports: &[Module], name: &str) -> Result<Option<Function>> {
    for m in imports {
        if let Some(f) = m.get_function(name, true)? {
            return Ok(Some(f));
        }
    }
    Ok(None)
}
