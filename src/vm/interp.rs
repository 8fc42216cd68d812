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

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Weak};

use once_cell::sync::Lazy;
use parking_lot::{Mutex, RwLock};

use crate::abi::{type_index, DLDevice, TVMFFIAny};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

use super::array::array_items;
use super::builtin::{self, Builtin};
use super::exec::{Arg, Executable, ExecutableModule, FuncKind, Instr, Reg};
use super::storage::{Allocator, AllocatorKind};

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

/// What a function-pool entry runs.
enum Callee {
    /// A builtin, called directly.
    Native(Builtin),
    /// A kernel or any other packed function.
    Packed(Function),
    /// A VM function of this executable.
    VmFunc(usize),
    /// A function of a kind tvmrt cannot run (named for the error).
    Unsupported(String),
}

/// A closure: a VM function of one executable, or a closure with arguments bound at the end.
pub struct ClosureObj {
    func_name: String,
    imp: ClosureImpl,
}

enum ClosureImpl {
    VmFunc {
        exec: Weak<Executable>,
        index: usize,
    },
    Bound {
        inner: ObjectRef,
        last_args: Shared<Vec<Any>>,
        /// `save_function(..., include_return=false)`: the call returns None.
        discard_result: bool,
    },
}

// SAFETY: no public cell (TVM's `VMClosureObj` is not read by generated code); tvmrt gives
// closures the generic object index (64) as the type is private to the VM.
unsafe impl ObjectPayload for ClosureObj {
    const TYPE_INDEX: i32 = type_index::OBJECT;
}

/// The closure payload of `obj`, if it is one.
pub fn closure_obj(obj: &ObjectRef) -> Option<&ClosureObj> {
    obj.downcast_ref::<ClosureObj>()
}

/// `vm.builtin.make_closure`: `inner` with `last_args` appended to every call.
pub fn new_bound_closure(inner: ObjectRef, last_args: Vec<Any>) -> ObjectRef {
    let func_name = closure_obj(&inner)
        .map(|c| c.func_name.clone())
        .unwrap_or_default();
    new_object(ClosureObj {
        func_name,
        imp: ClosureImpl::Bound {
            inner,
            last_args: Shared(last_args),
            discard_result: false,
        },
    })
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
    exec: Arc<Executable>,
    devices: Vec<DLDevice>,
    allocators: Vec<Allocator>,
    consts: Shared<Vec<Any>>,
    funcs: Vec<Callee>,
    /// The function pool as values (functions and closures), for function arguments.
    func_values: Shared<Vec<Any>>,
    /// The `%vm` register: an opaque pointer to this state.
    vm_raw: Shared<TVMFFIAny>,
    /// Set while `profile` records calls (the VM of `vm_profiler_load_executable`); the
    /// interpreter looks at nothing else of profiling when it is clear (see `invoke_func`).
    profiling: std::sync::atomic::AtomicBool,
    profiler: Mutex<Option<crate::profiling::Profiler>>,
}

impl Drop for VmState {
    fn drop(&mut self) {
        LIVE.lock().remove(&(self as *const VmState as usize));
    }
}

