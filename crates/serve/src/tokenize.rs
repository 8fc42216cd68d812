//! vLLM's tokenizer endpoints, so that a client tokenizes exactly as the server does:
//!
//! - `POST /tokenize`: a `prompt` (the tokenizer's special tokens added unless
//!   `add_special_tokens` is false), or chat `messages` rendered by the conversation template as
//!   `/v1/chat/completions` renders them; `{count, max_model_len, tokens, token_strs}`;
//! - `POST /detokenize`: `tokens` to `{prompt}`;
//! - `GET /tokenizer_info`: the model directory's `tokenizer_config.json`, its special tokens as
//!   plain strings, with `tokenizer_class` and `model_max_length`.
//!
//! lm-evaluation-harness's `local-completions` looks for them (`/tokenizer_info` with an
//! `eos_token`, then `/tokenize`) and, finding them, needs no tokenizer of its own.

use serde_json::{json, Map, Value};

use crate::api::{self, ApiError};
use crate::http::App;

type Res<T> = Result<T, ApiError>;

/// `POST /tokenize`.
pub fn tokenize(app: &App, body: &[u8]) -> Res<Value> {
    let body = api::parse_body(body)?;
    api::check_model(&body, &app.model_id)?;
    let codec = &app.engine.codec;
    let flag = |key, default| api::boolean_or(&body, key, default);
    let tokens = match (body.get("prompt"), body.get("messages")) {
        (Some(Value::String(text)), None) => codec
            .encode_with(text, flag("add_special_tokens", true)?)
            .map_err(ApiError::tokenizer)?,
        (None, Some(_)) => {
            if !flag("add_generation_prompt", true)? {
                return Err(ApiError::bad(
                    "`add_generation_prompt: false` is not supported: messages are rendered \
                     as /v1/chat/completions renders them",
                    Some("add_generation_prompt"),
                ));
            }
            let messages = api::messages(&body)?;
            let special = flag("add_special_tokens", false)?;
            // The request's tools in the prompt, as the chat endpoint renders them.
            let tools = crate::tools::parse(&body, app.grammar_bytes())?
                .filter(crate::tools::Tools::active);
            api::chat_prompt_ids(&app.chat.conv_template, &messages, tools.as_ref(), |text| {
                codec.encode_with(text, special)
            })?
        }
        (Some(_), None) => return Err(ApiError::bad("`prompt` must be a string", Some("prompt"))),
        (Some(_), Some(_)) => {
            return Err(ApiError::bad(
                "give either `prompt` or `messages`, not both",
                Some("prompt"),
            ))
        }
        (None, None) => {
            return Err(ApiError::bad(
                "`prompt` or `messages` is required",
                Some("prompt"),
            ))
        }
    };
    let token_strs = if flag("return_token_strs", false)? {
        json!(tokens
            .iter()
            .map(|&t| codec.token_text(t))
            .collect::<Vec<_>>())
    } else {
        Value::Null
    };
    Ok(json!({
        "count": tokens.len(),
        "max_model_len": app.engine.info.context_window,
        "tokens": tokens,
        "token_strs": token_strs,
    }))
}

/// `POST /detokenize`: the text of `tokens`, special tokens included (as vLLM decodes).
pub fn detokenize(app: &App, body: &[u8]) -> Res<Value> {
    let body = api::parse_body(body)?;
    api::check_model(&body, &app.model_id)?;
    let vocab = app.engine.info.vocab_size;
    let bad = || {
        ApiError::bad(
            format!("`tokens` must be a list of token ids below the vocabulary size {vocab}"),
            Some("tokens"),
        )
    };
    let Some(Value::Array(list)) = body.get("tokens") else {
        return Err(bad());
    };
    let ids = list
        .iter()
        .map(|t| {
            t.as_u64()
                .filter(|&v| (v as usize) < vocab)
                .map(|v| v as i32)
                .ok_or_else(bad)
        })
        .collect::<Res<Vec<i32>>>()?;
    Ok(json!({"prompt": app.engine.codec.decode_with(&ids, false)}))
}

/// `GET /tokenizer_info`: `config` (`tokenizer_config.json`) with its special tokens as
/// strings (an added-token object becomes its `content`), `eos_token`, `bos_token` and
/// `pad_token` always present (null where the config has none), `tokenizer_class` and
/// `model_max_length` (the context window) where the config does not say.
pub fn tokenizer_info(config: &Map<String, Value>, context_window: usize) -> Value {
    let mut out = Map::new();
    for (k, v) in config {
        let v = match v {
            Value::Object(o) if k.ends_with("_token") => {
                o.get("content").cloned().unwrap_or(Value::Null)
            }
            v => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    for key in ["eos_token", "bos_token", "pad_token"] {
        out.entry(key).or_insert(Value::Null);
    }
    out.entry("tokenizer_class")
        .or_insert_with(|| json!("PreTrainedTokenizerFast"));
    out.entry("model_max_length")
        .or_insert_with(|| json!(context_window));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_info_names_special_tokens_as_strings() {
        let config = json!({"eos_token": {"content": "</s>", "lstrip": false},
                            "bos_token": "<s>", "model_max_length": 4096,
                            "added_tokens_decoder": {}});
        let info = tokenizer_info(config.as_object().unwrap(), 512);
        assert_eq!(info["eos_token"], "</s>");
        assert_eq!(info["bos_token"], "<s>");
        assert!(info["pad_token"].is_null() && info.as_object().unwrap().contains_key("pad_token"));
        assert_eq!(info["model_max_length"], 4096);
        assert_eq!(info["tokenizer_class"], "PreTrainedTokenizerFast");
        assert_eq!(info["added_tokens_decoder"], json!({}));
        let empty = tokenizer_info(&Map::new(), 512);
        assert!(empty["eos_token"].is_null());
        assert_eq!(empty["model_max_length"], 512);
    }
}
