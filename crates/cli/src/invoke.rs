//! What `run` and `bench` share: the command-line description of a call, loading the library,
//! finding the function (a compiled kernel, or a Relax function run by the VM), reading the
//! inputs, allocating the outputs, checking them against the kernel's signature, and calling.

use std::path::Path;
use std::str::FromStr;

use tvmrt::abi::{type_index, DLDataType, DLDevice};
use tvmrt::dtype::dtype_from_str;
use tvmrt::introspect::signature::{Dim, Signature};
use tvmrt::introspect::{self, LibraryInfo};
use tvmrt::module::{load_from_file, Module};
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::{Any, Error, Function, Result};

use crate::npyio::{dtype_name, read_npy, HostArray};

/// A call described on the command line (shared by `run` and `bench`).
#[derive(clap::Args, Clone, Debug)]
pub struct CallArgs {
    /// The library (`.so` exported by TVM) or module file to load.
    pub library: String,

    /// The function to call: a compiled kernel, or a function of a Relax model (`main`).
    pub function: String,

    /// An input: a `.npy` file, or a scalar `int:N`, `float:X`, `bool:true`, `str:TEXT`;
    /// repeat in argument order.
    #[arg(short = 'i', long = "input", value_name = "X.npy")]
    pub inputs: Vec<String>,

    /// An output tensor a destination-passing kernel writes, `DTYPE:D0xD1...` (e.g.
    /// `float32:16`, `int8:4x4`); repeat in order. Passed after the inputs.
    #[arg(short = 'o', long = "output-shape", value_name = "DTYPE:D0xD1...")]
    pub output_shapes: Vec<OutputSpec>,

    /// Threads for parallel kernels (default: `TVM_NUM_THREADS`, else the core count).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// The file's format when its extension does not tell (`so`, or a registered loader's).
    #[arg(long, value_name = "FMT")]
    pub format: Option<String>,

    /// The device to run on: `cpu` (the default), or `opencl[:N]` / `cuda[:N]` for a library
    /// built for OpenCL / CUDA. Inputs are uploaded to it, outputs copied back.
    #[arg(long, value_name = "DEVICE", default_value = "cpu", value_parser = parse_device)]
    pub device: DLDevice,
}

fn parse_device(text: &str) -> std::result::Result<DLDevice, String> {
    let dev = tvmrt::device::parse_device(text).map_err(|e| e.message.clone())?;
    tvmrt::device::api_of(dev).map_err(|e| e.message.clone())?;
    Ok(dev)
}

/// An output tensor's dtype and shape (`float32:4x4`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputSpec {
    /// The dtype.
    pub dtype: DLDataType,
    /// The shape.
    pub shape: Vec<i64>,
    /// As written.
    pub text: String,
}

impl FromStr for OutputSpec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (dt, dims) = s.split_once(':').ok_or_else(|| {
            format!("`{s}` is not DTYPE:D0xD1... (e.g. float32:16 or float32:4x4)")
        })?;
        let dtype = dtype_from_str(dt.trim()).map_err(|e| format!("`{s}`: {}", e.message))?;
        if dtype.bits == 0 || dtype.lanes == 0 {
            return Err(format!("`{s}`: `{dt}` is not a tensor element type"));
        }
        let dims = dims.trim();
        if dims.is_empty() {
            return Err(format!(
                "`{s}` has no shape after the colon (e.g. {dt}:16 or {dt}:4x4)"
            ));
        }
        let shape = dims
            .split(['x', 'X', ','])
            .map(|d| {
                d.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|&v| v >= 0)
                    .ok_or_else(|| {
                        format!("`{s}`: `{d}` is not a dimension (a non-negative integer)")
                    })
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(OutputSpec {
            dtype,
            shape,
            text: s.to_string(),
        })
    }
}

/// The path to hand to the loader: `dlopen` searches the library path, not the current
/// directory, for a name without a slash, so `tvmrt run model.so` means `./model.so`.
pub fn loadable_path(path: &str) -> String {
    if path.contains('/') {
        path.to_string()
    } else {
        format!("./{path}")
    }
}

/// `float32[4, 4]`.
pub fn describe(dtype: DLDataType, shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("{}[{}]", dtype_name(dtype), dims.join(", "))
}

