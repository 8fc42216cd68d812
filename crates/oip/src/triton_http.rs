//! Triton's HTTP routes beyond the protocol's inference and repository: system shared memory
//! (`/v2/systemsharedmemory/...`, over [`crate::shm`]), and 501 naming what tvmrt serve does
//! not have (CUDA shared memory, trace and log settings).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::http::{read_body, App};

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
            get(unsupported("tracing (trace settings)"))
                .post(unsupported("tracing (trace settings)")),
        )
        .route(
            "/v2/models/{m}/trace/setting",
            get(unsupported("tracing (trace settings)"))
                .post(unsupported("tracing (trace settings)")),
        )
        .route(
            "/v2/logging",
            get(unsupported("log settings")).post(unsupported("log settings")),
        )
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
