//! OpenAI's request and response shapes: one validation step turns a request body into typed,
//! checked parameters (every mistake a 400 with OpenAI's error object), and the builders of
//! the response objects and stream chunks.

use serde_json::{json, Map, Value};

use crate::conversation::{Content, ConvTemplate, Message};
use crate::engine::FinishReason;
use crate::sampler::{SamplingParams, TokenLogprob};
use crate::tools::{self, Tools};

/// An HTTP error with OpenAI's error object.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
    pub param: Option<&'static str>,
    pub code: Option<&'static str>,
}

impl ApiError {
    /// 400 `invalid_request_error`.
    pub fn bad(message: impl Into<String>, param: Option<&'static str>) -> ApiError {
        ApiError {
            param,
            ..ApiError::request(400, message)
        }
    }

    /// An `invalid_request_error` with another status (404, 405, 413, ...) and no parameter.
    pub fn request(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind: "invalid_request_error",
            message: message.into(),
            param: None,
            code: None,
        }
    }

    /// 400 for text the tokenizer could not take.
    pub fn tokenizer(e: tvmrt::Error) -> ApiError {
        ApiError::bad(e.message.to_string(), None)
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

type Res<T> = Result<T, ApiError>;

/// What the two endpoints share after validation.
#[derive(Debug)]
pub struct Common {
    pub params: SamplingParams,
    pub stream: bool,
    pub include_usage: bool,
    pub tokens_as_ids: bool,
    /// A chat's active tools (`tools` with `tool_choice` other than `none`).
    pub tools: Option<Tools>,
}

/// The prompt of a completion request.
#[derive(Debug)]
pub enum Prompt {
    Text(String),
    Ids(Vec<i32>),
}

/// A validated `/v1/completions` request.
#[derive(Debug)]
pub struct CompletionRequest {
    /// One prompt, or several (OpenAI's batch form: `n` choices each).
    pub prompts: Vec<Prompt>,
    pub common: Common,
}

/// A validated `/v1/chat/completions` request.
#[derive(Debug)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub common: Common,
}

/// Parses a body as a JSON object.
pub fn parse_body(body: &[u8]) -> Res<Map<String, Value>> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad(
            "the request body must be a JSON object",
            None,
        )),
        Err(e) => Err(ApiError::bad(
            format!("the request body is not valid JSON: {e}"),
            None,
        )),
    }
}

/// Checks the `model` field against the served model's id.
pub fn check_model(body: &Map<String, Value>, served: &str) -> Res<()> {
    match body.get("model") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(m)) if m == served => Ok(()),
        Some(Value::String(m)) => Err(ApiError {
            status: 400,
            kind: "invalid_request_error",
            message: format!("The model `{m}` does not exist; this server serves `{served}`."),
            param: Some("model"),
            code: Some("model_not_found"),
        }),
        Some(_) => Err(ApiError::bad("`model` must be a string", Some("model"))),
    }
}

fn number(body: &Map<String, Value>, key: &'static str, lo: f64, hi: f64) -> Res<Option<f64>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let v = n.as_f64().unwrap_or(f64::NAN);
            if !(lo..=hi).contains(&v) {
                return Err(ApiError::bad(
                    format!("`{key}` must be between {lo} and {hi}, not {v}"),
                    Some(key),
                ));
            }
            Ok(Some(v))
        }
        Some(_) => Err(ApiError::bad(
            format!("`{key}` must be a number"),
            Some(key),
        )),
    }
}

fn integer(body: &Map<String, Value>, key: &'static str) -> Res<Option<i64>> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => {
            Ok(Some(n.as_i64().unwrap_or(i64::MAX)))
        }
        Some(_) => Err(ApiError::bad(
            format!("`{key}` must be an integer"),
            Some(key),
        )),
    }
}

fn boolean(body: &Map<String, Value>, key: &'static str) -> Res<bool> {
    boolean_or(body, key, false)
}

/// A boolean field, `default` where absent or null.
pub(crate) fn boolean_or(body: &Map<String, Value>, key: &'static str, default: bool) -> Res<bool> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad(
            format!("`{key}` must be a boolean"),
            Some(key),
        )),
    }
}

