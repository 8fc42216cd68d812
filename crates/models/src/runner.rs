//! A model loaded with tvmrt, and the executors that run it: one per Triton instance, each with
//! its own state (a Relax VM, a graph executor, or a compiled kernel's destination tensors).

use tvmrt::abi::{type_index, DLDevice};
use tvmrt::introspect::{self, graph_summary};
use tvmrt::module::{load_from_file, Module};
use tvmrt::object::containers::array::{array_items, new_array};
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::vm::exec::ExecutableModule;
use tvmrt::{Any, Error, Function, Result};

use crate::signature::{
    bind_vars, graph_tensor, output_name, relax_params, resolve_shape, Dim, RelaxParam, TensorSpec,
};
use crate::weights::{bind, metadata_param_names, Slot, Weights};

/// What kind of program the model file holds.
enum Program {
    /// A Relax VM executable (TVM 0.21+ `relax.build`): the function is run by a VM, its
    /// arguments the inputs and the weights as `slots` says.
    Vm { exec: Module, slots: Vec<Slot> },
    /// A classic graph executor factory (TVM <= 0.19 `relay.build`): `create(device)` makes an
    /// executor.
    Graph {
        factory: Module,
        create: String,
        /// Parameters saved beside the model (`relay.save_param_dict`), loaded into each
        /// executor over those the library holds.
        params: Option<Vec<u8>>,
    },
    /// A compiled kernel: inputs, then its outputs as destination tensors.
    Kernel { f: Function },
}

/// A loaded model and what it takes and returns.
pub struct Model {
    program: Program,
    /// The function served (`main`, the graph's, or the kernel's name).
    pub function: String,
    /// Its inputs, in call order.
    pub inputs: Vec<TensorSpec>,
    /// Its outputs, in order; empty for a Relax function until [`Model::probe_outputs`].
    pub outputs: Vec<TensorSpec>,
}

