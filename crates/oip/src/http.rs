//! The HTTP front of KServe's Open Inference Protocol (v2) with Triton's extensions: health,
//! server and model metadata, model configuration, inference (JSON and binary tensors), the
//! model repository (index, load, unload), statistics, and Prometheus `/metrics`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::compression;
use crate::error::ApiError;
use crate::infer::{decode_request, encode_response, InferRequest, Tensor};
use crate::load_request;
use crate::repository::Repository;
use crate::stats;
use crate::trace::Trace;

/// The header naming the JSON's length when binary tensors follow it.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// Limits on requests.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The largest request body in bytes (413 beyond).
    pub max_body: usize,
    /// How long a model may take to answer a request.
    pub timeout: Duration,
    /// How long a request's header may take to arrive (the connection is closed beyond).
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive (408 beyond).
    pub body_timeout: Duration,
}

/// What the handlers share.
pub struct App {
    /// The models.
    pub repo: Arc<Repository>,
    /// Request limits.
    pub limits: Limits,
    /// The registered system shared memory regions.
    pub shm: crate::shm::Regions,
    /// Set once the initial models are loaded.
    pub ready: AtomicBool,
    /// Set at shutdown: readiness turns false.
    pub stopping: AtomicBool,
    /// Tracing of sampled requests (Triton's trace extension).
    pub tracer: crate::trace::Tracer,
    /// Requests in flight, for giving memory back when none runs ([`crate::idle`]).
    pub idle: Arc<crate::idle::Idle>,
    /// Other routes served beside these (the LLM server's OpenAI routes), whose `/metrics`
    /// text is appended to ours.
    pub other: Option<Router>,
}

/// The extensions of the protocol this server implements (`/v2`'s `extensions`).
pub const EXTENSIONS: &[&str] = &[
    "binary_tensor_data",
    "logging",
    "model_configuration",
    "model_repository",
    "statistics",
    "system_shared_memory",
    "trace",
];

/// The server's metadata (`/v2`).
pub fn server_metadata() -> Value {
    json!({"name": "tvmrt", "version": env!("CARGO_PKG_VERSION"), "extensions": EXTENSIONS})
}

/// The router of every route.
pub fn router(app: Arc<App>) -> Router {
    let router = Router::new()
        .route(
            "/v2/health/live",
            get(|| async { Json(json!({"live": true})) }),
        )
        .route("/v2/health/ready", get(server_ready))
        .route("/v2", get(|| async { Json(server_metadata()) }))
        .route("/v2/models/{m}", get(model_metadata))
        .route("/v2/models/{m}/versions/{v}", get(model_metadata_v))
        .route("/v2/models/{m}/ready", get(model_ready))
        .route("/v2/models/{m}/versions/{v}/ready", get(model_ready_v))
        .route("/v2/models/{m}/config", get(model_config))
        .route("/v2/models/{m}/versions/{v}/config", get(model_config_v))
        .route("/v2/models/{m}/infer", post(infer))
        .route("/v2/models/{m}/versions/{v}/infer", post(infer_v))
        .route("/v2/models/stats", get(all_stats))
        .route("/v2/models/{m}/stats", get(model_stats))
        .route("/v2/models/{m}/versions/{v}/stats", get(model_stats_v))
        .route("/v2/repository/index", post(repository_index))
        .route("/v2/repository/models/{m}/load", post(load))
        .route("/v2/repository/models/{m}/unload", post(unload))
        .route("/metrics", get(metrics))
        .merge(crate::triton_http::routes());
    let router = match &app.other {
        Some(other) => router.fallback_service(other.clone()),
        None => router.fallback(|| async { ApiError::not_found("no such route") }),
    };
    router.with_state(app)
}

type Shared = State<Arc<App>>;

async fn server_ready(State(app): Shared) -> Response {
    if app.ready.load(Ordering::Relaxed) && !app.stopping.load(Ordering::Relaxed) {
        Json(json!({"ready": true})).into_response()
    } else if app.stopping.load(Ordering::Relaxed) {
        ApiError::unavailable("the server is shutting down").into_response()
    } else {
        ApiError::unavailable("the server is loading its models").into_response()
    }
}

