//! Triton's HTTP routes beyond the protocol's inference and repository: system shared memory
//! (`/v2/systemsharedmemory/...`, over [`crate::shm`]), trace settings (`/v2/trace/setting`,
//! `/v2/models/M/trace/setting`, [`crate::trace`]), log settings (`/v2/logging`,
//! [`crate::logging`]), and 501 naming what tvmrt serve does not have (CUDA shared memory).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use crate::error::ApiError;
use crate::http::{read_body, App};
use crate::logging;

type Shared = State<Arc<App>>;

/// The routes, to merge into the server's router.
pub fn routes() -> Router<Arc<App>> {
    let unsupported = |feature: &'static str| move || async move { unsupported(feature) };
    Router::new()
        .route("/v2/systemsharedmemory/status", get(status_all))
        .route("/v2/systemsharedmemory/region/{r}/status", get(status_one))
        .route("/v2/systemsharedmemory/region/{r}/register", post(register))
        .route(
            "/v2/systemsharedmemory/region/{r}/unregister",
            post(unregister_one),
        )
        .route("/v2/systemsharedmemory/unregister", post(unregister_all))
        .route(
            "/v2/cudasharedmemory/status",
            get(unsupported("CUDA shared memory")),
        )
        .route(
            "/v2/cudasharedmemory/region/{r}/{op}",
            get(unsupported("CUDA shared memory")).post(unsupported("CUDA shared memory")),
        )
        .route(
            "/v2/cudasharedmemory/unregister",
            post(unsupported("CUDA shared memory")),
        )
        .route(
            "/v2/trace/setting",
            get(trace_global).post(update_trace_global),
        )
        .route(
            "/v2/models/{m}/trace/setting",
            get(trace_model).post(update_trace_model),
        )
        .route("/v2/logging", get(log_settings).post(update_log_settings))
}

/// A settings update's body: a JSON object.
async fn settings_body(app: &App, body: Body, what: &str) -> Result<Map<String, Value>, ApiError> {
    let body = read_body(body, &app.limits).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(&body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad_request(format!(
            "a {what} update must be a JSON object"
        ))),
        Err(e) => Err(ApiError::bad_request(format!(
            "malformed {what} update: {e}"
        ))),
    }
}

/// The settings `model` traces with (checked to be a model being served), or the server's.
pub fn trace_settings(app: &App, model: Option<&str>) -> Result<Value, ApiError> {
    if let Some(m) = model {
        app.repo.get(m, None)?;
    }
    Ok(app.tracer.settings_json(model))
}

/// Applies a trace settings update to `model` (or the server's) and answers the settings.
pub fn update_trace(
    app: &App,
    model: Option<&str>,
    request: &Map<String, Value>,
) -> Result<Value, ApiError> {
    if let Some(m) = model {
        app.repo.get(m, None)?;
    }
    app.tracer
        .update(model, request)
        .map_err(ApiError::bad_request)?;
    trace_settings(app, model)
}

async fn trace_global(State(app): Shared) -> Result<Json<Value>, ApiError> {
    Ok(Json(trace_settings(&app, None)?))
}

async fn trace_model(State(app): Shared, Path(m): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(trace_settings(&app, Some(&m))?))
}

async fn update_trace_global(State(app): Shared, body: Body) -> Result<Json<Value>, ApiError> {
    let request = settings_body(&app, body, "trace setting").await?;
    Ok(Json(update_trace(&app, None, &request)?))
}

async fn update_trace_model(
    State(app): Shared,
    Path(m): Path<String>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let request = settings_body(&app, body, "trace setting").await?;
    Ok(Json(update_trace(&app, Some(&m), &request)?))
}

async fn log_settings() -> Json<Value> {
    Json(logging::settings_json())
}

async fn update_log_settings(State(app): Shared, body: Body) -> Result<Json<Value>, ApiError> {
    let request = settings_body(&app, body, "log setting").await?;
    logging::update(&request).map_err(ApiError::bad_request)?;
    Ok(Json(logging::settings_json()))
}

/// 501, naming the feature tvmrt serve does not have.
pub fn unsupported(feature: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        format!("{feature} is not supported by tvmrt serve"),
    )
}

fn region_json(r: &crate::shm::Region) -> Value {
    json!({"name": r.name, "key": r.key, "offset": r.offset, "byte_size": r.byte_size})
}

async fn status_all(State(app): Shared) -> Result<Json<Value>, ApiError> {
    let list = app.shm.status(None)?;
    Ok(Json(list.iter().map(|r| region_json(r)).collect()))
}

async fn status_one(State(app): Shared, Path(r): Path<String>) -> Result<Json<Value>, ApiError> {
    let list = app.shm.status(Some(&r))?;
    Ok(Json(list.iter().map(|r| region_json(r)).collect()))
}

async fn register(
    State(app): Shared,
    Path(name): Path<String>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let body = read_body(body, &app.limits).await?;
    let v: Value = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!("malformed shared memory register request: {e}"))
    })?;
    let key = v["key"]
        .as_str()
        .ok_or_else(|| ApiError::bad_request("the register request needs a string `key`"))?;
    let number = |k: &str| match v.get(k) {
        None => Ok(0),
        Some(n) => n
            .as_u64()
            .ok_or_else(|| ApiError::bad_request(format!("`{k}` must be a non-negative integer"))),
    };
    app.shm
        .register(&name, key, number("offset")?, number("byte_size")?)?;
    Ok(Json(json!({})))
}

async fn unregister_one(State(app): Shared, Path(r): Path<String>) -> Json<Value> {
    app.shm.unregister(Some(&r));
    Json(json!({}))
}

async fn unregister_all(State(app): Shared) -> Json<Value> {
    app.shm.unregister(None);
    Json(json!({}))
}
