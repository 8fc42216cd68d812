//! The functions Triton calls (`TRITONBACKEND_*`, backend API 1.19): each a boundary that
//! catches panics and turns errors into Triton errors, around safe code.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use serde_json::Value;
use tvmrt::abi::DLDevice;
use tvmrt::tensor::layout::cpu;

use crate::batch::{self, ModelView, Stats, Timing};
use crate::config::{self, Settings};
use crate::runner::{Executor, Model};
use crate::server::{self, check, log, text, BackendError, Request, Result};
use crate::signature::{batch_var, Dim};
use crate::sys::{self, Status};

/// Runs `f`; its error, or a panic, becomes a Triton error (null on success).
fn boundary(what: &str, f: impl FnOnce() -> Result<()>) -> Status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(e)) => e.into_raw(),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            BackendError::internal(format!("tvmrt backend: {what}: {why}")).into_raw()
        }
    }
}

/// What the backend keeps per model.
struct ModelState {
    name: String,
    model: Model,
    device: Option<DLDevice>,
    batched: bool,
    output_names: Vec<String>,
}

/// What the backend keeps per instance: its own executor.
struct InstanceState {
    executor: Executor,
}

/// Called once when Triton loads the backend: checks the backend API version.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[no_mangle]
pub unsafe extern "C" fn TRITONBACKEND_Initialize(
    _backend: *mut sys::TRITONBACKEND_Backend,
) -> Status {
    boundary("initialize", || {
        let (mut major, mut minor) = (0u32, 0u32);
        // SAFETY: ApiVersion writes both integers.
        check(
            unsafe { sys::TRITONBACKEND_ApiVersion(&mut major, &mut minor) },
            "reading Triton's backend API version",
        )?;
        if major != sys::BACKEND_API_MAJOR || minor < sys::BACKEND_API_MINOR {
            return Err(BackendError {
                code: sys::ERROR_UNSUPPORTED,
                message: format!(
                    "the tvmrt backend needs Triton's backend API {}.{} or a later 1.x; this \
                     server has {major}.{minor}",
                    sys::BACKEND_API_MAJOR,
                    sys::BACKEND_API_MINOR
                ),
            });
        }
        log(
            sys::LOG_INFO,
            &format!(
                "tvmrt backend {} (Triton backend API {major}.{minor})",
                env!("CARGO_PKG_VERSION")
            ),
        );
        Ok(())
    })
}

/// Reads the model's configuration.
fn model_config(model: *mut sys::TRITONBACKEND_Model) -> Result<Value> {
    let mut message = ptr::null_mut();
    // SAFETY: `model` is the live model Triton passed; the message is ours to delete.
    check(
        unsafe { sys::TRITONBACKEND_ModelConfig(model, 1, &mut message) },
        "reading the model configuration",
    )?;
    // SAFETY: `message` was just returned live.
    let value = unsafe { server::message_json(message) };
    server::delete_message(message);
    value
}

fn parse_device(text: &str) -> Result<DLDevice> {
    let dev = tvmrt::device::parse_device(text)
        .map_err(|e| BackendError::invalid(format!("parameter `device`: {}", e.message)))?;
    tvmrt::device::api_of(dev).map_err(|e| {
        BackendError::invalid(format!("parameter `device` `{text}`: {}", e.message))
    })?;
    Ok(dev)
}

