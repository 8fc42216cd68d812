//! The parts of MLC-LLM's `mlc-chat-config.json` the server reads: the conversation template
//! ([`crate::conversation`]), the stop tokens, the vocabulary's size and the default sampling.

use std::path::Path;

use serde::Deserialize;
use tvmrt::{Error, Result};

use crate::conversation::ConvTemplate;
use crate::sampler::SamplingParams;

/// mlc-chat-config.json.
#[derive(Clone, Debug, Deserialize)]
pub struct ChatConfig {
    pub conv_template: ConvTemplate,
    #[serde(default)]
    pub context_window_size: i64,
    #[serde(default)]
    pub prefill_chunk_size: i64,
    #[serde(default = "one")]
    pub temperature: f64,
    #[serde(default = "one")]
    pub top_p: f64,
    #[serde(default)]
    pub presence_penalty: f64,
    #[serde(default)]
    pub frequency_penalty: f64,
    #[serde(default)]
    pub eos_token_id: Option<serde_json::Value>,
    /// The vocabulary's size (MLC writes it at the top and in `model_config`).
    #[serde(default)]
    vocab_size: Option<i64>,
    #[serde(default)]
    model_config: serde_json::Value,
    /// Set (not -1) for models MLC runs with a sliding attention window on every sequence.
    #[serde(default)]
    sliding_window_size: Option<i64>,
    /// The four sampling fields above, checked (filled in by [`ChatConfig::load`]).
    #[serde(skip)]
    sampling: SamplingParams,
}

fn one() -> f64 {
    1.0
}

impl ChatConfig {
    /// Reads `MODEL_DIR/mlc-chat-config.json`.
    pub fn load(model_dir: &Path) -> Result<ChatConfig> {
        let path = model_dir.join("mlc-chat-config.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::value(format!("cannot read {}: {e}", path.display())))?;
        let mut cfg: ChatConfig = serde_json::from_str(&text)
            .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
        cfg.sampling = cfg
            .check_window()
            .and_then(|_| cfg.parse_sampling())
            .map_err(|e| Error::value(format!("{}: {}", path.display(), e.message)))?;
        if cfg.conv_template.seps.is_empty() {
            tvmrt::bail_value!(
                "{}: the conversation template has no separator",
                path.display()
            );
        }
        Ok(cfg)
    }

    /// The model's sampling defaults (`temperature`, `top_p`, `presence_penalty`,
    /// `frequency_penalty`), which a request overrides field by field, as MLC-LLM's engine
    /// takes them (`GenerationConfig::GetDefaultFromModelConfig`).
    pub fn sampling_defaults(&self) -> &SamplingParams {
        &self.sampling
    }

    /// The sampling defaults through the request parser's checks (the ranges a request may
    /// give); the other fields as tvmrt's defaults.
    fn parse_sampling(&self) -> Result<SamplingParams> {
        let fields = serde_json::json!({
            "temperature": self.temperature,
            "top_p": self.top_p,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
        });
        let mut p = SamplingParams::default();
        let fields = fields.as_object().expect("a JSON object");
        crate::api::sampling_fields(fields, &mut p).map_err(|e| Error::value(e.message))?;
        Ok(p)
    }

    /// MLC's engine enables a sliding window on every sequence of a model that has one
    /// (`kv_cache_enable_sliding_window_for_seq`); this server does not, so such a model is
    /// refused rather than answered with attention over the whole context.
    fn check_window(&self) -> Result<()> {
        match self.sliding_window_size {
            Some(w) if w != -1 => tvmrt::bail_value!(
                "`sliding_window_size` is {w}: models with a sliding attention window are not \
                 supported by tvmrt serve"
            ),
            _ => Ok(()),
        }
    }

    /// The vocabulary's size, as MLC's engine reads it: `vocab_size`, else `model_config`'s.
    pub fn vocab_size(&self) -> Result<i64> {
        match self.vocab_size.or(self.model_config["vocab_size"].as_i64()) {
            Some(v) if v > 0 => Ok(v),
            _ => tvmrt::bail_value!("mlc-chat-config.json has no positive `vocab_size`"),
        }
    }

    /// The token ids that end generation: the template's stop tokens and the model's EOS.
    pub fn stop_token_ids(&self) -> Vec<i32> {
        let mut ids = self.conv_template.stop_token_ids.clone();
        match &self.eos_token_id {
            Some(serde_json::Value::Number(n)) => ids.extend(n.as_i64().map(|v| v as i32)),
            Some(serde_json::Value::Array(a)) => {
                ids.extend(a.iter().filter_map(|v| v.as_i64()).map(|v| v as i32))
            }
            _ => {}
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: serde_json::Value) -> ChatConfig {
        let mut v = serde_json::json!({
            "conv_template": {"roles": {"user": "U", "assistant": "A"}, "seps": ["\n"]},
            "vocab_size": 320
        });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_models_sampling_defaults_are_checked_and_given() {
        let c = config(serde_json::json!({"temperature": 0.6, "top_p": 0.9,
                                          "presence_penalty": 0.5}));
        let d = c.parse_sampling().unwrap();
        assert_eq!((d.temperature, d.top_p), (0.6, 0.9));
        assert_eq!((d.presence_penalty, d.frequency_penalty), (0.5, 0.0));
        assert_eq!(
            config(serde_json::json!({}))
                .parse_sampling()
                .unwrap()
                .temperature,
            1.0
        );
        for bad in [
            serde_json::json!({"temperature": 3.0}),
            serde_json::json!({"top_p": 0.0}),
            serde_json::json!({"frequency_penalty": -2.5}),
        ] {
            let key = bad.as_object().unwrap().keys().next().unwrap().clone();
            let e = config(bad).parse_sampling().unwrap_err();
            assert!(e.message.contains(&key), "{}", e.message);
        }
    }

    #[test]
    fn a_sliding_window_model_is_refused() {
        config(serde_json::json!({"sliding_window_size": -1}))
            .check_window()
            .unwrap();
        let e = config(serde_json::json!({"sliding_window_size": 4096}))
            .check_window()
            .unwrap_err();
        assert!(
            e.message.contains("sliding_window_size` is 4096"),
            "{}",
            e.message
        );
    }
}
