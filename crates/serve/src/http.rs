//! The HTTP front (axum): handlers only authenticate, validate ([`crate::api`]), tokenize and
//! submit to the [`Engine`]; [`crate::respond`] then turns the engine's events into OpenAI's
//! response object or its server-sent-event chunks. A client that disconnects drops its event
//! receiver, which cancels its sequences in the engine.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::api::{self, ApiError, Common, Prompt};
use crate::batch::Events;
use crate::config::ChatConfig;
use crate::engine::{Engine, Refused, Request};
use crate::respond::{collect_response, stream_response, Responder};
use crate::sampler::SamplingParams;

/// The server's shared state.
pub struct App {
    pub engine: Engine,
    pub chat: ChatConfig,
    /// The id `/v1/models` lists and requests name.
    pub model_id: String,
    /// When set, `/v1/*` requests need `Authorization: Bearer <key>`.
    pub api_key: Option<String>,
    pub created: u64,
}

impl App {
    pub fn new(engine: Engine, chat: ChatConfig, model_id: String, api_key: Option<String>) -> App {
        App {
            engine,
            chat,
            model_id,
            api_key,
            created: now(),
        }
    }

    /// The longest output constraint (`--max-grammar-bytes`), which a tool's parameters meet
    /// too.
    pub fn grammar_bytes(&self) -> usize {
        self.engine.grammars().map_or(
            crate::structured::GrammarLimits::default().max_grammar_bytes,
            |g| g.max_bytes(),
        )
    }
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The routes: `/health`, `/metrics`, `/v1/models`, `/v1/completions`,
/// `/v1/chat/completions`, and vLLM's `/tokenize`, `/detokenize`, `/tokenizer_info`.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/tokenizer_info", get(tokenizer_info))
        .fallback(unknown_route)
        .method_not_allowed_fallback(wrong_method)
        .with_state(app)
}

/// 404 for a path the server does not have, as OpenAI's JSON error.
async fn unknown_route(method: Method, uri: Uri) -> Response {
    error_response(ApiError::request(
        404,
        format!("Invalid URL ({method} {})", uri.path()),
    ))
}

/// 405 for a known path asked with another method, as OpenAI's JSON error.
async fn wrong_method(method: Method, uri: Uri) -> Response {
    error_response(ApiError::request(
        405,
        format!("{} does not take {method}", uri.path()),
    ))
}

/// The request body, or the JSON error for one that could not be read (413 past the size
/// limit, 400 for a broken body).
fn read_body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|r| ApiError::request(r.status().as_u16(), r.body_text()))
}

/// Serves `app` on `listener` until `shutdown` resolves.
pub async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}

pub(crate) fn error_response(e: ApiError) -> Response {
    let mut r = (
        StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
        axum::Json(e.body()),
    )
        .into_response();
    if e.status == 429 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

fn authorize(app: &App, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &app.api_key else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given == Some(key.as_str()) {
        return Ok(());
    }
    Err(ApiError {
        status: 401,
        kind: "invalid_request_error",
        message: "Incorrect API key provided.".into(),
        param: None,
        code: Some("invalid_api_key"),
    })
}

async fn health(State(app): State<Arc<App>>) -> Response {
    if app.engine.is_alive() {
        return "ok".into_response();
    }
    error_response(ApiError {
        status: 503,
        kind: "server_error",
        message: "The engine has stopped.".into(),
        param: None,
        code: None,
    })
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.engine.metrics.render(),
    )
        .into_response()
}

async fn models(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&app, &headers) {
        return error_response(e);
    }
    axum::Json(json!({"object": "list", "data": [{
        "id": app.model_id, "object": "model", "created": app.created, "owned_by": "tvmrt",
        "max_model_len": app.engine.info.context_window,
    }]}))
    .into_response()
}

async fn tokenize(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    json_call(&app, &headers, body, crate::tokenize::tokenize).await
}

async fn detokenize(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    json_call(&app, &headers, body, crate::tokenize::detokenize).await
}

/// An authorized call of `f` on the request body (off the async workers): its JSON answer, or
/// the error's.
async fn json_call(
    app: &Arc<App>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    f: fn(&App, &[u8]) -> Result<Value, ApiError>,
) -> Response {
    let answer = match authorize(app, headers).and_then(|_| read_body(body)) {
        Ok(body) => off_workers(app, move |app| f(app, &body)).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error_response(e),
    }
}

