//! The parts of MLC-LLM's `mlc-chat-config.json` the server reads: the conversation template
//! ([`crate::conversation`]), the stop tokens, the vocabulary's size and the default sampling.

use std::path::Path;

use serde::Deserialize;
use tvmrt::{Error, Result};

use crate::conversation::ConvTemplate;

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
        let cfg: ChatConfig = serde_json::from_str(&text)
            .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
        if cfg.conv_template.seps.is_empty() {
            tvmrt::bail_value!(
                "{}: the conversation template has no separator",
                path.display()
            );
        }
        Ok(cfg)
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