fn load_model(model: *mut sys::TRITONBACKEND_Model) -> Result<ModelState> {
    let (mut name, mut location) = (ptr::null(), ptr::null());
    let mut version = 0u64;
    let mut artifact = 0;
    let mut auto_complete = false;
    // SAFETY: `model` is live; the strings it returns live as long as it does and are copied.
    let (name, location) = unsafe {
        check(
            sys::TRITONBACKEND_ModelName(model, &mut name),
            "reading the model name",
        )?;
        check(
            sys::TRITONBACKEND_ModelVersion(model, &mut version),
            "reading the model version",
        )?;
        check(
            sys::TRITONBACKEND_ModelRepository(model, &mut artifact, &mut location),
            "reading the model location",
        )?;
        check(
            sys::TRITONBACKEND_ModelAutoCompleteConfig(model, &mut auto_complete),
            "reading the auto-complete setting",
        )?;
        (text(name), text(location))
    };
    let fail = |m: String| BackendError::invalid(format!("model `{name}`: {m}"));
    let mut config = model_config(model)?;
    let settings = Settings::from_config(&config).map_err(fail)?;
    if let Some(n) = settings.threads {
        tvmrt::backend::thread_pool::set_num_threads(n).map_err(|e| fail(e.message.clone()))?;
    }
    let device = settings.device.as_deref().map(parse_device).transpose()?;
    let path = format!("{location}/{version}/{}", settings.filename);
    if !std::path::Path::new(&path).is_file() {
        return Err(BackendError {
            code: sys::ERROR_NOT_FOUND,
            message: format!("model `{name}`: no model file `{path}`"),
        });
    }
    // A graph executor model's parameters may come as a file beside it (TVM <= 0.19 deployments
    // save them with relay.save_param_dict).
    let params = format!("{location}/{version}/params");
    let params = std::path::Path::new(&params).is_file().then_some(params);
    // A Relax model's weights kept out of its library: the tensor cache the `weights`
    // parameter names (relative to the version directory), else `weights/` there if present.
    let version_dir = std::path::Path::new(&location).join(version.to_string());
    let weights = match &settings.weights {
        Some(w) => Some(version_dir.join(w)),
        None => Some(version_dir.join("weights")).filter(|d| d.is_dir()),
    };
    let mut loaded = Model::load(
        &path,
        settings.function.as_deref(),
        settings.num_outputs,
        params.as_deref(),
        weights.as_deref(),
    )
    .map_err(|e| fail(server::BackendError::from(e).message))?;

    let listed_outputs = config::listed_tensors(&config, "output");
    if loaded.outputs.is_empty() && (auto_complete && listed_outputs.is_empty()) {
        // On the device the instances will use: a model built for CUDA refuses host inputs.
        let probe_device = match device {
            Some(d) => d,
            None => match config::first_gpu(&config) {
                Some(gpu) => tvmrt::device::parse_device(&format!("cuda:{gpu}"))
                    .map_err(|e| fail(e.message.clone()))?,
                None => cpu(),
            },
        };
        loaded
            .probe_outputs(probe_device)
            .map_err(|e| fail(server::BackendError::from(e).message))?;
    }
    // Batchable: every input and output has the same symbolic first dimension (outputs found
    // by the probe have `n`), and the program is not a graph executor (static shapes).
    let batchable = batch_var(&loaded.inputs).is_some()
        && loaded
            .outputs
            .iter()
            .all(|o| matches!(o.dims.first(), Some(Dim::Var(_))));
    if auto_complete
        && config::autocomplete(&mut config, &loaded.inputs, &loaded.outputs, batchable)
    {
        let message = server::json_message(&config)?;
        // SAFETY: `model` is live; SetConfig copies the message, which is deleted after.
        let status = unsafe { sys::TRITONBACKEND_ModelSetConfig(model, 1, message) };
        server::delete_message(message);
        check(status, "setting the completed configuration")?;
        config = model_config(model)?;
    }
    let settings = Settings::from_config(&config).map_err(fail)?;
    let batched = settings.max_batch_size > 0;
    let checked = config::check_against_model(
        &config,
        &loaded.function,
        &loaded.inputs,
        &loaded.outputs,
        batch_var(&loaded.inputs).is_some(),
    )
    .map_err(fail)?;
    for warning in &checked.warnings {
        log(sys::LOG_WARN, &format!("model `{name}`: {warning}"));
    }
    let output_names = checked.output_names;
    log(
        sys::LOG_INFO,
        &format!(
            "tvmrt: model `{name}` version {version}: `{path}`, {} `{}` ({}) -> {}, max_batch_size {}",
            loaded.kind(),
            loaded.function,
            describe(&loaded.inputs),
            if loaded.outputs.is_empty() { output_names.join(", ") } else { describe(&loaded.outputs) },
            settings.max_batch_size
        ),
    );
    Ok(ModelState {
        name,
        model: loaded,
        device,
        batched,
        output_names,
    })
}

