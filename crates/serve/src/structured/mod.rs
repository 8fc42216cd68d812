//! Structured output: grammar-constrained decoding with [llguidance].
//!
//! - [`Constraint`]: what a request asks its answer to match (a JSON schema, any JSON object,
//!   a regex, one of a list of strings, a Lark grammar), read from the request by
//!   [`request::constraint_from_body`] (`response_format`, vLLM's `structured_outputs` and
//!   `guided_*` fields) or built by the server itself (tool calls);
//! - [`grammar`]: the model's token table, the compiled grammars (compiled once each, in a
//!   bounded cache keyed by their text) and the per-sequence [`grammar::Matcher`] the engine
//!   asks for each step's allowed tokens and advances with the sampled one; [`lexers`]: a
//!   grammar's lexers, one per mask thread, so that its sequences' masks run at once;
//! - [`cursor`]: each sequence's next mask (and forced run) computed ahead while the engine
//!   runs the forward ([`GrammarCursor`]), on the threads of a [`mask_pool`] that keeps one
//!   of them from grammars slow at every step.

pub mod cursor;
pub mod grammar;
mod lexers;
pub mod mask_pool;
pub mod request;

pub use cursor::GrammarCursor;
pub use grammar::{GrammarLimits, Grammars, Matcher};
pub use mask_pool::MaskPool;
pub use request::constraint_from_body;

use llguidance::api::TopLevelGrammar;
use serde_json::{json, Value};

/// What a request's answer must match. Set in [`crate::sampler::SamplingParams::constraint`];
/// the engine masks every step's logits to the tokens that keep the answer matching, and ends
/// the answer (`finish_reason: "stop"`) when the grammar is complete.
#[derive(Clone, Debug, PartialEq)]
pub enum Constraint {
    /// A JSON value valid against `schema` (JSON Schema, as llguidance supports it). `compact`:
    /// no whitespace, `,` and `:` separators (OpenAI's output); else `, ` and `: `. A schema's
    /// own `x-guidance` options (llguidance's JSON options) take precedence over both.
    JsonSchema { schema: Value, compact: bool },
    /// Any JSON object (`response_format: {"type": "json_object"}`), compact.
    JsonObject,
    /// Text matching a regular expression (whole answer).
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// A grammar in llguidance's Lark dialect; it may embed JSON schemas with
    /// `%json{ ... }` (a tool call's arguments), and regexes as `/.../` terminals.
    Lark(String),
}

impl Constraint {
    /// The grammar llguidance compiles for it. Its JSON text is the compile cache's key.
    pub fn to_grammar(&self) -> TopLevelGrammar {
        match self {
            Constraint::JsonSchema { schema, compact } => {
                TopLevelGrammar::from_json_schema(with_json_options(schema.clone(), *compact))
            }
            Constraint::JsonObject => TopLevelGrammar::from_json_schema(with_json_options(
                json!({"type": "object"}),
                true,
            )),
            Constraint::Regex(rx) => TopLevelGrammar::from_regex(rx),
            Constraint::Choice(options) => {
                let alternatives: Vec<String> = options
                    .iter()
                    .map(|o| Value::String(o.clone()).to_string())
                    .collect();
                TopLevelGrammar::from_lark(format!("start: {}\n", alternatives.join(" | ")))
            }
            Constraint::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
        }
    }
}

/// llguidance's JSON options for `compact` (or spaced) output without free whitespace,
/// unless the schema sets its own (`x-guidance`). A schema that is not an object (`true`)
/// is wrapped so that it can carry them.
pub fn with_json_options(schema: Value, compact: bool) -> Value {
    let mut schema = match schema {
        Value::Object(m) => m,
        Value::Bool(true) => serde_json::Map::new(),
        other => return other,
    };
    if !schema.contains_key("x-guidance") {
        let (item, key) = if compact { (",", ":") } else { (", ", ": ") };
        schema.insert(
            "x-guidance".into(),
            json!({"whitespace_flexible": false, "item_separator": item, "key_separator": key}),
        );
    }
    Value::Object(schema)
}
