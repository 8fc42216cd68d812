//! The HTTP front (axum): handlers only authenticate, validate ([`crate::api`]), tokenize and
//! submit to the [`Engine`]; they then turn the engine's events into OpenAI's response object
//! or its server-sent-event chunks. A client that disconnects drops its event receiver, which
//! cancels its sequences in the engine.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::mpsc::unbounded_channel;

use crate::api::{self, ApiError, Common, CompletionLogprobs, Prompt};
use crate::batch::Events;
use crate::config::ChatConfig;
use crate::engine::{Engine, Event, FinishReason, Refused, Request};
use crate::sampler::{SamplingParams, TokenLogprob};

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
}

fn now() -> u64 {
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

fn error_response(e: ApiError) -> Response {
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
    json_call(&app, &headers, body, crate::tokenize::tokenize)
}

async fn detokenize(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    json_call(&app, &headers, body, crate::tokenize::detokenize)
}

/// An authorized call of `f` on the request body: its JSON answer, or the error's.
fn json_call(
    app: &App,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    f: fn(&App, &[u8]) -> Result<Value, ApiError>,
) -> Response {
    match authorize(app, headers)
        .and_then(|_| read_body(body))
        .and_then(|body| f(app, &body))
    {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error_response(e),
    }
}

async fn tokenizer_info(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(e) = authorize(&app, &headers) {
        return error_response(e);
    }
    let info =
        crate::tokenize::tokenizer_info(app.engine.codec.config(), app.engine.info.context_window);
    axum::Json(info).into_response()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
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
    let bad_tok = |e: tvmrt::Error| ApiError::bad(e.message.to_string(), None);
    let mut echoed = Vec::new();
    let (prompts, common) = match kind {
        Kind::Completion => {
            let r = api::completion_request(&body)?;
            let echo = r.common.params.echo;
            let mut prompts = Vec::with_capacity(r.prompts.len());
            for p in r.prompts {
                let ids = match &p {
                    Prompt::Text(t) => codec.encode(t).map_err(bad_tok)?,
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
            let r = api::chat_request(&body)?;
            let text = app
                .chat
                .conv_template
                .render(&r.messages)
                .map_err(|e| ApiError::bad(e.message.to_string(), Some("messages")))?;
            let mut c = r.common;
            c.params
                .stop
                .extend(app.chat.conv_template.stop_str.iter().cloned());
            (vec![codec.encode(&text).map_err(bad_tok)?], c)
        }
    };
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
    let m = &app.engine.metrics;
    let prepared = authorize(&app, &headers)
        .and_then(|_| read_body(body))
        .and_then(|body| prepare(&app, &body, kind));
    let Prepared {
        prompts,
        common,
        echoed,
    } = match prepared {
        Ok(p) => p,
        Err(e) => {
            m.requests_error.fetch_add(1, Relaxed);
            return error_response(e);
        }
    };
    // One engine request per prompt. A refusal drops the receivers of those already
    // submitted, which cancels them.
    let mut receivers = Vec::with_capacity(prompts.len());
    let echo: Vec<(Vec<i32>, String)> = echoed
        .into_iter()
        .zip(&prompts)
        .map(|(text, ids)| (ids.clone(), text))
        .collect();
    for ids in prompts {
        let (tx, rx) = unbounded_channel();
        let req = Request {
            params: prompt_params(&app, &common, ids.len()),
            prompt: ids,
            events: tx,
        };
        if let Err(r) = app.engine.submit(req) {
            return error_response(refusal(r, m));
        }
        receivers.push(rx);
    }
    let events = Events::new(receivers, common.params.n);
    let state = Responder::new(app.clone(), kind, common, events.choices(), echo);
    if state.common.stream {
        stream_response(state, events)
    } else {
        collect_response(state, events).await
    }
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
        Refused::Stopped => ApiError {
            status: 503,
            kind: "server_error",
            message: "The engine has stopped.".into(),
            param: None,
            code: None,
        },
    }
}

/// Per-choice accumulation and the chunk and object builders of one response.
struct Responder {
    app: Arc<App>,
    kind: Kind,
    common: Common,
    id: String,
    created: u64,
    text: Vec<String>,
    finish: Vec<Option<FinishReason>>,
    legacy_logprobs: Vec<CompletionLogprobs>,
    chat_logprobs: Vec<Vec<Value>>,
    usage: Option<(usize, usize)>,
    /// For `echo`: each prompt's token ids and text.
    echo: Vec<(Vec<i32>, String)>,
}

impl Responder {
    /// A response of `n` choices (`echo`: the prompts to echo, else empty).
    fn new(
        app: Arc<App>,
        kind: Kind,
        common: Common,
        n: usize,
        echo: Vec<(Vec<i32>, String)>,
    ) -> Responder {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let prefix = if kind == Kind::Chat {
            "chatcmpl"
        } else {
            "cmpl"
        };
        Responder {
            id: format!("{prefix}-{:x}{:06x}", now(), NEXT.fetch_add(1, Relaxed)),
            created: now(),
            app,
            kind,
            common,
            text: vec![String::new(); n],
            finish: vec![None; n],
            legacy_logprobs: (0..n).map(|_| CompletionLogprobs::default()).collect(),
            chat_logprobs: vec![Vec::new(); n],
            usage: None,
            echo,
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Completion, _) => "text_completion",
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
        }
    }

    fn envelope(&self, choices: Vec<Value>, chunk: bool) -> Value {
        let mut v = json!({"id": self.id, "object": self.object(chunk), "created": self.created,
                           "model": self.app.model_id, "choices": choices});
        if chunk && self.common.include_usage {
            v["usage"] = Value::Null;
        }
        v
    }

    fn name(&self, id: i32) -> String {
        api::token_name(id, self.common.tokens_as_ids, |t| {
            self.app.engine.codec.token_text(t)
        })
    }

    fn top_names(&self, lp: &TokenLogprob) -> Vec<(String, f32)> {
        lp.top.iter().map(|&(id, v)| (self.name(id), v)).collect()
    }

    /// The echoed prompt of choice `c`: its text, and its tokens' log-probabilities when the
    /// request asked for them (`logprobs[j]` is token `j + 1`'s; the first token has none).
    /// Returns the stream chunk.
    fn on_prompt(&mut self, c: usize, logprobs: &[TokenLogprob]) -> Option<Value> {
        let (ids, text) = self.echo.get(c / self.common.params.n.max(1))?;
        self.text[c].push_str(text);
        let mut lp_json = Value::Null;
        if self.common.params.logprobs.is_some() {
            let mut lps = CompletionLogprobs::default();
            let mut offset = 0;
            for (j, &id) in ids.iter().enumerate() {
                let lp = j.checked_sub(1).and_then(|j| logprobs.get(j));
                let top = lp.map(|lp| self.top_names(lp)).unwrap_or_default();
                lps.push(self.name(id), lp, offset, top);
                offset += self.app.engine.codec.token_text(id).len();
            }
            lp_json = lps.to_json();
            self.legacy_logprobs[c] = lps;
        }
        let choice = json!({"index": c, "text": text, "logprobs": lp_json, "finish_reason": null});
        Some(self.envelope(vec![choice], true))
    }

    /// Takes an event; returns the stream chunk it makes, if any.
    fn on(&mut self, e: &Event) -> Option<Value> {
        match e {
            Event::Delta {
                choice,
                token,
                text,
                logprob,
            } => {
                let c = *choice;
                let offset = self.text[c].len();
                self.text[c].push_str(text);
                let mut lp_json = Value::Null;
                if let Some(lp) = logprob {
                    let top = self.top_names(lp);
                    let name = self.name(*token);
                    match self.kind {
                        Kind::Completion => {
                            let mut one = CompletionLogprobs::default();
                            one.push(name.clone(), Some(lp), offset, top.clone());
                            self.legacy_logprobs[c].push(name, Some(lp), offset, top);
                            lp_json = one.to_json();
                        }
                        Kind::Chat => {
                            let entry = api::chat_logprob(name, lp, top);
                            self.chat_logprobs[c].push(entry.clone());
                            lp_json = json!({"content": [entry]});
                        }
                    }
                }
                let choice = match self.kind {
                    Kind::Completion => json!({"index": c, "text": text, "logprobs": lp_json,
                                               "finish_reason": null}),
                    Kind::Chat => json!({"index": c, "delta": {"content": text},
                                         "logprobs": lp_json, "finish_reason": null}),
                };
                Some(self.envelope(vec![choice], true))
            }
            Event::Prompt { choice, logprobs } => self.on_prompt(*choice, logprobs),
            Event::Finish { choice, reason } => {
                self.finish[*choice] = Some(*reason);
                let choice = match self.kind {
                    Kind::Completion => json!({"index": choice, "text": "", "logprobs": null,
                                               "finish_reason": reason.as_str()}),
                    Kind::Chat => json!({"index": choice, "delta": {}, "logprobs": null,
                                         "finish_reason": reason.as_str()}),
                };
                Some(self.envelope(vec![choice], true))
            }
            Event::Done {
                prompt_tokens,
                completion_tokens,
            } => {
                self.usage = Some((*prompt_tokens, *completion_tokens));
                None
            }
            Event::Error(_) => None,
        }
    }

    /// The non-streamed response object.
    fn whole(&self) -> Value {
        let choices = (0..self.text.len())
            .map(|c| {
                let finish = api::finish(self.finish[c]);
                let want = self.common.params.logprobs.is_some();
                match self.kind {
                    Kind::Completion => json!({"index": c, "text": self.text[c],
                        "logprobs": if want { self.legacy_logprobs[c].to_json() } else { Value::Null },
                        "finish_reason": finish}),
                    Kind::Chat => json!({"index": c,
                        "message": {"role": "assistant", "content": self.text[c]},
                        "logprobs": if want { json!({"content": self.chat_logprobs[c]}) }
                                    else { Value::Null },
                        "finish_reason": finish}),
                }
            })
            .collect();
        let mut v = self.envelope(choices, false);
        let (p, c) = self.usage.unwrap_or((0, 0));
        v["usage"] = api::usage(p, c);
        v
    }
}

fn engine_error(msg: &str) -> ApiError {
    ApiError {
        status: 500,
        kind: "server_error",
        message: msg.to_string(),
        param: None,
        code: None,
    }
}

async fn collect_response(mut r: Responder, mut events: Events) -> Response {
    while let Some(e) = events.recv().await {
        match &e {
            Event::Error(msg) => return error_response(engine_error(msg)),
            Event::Done { .. } => {
                r.on(&e);
                return axum::Json(r.whole()).into_response();
            }
            _ => {
                r.on(&e);
            }
        }
    }
    error_response(engine_error("the engine stopped"))
}

struct StreamState {
    r: Responder,
    events: Events,
    out: VecDeque<String>,
    ended: bool,
}

fn stream_response(r: Responder, events: Events) -> Response {
    let mut out = VecDeque::new();
    if r.kind == Kind::Chat {
        let choices = (0..r.text.len())
            .map(|c| {
                json!({"index": c, "delta": {"role": "assistant", "content": ""},
                            "logprobs": null, "finish_reason": null})
            })
            .collect();
        out.push_back(r.envelope(choices, true).to_string());
    }
    let st = StreamState {
        r,
        events,
        out,
        ended: false,
    };
    let stream = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(data) = st.out.pop_front() {
                return Some((Ok::<_, Infallible>(SseEvent::default().data(data)), st));
            }
            if st.ended {
                return None;
            }
            match st.events.recv().await {
                Some(Event::Error(msg)) => {
                    st.out.push_back(engine_error(&msg).body().to_string());
                    st.out.push_back("[DONE]".into());
                    st.ended = true;
                }
                Some(e @ Event::Done { .. }) => {
                    st.r.on(&e);
                    if st.r.common.include_usage {
                        let (p, c) = st.r.usage.unwrap_or((0, 0));
                        let mut v = st.r.envelope(Vec::new(), true);
                        v["usage"] = api::usage(p, c);
                        st.out.push_back(v.to_string());
                    }
                    st.out.push_back("[DONE]".into());
                    st.ended = true;
                }
                Some(e) => {
                    if let Some(chunk) = st.r.on(&e) {
                        st.out.push_back(chunk.to_string());
                    }
                }
                None => {
                    st.out
                        .push_back(engine_error("the engine stopped").body().to_string());
                    st.ended = true;
                }
            }
        }
    });
    Sse::new(stream).into_response()
}