async fn model_metadata(
    State(app): Shared,
    Path(m): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(app.repo.get(&m, None)?.metadata()))
}

async fn model_metadata_v(
    State(app): Shared,
    Path((m, v)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(app.repo.get(&m, Some(&v))?.metadata()))
}

async fn model_ready(State(app): Shared, Path(m): Path<String>) -> Result<Json<Value>, ApiError> {
    app.repo
        .get(&m, None)
        .map(|_| Json(json!({"name": m, "ready": true})))
}

async fn model_ready_v(
    State(app): Shared,
    Path((m, v)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    app.repo
        .get(&m, Some(&v))
        .map(|_| Json(json!({"name": m, "ready": true})))
}

async fn model_config(State(app): Shared, Path(m): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(app.repo.get(&m, None)?.config.clone()))
}

async fn model_config_v(
    State(app): Shared,
    Path((m, v)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(app.repo.get(&m, Some(&v))?.config.clone()))
}

/// Reads a body of at most `limits.max_body` bytes within `limits.body_timeout`.
pub async fn read_body(body: Body, limits: &Limits) -> Result<axum::body::Bytes, ApiError> {
    let read = axum::body::to_bytes(body, limits.max_body);
    match tokio::time::timeout(limits.body_timeout, read).await {
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s (--body-read-timeout)",
                limits.body_timeout.as_secs_f64()
            ),
        )),
        Ok(Err(_)) => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than {} bytes (--max-request-size), or was cut off",
                limits.max_body
            ),
        )),
        Ok(Ok(b)) => Ok(b),
    }
}

/// Runs `request` on model `m` (version `v`): its outputs, or the error; `trace`, if the
/// request is traced, gets its steps from `REQUEST_START` on.
pub async fn run_request(
    app: &App,
    m: &str,
    v: Option<&str>,
    request: InferRequest,
    trace: Option<&Arc<Trace>>,
) -> Result<(Arc<crate::model::ServedModel>, InferRequest, Vec<Tensor>), ApiError> {
    crate::trace::stamp(trace, "REQUEST_START");
    let _busy = app.idle.busy();
    if app.stopping.load(Ordering::Relaxed) {
        return Err(ApiError::unavailable("the server is shutting down"));
    }
    let model = app.repo.get(m, v)?;
    crate::log_verbose!(
        1,
        "infer request for '{}' version {}",
        model.name,
        model.version
    );
    if let Some(t) = trace {
        t.set_version(&model.version);
    }
    // What the response needs of the request; its inputs go to the model.
    let mut request = request;
    app.shm.read_inputs(&mut request)?;
    let kept = InferRequest {
        id: request.id.clone(),
        inputs: Vec::new(),
        outputs: request.outputs.clone(),
        binary_outputs: request.binary_outputs,
        shm_inputs: Vec::new(),
    };
    let answer = model
        .infer(request, app.limits.timeout, trace.cloned())
        .await?;
    let mut outputs = answer.map_err(ApiError::bad_request)?;
    app.shm.write_outputs(&kept, &mut outputs)?;
    Ok((model, kept, outputs))
}