/// One line: kernels' messages span several.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Model {
    /// Loads `path`; `function` names the Relax function (default `main`) or the kernel to
    /// serve, whose last `kernel_outputs` parameters are its outputs; `params`, a graph
    /// executor model's parameter file; `weights`, a Relax model's tensor cache directory
    /// (read once here, shared by every executor: see [`crate::weights`]).
    pub fn load(
        path: &str,
        function: Option<&str>,
        kernel_outputs: usize,
        params: Option<&str>,
        weights: Option<&std::path::Path>,
    ) -> Result<Model> {
        let module = load_from_file(path, "").map_err(|e| {
            Error::new(
                e.kind.clone(),
                format!("loading `{path}`: {}", one_line(&e.message)),
            )
        })?;
        if let Some(summary) = graph_summary(&module) {
            if function.is_none_or(|f| f == summary.module_name) {
                let inputs = summary
                    .inputs
                    .iter()
                    .filter(|t| !t.param)
                    .map(|t| graph_tensor(&t.name, &t.dtype, &t.shape))
                    .collect::<Result<Vec<_>>>()?;
                let outputs = summary
                    .outputs
                    .iter()
                    .enumerate()
                    .map(|(k, t)| graph_tensor(&output_name(k), &t.dtype, &t.shape))
                    .collect::<Result<Vec<_>>>()?;
                if let Some(w) = weights {
                    return Err(Error::value(format!(
                        "`{path}` is a graph executor model: its parameters come from a \
                         `params` file beside it (relay.save_param_dict), not from the weights \
                         directory `{}`",
                        w.display()
                    )));
                }
                let params = params
                    .map(|p| {
                        std::fs::read(p)
                            .map_err(|e| Error::value(format!("reading the parameters `{p}`: {e}")))
                    })
                    .transpose()?;
                return Ok(Model {
                    program: Program::Graph {
                        factory: module,
                        create: summary.module_name.clone(),
                        params,
                    },
                    function: summary.module_name,
                    inputs,
                    outputs,
                });
            }
        }
        if let Some(em) = module.downcast::<ExecutableModule>() {
            let name = function.unwrap_or("main");
            let exec = em.executable();
            let Some((_, info)) = exec.func(name) else {
                let names: Vec<String> = introspect::vm_functions(&module)
                    .into_iter()
                    .map(|f| f.name)
                    .collect();
                return Err(Error::attribute(format!(
                    "`{path}` has no Relax function `{name}` (its functions: {})",
                    names.join(", ")
                )));
            };
            let strings: Vec<String> = exec
                .constants
                .iter()
                .filter_map(|c| c.view().as_str().map(str::to_string))
                .collect();
            let params = relax_params(name, &info.param_names, strings.iter().map(String::as_str));
            let weights = weights.map(|d| Weights::read(d, cpu())).transpose()?;
            let packed = params.iter().any(|p| matches!(p, RelaxParam::Tuple { .. }));
            let order = if weights.is_some() && packed && exec.func("_metadata").is_some() {
                metadata_order(&module)?
            } else {
                None
            };
            let (inputs, slots) = bind(name, params, weights.as_ref(), order.as_deref())?;
            return Ok(Model {
                program: Program::Vm {
                    exec: module.clone(),
                    slots,
                },
                function: name.to_string(),
                inputs,
                outputs: Vec::new(),
            });
        }
        if let Some(w) = weights {
            return Err(Error::value(format!(
                "`{path}` is not a Relax model: only a Relax function takes weights from a \
                 directory (`{}`)",
                w.display()
            )));
        }
        let Some(name) = function else {
            return Err(Error::value(format!(
                "`{path}` is neither a Relax model nor a graph executor model: name the kernel \
                 to serve with the `function` parameter"
            )));
        };
        let f = module
            .get_function(name, true)?
            .ok_or_else(|| Error::attribute(format!("`{path}` has no function `{name}`")))?;
        let sig = introspect::inspect_file(path)
            .ok()
            .and_then(|i| i.signature(name))
            .ok_or_else(|| {
                Error::value(format!(
                    "`{path}`: the signature of kernel `{name}` is not in the library, so its \
                     inputs and outputs are unknown"
                ))
            })?;
        let mut specs = Vec::new();
        for p in &sig.params {
            let (Some(dtype), Some(dims)) = (p.dtype(), p.shape()) else {
                return Err(Error::value(format!(
                    "kernel `{name}`: parameter {p} is not a tensor; the tvmrt backend serves \
                     kernels whose parameters are all tensors"
                )));
            };
            specs.push(TensorSpec {
                name: p.name.clone(),
                dtype,
                dims: dims.to_vec(),
            });
        }
        if kernel_outputs == 0 || kernel_outputs >= specs.len() {
            return Err(Error::value(format!(
                "kernel `{name}` has {} parameters: `num_outputs` must leave at least one input \
                 (it is {kernel_outputs})",
                specs.len()
            )));
        }
        let mut outputs = specs.split_off(specs.len() - kernel_outputs);
        for (k, o) in outputs.iter_mut().enumerate() {
            o.name = output_name(k);
        }
        Ok(Model {
            program: Program::Kernel { f },
            function: name.to_string(),
            inputs: specs,
            outputs,
        })
    }

    /// `Relax function`, `graph executor model` or `kernel`.
    pub fn kind(&self) -> &'static str {
        match self.program {
            Program::Vm { .. } => "Relax function",
            Program::Graph { .. } => "graph executor model",
            Program::Kernel { .. } => "kernel",
        }
    }

    /// A new executor on `device`.
    pub fn executor(&self, device: DLDevice) -> Result<Executor> {
        let call = match &self.program {
            Program::Vm { exec, slots } => {
                let vm = tvmrt::vm::initialized_vm(exec, device)?;
                let f = vm.get_function(&self.function, false)?.ok_or_else(|| {
                    Error::attribute(format!("the Relax VM has no `{}`", self.function))
                })?;
                // The weights are on the CPU; another device gets its own copy per executor.
                let on_device = |t: &Tensor| -> Result<Any> {
                    Ok(Any::from(if tvmrt::device::is_host_accessible(device) {
                        t.clone()
                    } else {
                        t.copy_to(device, None)?
                    }))
                };
                let args = slots
                    .iter()
                    .map(|s| {
                        Ok(match s {
                            Slot::Input(k) => Arg::Input(*k),
                            Slot::Weight(t) => Arg::Fixed(on_device(t)?),
                            Slot::Packed(ts) => Arg::Fixed(Any::from_object(new_array(
                                ts.iter().map(on_device).collect::<Result<Vec<_>>>()?,
                            ))),
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Call::Vm { f, _vm: vm, args }
            }
            Program::Graph {
                factory,
                create,
                params,
            } => {
                let create = factory.get_function(create, false)?.ok_or_else(|| {
                    Error::runtime("the graph executor factory lost its create function")
                })?;
                let exec = create.call_values(&[Any::from(device)])?;
                let exec = Module::from_view(&exec.view(), "the graph executor")?;
                let get = |name: &str| -> Result<Function> {
                    exec.get_function(name, false)?.ok_or_else(|| {
                        Error::runtime(format!("the graph executor has no `{name}`"))
                    })
                };
                if let Some(bytes) = params {
                    get("load_params")?
                        .call_values(&[Any::bytes(bytes)])
                        .map_err(|e| {
                            Error::new(
                                e.kind.clone(),
                                format!("loading the parameters file: {}", one_line(&e.message)),
                            )
                        })?;
                }
                Call::Graph {
                    set_input: get("set_input")?,
                    run: get("run")?,
                    get_output: get("get_output")?,
                    _exec: exec,
                }
            }
            Program::Kernel { f } => Call::Kernel { f: f.clone() },
        };
        Ok(Executor {
            call,
            device,
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
        })
    }

    /// A Relax function's outputs, found by running it on zeros with every symbolic size 1 and
    /// then 2: a dimension that differs between the two is symbolic (`n`), the others fixed.
    pub fn probe_outputs(&mut self, device: DLDevice) -> Result<()> {
        if !self.outputs.is_empty() {
            return Ok(());
        }
        let exec = self.executor(device)?;
        let run = |size: i64| -> Result<Vec<Tensor>> {
            let inputs = self
                .inputs
                .iter()
                .map(|spec| {
                    let shape: Vec<i64> = spec
                        .dims
                        .iter()
                        .map(|d| match d {
                            Dim::Fixed(v) => *v,
                            _ => size,
                        })
                        .collect();
                    let t = Tensor::empty(&shape, spec.dtype, cpu())?;
                    t.copy_from_bytes(&vec![0u8; t.nbytes()])?;
                    Ok(t)
                })
                .collect::<Result<Vec<_>>>()?;
            exec.run(&inputs)
        };
        let one = run(1).map_err(|e| {
            Error::new(
                e.kind.clone(),
                format!(
                    "running `{}` on zeros to find its outputs: {} (list the outputs in \
                     config.pbtxt instead)",
                    self.function, e.message
                ),
            )
        })?;
        let two = run(2).unwrap_or_else(|_| one.clone());
        self.outputs = one
            .iter()
            .zip(&two)
            .enumerate()
            .map(|(k, (a, b))| TensorSpec {
                name: output_name(k),
                dtype: a.dtype(),
                dims: a
                    .shape()
                    .iter()
                    .zip(b.shape().iter().chain(std::iter::repeat(&-1)))
                    .map(|(&x, &y)| {
                        if x == y {
                            Dim::Fixed(x)
                        } else {
                            Dim::Var("n".into())
                        }
                    })
                    .collect(),
            })
            .collect();
        Ok(())
    }
}

/// The parameters of `MLC-LLM`-style models in order, from their `_metadata` function
/// (MLC-LLM's engine reads it so, then `param_array_from_cache_by_name`).
fn metadata_order(exec: &Module) -> Result<Option<Vec<String>>> {
    let vm = tvmrt::vm::initialized_vm(exec, cpu())?;
    let Some(f) = vm.get_function("_metadata", false)? else {
        return Ok(None);
    };
    let v = f
        .call(&[])
        .map_err(|e| e.context("calling the model's `_metadata`"))?;
    Ok(v.view().as_str().and_then(metadata_param_names))
}

/// One argument of a Relax function: a request's input, or a weight set once.
enum Arg {
    Input(usize),
    Fixed(Any),
}

enum Call {
    Vm {
        f: Function,
        /// Keeps the VM (the function's state) alive.
        _vm: Module,
        args: Vec<Arg>,
    },
    Graph {
        set_input: Function,
        run: Function,
        get_output: Function,
        _exec: Module,
    },
    Kernel {
        f: Function,
    },
}

/// Runs a model for one Triton instance: not shared between threads at once.
pub struct Executor {
    call: Call,
    device: DLDevice,
    inputs: Vec<TensorSpec>,
    outputs: Vec<TensorSpec>,
}

impl Executor {
    /// Runs the model on host tensors (one per input, in order); returns its outputs on the
    /// host.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let on_host = tvmrt::device::is_host_accessible(self.device);
        let to_device = |t: &Tensor| -> Result<Any> {
            Ok(Any::from(if on_host {
                t.clone()
            } else {
                t.copy_to(self.device, None)?
            }))
        };
        let outputs = match &self.call {
            Call::Vm { f, args, .. } => {
                let args = args
                    .iter()
                    .map(|a| match a {
                        Arg::Input(k) => to_device(&inputs[*k]),
                        Arg::Fixed(v) => Ok(v.clone()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                let returned = f.call_values(&args)?;
                let mut out = Vec::new();
                returned_tensors(returned, &mut out)?;
                out
            }
            Call::Graph {
                set_input,
                run,
                get_output,
                ..
            } => {
                for (spec, t) in self.inputs.iter().zip(inputs) {
                    set_input
                        .call_values(&[Any::from(spec.name.as_str()), Any::from(t.clone())])?;
                }
                run.call(&[])?;
                (0..self.outputs.len())
                    .map(|i| {
                        let v = get_output.call_values(&[Any::from(i as i64)])?;
                        Tensor::from_any_view(&v.view(), "a graph output")
                    })
                    .collect::<Result<Vec<_>>>()?
            }
            Call::Kernel { f } => {
                let shapes: Vec<&[i64]> = inputs.iter().map(Tensor::shape).collect();
                let bound = bind_vars(&self.inputs, &shapes);
                let outs = self
                    .outputs
                    .iter()
                    .map(|o| Tensor::empty(&resolve_shape(o, &bound)?, o.dtype, self.device))
                    .collect::<Result<Vec<_>>>()?;
                let mut args = inputs.iter().map(to_device).collect::<Result<Vec<_>>>()?;
                args.extend(outs.iter().map(|t| Any::from(t.clone())));
                f.call_values(&args)?;
                outs
            }
        };
        if on_host {
            return Ok(outputs);
        }
        outputs.iter().map(Tensor::to_host).collect()
    }
}

/// The tensors a Relax function returned: one tensor, or a tuple (an `ffi.Array`) of them,
/// nested tuples flattened in order.
fn returned_tensors(v: Any, out: &mut Vec<Tensor>) -> Result<()> {
    let view = v.view();
    match view.type_index() {
        type_index::TENSOR => out.push(Tensor::from_any_view(&view, "the result")?),
        type_index::ARRAY => {
            let obj = view.expect_object("the result")?;
            let items = array_items(&obj)
                .ok_or_else(|| Error::type_error("the result is not a readable ffi.Array"))?;
            for item in items {
                returned_tensors(item.to_owned_any(), out)?;
            }
        }
        _ => {
            return Err(Error::type_error(format!(
                "output {} is a `{}`, not a tensor: the tvmrt backend returns tensors",
                out.len(),
                view.type_name()
            )))
        }
    }
    Ok(())
}
