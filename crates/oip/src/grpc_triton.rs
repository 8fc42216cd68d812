//! The gRPC calls of Triton's extensions to KServe's service, as tritonclient.grpc makes them:
//! streaming inference, model configuration and statistics (the JSON the HTTP front answers,
//! read into Triton's messages by [`crate::protojson`]), the repository index, system shared
//! memory, trace and log settings (as the JSON of the HTTP routes), and a clear UNAVAILABLE for
//! what tvmrt does not have (CUDA shared memory).

use std::pin::Pin;
use std::sync::Arc;

use tokio_stream::Stream;
use tonic::{Status, Streaming};

use crate::error::ApiError;
use crate::grpc::pb::repository_index_response::ModelIndex;
use crate::grpc::pb::*;
use crate::grpc::{infer, status, version};
use crate::http::{stats_json, App};
use crate::load_request::Param;
use crate::protojson;

/// The responses of `ModelStreamInfer`.
pub type InferStream = Pin<Box<dyn Stream<Item = Result<ModelStreamInferResponse, Status>> + Send>>;

/// `ModelStreamInfer`: each request of the stream answered in order, an error as the
/// response's `error_message` (as Triton streams them) so the stream goes on.
pub fn stream(app: Arc<App>, mut requests: Streaming<ModelInferRequest>) -> InferStream {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let r = match requests.message().await {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    break;
                }
            };
            let answer = match infer(&app, r).await {
                Ok(response) => ModelStreamInferResponse {
                    error_message: String::new(),
                    infer_response: Some(response),
                },
                Err(e) => ModelStreamInferResponse {
                    error_message: e.message().to_string(),
                    infer_response: None,
                },
            };
            if tx.send(Ok(answer)).await.is_err() {
                break;
            }
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// `ModelConfig`: the completed configuration, the fields `/config` answers.
pub fn config(app: &App, r: ModelConfigRequest) -> Result<ModelConfigResponse, Status> {
    let model = app.repo.get(&r.name, version(&r.version)).map_err(status)?;
    let config = protojson::message("inference.ModelConfig", &model.config).map_err(|e| {
        status(ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            e,
        ))
    })?;
    Ok(ModelConfigResponse {
        config: Some(config),
    })
}

/// `ModelStatistics`: the statistics `/stats` answers (every ready model when `name` is empty).
pub fn statistics(app: &App, r: ModelStatisticsRequest) -> Result<ModelStatisticsResponse, Status> {
    let name = (!r.name.is_empty()).then_some(r.name.as_str());
    let json = stats_json(app, name, version(&r.version)).map_err(status)?;
    protojson::message("inference.ModelStatisticsResponse", &json).map_err(|e| {
        status(ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            e,
        ))
    })
}

/// `RepositoryIndex`: the models of the repository (the ready ones when `ready`).
pub fn index(app: &App, r: RepositoryIndexRequest) -> RepositoryIndexResponse {
    let list = app.repo.index(r.ready);
    let text = |v: &serde_json::Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    let models = list
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| ModelIndex {
            name: text(m, "name"),
            version: text(m, "version"),
            state: text(m, "state"),
            reason: text(m, "reason"),
        })
        .collect();
    RepositoryIndexResponse { models }
}

/// The model a load or unload names: Triton's `model_name`, or field 1 (`repository_name` in
/// Triton's proto) where KServe's clients put the model's name.
pub fn model_name(model_name: String, field_1: String) -> String {
    if model_name.is_empty() {
        field_1
    } else {
        model_name
    }
}

/// A load request's parameters, as [`crate::load_request::config_override`] reads them.
pub fn load_params(
    params: std::collections::HashMap<String, ModelRepositoryParameter>,
) -> Vec<(String, Param)> {
    use model_repository_parameter::ParameterChoice as C;
    params
        .into_iter()
        .map(|(k, v)| {
            let value = match v.parameter_choice {
                Some(C::StringParam(s)) => Param::Text(s),
                Some(C::BoolParam(_)) => Param::Other("bool"),
                Some(C::Int64Param(_)) => Param::Other("int64"),
                Some(C::BytesParam(_)) => Param::Other("bytes"),
                None => Param::Other("empty parameter"),
            };
            (k, value)
        })
        .collect()
}

/// UNAVAILABLE, naming the feature tvmrt serve does not have.
pub fn unsupported(feature: &str) -> Status {
    Status::unavailable(format!("{feature} is not supported by tvmrt serve"))
}