/// The sampling fields of a body (`temperature`, `top_p`, `presence_penalty`,
/// `frequency_penalty`) checked and written into `p`; those the body leaves out keep `p`'s.
/// The model's own defaults (mlc-chat-config.json) go through here too.
pub fn sampling_fields(body: &Map<String, Value>, p: &mut SamplingParams) -> Res<()> {
    if let Some(t) = number(body, "temperature", 0.0, 2.0)? {
        p.temperature = t as f32;
    }
    if let Some(t) = number(body, "top_p", 0.0, 1.0)? {
        if t <= 0.0 {
            return Err(ApiError::bad(
                "`top_p` must be greater than 0",
                Some("top_p"),
            ));
        }
        p.top_p = t as f32;
    }
    if let Some(v) = number(body, "presence_penalty", -2.0, 2.0)? {
        p.presence_penalty = v as f32;
    }
    if let Some(v) = number(body, "frequency_penalty", -2.0, 2.0)? {
        p.frequency_penalty = v as f32;
    }
    Ok(())
}

/// Parameters common to both endpoints; `logprobs` is read by the caller (its type differs).
/// What the body leaves out comes from `defaults` (the server passes the model's sampling
/// defaults, as MLC-LLM's server takes them from mlc-chat-config.json).
/// `max_tokens` may be 0 only where `zero_tokens` (a completion with `echo`: the prompt alone,
/// as OpenAI's legacy endpoint scores a text).
fn common(
    body: &Map<String, Value>,
    defaults: &SamplingParams,
    logprobs: Option<usize>,
    zero_tokens: bool,
) -> Res<Common> {
    let mut p = defaults.clone();
    sampling_fields(body, &mut p)?;
    let max_tokens = match integer(body, "max_completion_tokens")? {
        Some(m) => Some(m),
        None => integer(body, "max_tokens")?,
    };
    if let Some(m) = max_tokens {
        let least = if zero_tokens { 0 } else { 1 };
        if m < least {
            return Err(ApiError::bad(
                format!("`max_tokens` must be at least {least}, not {m}"),
                Some("max_tokens"),
            ));
        }
        p.max_tokens = Some(m.min(i64::from(u32::MAX)) as usize);
    }
    if let Some(n) = integer(body, "n")? {
        if !(1..=128).contains(&n) {
            return Err(ApiError::bad(
                format!("`n` must be between 1 and 128, not {n}"),
                Some("n"),
            ));
        }
        p.n = n as usize;
    }
    p.seed = integer(body, "seed")?.map(|s| s as u64);
    p.stop = match body.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) if a.iter().all(Value::is_string) && a.len() <= 16 => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        Some(_) => {
            return Err(ApiError::bad(
                "`stop` must be a string or a list of at most 16 strings",
                Some("stop"),
            ))
        }
    };
    p.logit_bias = match body.get("logit_bias") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => {
            let mut out = Vec::new();
            for (k, v) in m {
                let id: i32 = k.parse().map_err(|_| {
                    ApiError::bad(
                        format!("`logit_bias` keys must be token ids, not `{k}`"),
                        Some("logit_bias"),
                    )
                })?;
                let b = v
                    .as_f64()
                    .filter(|b| (-100.0..=100.0).contains(b))
                    .ok_or_else(|| {
                        ApiError::bad(
                            "`logit_bias` values must be numbers between -100 and 100",
                            Some("logit_bias"),
                        )
                    })?;
                out.push((id, b as f32));
            }
            out
        }
        Some(_) => {
            return Err(ApiError::bad(
                "`logit_bias` must be an object",
                Some("logit_bias"),
            ))
        }
    };
    p.logprobs = logprobs;
    p.constraint = crate::structured::constraint_from_body(body)?;
    let stream = boolean(body, "stream")?;
    let include_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => boolean(o, "include_usage")?,
        Some(_) => {
            return Err(ApiError::bad(
                "`stream_options` must be an object",
                Some("stream_options"),
            ))
        }
    };
    Ok(Common {
        params: p,
        stream,
        include_usage,
        tokens_as_ids: boolean(body, "return_tokens_as_token_ids")?,
        tools: None,
    })
}

