//! Tool calling: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls` checked into a
//! [`Tools`]; how the tools and past calls reach the prompt ([`prompt`]); the grammar that
//! constrains a forced or required call ([`grammar`]); and the model's answer read back into
//! OpenAI's `tool_calls`, whole or as stream deltas ([`calls`]).
//!
//! The call format is the one ChatML-family tool models (Hermes 2 Pro, Qwen 2.5) are trained on
//! and MLC's ChatML templates keep: each call a JSON object
//! `{"name": ..., "arguments": {...}}` between `<tool_call>` and `</tool_call>` lines. Under
//! `auto`, an answer in MLC's own format (a Python call, as Gorilla models answer) is read
//! too ([`python_calls`]).

pub mod answer;
pub mod calls;
pub mod grammar;
pub mod prompt;
pub mod python_calls;

use llguidance::api::ParserLimits;
use llguidance::{GrammarBuilder, JsonCompileOptions};
use serde_json::{json, Map, Value};

use crate::api::ApiError;
use crate::structured::grammar::{check_length, on_compile_stack};

type Res<T> = Result<T, ApiError>;

/// One function a request offers the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub description: Option<String>,
    /// A JSON schema of `type: object` for the call's arguments.
    pub parameters: Value,
}

impl Function {
    /// The function as OpenAI's request gives it (`name`, `description`, `parameters`), for
    /// the prompt.
    pub fn to_json(&self) -> Value {
        let mut f = json!({"name": self.name});
        if let Some(d) = &self.description {
            f["description"] = json!(d);
        }
        f["parameters"] = self.parameters.clone();
        f
    }
}

/// `tool_choice`.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolChoice {
    /// The model is not told of the tools and answers in text.
    None,
    /// The model answers in text or with calls.
    Auto,
    /// The model calls at least one of the tools.
    Required,
    /// The model calls this function, once.
    Named(String),
}

/// A request's validated tools.
#[derive(Clone, Debug)]
pub struct Tools {
    pub functions: Vec<Function>,
    pub choice: ToolChoice,
    /// Whether an answer may hold several calls (`parallel_tool_calls`, default true).
    pub parallel: bool,
}

impl Tools {
    /// Whether the model is told of the tools and its answer read for calls.
    pub fn active(&self) -> bool {
        self.choice != ToolChoice::None
    }

    /// Whether the answer is constrained to calls (`required` or a named function).
    pub fn forced(&self) -> bool {
        matches!(self.choice, ToolChoice::Required | ToolChoice::Named(_))
    }

    /// The functions a call may name: the named one, else all.
    pub fn callable(&self) -> Vec<&Function> {
        match &self.choice {
            ToolChoice::Named(n) => self.functions.iter().filter(|f| &f.name == n).collect(),
            _ => self.functions.iter().collect(),
        }
    }

    /// Whether an answer may hold more than one call (never for a named function).
    pub fn several_calls(&self) -> bool {
        self.parallel && !matches!(self.choice, ToolChoice::Named(_))
    }
}

/// A function's parameters with llguidance's options for its arguments: JSON as OpenAI
/// writes it, compact (no free whitespace, which a weak model fills its budget with).
pub(crate) fn compact_schema(parameters: &Value) -> Value {
    crate::structured::with_json_options(parameters.clone(), true)
}

/// Checks that `schema` is a JSON schema llguidance can constrain arguments to, at most
/// `max_bytes` long (`--max-grammar-bytes`); its reason where not. llguidance compiles it on
/// the deep stack grammars compile on (its recursion overflowed an async worker's).
pub fn check_schema(schema: &Value, max_bytes: usize) -> Result<(), String> {
    if !schema.is_object() {
        return Err("a schema must be a JSON object".into());
    }
    match schema.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(t) => return Err(format!("the schema's type must be \"object\", not {t}")),
    }
    let compact = compact_schema(schema);
    check_length(compact.to_string().len(), max_bytes)?;
    on_compile_stack(move || {
        let builder = GrammarBuilder::new(None, ParserLimits::default());
        JsonCompileOptions::default()
            .json_to_llg_with_overrides(builder, compact)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
    })
}

/// A function name as OpenAI allows it: 1 to 64 of `a-z A-Z 0-9 _ -`.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn bad(message: String, param: &'static str) -> ApiError {
    ApiError::bad(message, Some(param))
}