/// `SystemSharedMemoryStatus`: region `name`'s, or every region's (`name` empty).
pub fn shm_status(
    app: &App,
    r: SystemSharedMemoryStatusRequest,
) -> Result<SystemSharedMemoryStatusResponse, Status> {
    use system_shared_memory_status_response::RegionStatus;
    let name = (!r.name.is_empty()).then_some(r.name.as_str());
    let regions = app.shm.status(name).map_err(status)?;
    let regions = regions
        .iter()
        .map(|x| {
            let s = RegionStatus {
                name: x.name.clone(),
                key: x.key.clone(),
                offset: x.offset,
                byte_size: x.byte_size,
            };
            (x.name.clone(), s)
        })
        .collect();
    Ok(SystemSharedMemoryStatusResponse { regions })
}

/// `SystemSharedMemoryRegister`.
pub fn shm_register(
    app: &App,
    r: SystemSharedMemoryRegisterRequest,
) -> Result<SystemSharedMemoryRegisterResponse, Status> {
    app.shm
        .register(&r.name, &r.key, r.offset, r.byte_size)
        .map_err(status)?;
    Ok(SystemSharedMemoryRegisterResponse {})
}

/// `SystemSharedMemoryUnregister`: region `name`, or every region (`name` empty).
pub fn shm_unregister(
    app: &App,
    r: SystemSharedMemoryUnregisterRequest,
) -> Result<SystemSharedMemoryUnregisterResponse, Status> {
    app.shm
        .unregister((!r.name.is_empty()).then_some(r.name.as_str()));
    Ok(SystemSharedMemoryUnregisterResponse {})
}

/// `TraceSetting`: the update (a setting without values goes back to the global one) applied
/// as `/trace/setting` applies it; the settings in force answered.
pub fn trace_setting(app: &App, r: TraceSettingRequest) -> Result<TraceSettingResponse, Status> {
    use serde_json::Value;
    let model = (!r.model_name.is_empty()).then_some(r.model_name.as_str());
    let request: serde_json::Map<String, Value> = r
        .settings
        .into_iter()
        .map(|(key, v)| {
            let value = match (key.as_str(), v.value.len()) {
                (_, 0) => Value::Null,
                ("trace_level", _) => v.value.into_iter().map(Value::String).collect(),
                _ => Value::String(v.value.into_iter().next().unwrap_or_default()),
            };
            (key, value)
        })
        .collect();
    let answer = if request.is_empty() {
        crate::triton_http::trace_settings(app, model)
    } else {
        crate::triton_http::update_trace(app, model, &request)
    }
    .map_err(status)?;
    use trace_setting_response::SettingValue;
    let settings = answer
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let value = match v {
                Value::Array(a) => a
                    .iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect(),
                Value::String(s) => vec![s.clone()],
                other => vec![other.to_string()],
            };
            (k.clone(), SettingValue { value })
        })
        .collect();
    Ok(TraceSettingResponse { settings })
}

/// `LogSettings`: the update applied as `/v2/logging` applies it; the settings answered.
pub fn log_settings(r: LogSettingsRequest) -> Result<LogSettingsResponse, Status> {
    use serde_json::Value;
    let request: serde_json::Map<String, Value> = r
        .settings
        .into_iter()
        .map(|(key, v)| {
            use log_settings_request::setting_value::ParameterChoice as P;
            let value = match v.parameter_choice {
                None => Value::Null,
                Some(P::BoolParam(b)) => Value::Bool(b),
                Some(P::Uint32Param(n)) => Value::from(n),
                Some(P::StringParam(s)) => Value::String(s),
            };
            (key, value)
        })
        .collect();
    crate::logging::update(&request).map_err(|e| status(ApiError::bad_request(e)))?;
    use log_settings_response::setting_value::ParameterChoice as P;
    let answer = crate::logging::settings_json();
    let settings = answer
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let choice = match v {
                Value::Bool(b) => P::BoolParam(*b),
                Value::Number(n) => P::Uint32Param(n.as_u64().unwrap_or(0) as u32),
                other => P::StringParam(other.as_str().unwrap_or("").to_string()),
            };
            let value = log_settings_response::SettingValue {
                parameter_choice: Some(choice),
            };
            (k.clone(), value)
        })
        .collect();
    Ok(LogSettingsResponse { settings })
}
