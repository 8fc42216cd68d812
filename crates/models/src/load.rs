//! Loading one version of a model from a Triton-layout repository (`MODEL/VERSION/model.so`,
//! with a `params` file or a `weights/` tensor cache beside it) as its configuration says, and
//! completing and checking that configuration against the model. Both servers take the same
//! three steps: [`open`], [`complete`] (the Triton backend hands the result to Triton, which
//! hands it back), then [`finish`].

use std::path::Path;

use serde_json::Value;
use tvmrt::abi::DLDevice;
use tvmrt::tensor::layout::cpu;

use crate::config::{self, Settings};
use crate::runner::{one_line, Model};
use crate::signature::{batch_var, describe_all, Dim};

/// Why a model could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// Its model file is missing.
    NotFound(String),
    /// Its configuration or its library is at fault.
    Invalid(String),
}

impl LoadError {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            LoadError::NotFound(m) | LoadError::Invalid(m) => m,
        }
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// A model version opened: its library loaded, what it takes and returns read.
pub struct Loaded {
    /// The model's name, for messages.
    pub name: String,
    /// The model file loaded.
    pub path: String,
    /// The model.
    pub model: Model,
    /// The `device` parameter, parsed (`None`: the instance's kind decides).
    pub device: Option<DLDevice>,
}

/// The parsed `device` parameter (`cpu`, `cuda:0`, `opencl:0`, `vulkan:0`), refused when
/// this build or machine lacks its back end.
pub fn parse_device(text: &str) -> Result<DLDevice, String> {
    let dev = tvmrt::device::parse_device(text)
        .map_err(|e| format!("parameter `device`: {}", e.message))?;
    tvmrt::device::api_of(dev)
        .map_err(|e| format!("parameter `device` `{text}`: {}", e.message))?;
    Ok(dev)
}

/// Where an instance runs: the model's `device` parameter, else GPU `gpu` for a `KIND_GPU`
/// instance, else the CPU.
pub fn instance_device(
    model_device: Option<DLDevice>,
    gpu: Option<i64>,
) -> Result<DLDevice, String> {
    match (model_device, gpu) {
        (Some(d), _) => Ok(d),
        (None, Some(id)) => parse_device(&format!("cuda:{id}")),
        (None, None) => Ok(cpu()),
    }
}

/// Opens version directory `version_dir` of model `name` as `config` says (its parameters
/// `function`, `device`, `threads`, `num_outputs`, `weights` and `default_model_filename`).
/// With `auto_complete` and no outputs listed, a Relax function's outputs are found by running
/// it ([`Model::probe_outputs`]) on the device its instances will use.
pub fn open(
    name: &str,
    version_dir: &Path,
    config: &Value,
    auto_complete: bool,
) -> Result<Loaded, LoadError> {
    let fail = |m: String| LoadError::Invalid(format!("model `{name}`: {m}"));
    let settings = Settings::from_config(config).map_err(fail)?;
    if let Some(n) = settings.threads {
        tvmrt::backend::thread_pool::set_num_threads(n).map_err(|e| fail(e.message.clone()))?;
    }
    let device = settings
        .device
        .as_deref()
        .map(parse_device)
        .transpose()
        .map_err(fail)?;
    let path = version_dir.join(&settings.filename);
    let path = path.to_string_lossy().into_owned();
    if !Path::new(&path).is_file() {
        return Err(LoadError::NotFound(format!(
            "model `{name}`: no model file `{path}`"
        )));
    }
    // A graph executor model's parameters may come as a file beside it (TVM <= 0.19
    // deployments save them with relay.save_param_dict).
    let params = version_dir.join("params");
    let params = params
        .is_file()
        .then(|| params.to_string_lossy().into_owned());
    // A Relax model's weights kept out of its library: the tensor cache the `weights`
    // parameter names (relative to the version directory), else `weights/` there if present.
    let weights = match &settings.weights {
        Some(w) => Some(version_dir.join(w)),
        None => Some(version_dir.join("weights")).filter(|d| d.is_dir()),
    };
    let mut model = Model::load(
        &path,
        settings.function.as_deref(),
        settings.num_outputs,
        params.as_deref(),
        weights.as_deref(),
    )
    .map_err(|e| fail(one_line(&e.message)))?;
    if model.outputs.is_empty()
        && auto_complete
        && config::listed_tensors(config, "output").is_empty()
    {
        // On the device the instances will use: a model built for CUDA refuses host inputs.
        let probe_device = instance_device(device, config::first_gpu(config)).map_err(fail)?;
        model
            .probe_outputs(probe_device)
            .map_err(|e| fail(one_line(&e.message)))?;
    }
    Ok(Loaded {
        name: name.to_string(),
        path,
        model,
        device,
    })
}

/// Whether requests to `model` can be stacked: every input and output has the same symbolic
/// first dimension (outputs found by the probe have `n`). A graph executor model's shapes are
/// static, so it is not batchable.
pub fn batchable(model: &Model) -> bool {
    batch_var(&model.inputs).is_some()
        && model
            .outputs
            .iter()
            .all(|o| matches!(o.dims.first(), Some(Dim::Var(_))))
}

/// Completes `config` from the model ([`config::autocomplete`]); returns whether it changed.
pub fn complete(config: &mut Value, loaded: &Loaded) -> bool {
    let m = &loaded.model;
    config::autocomplete(config, &m.inputs, &m.outputs, batchable(m))
}

/// What serving a model takes from its final configuration.
#[derive(Clone, Debug)]
pub struct Served {
    /// The settings of the final configuration.
    pub settings: Settings,
    /// Requests carry a batch dimension (`max_batch_size` > 0).
    pub batched: bool,
    /// The outputs the configuration lists, in order.
    pub output_names: Vec<String>,
    /// Things that will make requests fail, worth a line in the log.
    pub warnings: Vec<String>,
}

impl Served {
    /// The line a server logs for the loaded model.
    pub fn summary(&self, loaded: &Loaded, version: &str) -> String {
        let m = &loaded.model;
        format!(
            "model `{}` version {version}: `{}`, {} `{}` ({}) -> {}, max_batch_size {}",
            loaded.name,
            loaded.path,
            m.kind(),
            m.function,
            describe_all(&m.inputs),
            if m.outputs.is_empty() {
                self.output_names.join(", ")
            } else {
                describe_all(&m.outputs)
            },
            self.settings.max_batch_size
        )
    }
}

/// Checks the final (completed) configuration against the model
/// ([`config::check_against_model`]).
pub fn finish(loaded: &Loaded, config: &Value) -> Result<Served, LoadError> {
    let fail = |m: String| LoadError::Invalid(format!("model `{}`: {m}", loaded.name));
    let settings = Settings::from_config(config).map_err(fail)?;
    let m = &loaded.model;
    let checked = config::check_against_model(
        config,
        &m.function,
        &m.inputs,
        &m.outputs,
        batch_var(&m.inputs).is_some(),
    )
    .map_err(fail)?;
    Ok(Served {
        batched: settings.max_batch_size > 0,
        settings,
        output_names: checked.output_names,
        warnings: checked.warnings,
    })
}
