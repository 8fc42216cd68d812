//! The `relax.VirtualMachine` module: `vm_initialization`, calls by name, the stateful
//! input/output functions, saved closures and profiling.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::abi::{type_index, DLDevice};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::object::{new_object, ObjectRef};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

use super::closure::new_bound_closure;
use super::closure::{ClosureImpl, ClosureObj};
use super::state::{unsupported_tir, VmState};
use super::Shared;
use crate::vm::array::array_items;
use crate::vm::exec::{Executable, ExecutableModule, FuncKind};
use crate::vm::storage::AllocatorKind;

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
pub(super) fn move_to_device(v: &AnyView<'_>, dev: DLDevice, scope: Option<&str>) -> Result<Any> {
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
            Ok(Any::from_object(crate::vm::array::new_array(conv)))
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
#[cfg(feature = "profiling")]
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
    #[cfg(feature = "profiling")]
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
    #[cfg(feature = "profiling")]
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
            #[cfg(feature = "profiling")]
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
