//! A loaded library with its function resolved and its arguments ready: inputs read (files or
//! scalars), outputs allocated, the call, its profile, and what it returned.

use tvmrt::abi::{type_index, DLDevice};
use tvmrt::introspect;
use tvmrt::module::load_from_file;
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::{Any, Error, Result};

use super::args::{CallArgs, OutputSpec};
use super::callee::{resolve, Callee};
use super::loadable_path;
use super::messages::{arg_label, failing_argument, failing_param, load_error, one_line};
use super::signature::check_signature;
use crate::npyio::{read_npy, HostArray};

/// An input: a tensor read from a file, or a scalar.
pub(super) struct Input {
    /// As given on the command line.
    pub(super) text: String,
    pub(super) value: Any,
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