fn describe(specs: &[crate::signature::TensorSpec]) -> String {
    specs
        .iter()
        .map(|s| s.describe())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Loads a model: reads and completes its configuration, opens its library.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[no_mangle]
pub unsafe extern "C" fn TRITONBACKEND_ModelInitialize(
    model: *mut sys::TRITONBACKEND_Model,
) -> Status {
    boundary("loading a model", || {
        let state = Box::new(load_model(model)?);
        // SAFETY: the state is reclaimed in ModelFinalize, the only place that frees it.
        check(
            unsafe { sys::TRITONBACKEND_ModelSetState(model, Box::into_raw(state).cast()) },
            "storing the model state",
        )
    })
}

/// The state of `model` (set by ModelInitialize).
///
/// # Safety
/// `model` is live and its state is a `ModelState` not yet finalized.
unsafe fn model_state<'a>(model: *mut sys::TRITONBACKEND_Model) -> Result<&'a ModelState> {
    let mut state: *mut c_void = ptr::null_mut();
    check(
        sys::TRITONBACKEND_ModelState(model, &mut state),
        "reading the model state",
    )?;
    state
        .cast::<ModelState>()
        .as_ref()
        .ok_or_else(|| BackendError::internal("the model has no state"))
}

/// Unloads a model (after its instances).
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[no_mangle]
pub unsafe extern "C" fn TRITONBACKEND_ModelFinalize(
    model: *mut sys::TRITONBACKEND_Model,
) -> Status {
    boundary("unloading a model", || {
        let mut state: *mut c_void = ptr::null_mut();
        // SAFETY: Triton finalizes a model once, after its instances; the box came from
        // ModelInitialize.
        unsafe {
            check(
                sys::TRITONBACKEND_ModelState(model, &mut state),
                "reading the model state",
            )?;
            if !state.is_null() {
                drop(Box::from_raw(state.cast::<ModelState>()));
            }
        }
        Ok(())
    })
}

/// Creates an instance's executor on its device.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[no_mangle]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceInitialize(
    instance: *mut sys::TRITONBACKEND_ModelInstance,
) -> Status {
    boundary("creating a model instance", || {
        let mut model = ptr::null_mut();
        let mut kind = 0;
        let mut device_id = 0i32;
        let mut name = ptr::null();
        // SAFETY: `instance` is live; its model outlives it.
        let (state, iname) = unsafe {
            check(
                sys::TRITONBACKEND_ModelInstanceModel(instance, &mut model),
                "reading the instance's model",
            )?;
            check(
                sys::TRITONBACKEND_ModelInstanceKind(instance, &mut kind),
                "reading the instance kind",
            )?;
            check(
                sys::TRITONBACKEND_ModelInstanceDeviceId(instance, &mut device_id),
                "reading the instance device",
            )?;
            check(
                sys::TRITONBACKEND_ModelInstanceName(instance, &mut name),
                "reading the instance name",
            )?;
            (model_state(model)?, text(name))
        };
        let device = match state.device {
            Some(d) => d,
            None if kind == sys::INSTANCEGROUPKIND_GPU => {
                parse_device(&format!("cuda:{device_id}"))?
            }
            None => cpu(),
        };
        let executor = state.model.executor(device).map_err(|e| {
            BackendError::invalid(format!(
                "model `{}` instance `{iname}`: {}",
                state.name,
                crate::runner::one_line(&e.message)
            ))
        })?;
        log(
            sys::LOG_INFO,
            &format!(
                "tvmrt: model `{}` instance `{iname}` on {}",
                state.name,
                tvmrt::device::device_name(device)
            ),
        );
        let boxed = Box::new(InstanceState { executor });
        // SAFETY: reclaimed in ModelInstanceFinalize only.
        check(
            unsafe {
                sys::TRITONBACKEND_ModelInstanceSetState(instance, Box::into_raw(boxed).cast())
            },
            "storing the instance state",
        )
    })
}

