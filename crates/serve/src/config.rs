//! The parts of MLC-LLM's `mlc-chat-config.json` the server reads: the conversation template
//! (rendered as MLC's `Conversation.as_prompt` does, python/mlc_llm/protocol/
//! conversation_protocol.py), the stop tokens and strings, and the default sampling.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use tvmrt::{Error, Result};

/// MLC's conversation template (`conv_template` of mlc-chat-config.json).
#[derive(Clone, Debug, Deserialize)]
pub struct ConvTemplate {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub system_template: String,
    #[serde(default)]
    pub system_message: String,
    #[serde(default = "yes")]
    pub add_role_after_system_message: bool,
    pub roles: HashMap<String, String>,
    #[serde(default)]
    pub role_templates: HashMap<String, String>,
    pub seps: Vec<String>,
    #[serde(default)]
    pub role_content_sep: String,
    #[serde(default)]
    pub role_empty_sep: String,
    #[serde(default)]
    pub stop_str: Vec<String>,
    #[serde(default)]
    pub stop_token_ids: Vec<i32>,
    #[serde(default)]
    pub system_prefix_token_ids: Option<Vec<i32>>,
}

fn yes() -> bool {
    true
}

/// A chat message after validation: role and text.
#[derive(Clone, Debug)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl ConvTemplate {
    /// The prompt text of `messages` followed by an empty assistant turn, as MLC renders it:
    /// a system message replaces the template's, user and assistant turns follow with their
    /// role prefixes and separators.
    pub fn render(&self, messages: &[Message]) -> Result<String> {
        let mut system = self.system_message.clone();
        let mut turns: Vec<(&str, Option<&str>)> = Vec::new();
        for m in messages {
            match m.role.as_str() {
                "system" => {
                    if !turns.is_empty() {
                        tvmrt::bail_value!("a system message must come first");
                    }
                    system = m.content.clone();
                }
                role if self.roles.contains_key(role) => turns.push((role, Some(&m.content))),
                role => tvmrt::bail_value!(
                    "role `{role}` is not one of this model's roles (system, {})",
                    self.role_names()
                ),
            }
        }
        if turns.last().map(|t| t.0) != Some("user") {
            tvmrt::bail_value!("the last message must be the user's");
        }
        turns.push(("assistant", None));
        let system_msg = self.system_template.replace("{system_message}", &system);
        let seps = [
            self.seps[0].clone(),
            self.seps.get(1).unwrap_or(&self.seps[0]).clone(),
        ];
        let mut out = system_msg.clone();
        for (i, (role, content)) in turns.iter().enumerate() {
            let prefix = &self.roles[*role];
            let Some(content) = content else {
                out.push_str(prefix);
                out.push_str(&self.role_empty_sep);
                continue;
            };
            if !(!self.add_role_after_system_message && !system_msg.is_empty() && i == 0) {
                out.push_str(prefix);
                out.push_str(&self.role_content_sep);
            }
            let placeholder = format!("{{{role}_message}}");
            let templ = self
                .role_templates
                .get(*role)
                .cloned()
                .unwrap_or_else(|| placeholder.clone());
            out.push_str(&templ.replace(&placeholder, content));
            out.push_str(&seps[(*role == "assistant") as usize]);
        }
        Ok(out.replace("{function_string}", ""))
    }

    fn role_names(&self) -> String {
        let mut r: Vec<&str> = self.roles.keys().map(String::as_str).collect();
        r.sort();
        r.join(", ")
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn chatml() -> ConvTemplate {
        serde_json::from_value(serde_json::json!({
            "name": "chatml",
            "system_template": "<|im_start|>system\n{system_message}<|im_end|>\n",
            "system_message": "Be brief.",
            "roles": {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"},
            "role_templates": {"user": "{user_message}", "assistant": "{assistant_message}"},
            "seps": ["<|im_end|>\n"],
            "role_content_sep": "\n",
            "role_empty_sep": "\n",
            "stop_str": ["<|im_end|>"],
            "stop_token_ids": [2]
        }))
        .unwrap()
    }

    fn msg(role: &str, content: &str) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }

    #[test]
    fn chatml_as_mlc_renders_it() {
        let t = chatml();
        assert_eq!(
            t.render(&[msg("user", "hi")]).unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n\
             <|im_start|>assistant\n"
        );
        assert_eq!(
            t.render(&[
                msg("system", "S"),
                msg("user", "a"),
                msg("assistant", "b"),
                msg("user", "c")
            ])
            .unwrap(),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\na<|im_end|>\n\
             <|im_start|>assistant\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n\
             <|im_start|>assistant\n"
        );
    }

    #[test]
    fn bad_conversations_are_refused() {
        let t = chatml();
        assert!(t.render(&[]).is_err());
        assert!(t.render(&[msg("tool", "x")]).is_err());
        assert!(t
            .render(&[msg("user", "a"), msg("assistant", "b")])
            .is_err());
        assert!(t.render(&[msg("user", "a"), msg("system", "b")]).is_err());
    }
}