impl VmState {
    fn new(
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
                profiling: std::sync::atomic::AtomicBool::new(false),
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

    /// Runs VM function `fidx` on `args`.
    pub fn invoke_func(&self, fidx: usize, args: &[AnyView<'_>], depth: usize) -> Result<Any> {
        // Two copies of the interpreter: the one that runs when nothing is profiled has no
        // profiling code at all.
        if self.profiling.load(std::sync::atomic::Ordering::Relaxed) {
            self.run_func::<true>(fidx, args, depth)
        } else {
            self.run_func::<false>(fidx, args, depth)
        }
    }

    /// The interpreter, with every call instruction timed when `PROFILE`.
    fn run_func<const PROFILE: bool>(
        &self,
        fidx: usize,
        args: &[AnyView<'_>],
        depth: usize,
    ) -> Result<Any> {
        let exec = &*self.exec;
        let f = &exec.funcs[fidx];
        if f.kind == FuncKind::VMTIRFunc {
            return Err(unsupported_tir(&f.name));
        }
        if f.kind != FuncKind::VMFunc {
            return Err(Error::new(
                "InternalError",
                format!(
                    "Cannot support closure with function kind {}",
                    match f.kind {
                        FuncKind::PackedFunc => 0,
                        FuncKind::VMFunc => 1,
                        FuncKind::VMTIRFunc => 2,
                    }
                ),
            ));
        }
        if depth >= MAX_CALL_DEPTH {
            return Err(Error::runtime(format!(
                "VM call depth exceeds {MAX_CALL_DEPTH} while calling `{}` (unbounded recursion?)",
                f.name
            )));
        }
        if args.len() as i64 != f.num_args {
            let names = if f.param_names.is_empty() {
                String::new()
            } else {
                format!(" ({})", f.param_names.join(", "))
            };
            return Err(Error::value(format!(
                "Invoking function {} expects {} arguments{names}, but {} arguments were provided.",
                f.name,
                f.num_args,
                args.len()
            )));
        }
        let mut frame = Frame::take();
        let Frame { regs, scratch } = &mut frame;
        regs.extend(args.iter().map(AnyView::to_owned_any));
        regs.resize_with(f.register_file_size, Any::none);
        let consts = &self.consts.0;
        let fvals = &self.func_values.0;
        let mut pc = f.start_instr;
        loop {
            // Jumps were checked to stay inside [start, end); falling off the end is not.
            if pc >= f.end_instr {
                return Err(Error::new(
                    "InternalError",
                    format!("run into invalid section: `{}` has no Ret", f.name),
                ));
            }
            match &exec.instrs[pc] {
                Instr::Call {
                    dst,
                    func,
                    args_start,
                    args_len,
                } => {
                    scratch.clear();
                    for a in &exec.call_args[*args_start..args_start + args_len] {
                        scratch.push(match *a {
                            Arg::Reg(Reg::Slot(s)) => *regs[s].raw(),
                            Arg::Reg(Reg::Void) => TVMFFIAny::NONE,
                            Arg::Reg(Reg::Vm) => self.vm_raw.0,
                            Arg::Imm(v) => Any::from(v).into_raw(),
                            Arg::Const(c) => *consts[c].raw(),
                            Arg::Func(i) => *fvals[i].raw(),
                        });
                    }
                    // SAFETY: `scratch` holds borrowed copies of registers, constants and pool
                    // entries, which all outlive this call (the registers change only after it
                    // returns); immediates and special registers own nothing.
                    let views = unsafe { AnyView::slice_from_raw(scratch.as_ptr(), scratch.len()) };
                    let ret = if PROFILE {
                        self.call_pool_profiled(*func, views, depth)?
                    } else {
                        self.call_pool(*func, views, depth)?
                    };
                    if let Some(d) = dst {
                        regs[*d] = ret;
                    }
                    pc += 1;
                }
                Instr::Ret(r) => {
                    return Ok(match r {
                        Reg::Slot(s) => std::mem::take(&mut regs[*s]),
                        Reg::Void => Any::none(),
                        Reg::Vm => Any::opaque_ptr(self as *const VmState as *mut c_void),
                    });
                }
                Instr::Goto(off) => {
                    pc = (pc as i64 + off) as usize;
                }
                Instr::If { cond, false_offset } => {
                    let v = match cond {
                        Reg::Slot(s) => {
                            let v = regs[*s].view();
                            v.as_i64().ok_or_else(|| {
                                Error::type_error(format!(
                                    "If condition: expected int, got {}",
                                    v.type_name()
                                ))
                            })?
                        }
                        _ => {
                            return Err(Error::type_error(
                                "If condition: expected int, got a special register",
                            ))
                        }
                    };
                    if v != 0 {
                        pc += 1;
                    } else {
                        pc = (pc as i64 + false_offset) as usize;
                    }
                }
            }
        }
    }

    /// [`VmState::call_pool`] timed by the running profiler, as TVM's `VirtualMachineProfiler`
    /// times a call instruction: when an argument is a tensor, under the callee's name with
    /// the argument shapes, on the device of the last tensor argument. Out of line, so the
    /// interpreter's own call path stays as it is without a profiler.
    #[cold]
    #[inline(never)]
    fn call_pool_profiled(&self, idx: usize, args: &[AnyView<'_>], depth: usize) -> Result<Any> {
        let entered = std::time::Instant::now();
        let mut device = None;
        let mut shapes = Vec::new();
        for a in args.iter().filter(|a| a.type_index() == type_index::TENSOR) {
            // SAFETY: a tensor argument's descriptor is live for the call.
            let Some(t) = a
                .as_dltensor()
                .filter(|p| !p.is_null())
                .map(|p| unsafe { &*p })
            else {
                continue;
            };
            // SAFETY: as above; a tensor object's shape holds `ndim` values.
            let dims = unsafe { crate::tensor::layout::dl_shape(t, "argument") }
                .map(<[i64]>::to_vec)
                .unwrap_or_default();
            device = Some(t.device);
            shapes.push((t.dtype, dims));
        }
        let Some(device) = device else {
            return self.call_pool(idx, args, depth);
        };
        let name = &self.exec.funcs[idx].name;
        // Not held during the call: a VM function called here records its own calls.
        if let Some(p) = self.profiler.lock().as_mut() {
            p.start_call_with_shapes(name, device, Default::default(), Some(shapes))?;
        }
        let ret = self.call_pool(idx, args, depth);
        if let Some(p) = self.profiler.lock().as_mut() {
            let timed = p.stop_call()?;
            p.add_overhead(entered.elapsed().saturating_sub(timed));
        }
        ret
    }

    /// Runs `f` with every call instruction recorded (TVM's `profile`), and returns the report.
    fn profiled(&self, f: impl FnOnce() -> Result<Any>) -> Result<crate::profiling::Report> {
        use crate::profiling::{Metric, Profiler, Row};
        let config = Row::from([("Executor".to_string(), Metric::Str("VM".into()))]);
        let mut prof = Profiler::new(self.devices.clone(), config);
        prof.start()?;
        *self.profiler.lock() = Some(prof);
        self.profiling
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let ran = f();
        self.profiling
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let mut prof = self
            .profiler
            .lock()
            .take()
            .ok_or_else(|| Error::runtime("profile: the profiler went away"))?;
        prof.stop()?;
        ran?;
        Ok(prof.report())
    }

    #[inline(always)]
    fn call_pool(&self, idx: usize, args: &[AnyView<'_>], depth: usize) -> Result<Any> {
        match &self.funcs[idx] {
            Callee::Native(b) => builtin::call(*b, Some(self), args, depth),
            Callee::Packed(f) => f.call(args),
            Callee::VmFunc(i) => self.invoke_func(*i, args, depth + 1),
            Callee::Unsupported(name) => Err(unsupported_tir(name)),
        }
    }

    /// Calls a closure or a function object (`InvokeClosurePacked`).
    pub fn invoke_closure(
        &self,
        obj: &ObjectRef,
        args: &[AnyView<'_>],
        depth: usize,
    ) -> Result<Any> {
        if obj.type_index() == type_index::FUNCTION {
            return Function::from_object(obj.clone())?.call(args);
        }
        let clo = closure_obj(obj).ok_or_else(|| {
            Error::new(
                "InternalError",
                format!(
                    "Function expects a closure or ffi::Function, got {}",
                    crate::value::type_name(obj.type_index())
                ),
            )
        })?;
        if depth >= MAX_CALL_DEPTH {
            return Err(Error::runtime(format!(
                "VM call depth exceeds {MAX_CALL_DEPTH} while calling closure `{}`",
                clo.func_name
            )));
        }
        match &clo.imp {
            ClosureImpl::VmFunc { exec, index } => {
                let same = exec.upgrade().is_some_and(|e| Arc::ptr_eq(&e, &self.exec));
                if !same {
                    return Err(Error::value(format!(
                        "closure `{}` belongs to another VM executable",
                        clo.func_name
                    )));
                }
                self.invoke_func(*index, args, depth)
            }
            ClosureImpl::Bound {
                inner,
                last_args,
                discard_result,
            } => {
                let mut all: Vec<AnyView<'_>> = args.to_vec();
                all.extend(last_args.0.iter().map(Any::view));
                let out = self.invoke_closure(inner, &all, depth + 1)?;
                Ok(if *discard_result { Any::none() } else { out })
            }
        }
    }
}

/// A call's register file and argument buffer, recycled through a per-thread free list so a
/// call allocates nothing for them once warm (TVM keeps a frame free list per VM).
struct Frame {
    regs: Vec<Any>,
    scratch: Vec<TVMFFIAny>,
}

type FrameBuffers = (Vec<Any>, Vec<TVMFFIAny>);

thread_local! {
    static FREE_FRAMES: std::cell::RefCell<Vec<FrameBuffers>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl Frame {
    fn take() -> Frame {
        let (regs, scratch) = FREE_FRAMES
            .try_with(|f| f.try_borrow_mut().ok().and_then(|mut f| f.pop()))
            .ok()
            .flatten()
            .unwrap_or_default();
        Frame { regs, scratch }
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        // Released before touching the free list: dropping a value may run arbitrary code,
        // including another VM call on this thread.
        self.regs.clear();
        self.scratch.clear();
        let buffers = (
            std::mem::take(&mut self.regs),
            std::mem::take(&mut self.scratch),
        );
        let _ = FREE_FRAMES.try_with(|f| {
            if let Ok(mut f) = f.try_borrow_mut() {
                if f.len() < 64 {
                    f.push(buffers);
                }
            }
        });
    }
}

fn unsupported_tir(name: &str) -> Error {
    Error::runtime(format!(
        "`{name}` is a VMTIR function (compiled with exec_mode=\"compiled\"), which tvmrt does \
         not run; compile with the default bytecode mode"
    ))
}

/// TVM's `GetFuncFromImports`: each import, depth-first.
fn lookup_imports(imports: &[Module], name: &str) -> Result<Option<Function>> {
    for m in imports {
        if let Some(f) = m.get_function(name, true)? {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

/// Converts an input as TVM's `ConvertArgToDevice` does, for the VM's device `dev`: a tensor
/// object on another device is copied to `dev` (one already there stays), a bare `DLTensor*` is
/// always copied into a new tensor on `dev`, arrays are converted item by item, other values
/// stay.
fn convert_input(v: &AnyView<'_>, dev: DLDevice) -> Result<Any> {
    if v.type_index() == type_index::DL_TENSOR_PTR {
        let p = v.as_dltensor().unwrap_or(std::ptr::null_mut());
        crate::error::non_null(p, "DLTensor* input")?;
        // SAFETY: the caller keeps the tensor alive for the call.
        let src = unsafe { &*p };
        // SAFETY: as above.
        let shape = unsafe { crate::tensor::layout::dl_shape(src, "input")? };
        let t = Tensor::empty(shape, src.dtype, dev)?;
        // SAFETY: both describe live memory.
        unsafe { crate::tensor::copy::copy_dltensor(src, t.dl())? };
        return Ok(t.into());
    }
    move_to_device(v, dev, None)
}

/// TVM's `ConvertObjectToDevice`: a tensor not on `dev` is copied there (in `scope`), arrays
/// item by item; anything else is returned as it is.
fn move_to_device(v: &AnyView<'_>, dev: DLDevice, scope: Option<&str>) -> Result<Any> {
    match v.type_index() {
        type_index::TENSOR => {
            let t = Tensor::from_any_view(v, "input")?;
            if t.device() == dev {
                Ok(t.into())
            } else {
                Ok(t.copy_to(dev, scope)?.into())
            }
        }
        type_index::ARRAY => {
            let obj = v.as_object().ok_or_else(|| Error::value("null array"))?;
            let items = array_items(&obj).unwrap_or(&[]);
            let conv = items
                .iter()
                .map(|item| convert_input(item, dev))
                .collect::<Result<Vec<_>>>()?;
            Ok(Any::from_object(super::array::new_array(conv)))
        }
        _ => Ok(v.to_owned_any()),
    }
}

/// State of `set_input` / `invoke_stateful` / `get_output` and saved closures.
#[derive(Default)]
struct Io {
    inputs: HashMap<String, Vec<Any>>,
    outputs: HashMap<String, Any>,
    saved: HashMap<String, ObjectRef>,
}

/// The module of kind `relax.VirtualMachine`.
pub struct VmModule {
    exec_module: Module,
    exec: Arc<Executable>,
    /// Made by `vm_profiler_load_executable`: has `profile`.
    profiler: bool,
    state: RwLock<Option<Arc<VmState>>>,
    io: Mutex<Shared<Io>>,
}

/// `vm_load_executable`: a new, uninitialized VM over an executable module.
pub fn load_vm(exec_module: &Module) -> Result<Module> {
    new_vm(exec_module, false)
}

/// `vm_profiler_load_executable`: a VM that also has `profile` (TVM's
/// `VirtualMachineProfiler`).
pub fn load_profiler_vm(exec_module: &Module) -> Result<Module> {
    new_vm(exec_module, true)
}

fn new_vm(exec_module: &Module, profiler: bool) -> Result<Module> {
    let exec = exec_module
        .downcast::<ExecutableModule>()
        .ok_or_else(|| Error::type_error("vm_load_executable: not a relax.VMExecutable module"))?
        .executable()
        .clone();
    Ok(Module::new(VmModule {
        exec_module: exec_module.clone(),
        exec,
        profiler,
        state: RwLock::new(None),
        io: Mutex::new(Shared(Io::default())),
    }))
}

/// The VM module behind `m` (a function's own module, so this cannot fail in practice).
fn vm_of(m: &Module) -> Result<&VmModule> {
    m.downcast::<VmModule>()
        .ok_or_else(|| Error::runtime("internal: not a relax.VirtualMachine module"))
}

fn str_arg<'a>(args: &'a [AnyView<'_>], i: usize, what: &str) -> Result<&'a str> {
    args.get(i)
        .ok_or_else(|| Error::type_error(format!("missing argument {i} (`{what}`)")))?
        .expect_str(what)
}

impl VmModule {
    /// The initialized state, or an error telling the caller to initialize.
    pub fn state(&self) -> Result<Arc<VmState>> {
        self.state.read().clone().ok_or_else(|| {
            Error::value(
                "the VirtualMachine is not initialized: call `vm_initialization` (device type, \
                 device id, allocator type per device) first",
            )
        })
    }

    /// `vm_initialization(device_type, device_id, allocator_type, ...)`: the devices, the first
    /// one where the model runs and the last one the host (TVM 0.27 passes `(4, 0, 2, 1, 0, 2)`
    /// for OpenCL device 0 and the CPU).
    pub fn init(&self, args: &[AnyView<'_>]) -> Result<()> {
        if args.is_empty() || !args.len().is_multiple_of(3) {
            return Err(Error::value(format!(
                "vm_initialization expects (device_type, device_id, allocator_type) per device, \
                 got {} arguments",
                args.len()
            )));
        }
        let mut devices = Vec::new();
        let mut kinds = Vec::new();
        for c in args.chunks(3) {
            let dt = c[0].expect_i64("device_type")?;
            let id = c[1].expect_i64("device_id")?;
            let kind = AllocatorKind::from_code(c[2].expect_i64("allocator_type")?)?;
            let dt =
                u32::try_from(dt).map_err(|_| Error::value(format!("invalid device type {dt}")))?;
            let id = i32::try_from(id)
                .map_err(|_| Error::value(format!("device id {id} is out of range")))?;
            let dev = DLDevice {
                device_type: crate::abi::DLDeviceType(dt),
                device_id: id,
            };
            crate::device::usable(dev).map_err(|e| e.context("vm_initialization"))?;
            devices.push(dev);
            kinds.push(kind);
        }
        let imports = self.exec_module.imports();
        let state = VmState::new(self.exec.clone(), &imports, devices, kinds)?;
        *self.state.write() = Some(state);
        Ok(())
    }

    /// Calls the VM function or saved closure `name`.
    pub fn invoke(&self, name: &str, args: &[AnyView<'_>]) -> Result<Any> {
        let state = self.state()?;
        let saved = self.io.lock().0.saved.get(name).cloned();
        if let Some(clo) = saved {
            return state.invoke_closure(&clo, args, 0);
        }
        let (idx, _) = self
            .exec
            .func(name)
            .ok_or_else(|| Error::value(format!("Unknown function: {name}")))?;
        state.invoke_func(idx, args, 0)
    }

    /// `set_input` (`with_param_module` false) and `set_input_with_param_module` (true: the
    /// last argument is a module whose `get_params()` gives that input, as in TVM).
    fn set_input(&self, args: &[AnyView<'_>], with_param_module: bool) -> Result<()> {
        let name = str_arg(args, 0, "func_name")?;
        let (_, f) = self
            .exec
            .func(name)
            .ok_or_else(|| Error::value(format!("Unknown function: {name}")))?;
        let inputs = &args[1..];
        if inputs.len() as i64 != f.num_args {
            return Err(Error::value(format!(
                "The number of provided parameters doesn't match the number of arguments for \
                 {name}: {} given, {} expected",
                inputs.len(),
                f.num_args
            )));
        }
        // Inputs go to the VM's first device (TVM's `SetInput`).
        let dev = self.state()?.devices()[0];
        let mut conv = Vec::with_capacity(inputs.len());
        for (i, v) in inputs.iter().enumerate() {
            if with_param_module && i + 1 == inputs.len() {
                let m = Module::from_view(v, "param module")?;
                let get = m.get_function("get_params", false)?.ok_or_else(|| {
                    Error::value("set_input_with_param_module: the module has no `get_params`")
                })?;
                conv.push(get.call(&[])?);
            } else {
                conv.push(convert_input(v, dev)?);
            }
        }
        self.io.lock().0.inputs.insert(name.to_string(), conv);
        Ok(())
    }

    /// `profile(func_name, *args)` (TVM 0.22's `VirtualMachineProfiler`, which returns the
    /// report as JSON text): with the inputs given (or those of `set_input`, which then must
    /// not be repeated), one warm-up call, then one call with every call instruction recorded.
    pub fn profile(&self, args: &[AnyView<'_>]) -> Result<crate::profiling::Report> {
        let name = str_arg(args, 0, "func_name")?;
        let state = self.state()?;
        let (idx, _) = self
            .exec
            .func(name)
            .ok_or_else(|| Error::value(format!("Unknown function: {name}")))?;
        let stored = self.io.lock().0.inputs.get(name).cloned();
        let inputs = match stored {
            Some(inputs) => {
                if args.len() != 1 {
                    crate::bail_value!(
                        "profile: inputs of `{name}` are already set by set_input; pass only the function name"
                    );
                }
                inputs
            }
            None => {
                if args.len() < 2 && self.exec.func(name).is_some_and(|(_, f)| f.num_args > 0) {
                    crate::bail_value!("profile: no input is provided for `{name}`");
                }
                let dev = state.devices()[0];
                args[1..]
                    .iter()
                    .map(|v| convert_input(v, dev))
                    .collect::<Result<Vec<_>>>()?
            }
        };
        let views: Vec<AnyView<'_>> = inputs.iter().map(Any::view).collect();
        state.invoke_func(idx, &views, 0)?;
        state.profiled(|| state.invoke_func(idx, &views, 0))
    }

    /// One call of VM function `name` with every call instruction recorded (no warm-up; any
    /// VM, as `tvmrt bench --profile` uses it).
    pub fn profile_once(
        &self,
        name: &str,
        args: &[AnyView<'_>],
    ) -> Result<crate::profiling::Report> {
        let state = self.state()?;
        let (idx, _) = self
            .exec
            .func(name)
            .ok_or_else(|| Error::value(format!("Unknown function: {name}")))?;
        state.profiled(|| state.invoke_func(idx, args, 0))
    }

    fn invoke_stateful(&self, args: &[AnyView<'_>]) -> Result<()> {
        let name = str_arg(args, 0, "func_name")?;
        if self.exec.func(name).is_none() {
            return Err(Error::value(format!("Unknown function: {name}")));
        }
        let inputs = self.io.lock().0.inputs.get(name).cloned().ok_or_else(|| {
            Error::value(format!(
                "No inputs set for stateful call of {name}; use `set_input` first."
            ))
        })?;
        let views: Vec<AnyView<'_>> = inputs.iter().map(Any::view).collect();
        let out = self.invoke(name, &views)?;
        self.io.lock().0.outputs.insert(name.to_string(), out);
        Ok(())
    }

    fn output_at(&self, args: &[AnyView<'_>]) -> Result<Any> {
        let name = str_arg(args, 0, "func_name")?;
        let mut obj = self.io.lock().0.outputs.get(name).cloned().ok_or_else(|| {
            Error::value(format!(
                "No output saved for call of \"{name}\"; use `invoke_stateful` to call it first."
            ))
        })?;
        for a in &args[1..] {
            let index = a.expect_i64("index")?;
            let arr = obj
                .view()
                .as_object()
                .filter(|o| o.type_index() == type_index::ARRAY)
                .ok_or_else(|| {
                    Error::value("Attempted to index into an object that is not an Array.")
                })?;
            let items = array_items(&arr).unwrap_or(&[]);
            if index < 0 || index as usize >= items.len() {
                return Err(Error::index(format!(
                    "Invalid index ({index} >= {}).",
                    items.len()
                )));
            }
            obj = items[index as usize].to_owned_any();
        }
        Ok(obj)
    }

    fn save_function(&self, args: &[AnyView<'_>]) -> Result<()> {
        let name = str_arg(args, 0, "func_name")?;
        let save_name = str_arg(args, 1, "save_name")?;
        let include_return = args
            .get(2)
            .and_then(|v| v.as_bool().or_else(|| v.as_i64().map(|i| i != 0)))
            .ok_or_else(|| Error::type_error("save_function: missing `include_return` (bool)"))?;
        let state = self.state()?;
        let (idx, info) = self
            .exec
            .func(name)
            .ok_or_else(|| Error::value(format!("Unknown function: {name}")))?;
        if info.kind != FuncKind::VMFunc {
            return Err(unsupported_tir(name));
        }
        let dev = state.devices()[0];
        let inputs = args[3..]
            .iter()
            .map(|v| convert_input(v, dev))
            .collect::<Result<Vec<_>>>()?;
        let base = state.func_values.0[idx]
            .view()
            .as_object()
            .ok_or_else(|| Error::runtime("internal: missing closure"))?;
        let bound = new_bound_closure(base, inputs);
        let clo = if include_return {
            bound
        } else {
            // TVM drops the result of such a saved call.
            new_object(ClosureObj {
                func_name: save_name.to_string(),
                imp: ClosureImpl::Bound {
                    inner: bound,
                    last_args: Shared(Vec::new()),
                    discard_result: true,
                },
            })
        };
        self.io.lock().0.saved.insert(save_name.to_string(), clo);
        Ok(())
    }
}

impl ModuleKind for VmModule {
    fn kind(&self) -> &str {
        "relax.VirtualMachine"
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let keep = this.clone();
        let f = match name {
            "vm_initialization" => Function::from_fn(move |args| {
                vm_of(&keep)?.init(args)?;
                Ok(Any::none())
            }),
            "invoke_stateful" => Function::from_fn(move |args| {
                vm_of(&keep)?.invoke_stateful(args)?;
                Ok(Any::none())
            }),
            "set_input" => Function::from_fn(move |args| {
                vm_of(&keep)?.set_input(args, false)?;
                Ok(Any::none())
            }),
            "set_input_with_param_module" => Function::from_fn(move |args| {
                vm_of(&keep)?.set_input(args, true)?;
                Ok(Any::none())
            }),
            "get_output" => Function::from_fn(move |args| {
                let out = vm_of(&keep)?.output_at(args)?;
                if out.view().type_index() == type_index::ARRAY {
                    return Err(Error::value(
                        "`get_output` cannot return a tuple for RPC compatibility. Please \
                         specify another index argument.",
                    ));
                }
                Ok(out)
            }),
            "get_output_arity" => Function::from_fn(move |args| {
                let out = vm_of(&keep)?.output_at(args)?;
                let n = out
                    .view()
                    .as_object()
                    .and_then(|o| array_items(&o).map(<[AnyView<'_>]>::len));
                Ok(Any::from(n.map_or(-1, |n| n as i64)))
            }),
            "get_function_arity" => Function::from_fn(move |args| {
                let m = vm_of(&keep)?;
                let name = str_arg(args, 0, "func_name")?;
                let (_, f) = m
                    .exec
                    .func(name)
                    .ok_or_else(|| Error::value(format!("Unknown function: {name}")))?;
                Ok(Any::from(f.param_names.len() as i64))
            }),
            "get_function_param_name" => Function::from_fn(move |args| {
                let m = vm_of(&keep)?;
                let name = str_arg(args, 0, "func_name")?;
                let index = args
                    .get(1)
                    .ok_or_else(|| Error::type_error("missing argument 1 (`index`)"))?
                    .expect_i64("index")?;
                let (_, f) = m
                    .exec
                    .func(name)
                    .ok_or_else(|| Error::value(format!("Unknown function: {name}")))?;
                let n = f.param_names.len();
                usize::try_from(index)
                    .ok()
                    .and_then(|i| f.param_names.get(i))
                    .map(|s| Any::from(s.as_str()))
                    .ok_or_else(|| {
                        Error::value(format!("Invalid index for {name} ({index} out of {n})"))
                    })
            }),
            "save_function" => Function::from_fn(move |args| {
                vm_of(&keep)?.save_function(args)?;
                Ok(Any::none())
            }),
            "invoke_closure" => Function::from_fn(move |args| {
                let m = vm_of(&keep)?;
                let state = m.state()?;
                let c = args
                    .first()
                    .ok_or_else(|| Error::type_error("invoke_closure: missing the closure"))?;
                let obj = c
                    .as_object()
                    .ok_or_else(|| c.type_mismatch("closure", "relax.vm.Closure"))?;
                state.invoke_closure(&obj, &args[1..], 0)
            }),
            "profile" if self.profiler => {
                Function::from_fn(move |args| Ok(Any::from(vm_of(&keep)?.profile(args)?.to_json())))
            }
            "set_instrument" => Function::from_fn(|_| {
                Err(Error::runtime(
                    "set_instrument is not supported by tvmrt's VirtualMachine",
                ))
            }),
            _ => {
                // Resolved now, as TVM's `_LookupFunction` does: a saved closure first, then
                // the function table.
                if let Some(clo) = self.io.lock().0.saved.get(name).cloned() {
                    return Ok(Some(Function::from_fn(move |args| {
                        vm_of(&keep)?.state()?.invoke_closure(&clo, args, 0)
                    })));
                }
                let idx = match self.exec.func(name) {
                    Some((_, info)) if info.kind == FuncKind::PackedFunc => {
                        return Err(Error::new(
                            "InternalError",
                            format!(
                                "`{name}` is a packed function of the executable, not a VM \
                                 function (Cannot support closure with function kind 0)"
                            ),
                        ))
                    }
                    Some((idx, _)) => idx,
                    None => return Ok(None),
                };
                Function::from_fn(move |args| vm_of(&keep)?.state()?.invoke_func(idx, args, 0))
            }
        };
        Ok(Some(f))
    }

    fn implements_function(&self, _this: &Module, name: &str) -> bool {
        matches!(
            name,
            "vm_initialization"
                | "invoke_stateful"
                | "set_input"
                | "set_input_with_param_module"
                | "get_output"
                | "get_output_arity"
                | "get_function_arity"
                | "get_function_param_name"
                | "save_function"
                | "invoke_closure"
                | "set_instrument"
        ) || (self.profiler && name == "profile")
            || self
                .exec
                .func(name)
                .is_some_and(|(_, f)| f.kind != FuncKind::PackedFunc)
            || self.io.lock().0.saved.contains_key(name)
    }
}