/// Drops an instance's executor.
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[no_mangle]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceFinalize(
    instance: *mut sys::TRITONBACKEND_ModelInstance,
) -> Status {
    boundary("removing a model instance", || {
        let mut state: *mut c_void = ptr::null_mut();
        // SAFETY: finalized once; the box came from ModelInstanceInitialize.
        unsafe {
            check(
                sys::TRITONBACKEND_ModelInstanceState(instance, &mut state),
                "reading the instance state",
            )?;
            if !state.is_null() {
                drop(Box::from_raw(state.cast::<InstanceState>()));
            }
        }
        Ok(())
    })
}

/// Statistics for one instance.
struct InstanceStats(*mut sys::TRITONBACKEND_ModelInstance);

impl Stats<Request> for InstanceStats {
    fn request(&self, request: &Request, success: bool, exec_start: u64, t: Timing, exec_end: u64) {
        // SAFETY: the instance and the (not yet released) request are live.
        let status = unsafe {
            sys::TRITONBACKEND_ModelInstanceReportStatistics(
                self.0,
                request.0,
                success,
                exec_start,
                t.compute_start,
                t.compute_end,
                exec_end,
            )
        };
        if let Err(e) = check(status, "reporting statistics") {
            log(sys::LOG_ERROR, &e.message);
        }
    }

    fn batch(&self, batch_size: u64, exec_start: u64, t: Timing, exec_end: u64) {
        // SAFETY: the instance is live.
        let status = unsafe {
            sys::TRITONBACKEND_ModelInstanceReportBatchStatistics(
                self.0,
                batch_size,
                exec_start,
                t.compute_start,
                t.compute_end,
                exec_end,
            )
        };
        if let Err(e) = check(status, "reporting batch statistics") {
            log(sys::LOG_ERROR, &e.message);
        }
    }
}

/// Runs a batch of requests and answers each (the backend owns and releases them).
///
/// # Safety
/// Called by Triton with the live handles its backend API documents.
#[no_mangle]
pub unsafe extern "C" fn TRITONBACKEND_ModelInstanceExecute(
    instance: *mut sys::TRITONBACKEND_ModelInstance,
    requests: *mut *mut sys::TRITONBACKEND_Request,
    request_count: u32,
) -> Status {
    boundary("executing requests", || {
        let requests: Vec<Request> = if requests.is_null() {
            Vec::new()
        } else {
            // SAFETY: Triton passes `request_count` live requests, which the backend now owns
            // until it releases each (batch::execute does, whatever happens).
            unsafe { std::slice::from_raw_parts(requests, request_count as usize) }
                .iter()
                .map(|&r| Request(r))
                .collect()
        };
        let mut model = ptr::null_mut();
        let mut state: *mut c_void = ptr::null_mut();
        // SAFETY: the instance, its model and both states are live during execution.
        let (model_state, instance_state) = unsafe {
            check(
                sys::TRITONBACKEND_ModelInstanceModel(instance, &mut model),
                "reading the instance's model",
            )?;
            check(
                sys::TRITONBACKEND_ModelInstanceState(instance, &mut state),
                "reading the instance state",
            )?;
            (
                model_state(model)?,
                state
                    .cast::<InstanceState>()
                    .as_ref()
                    .ok_or_else(|| BackendError::internal("the instance has no state"))?,
            )
        };
        let view = ModelView {
            inputs: &model_state.model.inputs,
            output_names: model_state.output_names.clone(),
            batched: model_state.batched,
        };
        batch::execute(
            &instance_state.executor,
            &view,
            &requests,
            &InstanceStats(instance),
        );
        Ok(())
    })
}