/// How the function is called.
enum Callee {
    /// A compiled kernel (destination-passing: outputs appended to the arguments).
    Kernel(Function),
    /// A function of a Relax VM (returns its outputs). The VM module is kept alive with it.
    Vm(Function, #[allow(dead_code)] Module),
    /// A graph executor (TVM <= 0.19 model): inputs set by name, then `run`; returns the
    /// outputs. The names are filled in as the inputs are read.
    Graph(GraphCall),
}

/// A graph executor's functions and the input name of each `--input`.
struct GraphCall {
    /// The executor module (for profiling).
    exec: Module,
    set_input: Function,
    run: Function,
    get_output: Function,
    num_outputs: usize,
    /// Inputs the user may give (parameters saved with the model excluded), in graph order.
    free_inputs: Vec<String>,
    /// All input names, parameters included.
    all_inputs: Vec<String>,
    names: Vec<String>,
}

impl GraphCall {
    /// Creates the executor on `device`, as `factory["default"](device)`.
    fn new(
        factory: &Module,
        summary: &tvmrt::introspect::GraphSummary,
        device: DLDevice,
    ) -> Result<GraphCall> {
        let create = factory
            .get_function(&summary.module_name, false)?
            .ok_or_else(|| Error::runtime("the graph executor factory lost its create function"))?;
        let exec = create.call_values(&[Any::from(device)])?;
        let exec = Module::from_view(&exec.view(), "the graph executor")?;
        let get = |name: &str| -> Result<Function> {
            exec.get_function(name, false)?
                .ok_or_else(|| Error::runtime(format!("the graph executor has no `{name}`")))
        };
        Ok(GraphCall {
            exec: exec.clone(),
            set_input: get("set_input")?,
            run: get("run")?,
            get_output: get("get_output")?,
            num_outputs: summary.outputs.len(),
            free_inputs: summary
                .inputs
                .iter()
                .filter(|t| !t.param)
                .map(|t| t.name.clone())
                .collect(),
            all_inputs: summary.inputs.iter().map(|t| t.name.clone()).collect(),
            names: Vec::new(),
        })
    }

    /// Splits `NAME=VALUE`; a bare value takes the next input the model does not save.
    fn take_name<'t>(&mut self, text: &'t str) -> Result<&'t str> {
        if let Some((name, value)) = text.split_once('=') {
            if !self.all_inputs.iter().any(|n| n == name) {
                return Err(Error::value(format!(
                    "the model has no input `{name}` (inputs: {})",
                    self.all_inputs.join(", ")
                )));
            }
            self.names.push(name.to_string());
            return Ok(value);
        }
        let next = self
            .free_inputs
            .iter()
            .find(|n| !self.names.contains(n))
            .ok_or_else(|| {
                Error::value(format!(
                    "`{text}`: every input of the model is already given (inputs: {}); name parameters as NAME=FILE",
                    self.free_inputs.join(", ")
                ))
            })?
            .clone();
        self.names.push(next);
        Ok(text)
    }

    fn set_inputs(&self, inputs: &[Input]) -> Result<()> {
        for (name, input) in self.names.iter().zip(inputs) {
            self.set_input
                .call_values(&[Any::from(name.as_str()), input.value.clone()])
                .map_err(|e| {
                    Error::new(e.kind.clone(), format!("input `{name}`: {}", e.message))
                })?;
        }
        Ok(())
    }

    fn call(&self, inputs: &[Input]) -> Result<Any> {
        self.set_inputs(inputs)?;
        self.run.call(&[])?;
        let outs = (0..self.num_outputs)
            .map(|i| self.get_output.call_values(&[Any::from(i as i64)]))
            .collect::<Result<Vec<_>>>()?;
        Ok(Any::from_object(
            tvmrt::object::containers::array::new_array(outs),
        ))
    }
}

/// An input: a tensor read from a file, or a scalar.
struct Input {
    /// As given on the command line.
    text: String,
    value: Any,
}

/// An input as given: an array read from a file, or a scalar.
enum Given {
    Array(HostArray),
    Scalar(Any),
}

