//! `config.pbtxt`, Triton's model configuration in protobuf's text format, read into the JSON
//! Triton hands its backends (protobuf's JSON mapping of `model_config.proto`): repeated fields
//! as arrays (`input: [{name, data_type: "TYPE_FP32", dims: [16]}]`), maps as objects
//! (`parameters: {device: {string_value: "cpu"}}`), enums as their names, 64-bit integers as
//! numbers (as Triton's own JSON writes `max_batch_size` and `dims`). So a server outside
//! Triton reads a repository's configurations into what [`crate::config`] takes.
//!
//! Field names are checked against `model_config.proto`'s (a misspelt field is an error, as
//! Triton's own parser makes it, never silently dropped); every error names its line.

mod lex;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use lex::{describe, tokenize, Token};

/// Why a configuration could not be read: its line (1-based) and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PbtxtError {
    /// The line of the text at fault.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for PbtxtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for PbtxtError {}

/// Every field name (space-separated) of `model_config.proto`'s `ModelConfig` and the messages it holds.
const FIELDS: &str = "\
    agents all allow_ragged_batch allow_timeout_override backend batch_input batch_output \
    batch_size bool_false_true buckets busy_wait_events cc_model_filenames control \
    control_input count cpu_execution_accelerator cuda data_file data_type decoupled \
    default_model_filename default_priority_level default_queue_policy \
    default_timeout_microseconds device_id dim dims direct dynamic_batching eager_batching \
    enable ensemble_scheduling execution_accelerators family format fp32_false_true \
    gather_kernel_buffer_threshold global gpu_execution_accelerator gpus graph \
    graph_lower_bound graph_spec graphs histogram_options host_policy initial_state input \
    input_data_file input_map input_name input_pinned_memory inputs instance_group \
    int32_false_true is_non_linear_format_io is_shape_tensor iterative_sequence key kind \
    label_filename latest level max_batch_size max_candidate_sequences max_inflight_requests \
    max_queue_delay_microseconds max_queue_size max_sequence_idle_microseconds metric_control \
    metric_identifier metric_tags minimum_slot_utilization model_metrics model_name \
    model_namespace model_operations model_repository_agents model_transaction_policy \
    model_version model_warmup name num_versions oldest op_library_filename optimization \
    optional output output_copy_stream output_map output_name output_pinned_memory parameters \
    passive platform preferred_batch_size preserve_ordering priority priority_levels \
    priority_queue_policy profile random_data rate_limiter reshape resources response_cache \
    runtime secondary_devices sequence_batching shape source_input specific state step \
    string_value target_name timeout_action use_growable_memory \
    use_same_buffer_for_input_output value version_policy versions zero_data";

/// The repeated fields (JSON arrays even when given once).
const REPEATED: &str = "\
    agents batch_input batch_output bool_false_true buckets control control_input \
    cpu_execution_accelerator dim dims fp32_false_true gpu_execution_accelerator gpus \
    graph_spec initial_state input instance_group int32_false_true metric_control model_warmup \
    op_library_filename output preferred_batch_size profile resources secondary_devices shape \
    source_input state step target_name versions";

/// The map fields (JSON objects by key): written as repeated `{ key: ... value: ... }`.
const MAPS: &str = "\
    cc_model_filenames input_map metric_tags output_map parameters priority_queue_policy";

/// What a field is, by its name and the field holding it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Single,
    Repeated,
    Map,
}

fn listed(names: &str, name: &str) -> bool {
    names.split_ascii_whitespace().any(|n| n == name)
}

fn kind(parent: Option<&str>, name: &str) -> Kind {
    match (parent, name) {
        // `CudaGraphSpec.input` and `ModelWarmup.inputs` are maps; `ModelConfig.input` is not.
        (Some("graph_spec"), "input") | (Some("model_warmup"), "inputs") => Kind::Map,
        _ if listed(MAPS, name) => Kind::Map,
        _ if listed(REPEATED, name) => Kind::Repeated,
        _ => Kind::Single,
    }
}

fn error<T>(line: usize, message: impl Into<String>) -> Result<T, PbtxtError> {
    Err(PbtxtError {
        line,
        message: message.into(),
    })
}