/// Validates a `/v1/completions` body; `defaults`: the model's sampling defaults.
pub fn completion_request(
    body: &Map<String, Value>,
    defaults: &SamplingParams,
) -> Res<CompletionRequest> {
    let bad_prompt = || {
        ApiError::bad(
            "`prompt` must be a string, a list of token ids, or a non-empty list of either \
             (several prompts)",
            Some("prompt"),
        )
    };
    let ids = |a: &[Value]| -> Res<Vec<i32>> {
        a.iter()
            .map(|t| {
                t.as_i64()
                    .and_then(|v| i32::try_from(v).ok())
                    .ok_or_else(bad_prompt)
            })
            .collect()
    };
    let prompts = match body.get("prompt") {
        Some(Value::String(s)) => vec![Prompt::Text(s.clone())],
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_number) => {
            vec![Prompt::Ids(ids(a)?)]
        }
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_string) => a
            .iter()
            .map(|s| Prompt::Text(s.as_str().unwrap_or_default().to_string()))
            .collect(),
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_array) => a
            .iter()
            .map(|x| {
                Ok(Prompt::Ids(ids(x
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default())?))
            })
            .collect::<Res<_>>()?,
        None => return Err(ApiError::bad("`prompt` is required", Some("prompt"))),
        _ => return Err(bad_prompt()),
    };
    let logprobs = match integer(body, "logprobs")? {
        None => None,
        Some(k) if (0..=20).contains(&k) => Some(k as usize),
        Some(k) => {
            return Err(ApiError::bad(
                format!("`logprobs` must be between 0 and 20, not {k}"),
                Some("logprobs"),
            ))
        }
    };
    if matches!(body.get("suffix"), Some(Value::String(s)) if !s.is_empty()) {
        return Err(ApiError::bad("`suffix` is not supported", Some("suffix")));
    }
    let echo = boolean(body, "echo")?;
    let mut common = common(body, defaults, logprobs, echo)?;
    common.params.echo = echo;
    // best_of = n (or absent) is what every request does; more candidates than answers is not.
    if let Some(b) = integer(body, "best_of")? {
        if b != common.params.n as i64 {
            return Err(ApiError::bad(
                format!(
                    "`best_of` other than `n` is not supported (best_of {b}, n {})",
                    common.params.n
                ),
                Some("best_of"),
            ));
        }
    }
    Ok(CompletionRequest { prompts, common })
}

/// Validates a `/v1/chat/completions` body; `defaults`: the model's sampling defaults.
pub fn chat_request(
    body: &Map<String, Value>,
    defaults: &SamplingParams,
    max_grammar_bytes: usize,
) -> Res<ChatRequest> {
    let messages = messages(body)?;
    unsupported_chat_options(body)?;
    let top = integer(body, "top_logprobs")?;
    let logprobs = match (boolean(body, "logprobs")?, top) {
        (false, None) => None,
        (false, Some(_)) => {
            return Err(ApiError::bad(
                "`top_logprobs` needs `logprobs: true`",
                Some("top_logprobs"),
            ))
        }
        (true, None) => Some(0),
        (true, Some(k)) if (0..=20).contains(&k) => Some(k as usize),
        (true, Some(k)) => {
            return Err(ApiError::bad(
                format!("`top_logprobs` must be between 0 and 20, not {k}"),
                Some("top_logprobs"),
            ))
        }
    };
    let mut common = common(body, defaults, logprobs, false)?;
    common.tools = tools::parse(body, max_grammar_bytes)?.filter(Tools::active);
    if let Some(t) = common.tools.as_ref().filter(|t| t.forced()) {
        if common.params.constraint.is_some() {
            return Err(ApiError::bad(
                "a forced tool call (`tool_choice`) cannot be combined with another constraint \
                 on the answer (`response_format`, ...)",
                Some("tool_choice"),
            ));
        }
        common.params.constraint = Some(tools::grammar::constraint(t));
    }
    Ok(ChatRequest { messages, common })
}

/// A body's chat `messages` (text content only).
pub fn messages(body: &Map<String, Value>) -> Res<Vec<Message>> {
    let bad = |m: &str| ApiError::bad(m.to_string(), Some("messages"));
    let list = match body.get("messages") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => return Err(bad("`messages` must not be empty")),
        None => return Err(bad("`messages` is required")),
        Some(_) => return Err(bad("`messages` must be a list")),
    };
    let mut messages = Vec::new();
    for m in list {
        let role = m["role"]
            .as_str()
            .ok_or_else(|| bad("every message needs a string `role`"))?;
        if !m["tool_call_id"].is_null() && (role != "tool" || !m["tool_call_id"].is_string()) {
            return Err(bad("only a `tool` message has a `tool_call_id`, a string"));
        }
        if !m["tool_calls"].is_null() {
            if role != "assistant" {
                return Err(bad("only an assistant message has `tool_calls`"));
            }
            let text =
                tools::prompt::assistant_with_calls(m["content"].as_str(), &m["tool_calls"])?;
            messages.push(Message::text(role, &text));
            continue;
        }
        let content = match &m["content"] {
            Value::String(s) => Content::Text(s.clone()),
            Value::Array(parts) => Content::Parts(
                parts
                    .iter()
                    .map(|p| match (p["type"].as_str(), p["text"].as_str()) {
                        (Some("text"), Some(t)) => Ok(t.to_string()),
                        _ => Err(bad("only text content parts are supported")),
                    })
                    .collect::<Res<_>>()?,
            ),
            _ => return Err(bad("every message needs a string `content`")),
        };
        messages.push(Message {
            role: role.to_string(),
            content,
        });
    }
    Ok(messages)
}