/// A scalar input (`int:5`, `float:0.5`, `bool:true`, `str:hello`); `None` for a file name.
fn parse_scalar(text: &str) -> Option<Result<Any>> {
    let (kind, value) = text.split_once(':')?;
    let bad = |what: &str| Error::value(format!("`{text}`: `{value}` is not {what}"));
    Some(match kind {
        "int" => value
            .trim()
            .parse::<i64>()
            .map(Any::from)
            .map_err(|_| bad("an int64")),
        "float" => value
            .trim()
            .parse::<f64>()
            .map(Any::from)
            .map_err(|_| bad("a number")),
        "bool" => match value.trim() {
            "true" | "1" => Ok(Any::from(true)),
            "false" | "0" => Ok(Any::from(false)),
            _ => Err(bad("true or false")),
        },
        "str" => Ok(Any::from(value)),
        _ => return None,
    })
}

/// What a call produced: a tensor's data, or a scalar shown as text.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A tensor, copied to the host.
    Array(HostArray),
    /// A scalar or other value: its text and type name.
    Scalar(String, &'static str),
}

/// A loaded library with its function resolved and its arguments ready.
pub struct Prepared {
    callee: Callee,
    inputs: Vec<Input>,
    outputs: Vec<(OutputSpec, Tensor)>,
    /// Every argument, in order (inputs, then outputs).
    args: Vec<Any>,
    /// The function name.
    pub function: String,
    /// Where it runs.
    device: DLDevice,
}

/// 1-based, human label of argument `k` (TVM numbers arguments from 0).
fn arg_label(k: usize, inputs: &[String], outputs: &[OutputSpec]) -> String {
    if k < inputs.len() {
        format!("input {} (`{}`)", k + 1, inputs[k])
    } else if let Some(o) = outputs.get(k - inputs.len()) {
        format!(
            "output {} (--output-shape {})",
            k - inputs.len() + 1,
            o.text
        )
    } else {
        format!("argument {}", k + 1)
    }
}