/// Reads a configuration's text into Triton's JSON form of it.
pub fn parse(text: &str) -> Result<Value, PbtxtError> {
    let tokens = tokenize(text)?;
    let mut p = Parser {
        tokens,
        at: 0,
        last_line: text.lines().count().max(1),
    };
    let top = p.message(None, None)?;
    Ok(Value::Object(top))
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    /// The line errors at the end of the text name.
    last_line: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|t| &t.0)
    }

    fn line(&self) -> usize {
        self.tokens.get(self.at).map_or(self.last_line, |t| t.1)
    }

    fn next(&mut self) -> Option<(Token, usize)> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Token::Punct(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// The fields up to `close` (`}` or `>`; the end of the text for the top level).
    fn message(
        &mut self,
        parent: Option<&str>,
        close: Option<(char, usize)>,
    ) -> Result<Map<String, Value>, PbtxtError> {
        let mut fields = Map::new();
        // The line each field was first given on, for a repeated singular field's error.
        let mut first_lines: Vec<(String, usize)> = Vec::new();
        loop {
            let line = self.line();
            match self.next() {
                None => match close {
                    Some((c, opened)) => {
                        return error(
                            self.last_line,
                            format!("the message opened on line {opened} is not closed by `{c}`"),
                        )
                    }
                    None => return Ok(fields),
                },
                Some((Token::Punct(c), _)) if close.is_some_and(|(want, _)| want == c) => {
                    return Ok(fields)
                }
                Some((Token::Ident(name), _)) => {
                    self.field(&mut fields, &mut first_lines, parent, name, line)?;
                    if !self.eat(',') {
                        self.eat(';');
                    }
                }
                Some((t, _)) => {
                    return error(
                        line,
                        format!("expected a field name, found {}", describe(Some(&t))),
                    )
                }
            }
        }
    }

    /// One field's value(s), after its name, added to `fields`.
    fn field(
        &mut self,
        fields: &mut Map<String, Value>,
        first_lines: &mut Vec<(String, usize)>,
        parent: Option<&str>,
        name: String,
        line: usize,
    ) -> Result<(), PbtxtError> {
        if !listed(FIELDS, &name) {
            return error(line, format!("unknown field `{name}`"));
        }
        let colon = self.eat(':');
        let is_list = self.peek() == Some(&Token::Punct('['));
        let values = match self.peek() {
            Some(Token::Punct('[')) => {
                self.at += 1;
                self.list(&name)?
            }
            Some(Token::Punct('{' | '<')) => vec![self.value(&name)?],
            _ if colon => vec![self.value(&name)?],
            other => {
                return error(
                    self.line(),
                    format!(
                        "expected `:` or `{{` after `{name}`, found {}",
                        describe(other)
                    ),
                )
            }
        };
        match kind(parent, &name) {
            Kind::Repeated => {
                let list = fields
                    .entry(name)
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = list {
                    items.extend(values);
                }
            }
            Kind::Map => {
                let map = fields
                    .entry(name.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                for entry in values {
                    let (key, value) = map_entry(&name, entry, line)?;
                    if let Value::Object(m) = map {
                        m.insert(key, value);
                    }
                }
            }
            Kind::Single => {
                if let Some((_, first)) = first_lines.iter().find(|(n, _)| *n == name) {
                    return error(
                        line,
                        format!(
                            "field `{name}` takes one value; it was given on line {first} already"
                        ),
                    );
                }
                let value = match <[Value; 1]>::try_from(values) {
                    Ok([value]) if !is_list => value,
                    _ => return error(line, format!("field `{name}` takes one value, not a list")),
                };
                first_lines.push((name.clone(), line));
                fields.insert(name, value);
            }
        }
        Ok(())
    }

    /// The items of a `[ ... ]` list, after its `[`.
    fn list(&mut self, name: &str) -> Result<Vec<Value>, PbtxtError> {
        let opened = self.tokens[self.at - 1].1;
        let mut items = Vec::new();
        if self.eat(']') {
            return Ok(items);
        }
        loop {
            items.push(self.value(name)?);
            if self.eat(']') {
                return Ok(items);
            }
            if !self.eat(',') {
                return error(
                    self.line(),
                    format!(
                        "expected `,` or `]` in the list `{name}` opened on line {opened}, found {}",
                        describe(self.peek())
                    ),
                );
            }
        }
    }

    /// One value of field `name`: a scalar or a message.
    fn value(&mut self, name: &str) -> Result<Value, PbtxtError> {
        let line = self.line();
        match self.next() {
            Some((Token::Punct('{'), l)) => {
                Ok(Value::Object(self.message(Some(name), Some(('}', l)))?))
            }
            Some((Token::Punct('<'), l)) => {
                Ok(Value::Object(self.message(Some(name), Some(('>', l)))?))
            }
            Some((Token::Str(s), _)) => Ok(Value::String(s)),
            Some((Token::Num(n), _)) => Ok(n),
            Some((Token::Ident(word), _)) => Ok(match word.as_str() {
                "true" | "True" | "t" => Value::Bool(true),
                "false" | "False" | "f" => Value::Bool(false),
                _ => Value::String(word),
            }),
            other => error(
                line,
                format!(
                    "expected a value for `{name}`, found {}",
                    describe(other.as_ref().map(|t| &t.0))
                ),
            ),
        }
    }
}

/// A map entry (`{ key: "k" value: ... }`) as its JSON key and value.
fn map_entry(name: &str, entry: Value, line: usize) -> Result<(String, Value), PbtxtError> {
    let Value::Object(mut fields) = entry else {
        return error(
            line,
            format!("`{name}` is a map: each entry is `{{ key: ... value: ... }}`"),
        );
    };
    let key = match fields.remove("key") {
        Some(Value::String(s)) => s,
        Some(Value::Number(n)) => n.to_string(),
        _ => return error(line, format!("an entry of `{name}` has no `key`")),
    };
    if let Some(extra) = fields.keys().find(|k| *k != "value") {
        return error(
            line,
            format!("an entry of `{name}` has `{extra}`: map entries have `key` and `value`"),
        );
    }
    let value = fields.remove("value").unwrap_or(Value::Object(Map::new()));
    Ok((key, value))
}