/// Runs `f` on tokio's blocking pool, so that the async workers go on serving: reading a
/// request tokenizes its prompt and checks its tools' schemas, which may wait their turn for
/// a compile thread ([`crate::structured::grammar::on_compile_stack`]).
async fn off_workers<T: Send + 'static>(
    app: &Arc<App>,
    f: impl FnOnce(&App) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let app = app.clone();
    tokio::task::spawn_blocking(move || f(&app))
        .await
        .unwrap_or_else(|_| Err(ApiError::request(500, "reading the request failed")))
}

async fn tokenizer_info(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&app, &headers) {
        return error_response(e);
    }
    let info =
        crate::tokenize::tokenizer_info(app.engine.codec.config(), app.engine.info.context_window);
    axum::Json(info).into_response()
}

/// Which endpoint a generation request came through.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Completion,
    Chat,
}

async fn completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    generate(app, headers, body, Kind::Completion).await
}

async fn chat_completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    generate(app, headers, body, Kind::Chat).await
}

/// A request ready for the engine: see [`prepare`].
struct Prepared {
    prompts: Vec<Vec<i32>>,
    common: Common,
    /// For `echo`, each prompt's text; else empty.
    echoed: Vec<String>,
}

/// Validates and tokenizes a request: its prompts (several only for a completion with a list
/// of prompts), its options, `max_tokens` as the client gave it (capped per prompt at
/// submission, [`prompt_params`]), and for `echo` each prompt's text (as given, or its
/// token ids decoded).
fn prepare(app: &App, body: &[u8], kind: Kind) -> Result<Prepared, ApiError> {
    let body = api::parse_body(body)?;
    api::check_model(&body, &app.model_id)?;
    let codec = &app.engine.codec;
    let mut echoed = Vec::new();
    let (prompts, mut common) = match kind {
        Kind::Completion => {
            let r = api::completion_request(&body, app.chat.sampling_defaults())?;
            let echo = r.common.params.echo;
            let mut prompts = Vec::with_capacity(r.prompts.len());
            for p in r.prompts {
                let ids = match &p {
                    Prompt::Text(t) => codec.encode(t).map_err(ApiError::tokenizer)?,
                    Prompt::Ids(ids) => ids.clone(),
                };
                if echo {
                    echoed.push(match p {
                        Prompt::Text(t) => t,
                        Prompt::Ids(ids) => codec.decode(&ids),
                    });
                }
                prompts.push(ids);
            }
            (prompts, r.common)
        }
        Kind::Chat => {
            let r = api::chat_request(&body, app.chat.sampling_defaults(), app.grammar_bytes())?;
            let ids = api::chat_prompt_ids(
                &app.chat.conv_template,
                &r.messages,
                r.common.tools.as_ref(),
                |text| codec.encode(text),
            )?;
            (vec![ids], r.common)
        }
    };
    // Both endpoints stop at the template's stop strings too, as MLC's server does.
    common
        .params
        .stop
        .extend(app.chat.conv_template.stop_str.iter().cloned());
    let info = &app.engine.info;
    // A list the queue can never take whole would answer 429 to every retry.
    if prompts.len() > 1 && prompts.len() > info.config.max_queue {
        return Err(ApiError::bad(
            format!(
                "a list of {} prompts is more than the server's queue holds ({}, --max-queue)",
                prompts.len(),
                info.config.max_queue
            ),
            Some("prompt"),
        ));
    }
    let several = prompts.len() > 1;
    for (i, ids) in prompts.iter().enumerate() {
        check_prompt(app, ids).map_err(|mut e| {
            if several {
                e.message = format!("prompt {i}: {}", e.message);
            }
            e
        })?;
    }
    if let Some(b) = common
        .params
        .logit_bias
        .iter()
        .find(|b| b.0 < 0 || b.0 as usize >= info.vocab_size)
    {
        return Err(ApiError::bad(
            format!(
                "`logit_bias` names token {}, outside the vocabulary of {} tokens",
                b.0, info.vocab_size
            ),
            Some("logit_bias"),
        ));
    }
    if common.params.echo && common.params.logprobs.is_some() && !info.prompt_logprobs {
        return Err(ApiError::bad(
            "`echo` with `logprobs` needs the prompt's log-probabilities, which this model \
             library cannot give (it has no `batch_verify`)",
            Some("echo"),
        ));
    }
    if common.params.n > info.config.max_num_sequence {
        return Err(ApiError::bad(
            format!(
                "`n` = {} is more than the server's max_num_sequence {}",
                common.params.n, info.config.max_num_sequence
            ),
            Some("n"),
        ));
    }
    Ok(Prepared {
        prompts,
        common,
        echoed,
    })
}