/// Joins a multi-line message (TVM's argument errors span three lines) into one line.
pub fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The argument index in a TVM argument error (`... on argument #1 when calling ...`).
fn failing_argument(message: &str) -> Option<usize> {
    let rest = &message[message.find("argument #")? + "argument #".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The parameter index in a Relax VM error (`ErrorContext(fn=main, loc=param[0], ...)`).
fn failing_param(message: &str) -> Option<usize> {
    let rest = &message[message.find("loc=param[")? + "loc=param[".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl Prepared {
    /// Loads the library, resolves the function and prepares its arguments.
    pub fn new(a: &CallArgs) -> Result<Prepared> {
        if let Some(n) = a.threads {
            if n == 0 {
                return Err(Error::value("--threads must be at least 1"));
            }
            tvmrt::backend::thread_pool::set_num_threads(n)?;
        }
        let format = a.format.clone().unwrap_or_default();
        // The file's own description (functions, signatures); a file that is not an ELF
        // library (an ExampleJSON file, say) simply has none.
        let info = introspect::inspect_file(&a.library).ok();
        let path = loadable_path(&a.library);
        let module = load_from_file(&path, &format).map_err(|e| load_error(&path, e))?;
        log::debug!(target: "tvmrt::cli", "loaded `{}`: root module `{}`", a.library, module.kind());

        let device = a.device;
        let mut callee = resolve(&module, &a.function, info.as_ref(), &a.library, device)?;
        let mut given = Vec::with_capacity(a.inputs.len());
        for (k, text) in a.inputs.iter().enumerate() {
            let named =
                |e: Error| Error::new(e.kind.clone(), format!("input {}: {}", k + 1, e.message));
            let text = match &mut callee {
                Callee::Graph(g) => g.take_name(text).map_err(named)?,
                _ => text.as_str(),
            };
            given.push(match parse_scalar(text) {
                Some(v) => Given::Scalar(v.map_err(named)?),
                None => Given::Array(read_npy(text).map_err(named)?),
            });
        }

        let outputs = match &callee {
            Callee::Vm(..) | Callee::Graph(_) => {
                if !a.output_shapes.is_empty() {
                    let what = match callee {
                        Callee::Graph(_) => "a graph executor model",
                        _ => "a Relax function",
                    };
                    return Err(Error::value(format!(
                        "`{}` is {what}: it returns its outputs, so --output-shape (for \
                         destination-passing kernels) does not apply",
                        a.function
                    )));
                }
                Vec::new()
            }
            Callee::Kernel(_) => {
                let sig = info.as_ref().and_then(|i| i.signature(&a.function));
                // With scalar inputs, positions no longer line up with tensor parameters: the
                // kernel checks its arguments itself.
                let tensors: Option<Vec<&HostArray>> = given
                    .iter()
                    .map(|g| match g {
                        Given::Array(a) => Some(a),
                        Given::Scalar(_) => None,
                    })
                    .collect();
                if let (Some(sig), Some(tensors)) = (sig, tensors) {
                    check_signature(&sig, &a.inputs, &tensors, &a.output_shapes)?;
                }
                a.output_shapes.clone()
            }
        };

        // Kernels and VM functions take tensors on their device; a graph executor's set_input
        // uploads host tensors itself.
        let input_device = match callee {
            Callee::Graph(_) => cpu(),
            _ => device,
        };
        let mut inputs = Vec::with_capacity(given.len());
        for (k, (g, text)) in given.into_iter().zip(&a.inputs).enumerate() {
            let value = match g {
                Given::Scalar(v) => v,
                Given::Array(arr) => Tensor::empty(&arr.shape, arr.dtype, input_device)
                    .and_then(|t| t.copy_from_bytes(&arr.data).map(|()| Any::from(t)))
                    .map_err(|e| {
                        Error::new(
                            e.kind.clone(),
                            format!("input {} (`{text}`): {}", k + 1, e.message),
                        )
                    })?,
            };
            inputs.push(Input {
                text: text.clone(),
                value,
            });
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for (k, spec) in outputs.into_iter().enumerate() {
            let t = Tensor::empty(&spec.shape, spec.dtype, device).map_err(|e| {
                Error::new(
                    e.kind.clone(),
                    format!(
                        "output {} (--output-shape {}): {}",
                        k + 1,
                        spec.text,
                        e.message
                    ),
                )
            })?;
            outs.push((spec, t));
        }
        let args = inputs
            .iter()
            .map(|i| i.value.clone())
            .chain(outs.iter().map(|(_, t)| Any::from(t.clone())))
            .collect();
        Ok(Prepared {
            callee,
            inputs,
            outputs: outs,
            args,
            function: a.function.clone(),
            device,
        })
    }

    /// Waits until the device has finished what the calls queued (kernels on OpenCL run
    /// after the call returns).
    pub fn sync(&self) -> Result<()> {
        if tvmrt::device::is_host_accessible(self.device) {
            return Ok(());
        }
        tvmrt::device::api_of(self.device)?.stream_sync(self.device, std::ptr::null_mut())
    }

    /// `packed function` (a compiled kernel or any module function) / `Relax VM function`.
    pub fn kind(&self) -> &'static str {
        match self.callee {
            Callee::Kernel(_) => "packed function",
            Callee::Vm(..) => "Relax VM function",
            Callee::Graph(_) => "graph executor model",
        }
    }

    /// Number of inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Calls the function once; returns what it returned (a tensor or an array of them), or
    /// nothing for a kernel that writes its outputs.
    pub fn call(&self) -> Result<Any> {
        let (f, args) = match &self.callee {
            Callee::Kernel(f) => (f, &self.args[..]),
            Callee::Vm(f, _) => (f, &self.args[..self.inputs.len()]),
            Callee::Graph(g) => return g.call(&self.inputs).map_err(|e| self.explain(e)),
        };
        f.call_values(args).map_err(|e| self.explain(e))
    }

    /// One call with its kernel calls timed (a Relax VM's call instructions, a graph's
    /// nodes, or the kernel itself): the profiler's report.
    pub fn profile_once(&self) -> Result<tvmrt::profiling::Report> {
        use tvmrt::profiling::{shape_string, Metric, Profiler, Row};
        match &self.callee {
            Callee::Vm(_, vm) => {
                let vm = vm
                    .downcast::<tvmrt::vm::VmModule>()
                    .ok_or_else(|| Error::runtime("the Relax VM module is not a VM"))?;
                let views: Vec<_> = self.args[..self.inputs.len()]
                    .iter()
                    .map(Any::view)
                    .collect();
                vm.profile_once(&self.function, &views)
                    .map_err(|e| self.explain(e))
            }
            Callee::Graph(g) => {
                g.set_inputs(&self.inputs)?;
                let exec = g
                    .exec
                    .downcast::<tvmrt::graph::GraphExecutor>()
                    .ok_or_else(|| Error::runtime("the graph executor module is not one"))?;
                tvmrt::graph::debug::profile_once(exec)
            }
            Callee::Kernel(f) => {
                let tensors: Vec<Tensor> = self
                    .args
                    .iter()
                    .filter_map(|a| Tensor::from_any_view(&a.view(), "argument").ok())
                    .collect();
                let shapes = shape_string(tensors.iter().map(|t| (t.dtype(), t.shape())));
                let config = Row::from([("Executor".to_string(), Metric::Str("none".into()))]);
                let mut prof = Profiler::new(vec![cpu()], config);
                prof.start()?;
                let extra = Row::from([("Argument Shapes".to_string(), Metric::Str(shapes))]);
                prof.start_call(&self.function, cpu(), extra)?;
                let ran = f.call_values(&self.args);
                prof.stop_call()?;
                prof.stop()?;
                ran.map_err(|e| self.explain(e))?;
                Ok(prof.report())
            }
        }
    }

    /// A kernel error on one line, naming the input or output it is about.
    fn explain(&self, e: Error) -> Error {
        let msg = one_line(&e.message);
        let paths: Vec<String> = self.inputs.iter().map(|i| i.text.clone()).collect();
        let specs: Vec<OutputSpec> = self.outputs.iter().map(|(s, _)| s.clone()).collect();
        let index = match self.callee {
            Callee::Kernel(_) => failing_argument(&msg),
            Callee::Vm(..) => failing_param(&msg),
            Callee::Graph(_) => None,
        };
        let msg = match index {
            Some(k) => format!("{}: {msg}", arg_label(k, &paths, &specs)),
            None if (msg.starts_with("Expected ") || msg.contains(" expects "))
                && msg.contains(" arguments") =>
            {
                format!(
                    "wrong number of arguments: {} inputs and {} outputs were passed: {msg}",
                    paths.len(),
                    specs.len()
                )
            }
            None => format!("calling `{}`: {msg}", self.function),
        };
        Error::new(e.kind.clone(), msg + &self.device_hint(&e.message))
    }

    /// When a kernel refused its tensors' device (TVM's `... device_type ..., expected
    /// opencl`), the option that runs it where it was built for.
    fn device_hint(&self, message: &str) -> String {
        if !message.contains("device_type") {
            return String::new();
        }
        let wanted = message
            .rsplit("expected ")
            .next()
            .map(|w| w.trim().trim_end_matches(['`', '.']).to_string())
            .unwrap_or_default();
        match tvmrt::device::device_type_from_name(&wanted) {
            Some(t) if t != self.device.device_type.0 => {
                format!(" (the library was built for {wanted}: run with --device {wanted})")
            }
            _ => String::new(),
        }
    }

    /// The outputs after a call: the kernel's destination tensors, then whatever the call
    /// returned.
    pub fn collect(&self, returned: Any) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        for (_, t) in &self.outputs {
            out.push(Value::Array(host_array(t)?));
        }
        returned_values(returned, &mut out)?;
        Ok(out)
    }
}

fn host_array(t: &Tensor) -> Result<HostArray> {
    Ok(HostArray {
        dtype: t.dtype(),
        shape: t.shape().to_vec(),
        data: t.to_vec()?,
    })
}

/// Appends what a call returned: nothing (None), a tensor, a scalar, or the items of an
/// `ffi.Array` (a Relax function returning a tuple).
fn returned_values(v: Any, out: &mut Vec<Value>) -> Result<()> {
    let view = v.view();
    let scalar = |text: String| Value::Scalar(text, view.type_name());
    match view.type_index() {
        type_index::NONE => {}
        type_index::TENSOR => out.push(Value::Array(host_array(&Tensor::from_any_view(
            &view,
            "the result",
        )?)?)),
        type_index::ARRAY => {
            // Both tvmrt's arrays and tvm-ffi's share the sequence cell `array_items` reads.
            let obj = view.expect_object("the result")?;
            let items = tvmrt::vm::array::array_items(&obj)
                .ok_or_else(|| Error::type_error("the result is not a readable ffi.Array"))?;
            for item in items {
                returned_values(item.to_owned_any(), out)?;
            }
        }
        _ => {
            if let Some(b) = view
                .as_bool()
                .filter(|_| view.type_index() == type_index::BOOL)
            {
                out.push(scalar(b.to_string()));
            } else if let Some(i) = view.as_i64() {
                out.push(scalar(i.to_string()));
            } else if let Some(f) = view.as_f64() {
                out.push(scalar(f.to_string()));
            } else if let Some(s) = view.as_str() {
                out.push(scalar(format!("{s:?}")));
            } else {
                out.push(scalar(format!("<{}>", view.type_name())));
            }
        }
    }
    Ok(())
}

/// A load error on one line, naming the file.
fn load_error(path: &str, e: Error) -> Error {
    let msg = one_line(&e.message);
    let msg = if msg.contains(path) {
        msg
    } else {
        format!("loading `{path}`: {msg}")
    };
    Error::new(e.kind.clone(), msg)
}

/// Finds `name`: through the Relax VM when the root module is a VM executable that has it,
/// else as a compiled function of the module or its imports.
fn resolve(
    module: &Module,
    name: &str,
    info: Option<&LibraryInfo>,
    path: &str,
    device: DLDevice,
) -> Result<Callee> {
    if let Some(summary) = tvmrt::introspect::graph_summary(module) {
        if name == summary.module_name || name == "run" {
            log::debug!(target: "tvmrt::cli", "`{name}`: the graph executor model");
            return Ok(Callee::Graph(GraphCall::new(module, &summary, device)?));
        }
    }
    let mut vm_error = None;
    if module.implements_function("vm_load_executable", false) {
        let vm = make_vm(module, device)?;
        // The VM refuses names that are not Relax functions (the executable's kernels, which
        // are then found in the imported library below).
        match vm.get_function(name, false) {
            Ok(Some(f)) => {
                log::debug!(target: "tvmrt::cli", "`{name}`: a function of the Relax VM");
                return Ok(Callee::Vm(f, vm));
            }
            Ok(None) => {}
            Err(e) => vm_error = Some(e),
        }
    }
    if let Some(f) = module.get_function(name, true)? {
        log::debug!(target: "tvmrt::cli", "`{name}`: a compiled function");
        return Ok(Callee::Kernel(f));
    }
    if let Some(e) = vm_error {
        return Err(e);
    }
    let known = match info.map(LibraryInfo::function_names) {
        Some(names) if !names.is_empty() => {
            format!(" (its compiled functions: {})", names.join(", "))
        }
        _ => String::new(),
    };
    Err(Error::attribute(format!(
        "`{path}` has no function `{name}`{known}"
    )))
}

/// Creates a VM for an executable as TVM's `relax.VirtualMachine` does:
/// `vm = exec["vm_load_executable"](); vm["vm_initialization"](kDLCPU, 0, pooled)` on the CPU,
/// `(device, pooled, kDLCPU, 0, pooled)` on another device (the CPU is the host).
fn make_vm(exec: &Module, device: DLDevice) -> Result<Module> {
    /// TVM's `VirtualMachine.POOLED_ALLOCATOR`.
    const POOLED_ALLOCATOR: i64 = 2;
    let load = exec
        .get_function("vm_load_executable", false)?
        .ok_or_else(|| Error::runtime("vm_load_executable disappeared"))?;
    let vm = load.call(&[]).map_err(|e| {
        Error::new(
            e.kind.clone(),
            format!("creating the Relax VM: {}", one_line(&e.message)),
        )
    })?;
    let vm = Module::from_view(&vm.view(), "the result of vm_load_executable")?;
    let init = vm
        .get_function("vm_initialization", false)?
        .ok_or_else(|| Error::runtime("the Relax VM has no `vm_initialization` function"))?;
    let mut args = vec![
        Any::from(device.device_type.0 as i64),
        Any::from(device.device_id as i64),
        Any::from(POOLED_ALLOCATOR),
    ];
    if !tvmrt::device::is_host_accessible(device) {
        args.extend([
            Any::from(1i64),
            Any::from(0i64),
            Any::from(POOLED_ALLOCATOR),
        ]);
    }
    init.call_values(&args).map_err(|e| {
        Error::new(
            e.kind.clone(),
            format!("initializing the Relax VM: {}", one_line(&e.message)),
        )
    })?;
    Ok(vm)
}

/// Checks the inputs and outputs against a kernel's signature before calling it, so that a
/// wrong count, dtype or shape is reported naming the file or option at fault. Checks only what
/// the signature states: non-tensor parameters or dimension expressions are left to the kernel.
fn check_signature(
    sig: &Signature,
    paths: &[String],
    inputs: &[&HostArray],
    outputs: &[OutputSpec],
) -> Result<()> {
    if sig.params.iter().any(|p| p.shape().is_none()) {
        return Ok(());
    }
    let n = sig.params.len();
    let list = sig
        .params
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let got = inputs.len() + outputs.len();
    if got != n {
        let mut msg = format!(
            "wrong number of arguments: `{}` takes {n} tensors ({list}), but {} inputs and {} \
             outputs were given",
            sig.name,
            inputs.len(),
            outputs.len()
        );
        if got < n && outputs.is_empty() {
            msg.push_str(&suggest_outputs(sig, inputs));
        }
        return Err(Error::type_error(msg));
    }
    let mut bound: Vec<(String, i64, usize)> = Vec::new();
    for (k, p) in sig.params.iter().enumerate() {
        let (dtype, shape): (DLDataType, &[i64]) = match inputs.get(k) {
            Some(a) => (a.dtype, &a.shape),
            None => {
                let o = &outputs[k - inputs.len()];
                (o.dtype, &o.shape)
            }
        };
        let who = arg_label(k, paths, outputs);
        let expected = format!("`{}` expects {p}", sig.name);
        if let Some(want) = p.dtype() {
            if want != dtype {
                return Err(Error::type_error(format!(
                    "{who}: dtype {}, but {expected}",
                    dtype_name(dtype)
                )));
            }
        }
        let dims = p.shape().unwrap_or_default();
        if dims.len() != shape.len() {
            return Err(Error::value(format!(
                "{who}: shape {shape:?} has {} dimensions, but {expected}",
                shape.len()
            )));
        }
        for (axis, (d, &v)) in dims.iter().zip(shape).enumerate() {
            match d {
                Dim::Fixed(want) if *want != v => {
                    return Err(Error::value(format!(
                        "{who}: shape {shape:?}, but {expected} (dimension {axis} must be {want})"
                    )));
                }
                Dim::Var(name) => match bound.iter().find(|b| &b.0 == name) {
                    Some((_, value, from)) if *value != v => {
                        return Err(Error::value(format!(
                            "{who}: shape {shape:?}, but {expected} with {name} = {value} (from {})",
                            arg_label(*from, paths, outputs)
                        )));
                    }
                    Some(_) => {}
                    None => bound.push((name.clone(), v, k)),
                },
                _ => {}
            }
        }
    }
    Ok(())
}

/// `; pass the outputs as --output-shape float32:16` when the remaining parameters' shapes
/// follow from the inputs.
fn suggest_outputs(sig: &Signature, inputs: &[&HostArray]) -> String {
    let mut bound: Vec<(String, i64)> = Vec::new();
    for (p, a) in sig.params.iter().zip(inputs) {
        for (d, &v) in p.shape().unwrap_or_default().iter().zip(&a.shape) {
            if let Dim::Var(n) = d {
                bound.push((n.clone(), v));
            }
        }
    }
    let mut flags = Vec::new();
    for p in sig.params.iter().skip(inputs.len()) {
        let Some(dtype) = p.dtype() else {
            return String::new();
        };
        let mut dims = Vec::new();
        for d in p.shape().unwrap_or_default() {
            let v = match d {
                Dim::Fixed(v) => *v,
                Dim::Var(n) => match bound.iter().find(|b| &b.0 == n) {
                    Some((_, v)) => *v,
                    None => return String::new(),
                },
                Dim::Expr(_) => return String::new(),
            };
            dims.push(v.to_string());
        }
        if dims.is_empty() {
            return String::new();
        }
        flags.push(format!(
            "--output-shape {}:{}",
            dtype_name(dtype),
            dims.join("x")
        ));
    }
    format!("; if the rest are outputs, pass {}", flags.join(" "))
}

/// `Path` of the n-th output file under `dir`.
pub fn output_path(dir: &Path, n: usize) -> std::path::PathBuf {
    dir.join(format!("output{n}.npy"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvmrt::dtype::dtypes;
    use tvmrt::introspect::signature::parse;

    fn arr(dtype: DLDataType, shape: &[i64]) -> HostArray {
        HostArray {
            dtype,
            shape: shape.to_vec(),
            data: Vec::new(),
        }
    }

    #[test]
    fn output_specs() {
        let s: OutputSpec = "float32:4x4".parse().unwrap();
        assert_eq!(
            (s.dtype, s.shape.as_slice()),
            (dtypes::FLOAT32, &[4i64, 4][..])
        );
        let s: OutputSpec = "int8:16".parse().unwrap();
        assert_eq!((s.dtype, s.shape.as_slice()), (dtypes::INT8, &[16i64][..]));
        assert!("float32"
            .parse::<OutputSpec>()
            .unwrap_err()
            .contains("DTYPE:D0xD1"));
        assert!("float32:"
            .parse::<OutputSpec>()
            .unwrap_err()
            .contains("no shape"));
        assert!("float32:4x-1"
            .parse::<OutputSpec>()
            .unwrap_err()
            .contains("`-1`"));
        assert!("floaty:4"
            .parse::<OutputSpec>()
            .unwrap_err()
            .contains("floaty"));
    }

    #[test]
    fn signature_checks_name_the_argument() {
        let sig =
            parse("add(A: Tensor([n], float32), B: Tensor([n], float32), C: Tensor([n], float32))")
                .unwrap();
        let paths = vec!["a.npy".to_string(), "b.npy".to_string()];
        let out: Vec<OutputSpec> = vec!["float32:4".parse().unwrap()];
        let f32_4 = arr(dtypes::FLOAT32, &[4]);
        check_signature(&sig, &paths, &[&f32_4, &f32_4], &out).unwrap();

        let e = check_signature(&sig, &paths, &[&f32_4, &arr(dtypes::FLOAT32, &[5])], &out)
            .unwrap_err();
        assert_eq!(
            e.message,
            "input 2 (`b.npy`): shape [5], but `add` expects B: Tensor([n], float32) with n = 4 \
             (from input 1 (`a.npy`))"
        );
        let e =
            check_signature(&sig, &paths, &[&arr(dtypes::INT64, &[4]), &f32_4], &out).unwrap_err();
        assert_eq!(e.kind, "TypeError");
        assert_eq!(
            e.message,
            "input 1 (`a.npy`): dtype int64, but `add` expects A: Tensor([n], float32)"
        );
        let e = check_signature(&sig, &paths, &[&f32_4, &f32_4], &[]).unwrap_err();
        assert!(
            e.message.ends_with(
                "but 2 inputs and 0 outputs were given; if the rest are outputs, pass \
                 --output-shape float32:4"
            ),
            "{}",
            e.message
        );
        let bad_out: Vec<OutputSpec> = vec!["float32:4x1".parse().unwrap()];
        let e = check_signature(&sig, &paths, &[&f32_4, &f32_4], &bad_out).unwrap_err();
        assert!(
            e.message.starts_with(
                "output 1 (--output-shape float32:4x1): shape [4, 1] has 2 dimensions"
            ),
            "{}",
            e.message
        );

        let fixed = parse("add(A: Tensor([4, 4], float32), B: Tensor([4, 4], float32))").unwrap();
        let e = check_signature(
            &fixed,
            &paths,
            &[
                &arr(dtypes::FLOAT32, &[3, 4]),
                &arr(dtypes::FLOAT32, &[4, 4]),
            ],
            &[],
        )
        .unwrap_err();
        assert!(
            e.message.ends_with("(dimension 0 must be 4)"),
            "{}",
            e.message
        );
    }

    #[test]
    fn kernel_messages_become_one_line() {
        let m = "Mismatched B.shape[0] on argument #1 when calling:\n  `add(A: Tensor([n], float32))`,\n  expected 4";
        assert_eq!(
            one_line(m),
            "Mismatched B.shape[0] on argument #1 when calling: `add(A: Tensor([n], float32))`, expected 4"
        );
        assert_eq!(failing_argument(m), Some(1));
        assert_eq!(failing_argument("Expected 3 arguments"), None);
        assert_eq!(
            failing_param("Check failed: ErrorContext(fn=main, loc=param[2], param=x) mismatch"),
            Some(2)
        );
    }
}