/// A chat's prompt token ids: the template's prefix ids, then `encode` of the messages rendered
/// through the template with the request's active `tools` (a 400 naming `messages` where the
/// template refuses them).
pub fn chat_prompt_ids(
    template: &ConvTemplate,
    messages: &[Message],
    tools: Option<&Tools>,
    encode: impl FnOnce(&str) -> tvmrt::Result<Vec<i32>>,
) -> Res<Vec<i32>> {
    let (messages, function_string) = tools::prompt::for_template(template, messages, tools);
    let text = template
        .render_with_functions(&messages, &function_string)
        .map_err(|e| ApiError::bad(e.message.to_string(), Some("messages")))?;
    let mut ids = template.prefix_ids().to_vec();
    ids.extend(encode(&text).map_err(ApiError::tokenizer)?);
    Ok(ids)
}

/// Chat options that would change what the answer must be (OpenAI's legacy `functions`) and
/// that this server does not implement: refused, not ignored. Their "off" values pass.
fn unsupported_chat_options(body: &Map<String, Value>) -> Res<()> {
    let refuse = |key: &'static str| {
        Err(ApiError::bad(
            format!("`{key}` is not supported by this server"),
            Some(key),
        ))
    };
    match body.get("functions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.is_empty() => {}
        Some(_) => return refuse("functions"),
    }
    match body.get("function_call") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "none" || s == "auto" => {}
        Some(_) => return refuse("function_call"),
    }
    Ok(())
}

/// How a token is named in `logprobs`: its text, or `token_id:N` (vLLM's
/// `return_tokens_as_token_ids`).
pub fn token_name(id: i32, as_ids: bool, text: impl Fn(i32) -> String) -> String {
    if as_ids {
        format!("token_id:{id}")
    } else {
        text(id)
    }
}

/// `usage`.
pub fn usage(prompt: usize, completion: usize) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion,
           "total_tokens": prompt + completion})
}

/// One choice's log-probabilities as the completions endpoint shows them (legacy shape),
/// accumulated token by token. An echoed prompt's first token has none (`null`), as in
/// OpenAI's and vLLM's answers.
#[derive(Default, Debug)]
pub struct CompletionLogprobs {
    pub tokens: Vec<String>,
    pub token_logprobs: Vec<Option<f32>>,
    pub top_logprobs: Vec<Option<Map<String, Value>>>,
    pub text_offset: Vec<usize>,
}

impl CompletionLogprobs {
    /// A token and, unless it opens the prompt, its log-probability and the top alternatives.
    pub fn push(
        &mut self,
        name: String,
        lp: Option<&TokenLogprob>,
        offset: usize,
        top: Vec<(String, f32)>,
    ) {
        self.tokens.push(name);
        self.token_logprobs.push(lp.map(|lp| lp.logprob));
        self.top_logprobs
            .push(lp.map(|_| top.into_iter().map(|(k, v)| (k, json!(v))).collect()));
        self.text_offset.push(offset);
    }

    pub fn to_json(&self) -> Value {
        json!({"tokens": self.tokens, "token_logprobs": self.token_logprobs,
               "top_logprobs": self.top_logprobs, "text_offset": self.text_offset})
    }
}

/// One token of the chat endpoint's `logprobs.content`.
pub fn chat_logprob(name: String, lp: &TokenLogprob, top: Vec<(String, f32)>) -> Value {
    let entry = |t: &str, v: f32| json!({"token": t, "logprob": v, "bytes": t.as_bytes()});
    let mut e = entry(&name, lp.logprob);
    e["top_logprobs"] = Value::Array(top.iter().map(|(t, v)| entry(t, *v)).collect());
    e
}