/// One prompt's checks: not empty, every token in the vocabulary, room left to generate.
fn check_prompt(app: &App, ids: &[i32]) -> Result<(), ApiError> {
    let info = &app.engine.info;
    if ids.is_empty() {
        return Err(ApiError::bad("the prompt is empty", Some("prompt")));
    }
    if let Some(t) = ids
        .iter()
        .find(|&&t| t < 0 || t as usize >= info.vocab_size)
    {
        return Err(ApiError::bad(
            format!(
                "token id {t} is outside the vocabulary of {} tokens",
                info.vocab_size
            ),
            Some("prompt"),
        ));
    }
    if ids.len() >= info.context_window {
        return Err(ApiError::bad(
            format!(
                "This model's maximum context length is {} tokens. However, your prompt has {} \
                 tokens, leaving none to generate.",
                info.context_window,
                ids.len()
            ),
            Some("prompt"),
        ));
    }
    Ok(())
}

/// A prompt's sampling parameters: `max_tokens` defaults to, and is capped at, what the
/// context window leaves after the prompt.
fn prompt_params(app: &App, common: &Common, prompt_len: usize) -> SamplingParams {
    let room = app.engine.info.context_window - prompt_len;
    let mut params = common.params.clone();
    params.max_tokens = Some(params.max_tokens.unwrap_or(room).min(room));
    params
}

async fn generate(
    app: Arc<App>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    kind: Kind,
) -> Response {
    let admitted = match authorize(&app, &headers).and_then(|_| read_body(body)) {
        Ok(body) => off_workers(&app, move |app| admit(app, &body, kind)).await,
        Err(e) => {
            app.engine.metrics.requests_error.fetch_add(1, Relaxed);
            Err(e)
        }
    };
    let (receivers, common, echo) = match admitted {
        Ok(a) => a,
        Err(e) => return error_response(e),
    };
    let events = Events::new(receivers, common.params.n);
    let state = Responder::new(app.clone(), kind, common, events.choices(), echo);
    if state.common.stream {
        stream_response(state, events)
    } else {
        collect_response(state, events).await
    }
}

/// A request the engine took: the receivers of its prompts' events, its options, and for
/// `echo` each prompt's (ids, text).
type Admitted = (
    Vec<UnboundedReceiver<crate::engine::Event>>,
    Common,
    Vec<(Vec<i32>, String)>,
);

/// Reads a generation request and submits one engine request per prompt, compiling a
/// constrained request's grammar (milliseconds, up to seconds for the largest the limits let
/// through): run off the async workers ([`off_workers`]). A refusal drops the receivers of
/// those already submitted, which cancels them.
fn admit(app: &App, body: &[u8], kind: Kind) -> Result<Admitted, ApiError> {
    let m = &app.engine.metrics;
    let Prepared {
        prompts,
        common,
        echoed,
    } = prepare(app, body, kind).inspect_err(|_| {
        m.requests_error.fetch_add(1, Relaxed);
    })?;
    let echo = echoed
        .into_iter()
        .zip(&prompts)
        .map(|(text, ids)| (ids.clone(), text))
        .collect();
    let mut receivers = Vec::with_capacity(prompts.len());
    for ids in prompts {
        let (tx, rx) = unbounded_channel();
        let req = Request {
            params: prompt_params(app, &common, ids.len()),
            prompt: ids,
            events: tx,
        };
        app.engine.submit(req).map_err(|r| refusal(r, m))?;
        receivers.push(rx);
    }
    Ok((receivers, common, echo))
}

/// The HTTP error of a request the engine refused.
fn refusal(r: Refused, m: &crate::metrics::Metrics) -> ApiError {
    match r {
        Refused::QueueFull => {
            m.requests_rejected.fetch_add(1, Relaxed);
            ApiError {
                status: 429,
                kind: "rate_limit_error",
                message: "The server's queue is full; retry later.".into(),
                param: None,
                code: None,
            }
        }
        Refused::Invalid(msg) => ApiError::bad(msg, None),
        Refused::BadConstraint(msg) => ApiError::bad(msg, Some("response_format")),
        Refused::Stopped => ApiError {
            status: 503,
            kind: "server_error",
            message: "The engine has stopped.".into(),
            param: None,
            code: None,
        },
    }
}
