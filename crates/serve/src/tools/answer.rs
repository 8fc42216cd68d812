//! The answers of a request with active tools in OpenAI's shapes: `message.tool_calls` beside
//! a `content` that is null where the model wrote only calls, the stream's
//! `delta.tool_calls` (a call's id, type and name first, then its arguments in fragments),
//! and `finish_reason` `tool_calls` (`stop` for a call forced by name, as OpenAI answers).

use serde_json::{json, Value};

use super::calls::{call_id, read_answer, CallReader, Piece};
use super::{ToolChoice, Tools};
use crate::engine::FinishReason;

/// The tool side of one response's choices.
#[derive(Debug)]
pub struct ToolAnswers {
    /// A reader of no text yet, cloned for each answer.
    reader: CallReader,
    named: bool,
    /// Per choice, for streams: the reader and the ids of its calls.
    readers: Vec<CallReader>,
    ids: Vec<Vec<String>>,
}

impl ToolAnswers {
    /// The tool side of `choices` answers to a request with `tools` (active).
    pub fn new(tools: &Tools, choices: usize) -> ToolAnswers {
        let names: Vec<String> = tools.callable().iter().map(|f| f.name.clone()).collect();
        let max_calls = if tools.several_calls() { usize::MAX } else { 1 };
        let reader = CallReader::new(names).with_max_calls(max_calls);
        ToolAnswers {
            readers: vec![reader.clone(); choices],
            ids: vec![Vec::new(); choices],
            reader,
            named: matches!(tools.choice, ToolChoice::Named(_)),
        }
    }

    /// OpenAI's finish reason of an answer with `calls` complete calls.
    fn reason(&self, calls: usize, reason: FinishReason) -> &'static str {
        match reason {
            FinishReason::Stop if calls > 0 && self.named => "stop",
            FinishReason::Stop if calls > 0 => "tool_calls",
            r => r.as_str(),
        }
    }

    /// A stream delta of choice `c`'s pieces (`None` for none).
    fn delta_of(&mut self, c: usize, pieces: Vec<Piece>) -> Option<Value> {
        let mut content = String::new();
        let mut calls: Vec<Value> = Vec::new();
        for p in pieces {
            match p {
                Piece::Text(t) => content.push_str(&t),
                Piece::CallStart { index, name } => {
                    let id = call_id();
                    self.ids[c].push(id.clone());
                    calls.push(json!({"index": index, "id": id, "type": "function",
                                      "function": {"name": name, "arguments": ""}}));
                }
                Piece::Arguments { index, fragment } => match calls.last_mut() {
                    Some(last) if last["index"] == json!(index) => {
                        let a = last["function"]["arguments"].as_str().unwrap_or_default();
                        last["function"]["arguments"] = json!(format!("{a}{fragment}"));
                    }
                    _ => calls.push(json!({"index": index, "function": {"arguments": fragment}})),
                },
            }
        }
        let mut delta = json!({});
        if !content.is_empty() {
            delta["content"] = json!(content);
        }
        if !calls.is_empty() {
            delta["tool_calls"] = Value::Array(calls);
        }
        (delta != json!({})).then_some(delta)
    }

    /// The stream delta of choice `c`'s next text, if it completes any.
    pub fn delta(&mut self, c: usize, text: &str) -> Option<Value> {
        let pieces = self.readers[c].push(text);
        self.delta_of(c, pieces)
    }

    /// Choice `c`'s end in a stream: the delta of what was held back (or `{}`) and the finish
    /// reason.
    pub fn finish(&mut self, c: usize, reason: FinishReason) -> (Value, &'static str) {
        let pieces = self.readers[c].finish();
        let delta = self.delta_of(c, pieces).unwrap_or_else(|| json!({}));
        (delta, self.reason(self.readers[c].calls(), reason))
    }

    /// A whole answer's `message` and finish reason.
    pub fn message(&self, text: &str, reason: Option<FinishReason>) -> (Value, Value) {
        let (content, calls, complete) = read_answer(self.reader.clone(), text);
        let mut message = json!({"role": "assistant", "content": content});
        if !calls.is_empty() {
            message["tool_calls"] = calls
                .iter()
                .map(|c| {
                    json!({"id": call_id(), "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
        }
        let finish = reason.map_or(Value::Null, |r| json!(self.reason(complete, r)));
        (message, finish)
    }
}