/// A finish reason as JSON (null while running).
pub fn finish(reason: Option<FinishReason>) -> Value {
    reason.map_or(Value::Null, |r| json!(r.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The endpoints' parsers with tvmrt's own defaults (temperature 1, top_p 1, no penalty).
    fn completion_request(body: &Map<String, Value>) -> Res<CompletionRequest> {
        super::completion_request(body, &SamplingParams::default())
    }

    fn chat_request(body: &Map<String, Value>) -> Res<ChatRequest> {
        super::chat_request(body, &SamplingParams::default(), 128 << 10)
    }

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn bad_inputs_are_400s_naming_the_parameter() {
        let cases = [
            (json!({"prompt": "a", "max_tokens": 0}), "max_tokens"),
            (json!({"prompt": "a", "max_tokens": -3}), "max_tokens"),
            (json!({"prompt": "a", "max_tokens": "5"}), "max_tokens"),
            (json!({"prompt": "a", "temperature": "hot"}), "temperature"),
            (json!({"prompt": "a", "top_p": 0}), "top_p"),
            (json!({"prompt": 5}), "prompt"),
            (json!({"prompt": ["a", 1]}), "prompt"),
            (json!({"prompt": []}), "prompt"),
            (json!({"prompt": [[1], "a"]}), "prompt"),
            (json!({"prompt": [[1], [2.5]]}), "prompt"),
            (json!({"prompt": "a", "n": 0}), "n"),
            (json!({"prompt": "a", "stop": 3}), "stop"),
            (json!({"prompt": "a", "logit_bias": {"x": 1}}), "logit_bias"),
            (json!({"prompt": "a", "logprobs": 21}), "logprobs"),
            (json!({"prompt": "a", "stream": "yes"}), "stream"),
            (json!({"prompt": "a", "echo": "yes"}), "echo"),
            (
                json!({"prompt": "a", "max_tokens": -1, "echo": true}),
                "max_tokens",
            ),
            (json!({"prompt": "a", "suffix": "b"}), "suffix"),
            (json!({"prompt": "a", "best_of": 3}), "best_of"),
            (json!({"prompt": "a", "n": 2, "best_of": 3}), "best_of"),
            (json!({"prompt": "a", "best_of": "3"}), "best_of"),
        ];
        for (b, param) in cases {
            let e = completion_request(&body(b.clone())).unwrap_err();
            assert_eq!((e.status, e.param), (400, Some(param)), "{b}");
        }
        assert!(parse_body(b"{nope").is_err());
        assert!(parse_body(b"[1]").is_err());
        let e = check_model(&body(json!({"model": "other"})), "mine").unwrap_err();
        assert_eq!(e.code, Some("model_not_found"));
        for b in [
            json!({"messages": []}),
            json!({"messages": [{"role": "user"}]}),
            json!({"messages": "hi"}),
        ] {
            assert_eq!(chat_request(&body(b)).unwrap_err().param, Some("messages"));
        }
        let hi = json!([{"role": "user", "content": "hi"}]);
        let tool = json!([{"type": "function", "function": {"name": "f"}}]);
        for (b, param) in [
            (json!({"messages": hi, "tools": [{"type": "x"}]}), "tools"),
            (
                json!({"messages": hi, "functions": [{"name": "f"}]}),
                "functions",
            ),
            (
                json!({"messages": hi, "tool_choice": "required"}),
                "tool_choice",
            ),
            (
                json!({"messages": hi, "tools": tool, "tool_choice": {"type": "function",
                       "function": {"name": "g"}}}),
                "tool_choice",
            ),
            (
                json!({"messages": hi, "function_call": {"name": "f"}}),
                "function_call",
            ),
            (
                json!({"messages": hi, "response_format": {"type": "yaml"}}),
                "response_format",
            ),
        ] {
            let e = chat_request(&body(b.clone())).unwrap_err();
            assert_eq!((e.status, e.param), (400, Some(param)), "{b}");
        }
        // Their "off" values, and best_of equal to n, are accepted.
        for b in [
            json!({"messages": hi, "tools": [], "tool_choice": "none"}),
            json!({"messages": hi, "tools": tool, "tool_choice": "required"}),
            json!({"messages": hi, "response_format": {"type": "text"}}),
        ] {
            assert!(chat_request(&body(b.clone())).is_ok(), "{b}");
        }
        for b in [
            json!({"prompt": "a", "best_of": 1}),
            json!({"prompt": "a", "n": 2, "best_of": 2, "suffix": ""}),
        ] {
            assert!(completion_request(&body(b.clone())).is_ok(), "{b}");
        }
    }

    #[test]
    fn good_inputs_are_typed() {
        let r = completion_request(&body(json!({
            "prompt": [[1, 2, 3]], "max_tokens": 4, "temperature": 0, "stop": ["x", "y"],
            "logit_bias": {"7": -100}, "logprobs": 2, "stream": true,
            "stream_options": {"include_usage": true}, "return_tokens_as_token_ids": true,
            "echo": true
        })))
        .unwrap();
        assert!(matches!(&r.prompts[..], [Prompt::Ids(v)] if v == &[1, 2, 3]));
        let c = r.common;
        assert_eq!(c.params.max_tokens, Some(4));
        assert_eq!(c.params.stop, vec!["x", "y"]);
        assert_eq!(c.params.logit_bias, vec![(7, -100.0)]);
        assert_eq!(c.params.logprobs, Some(2));
        assert!(c.stream && c.include_usage && c.tokens_as_ids && c.params.echo);
        // max_tokens 0 is the prompt alone: only with echo, only on completions.
        let r = completion_request(&body(json!({"prompt": "a", "max_tokens": 0, "echo": true})));
        assert_eq!(r.unwrap().common.params.max_tokens, Some(0));
        let chat = json!({"messages": [{"role": "user", "content": "a"}], "max_tokens": 0,
                          "echo": true});
        assert_eq!(
            chat_request(&body(chat)).unwrap_err().param,
            Some("max_tokens")
        );
        let r = chat_request(&body(json!({"messages": [{"role": "user", "content":
            [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
            "logprobs": true, "top_logprobs": 3})))
        .unwrap();
        assert_eq!(
            r.messages[0].content,
            Content::Parts(vec!["a".into(), "b".into()])
        );
        assert_eq!(r.common.params.logprobs, Some(3));
    }

    #[test]
    fn a_chats_ids_start_with_the_templates_prefix() {
        let template: ConvTemplate = serde_json::from_value(json!({
            "system_template": "[S]{system_message}", "system_prefix_token_ids": [1],
            "roles": {"user": "U:", "assistant": "A:"}, "seps": ["|"]
        }))
        .unwrap();
        let byte_ids = |t: &str| Ok(t.bytes().map(i32::from).collect());
        let ids =
            chat_prompt_ids(&template, &[Message::text("user", "h")], None, byte_ids).unwrap();
        assert_eq!(ids[0], 1);
        assert_eq!(
            String::from_utf8(ids[1..].iter().map(|&b| b as u8).collect()).unwrap(),
            "[S]U:h|A:"
        );
        let refused = chat_prompt_ids(&template, &[Message::text("x", "x")], None, byte_ids);
        assert_eq!(refused.unwrap_err().param, Some("messages"));
    }

    #[test]
    fn the_models_defaults_fill_what_a_request_leaves_out() {
        let defaults = SamplingParams {
            temperature: 0.6,
            top_p: 0.9,
            frequency_penalty: 0.3,
            ..SamplingParams::default()
        };
        let hi = json!([{"role": "user", "content": "hi"}]);
        let r = super::chat_request(&body(json!({"messages": hi})), &defaults, 128 << 10).unwrap();
        let p = r.common.params;
        assert_eq!(
            (p.temperature, p.top_p, p.frequency_penalty),
            (0.6, 0.9, 0.3)
        );
        let r = super::completion_request(
            &body(json!({"prompt": "a", "temperature": 0, "frequency_penalty": 0})),
            &defaults,
        )
        .unwrap();
        let p = r.common.params;
        assert_eq!(
            (p.temperature, p.top_p, p.frequency_penalty),
            (0.0, 0.9, 0.0)
        );
    }

    #[test]
    fn a_list_of_prompts_is_several_prompts() {
        let prompts = |v: Value| {
            completion_request(&body(json!({"prompt": v})))
                .unwrap()
                .prompts
        };
        assert!(matches!(&prompts(json!(["a", "b"]))[..],
            [Prompt::Text(a), Prompt::Text(b)] if a == "a" && b == "b"));
        assert!(matches!(&prompts(json!([[1, 2], [3]]))[..],
            [Prompt::Ids(a), Prompt::Ids(b)] if a == &[1, 2] && b == &[3]));
        // A list of numbers is one prompt of token ids.
        assert!(matches!(&prompts(json!([1, 2]))[..], [Prompt::Ids(a)] if a == &[1, 2]));
    }
}
