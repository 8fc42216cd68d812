//! The grammar of a forced (`tool_choice` naming a function) or required call: the call format
//! of [`super::prompt`] around each callable function's arguments, JSON valid against its
//! parameters (llguidance's `%json{...}` in a Lark grammar). A named function is called once;
//! `required` allows several calls (one a line) unless `parallel_tool_calls` is false.

use serde_json::Value;

use super::prompt::{call_head, CALL_CLOSE, CALL_OPEN};
use super::{compact_schema, Tools};
use crate::structured::Constraint;

/// The constraint of `tools`' forced or required call.
pub fn constraint(tools: &Tools) -> Constraint {
    Constraint::Lark(lark(tools))
}

/// A Lark string literal of `text`.
fn literal(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// The Lark grammar of `tools`' calls (llguidance's dialect).
pub fn lark(tools: &Tools) -> String {
    let callable = tools.callable();
    let mut g = String::from(if tools.several_calls() {
        "start: call (\"\\n\" call)*\n"
    } else {
        "start: call\n"
    });
    let alternatives: Vec<String> = (0..callable.len()).map(|i| format!("call_{i}")).collect();
    g.push_str(&format!("call: {}\n", alternatives.join(" | ")));
    for (i, f) in callable.iter().enumerate() {
        g.push_str(&format!(
            "call_{i}: {} args_{i} {}\nargs_{i}: %json {}\n",
            literal(&format!("{CALL_OPEN}{}", call_head(&f.name))),
            literal(&format!("}}{CALL_CLOSE}")),
            compact_schema(&f.parameters)
        ));
    }
    g
}
