//! MLC-LLM's conversation template (`conv_template` of mlc-chat-config.json) and a chat's prompt
//! through it, as MLC's server makes one: its request rules (engine_base.py,
//! `check_message_validity`), then `Conversation.as_prompt`
//! (python/mlc_llm/protocol/conversation_protocol.py); the template's `system_prefix_token_ids`
//! go before the text's tokens (`api::chat_prompt_ids`).

use std::collections::HashMap;

use serde::Deserialize;
use tvmrt::Result;

/// MLC's conversation template.
#[derive(Clone, Debug, Deserialize)]
pub struct ConvTemplate {
    #[serde(default)]
    pub name: String,
    #[serde(default = "system_placeholder")]
    pub system_template: String,
    #[serde(default)]
    pub system_message: String,
    /// Token ids put before the prompt's (most templates: the BOS the tokenizer does not add).
    #[serde(default)]
    pub system_prefix_token_ids: Option<Vec<i32>>,
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
    /// Qwen3's rule: assistant turns before the last user turn lose their `<think>` block.
    #[serde(default)]
    pub strip_reasoning_in_history: bool,
}

fn yes() -> bool {
    true
}

fn system_placeholder() -> String {
    "{system_message}".into()
}

/// A message's content: a text, or the text parts of a list (a user's only, as MLC allows).
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Text(String),
    Parts(Vec<String>),
}

/// A chat message after validation: role and content.
#[derive(Clone, Debug)]
pub struct Message {
    pub role: String,
    pub content: Content,
}

impl Message {
    /// A message of one text.
    pub fn text(role: &str, content: &str) -> Message {
        Message {
            role: role.into(),
            content: Content::Text(content.into()),
        }
    }
}

impl ConvTemplate {
    /// The token ids a prompt starts with, before its text's.
    pub fn prefix_ids(&self) -> &[i32] {
        self.system_prefix_token_ids.as_deref().unwrap_or_default()
    }

    /// The prompt text of `messages` followed by an empty assistant turn, as MLC renders it:
    /// a system message (first only) replaces the template's, the other turns follow with their
    /// role prefixes, role templates and separators.
    pub fn render(&self, messages: &[Message]) -> Result<String> {
        self.render_with_functions(messages, "")
    }

    /// [`ConvTemplate::render`] with MLC's function string at the last `{function_string}`
    /// placeholder (the others emptied).
    pub fn render_with_functions(
        &self,
        messages: &[Message],
        function_string: &str,
    ) -> Result<String> {
        if messages.is_empty() {
            tvmrt::bail_value!("a chat needs at least one message");
        }
        let mut system = self.system_message.as_str();
        let mut turns: Vec<(&str, Option<Content>)> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            match (m.role.as_str(), &m.content) {
                ("system", _) if i > 0 => {
                    tvmrt::bail_value!("a system message must come first (message {i} is one)")
                }
                ("system", Content::Text(t)) => system = t,
                (role, Content::Parts(_)) if role != "user" => {
                    tvmrt::bail_value!("only a user message may be a list of parts ({role}'s is)")
                }
                (role, content) if self.roles.contains_key(role) => {
                    turns.push((role, Some(content.clone())))
                }
                (role, _) => tvmrt::bail_value!(
                    "role `{role}` is not one of this model's roles (system, {})",
                    self.role_names()
                ),
            }
        }
        if self.strip_reasoning_in_history {
            strip_reasoning(&mut turns);
        }
        turns.push(("assistant", None));
        let system_msg = self.system_template.replace("{system_message}", system);
        let seps = [
            self.seps[0].as_str(),
            self.seps.get(1).unwrap_or(&self.seps[0]).as_str(),
        ];
        let mut out = system_msg.clone();
        for (i, (role, content)) in turns.iter().enumerate() {
            let prefix = &self.roles[*role];
            let Some(content) = content else {
                out.push_str(prefix);
                out.push_str(&self.role_empty_sep);
                continue;
            };
            if self.add_role_after_system_message || system_msg.is_empty() || i > 0 {
                out.push_str(prefix);
                out.push_str(&self.role_content_sep);
            }
            let placeholder = format!("{{{role}_message}}");
            let template = self.role_templates.get(*role).unwrap_or(&placeholder);
            match content {
                Content::Text(t) => out.push_str(&template.replace(&placeholder, t)),
                Content::Parts(parts) => {
                    for p in parts {
                        out.push_str(&template.replace(&placeholder, p));
                    }
                }
            }
            out.push_str(seps[(*role == "assistant") as usize]);
        }
        let placeholder = crate::tools::prompt::FUNCTION_PLACEHOLDER;
        if let Some(at) = out.rfind(placeholder) {
            out.replace_range(at..at + placeholder.len(), function_string);
        }
        Ok(out.replace(placeholder, ""))
    }

    /// The template's roles, sorted, for messages.
    pub fn role_names(&self) -> String {
        let mut r: Vec<&str> = self.roles.keys().map(String::as_str).collect();
        r.sort();
        r.join(", ")
    }
}

/// Assistant texts before the last user turn keep only what follows their last `</think>`,
/// without the newlines that start it.
fn strip_reasoning(turns: &mut [(&str, Option<Content>)]) {
    let Some(last_user) = turns.iter().rposition(|t| t.0 == "user") else {
        return;
    };
    for (role, content) in &mut turns[..last_user] {
        if let ("assistant", Some(Content::Text(t))) = (*role, content) {
            if let Some(at) = t.rfind("</think>") {
                *t = t[at + "</think>".len()..]
                    .trim_start_matches('\n')
                    .to_string();
            }
        }
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
        Message::text(role, content)
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
        assert!(t.render(&[msg("user", "a"), msg("system", "b")]).is_err());
        assert!(t.render(&[msg("system", "a"), msg("system", "b")]).is_err());
        let parts = Message {
            role: "assistant".into(),
            content: Content::Parts(vec!["b".into()]),
        };
        assert!(t.render(&[msg("user", "a"), parts]).is_err());
    }

    #[test]
    fn reasoning_before_the_last_user_turn_is_stripped() {
        let mut turns = vec![
            (
                "assistant",
                Some(Content::Text("<think>a</think>\n\nx".into())),
            ),
            ("user", Some(Content::Text("<think>u</think>y".into()))),
            ("assistant", Some(Content::Text("<think>b</think>z".into()))),
        ];
        strip_reasoning(&mut turns);
        let texts: Vec<_> = turns.iter().map(|t| t.1.clone().unwrap()).collect();
        assert_eq!(
            texts,
            [
                Content::Text("x".into()),
                Content::Text("<think>u</think>y".into()),
                Content::Text("<think>b</think>z".into())
            ]
        );
    }
}
