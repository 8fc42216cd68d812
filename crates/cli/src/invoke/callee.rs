//! Finding the function to call: through the Relax VM when the root module is a VM executable
//! that has it, a graph executor's `run`, or a compiled kernel of the module or its imports.

use tvmrt::abi::DLDevice;
use tvmrt::introspect::LibraryInfo;
use tvmrt::module::Module;
use tvmrt::{Any, Error, Function, Result};

use super::messages::one_line;
use super::prepared::Input;

/// How the function is called.
pub(super) enum Callee {
    /// A compiled kernel (destination-passing: outputs appended to the arguments).
    Kernel(Function),
    /// A function of a Relax VM (returns its outputs). The VM module is kept alive with it.
    Vm(Function, #[allow(dead_code)] Module),
    /// A graph executor (TVM <= 0.19 model): inputs set by name, then `run`; returns the
    /// outputs. The names are filled in as the inputs are read.
    Graph(GraphCall),
}

/// A graph executor's functions and the input name of each `--input`.
pub(super) struct GraphCall {
    /// The executor module (for profiling).
    pub(super) exec: Module,
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
    pub(super) fn take_name<'t>(&mut self, text: &'t str) -> Result<&'t str> {
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

    pub(super) fn set_inputs(&self, inputs: &[Input]) -> Result<()> {
        for (name, input) in self.names.iter().zip(inputs) {
            self.set_input
                .call_values(&[Any::from(name.as_str()), input.value.clone()])
                .map_err(|e| {
                    Error::new(e.kind.clone(), format!("input `{name}`: {}", e.message))
                })?;
        }
        Ok(())
    }

    pub(super) fn call(&self, inputs: &[Input]) -> Result<Any> {
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

/// Finds `name`: through the Relax VM when the root module is a VM executable that has it,
/// else as a compiled function of the module or its imports.
pub(super) fn resolve(
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
        // The CLI prints one line per error: the kernels' messages span several.
        let vm = tvmrt::vm::initialized_vm(module, device)
            .map_err(|e| Error::new(e.kind.clone(), one_line(&e.message)))?;
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
