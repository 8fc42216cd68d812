//! The answer to a generation request: the engine's events accumulated per choice into
//! OpenAI's response object ([`collect_response`]) or turned chunk by chunk into its
//! server-sent events ([`stream_response`]), the echoed prompt and logprobs included.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::api::{self, ApiError, Common, CompletionLogprobs};
use crate::batch::Events;
use crate::engine::{Event, Failure, FinishReason};
use crate::http::{error_response, now, App, Kind};
use crate::sampler::TokenLogprob;
use crate::tools::answer::ToolAnswers;

/// Per-choice accumulation and the chunk and object builders of one response.
pub(crate) struct Responder {
    app: Arc<App>,
    kind: Kind,
    pub(crate) common: Common,
    id: String,
    created: u64,
    text: Vec<String>,
    finish: Vec<Option<FinishReason>>,
    legacy_logprobs: Vec<CompletionLogprobs>,
    chat_logprobs: Vec<Vec<Value>>,
    usage: Option<(usize, usize)>,
    /// For `echo`: each prompt's token ids and text.
    echo: Vec<(Vec<i32>, String)>,
    /// A chat with active tools: its answers read for calls.
    tools: Option<ToolAnswers>,
}

impl Responder {
    /// A response of `n` choices (`echo`: the prompts to echo, else empty).
    pub(crate) fn new(
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
            text: vec![String::new(); n],
            finish: vec![None; n],
            legacy_logprobs: (0..n).map(|_| CompletionLogprobs::default()).collect(),
            chat_logprobs: vec![Vec::new(); n],
            usage: None,
            echo,
            tools: common.tools.as_ref().map(|t| ToolAnswers::new(t, n)),
            common,
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
                let delta = match &mut self.tools {
                    Some(tools) => match tools.delta(c, text) {
                        Some(delta) => delta,
                        None if lp_json.is_null() => return None,
                        None => json!({}),
                    },
                    None => json!({"content": text}),
                };
                let choice = match self.kind {
                    Kind::Completion => json!({"index": c, "text": text, "logprobs": lp_json,
                                               "finish_reason": null}),
                    Kind::Chat => json!({"index": c, "delta": delta,
                                         "logprobs": lp_json, "finish_reason": null}),
                };
                Some(self.envelope(vec![choice], true))
            }
            Event::Prompt { choice, logprobs } => self.on_prompt(*choice, logprobs),
            Event::Finish { choice, reason } => {
                self.finish[*choice] = Some(*reason);
                let (delta, finish) = match &mut self.tools {
                    Some(tools) => tools.finish(*choice, *reason),
                    None => (json!({}), reason.as_str()),
                };
                let choice = match self.kind {
                    Kind::Completion => json!({"index": choice, "text": "", "logprobs": null,
                                               "finish_reason": finish}),
                    Kind::Chat => json!({"index": choice, "delta": delta, "logprobs": null,
                                         "finish_reason": finish}),
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
                let (message, finish) = match &self.tools {
                    Some(tools) => tools.message(&self.text[c], self.finish[c]),
                    None => (
                        json!({"role": "assistant", "content": self.text[c]}),
                        api::finish(self.finish[c]),
                    ),
                };
                let want = self.common.params.logprobs.is_some();
                match self.kind {
                    Kind::Completion => json!({"index": c, "text": self.text[c],
                        "logprobs": if want { self.legacy_logprobs[c].to_json() } else { Value::Null },
                        "finish_reason": finish}),
                    Kind::Chat => json!({"index": c,
                        "message": message,
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

/// The engine went away before the request's end.
fn stopped() -> Failure {
    Failure {
        message: "the engine stopped".into(),
        by_request: false,
    }
}

/// The error a failed request answers with: its own grammar's failure a 400, the engine's a
/// 500.
fn engine_error(f: &Failure) -> ApiError {
    if f.by_request {
        return ApiError::bad(f.message.clone(), None);
    }
    ApiError {
        status: 500,
        kind: "server_error",
        message: f.message.clone(),
        param: None,
        code: None,
    }
}

pub(crate) async fn collect_response(mut r: Responder, mut events: Events) -> Response {
    while let Some(e) = events.recv().await {
        match &e {
            Event::Error(f) => return error_response(engine_error(f)),
            Event::Done { .. } => {
                r.on(&e);
                return axum::Json(r.whole()).into_response();
            }
            _ => {
                r.on(&e);
            }
        }
    }
    error_response(engine_error(&stopped()))
}

struct StreamState {
    r: Responder,
    events: Events,
    out: VecDeque<String>,
    ended: bool,
}

pub(crate) fn stream_response(r: Responder, events: Events) -> Response {
    let mut out = VecDeque::new();
    if r.kind == Kind::Chat {
        let choices = (0..r.text.len())
            .map(|c| {
                // A forced call's answer has no content (OpenAI's null).
                let content = match &r.common.tools {
                    Some(t) if t.forced() => Value::Null,
                    _ => json!(""),
                };
                json!({"index": c, "delta": {"role": "assistant", "content": content},
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
                Some(Event::Error(f)) => {
                    st.out.push_back(engine_error(&f).body().to_string());
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
                        .push_back(engine_error(&stopped()).body().to_string());
                    st.ended = true;
                }
            }
        }
    });
    Sse::new(stream).into_response()
}
