//! The functions Triton calls (`TRITONBACKEND_*`, backend API 1.19): each a boundary that
//! catches panics and turns errors into Triton errors, around safe code.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use serde_json::Value;

use tvmrt_models::load::{self, LoadError, Loaded};
use tvmrt_models::runner::one_line;
use tvmrt_models::{batch, Executor, ModelView, Stats, Timing};

use crate::server::{self, check, log, text, BackendError, Request, Result};
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
    loaded: Loaded,
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

impl From<LoadError> for BackendError {
    fn from(e: LoadError) -> BackendError {
        match e {
            LoadError::NotFound(message) => BackendError {
                code: sys::ERROR_NOT_FOUND,
                message,
            },
            LoadError::Invalid(message) => BackendError::invalid(message),
        }
    }
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
    let mut config = model_config(model)?;
    let version_dir = std::path::Path::new(&location).join(version.to_string());
    let loaded = load::open(&name, &version_dir, &config, auto_complete)?;
    if auto_complete && load::complete(&mut config, &loaded) {
        let message = server::json_message(&config)?;
        // SAFETY: `model` is live; SetConfig copies the message, which is deleted after.
        let status = unsafe { sys::TRITONBACKEND_ModelSetConfig(model, 1, message) };
        server::delete_message(message);
        check(status, "setting the completed configuration")?;
        config = model_config(model)?;
    }
    let served = load::finish(&loaded, &config)?;
    for warning in &served.warnings {
        log(sys::LOG_WARN, &format!("model `{name}`: {warning}"));
    }
    log(
        sys::LOG_INFO,
        &format!("tvmrt: {}", served.summary(&loaded, &version.to_string())),
    );
    Ok(ModelState {
        loaded,
        batched: served.batched,
        output_names: served.output_names,
    })
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
        let gpu = (kind == sys::INSTANCEGROUPKIND_GPU).then_some(device_id as i64);
        let device = load::instance_device(state.loaded.device, gpu).map_err(|m| {
            BackendError::invalid(format!(
                "model `{}` instance `{iname}`: {m}",
                state.loaded.name
            ))
        })?;
        let executor = state.loaded.model.executor(device).map_err(|e| {
            BackendError::invalid(format!(
                "model `{}` instance `{iname}`: {}",
                state.loaded.name,
                one_line(&e.message)
            ))
        })?;
        log(
            sys::LOG_INFO,
            &format!(
                "tvmrt: model `{}` instance `{iname}` on {}",
                state.loaded.name,
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
            inputs: &model_state.loaded.model.inputs,
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