async fn infer_at(
    app: &App,
    m: &str,
    v: Option<&str>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let trace = app.tracer.start(m);
    let stamp = |name| crate::trace::stamp(trace.as_ref(), name);
    stamp("HTTP_RECV_START");
    let coding = compression::request_coding(headers)?;
    let header_length = match headers.get(HEADER_LENGTH) {
        None => None,
        Some(h) => Some(
            h.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request("Inference-Header-Content-Length is not a byte count")
                })?,
        ),
    };
    let mut body = read_body(body, &app.limits).await?;
    if let Some(coding) = coding {
        body = compression::decompress(coding, &body, app.limits.max_body)?.into();
    }
    let request = decode_request(&body, header_length)?;
    drop(body);
    stamp("HTTP_RECV_END");
    let (model, request, outputs) = run_request(app, m, v, request, trace.as_ref()).await?;
    stamp("HTTP_SEND_START");
    let mut encoded = encode_response(&model.name, &model.version, &request, &outputs);
    let coding = compression::response_coding(headers);
    let coded = coding.map(|c| {
        let (body, name) = compression::compress(c, &encoded.body);
        encoded.body = body;
        name
    });
    let mut response = Response::new(Body::from(encoded.body));
    let h = response.headers_mut();
    if let Some(name) = coded {
        h.insert(header::CONTENT_ENCODING, name);
    }
    match encoded.header_length {
        Some(n) => {
            h.insert(
                header::CONTENT_TYPE,
                "application/octet-stream".parse().expect("a header"),
            );
            h.insert(HEADER_LENGTH, n.into());
        }
        None => {
            h.insert(
                header::CONTENT_TYPE,
                "application/json".parse().expect("a header"),
            );
        }
    }
    stamp("HTTP_SEND_END");
    Ok(response)
}

async fn infer(
    State(app): Shared,
    Path(m): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    infer_at(&app, &m, None, &headers, body)
        .await
        .into_response()
}

async fn infer_v(
    State(app): Shared,
    Path((m, v)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    infer_at(&app, &m, Some(&v), &headers, body)
        .await
        .into_response()
}

/// `model_stats` of the ready models (all, or `m`'s).
pub fn stats_json(app: &App, m: Option<&str>, v: Option<&str>) -> Result<Value, ApiError> {
    let models = match m {
        Some(m) => vec![app.repo.get(m, v)?],
        None => app.repo.ready(),
    };
    let list: Vec<Value> = models
        .iter()
        .map(|s| s.stats().to_json(&s.name, &s.version))
        .collect();
    Ok(json!({ "model_stats": list }))
}

async fn all_stats(State(app): Shared) -> Result<Json<Value>, ApiError> {
    stats_json(&app, None, None).map(Json)
}

async fn model_stats(State(app): Shared, Path(m): Path<String>) -> Result<Json<Value>, ApiError> {
    stats_json(&app, Some(&m), None).map(Json)
}

async fn model_stats_v(
    State(app): Shared,
    Path((m, v)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    stats_json(&app, Some(&m), Some(&v)).map(Json)
}

async fn repository_index(State(app): Shared, body: Body) -> Result<Json<Value>, ApiError> {
    let body = read_body(body, &app.limits).await?;
    let ready = if body.iter().all(u8::is_ascii_whitespace) {
        false
    } else {
        let v: Value = serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!("malformed repository index request: {e}"))
        })?;
        v.get("ready").and_then(Value::as_bool).unwrap_or(false)
    };
    Ok(Json(app.repo.index(ready)))
}

async fn load(
    State(app): Shared,
    Path(m): Path<String>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let body = read_body(body, &app.limits).await?;
    let params = load_request::http_params(&m, &body)?;
    let config = load_request::config_override(&m, params)?;
    app.repo.load(&m, config).await.map(|_| Json(json!({})))
}

async fn unload(State(app): Shared, Path(m): Path<String>) -> Result<Json<Value>, ApiError> {
    app.repo.unload(&m).await.map(|_| Json(json!({})))
}

async fn metrics(State(app): Shared) -> Response {
    let models: Vec<_> = app
        .repo
        .ready()
        .iter()
        .map(|s| (s.name.clone(), s.version.clone(), s.stats(), s.pending()))
        .collect();
    let mut text = stats::prometheus(&models);
    if let Some(other) = &app.other {
        text.push_str(&other_metrics(other).await);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The `/metrics` text of the routes served beside ours (empty if they have none).
async fn other_metrics(other: &Router) -> String {
    use tower::ServiceExt;
    let request = axum::http::Request::get("/metrics")
        .body(Body::empty())
        .expect("a request");
    let Ok(response) = other.clone().oneshot(request).await;
    if !response.status().is_success() {
        return String::new();
    }
    let body = axum::body::to_bytes(response.into_body(), 16 << 20).await;
    body.map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}