/// One entry of `tools`.
fn function(i: usize, tool: &Value, max_bytes: usize) -> Res<Function> {
    let bad = |m: &str| bad(format!("tools[{i}]: {m}"), "tools");
    let Some(tool) = tool.as_object() else {
        return Err(bad("a tool must be an object"));
    };
    match tool.get("type").and_then(Value::as_str) {
        Some("function") => {}
        Some(t) => {
            return Err(bad(&format!(
                "tool type `{t}` is not supported (only `function`)"
            )))
        }
        None => return Err(bad("a tool needs `type: \"function\"`")),
    }
    let Some(f) = tool.get("function").and_then(Value::as_object) else {
        return Err(bad("a tool needs a `function` object"));
    };
    let name = match f.get("name") {
        Some(Value::String(n)) if valid_name(n) => n.clone(),
        Some(Value::String(n)) => {
            return Err(bad(&format!(
                "function name `{n}` must be 1 to 64 letters, digits, `_` or `-`"
            )))
        }
        _ => return Err(bad("a function needs a string `name`")),
    };
    let description = match f.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(bad("a function's `description` must be a string")),
    };
    let parameters = match f.get("parameters") {
        // OpenAI's rule: no parameters is an empty parameter list.
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(p) => {
            check_schema(p, max_bytes).map_err(|e| {
                bad(&format!(
                    "the parameters of function `{name}` are not a valid JSON schema: {e}"
                ))
            })?;
            p.clone()
        }
    };
    Ok(Function {
        name,
        description,
        parameters,
    })
}

/// `tool_choice` (absent: `auto` with tools, `none` without, as OpenAI's default).
fn tool_choice(body: &Map<String, Value>, functions: &[Function]) -> Res<ToolChoice> {
    let param = "tool_choice";
    let choice = match body.get(param) {
        None | Some(Value::Null) if functions.is_empty() => return Ok(ToolChoice::None),
        None | Some(Value::Null) => return Ok(ToolChoice::Auto),
        Some(Value::String(s)) if s == "none" => return Ok(ToolChoice::None),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            _ => {
                return Err(bad(
                    format!(
                        "`tool_choice` must be \"none\", \"auto\", \"required\" or \
                         {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, not \"{s}\""
                    ),
                    param,
                ))
            }
        },
        Some(Value::Object(o)) => {
            let name = match (o.get("type").and_then(Value::as_str), &o.get("function")) {
                (Some("function"), Some(f)) => f.get("name").and_then(Value::as_str),
                _ => None,
            };
            let Some(name) = name else {
                return Err(bad(
                    "`tool_choice` as an object must be {\"type\": \"function\", \
                     \"function\": {\"name\": ...}}"
                        .into(),
                    param,
                ));
            };
            ToolChoice::Named(name.to_string())
        }
        Some(_) => {
            return Err(bad(
                "`tool_choice` must be a string or an object".into(),
                param,
            ))
        }
    };
    if functions.is_empty() {
        return Err(bad(
            "`tool_choice` is only allowed when `tools` are given".into(),
            param,
        ));
    }
    if let ToolChoice::Named(name) = &choice {
        if !functions.iter().any(|f| &f.name == name) {
            let known: Vec<&str> = functions.iter().map(|f| f.name.as_str()).collect();
            return Err(bad(
                format!(
                    "`tool_choice` names function `{name}`, which is not in `tools` ({})",
                    known.join(", ")
                ),
                param,
            ));
        }
    }
    Ok(choice)
}

/// The tool fields of a chat body: `None` where it offers no tools (or an empty list) and
/// leaves `tool_choice` out or `none`. A function's parameters are at most `max_bytes` long.
pub fn parse(body: &Map<String, Value>, max_bytes: usize) -> Res<Option<Tools>> {
    let list = match body.get("tools") {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(bad("`tools` must be a list".into(), "tools")),
    };
    let functions = list
        .iter()
        .enumerate()
        .map(|(i, t)| function(i, t, max_bytes))
        .collect::<Res<Vec<_>>>()?;
    for (i, f) in functions.iter().enumerate() {
        if functions[..i].iter().any(|g| g.name == f.name) {
            return Err(bad(
                format!("tools: function `{}` is given twice", f.name),
                "tools",
            ));
        }
    }
    let choice = tool_choice(body, &functions)?;
    let parallel = crate::api::boolean_or(body, "parallel_tool_calls", true)?;
    if functions.is_empty() {
        return Ok(None);
    }
    Ok(Some(Tools {
        functions,
        choice,
        parallel,
    }))
}

#[cfg(test)]
mod tests;
