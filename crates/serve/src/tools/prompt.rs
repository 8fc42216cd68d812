//! How tools and past calls reach the prompt.
//!
//! A template with MLC's `{function_string}` placeholder (Gorilla's, Ministral's) gets MLC's
//! function string there: the named function's JSON, else the list of the functions
//! (`check_function_call_usage` in MLC's openai_api_protocol.py; `Conversation.as_prompt` fills
//! the last placeholder and empties the others). A template without one (ChatML and most
//! others, where MLC would drop the tools) gets them in its system message, in the block
//! ChatML-family tool models are trained on: the functions between `<tools>` lines, and how
//! to call them. Past calls are rendered in the call format ([`call_text`]); a `tool` message
//! takes the template's `tool` role where it has one (MLC's), else it is a user turn between
//! `<tool_response>` lines.

use serde_json::{json, Value};

use super::Tools;
use crate::api::ApiError;
use crate::conversation::{Content, ConvTemplate, Message};

/// MLC's placeholder of the function string.
pub const FUNCTION_PLACEHOLDER: &str = "{function_string}";

/// The line a call opens with.
pub const CALL_OPEN: &str = "<tool_call>\n";
/// The line a call closes with.
pub const CALL_CLOSE: &str = "\n</tool_call>";

/// The text of a call up to its arguments: `{"name": "<name>", "arguments": `.
pub fn call_head(name: &str) -> String {
    format!("{{\"name\": {}, \"arguments\": ", json!(name))
}

/// One call in the call format (`arguments`: a JSON text).
pub fn call_text(name: &str, arguments: &str) -> String {
    format!("{CALL_OPEN}{}{arguments}}}{CALL_CLOSE}", call_head(name))
}

/// Whether `template` has MLC's function-string placeholder.
pub fn has_placeholder(template: &ConvTemplate) -> bool {
    template.system_template.contains(FUNCTION_PLACEHOLDER)
        || template
            .role_templates
            .values()
            .any(|t| t.contains(FUNCTION_PLACEHOLDER))
}

/// MLC's function string: the named function's JSON, else the list of all.
pub fn function_string(tools: &Tools) -> String {
    let callable = tools.callable();
    match (&tools.choice, &callable[..]) {
        (super::ToolChoice::Named(_), [f]) => f.to_json().to_string(),
        _ => Value::Array(callable.iter().map(|f| f.to_json()).collect()).to_string(),
    }
}

/// The system message's tools block (for a template without the placeholder): the tags
/// ChatML-family tool models are trained on (Hermes 2 Pro's and Qwen 2.5's `<tools>` list and
/// `<tool_call>` format), in few words, so that the tools leave room in a small context.
pub fn system_block(tools: &Tools) -> String {
    let mut s = String::from("\n\n# Tools\n\nYou may call functions:\n<tools>");
    for f in tools.callable() {
        s.push('\n');
        s.push_str(&json!({"type": "function", "function": f.to_json()}).to_string());
    }
    s.push_str(
        "\n</tools>\nFor each call, answer:\n<tool_call>\n\
         {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    s
}

/// An assistant message's text with its `tool_calls` (OpenAI's shape) in the call format
/// after its content; a 400 naming `messages` for a malformed call.
pub fn assistant_with_calls(content: Option<&str>, calls: &Value) -> Result<String, ApiError> {
    let bad = |m: &str| {
        ApiError::bad(
            format!("an assistant message's tool_calls: {m}"),
            Some("messages"),
        )
    };
    let Some(calls) = calls.as_array() else {
        return Err(bad("must be a list"));
    };
    let mut parts: Vec<String> = content
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .into_iter()
        .collect();
    for call in calls {
        let f = &call["function"];
        let (Some(name), Some(arguments)) = (f["name"].as_str(), f["arguments"].as_str()) else {
            return Err(bad(
                "each needs `function` with a string `name` and `arguments` (a JSON text)",
            ));
        };
        // The arguments as compact JSON where they parse, else as the string they are.
        let arguments = serde_json::from_str::<Value>(arguments)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| json!(arguments).to_string());
        parts.push(call_text(name, &arguments));
    }
    Ok(parts.join("\n"))
}

/// `messages` made ready for `template`: the tools block in the system message (active tools,
/// template without the placeholder), `tool` messages as the template takes them. Returns the
/// messages and the function string for the placeholder (empty where unused).
pub fn for_template(
    template: &ConvTemplate,
    messages: &[Message],
    tools: Option<&Tools>,
) -> (Vec<Message>, String) {
    let tool_role = template.roles.contains_key("tool");
    let mut out: Vec<Message> = messages
        .iter()
        .map(|m| match (m.role.as_str(), &m.content) {
            ("tool", Content::Text(t)) if !tool_role => {
                Message::text("user", &format!("<tool_response>\n{t}\n</tool_response>"))
            }
            _ => m.clone(),
        })
        .collect();
    let Some(tools) = tools.filter(|t| t.active()) else {
        return (out, String::new());
    };
    if has_placeholder(template) {
        return (out, function_string(tools));
    }
    let block = system_block(tools);
    match out.first_mut() {
        Some(Message {
            role,
            content: Content::Text(t),
        }) if role == "system" => t.push_str(&block),
        _ => out.insert(
            0,
            Message::text("system", &format!("{}{block}", template.system_message)),
        ),
    }
    (out, String::new())
}
