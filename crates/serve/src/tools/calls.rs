//! The model's answer read for calls in the call format of [`super::prompt`], as it streams:
//! a [`CallReader`] takes the text piece by piece and gives [`Piece`]s (text outside calls, a
//! call's start with its function's name, fragments of its arguments), holding back only what
//! may still turn out to open a call. The same reader reads a whole answer ([`read_answer`]),
//! so a streamed answer's calls are the non-streamed answer's. A call block that is not in the
//! canonical order (`name` first) is read when it closes; one that does not parse, or names a
//! function the request does not offer, stays text.

use std::hash::{BuildHasher, Hasher};

use serde_json::Value;

use super::python_calls;

const OPEN_TAG: &str = "<tool_call>";
const CLOSE_TAG: &str = "</tool_call>";

/// A piece of an answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    /// Text outside calls.
    Text(String),
    /// Call `index` (of this answer, from 0) starts, naming `name`.
    CallStart { index: usize, name: String },
    /// The next fragment of call `index`'s arguments (a JSON text once all are joined).
    Arguments { index: usize, fragment: String },
}

/// Where a JSON value's scan stands (strings and nesting).
#[derive(Clone, Debug, Default)]
struct JsonScan {
    started: bool,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl JsonScan {
    /// Takes `ch` if the scan is in a string (its escapes, its closing quote); whether it was.
    fn string_char(&mut self, ch: char) -> bool {
        if !self.in_string {
            return false;
        }
        match (self.escaped, ch) {
            (true, _) => self.escaped = false,
            (false, '\\') => self.escaped = true,
            (false, '"') => self.in_string = false,
            _ => {}
        }
        true
    }

    /// How many bytes of `s` belong to the value, and whether it ends within them.
    fn take(&mut self, s: &str) -> (usize, bool) {
        for (i, ch) in s.char_indices() {
            self.started = true;
            if self.string_char(ch) {
                continue;
            }
            match ch {
                '"' => self.in_string = true,
                '{' | '[' => self.depth += 1,
                // The call object's own `}`: a scalar's end.
                '}' | ']' if self.depth == 0 => return (i, true),
                '}' | ']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return (i + 1, true);
                    }
                }
                _ => {}
            }
        }
        (s.len(), false)
    }
}

#[derive(Clone, Debug)]
enum State {
    /// Outside calls.
    Text,
    /// After `<tool_call>`, before the arguments.
    Head,
    /// In a call's arguments.
    Arguments(JsonScan),
    /// After the arguments, before `</tool_call>`.
    Tail,
    /// A call block read whole when it closes.
    Block,
}

/// Reads one answer's calls as its text comes.
#[derive(Clone, Debug)]
pub struct CallReader {
    /// The functions a call may name.
    names: Vec<String>,
    state: State,
    /// Text not yet given out.
    buf: String,
    /// Whitespace outside calls, held until text follows (dropped after a call).
    blank: String,
    calls: usize,
    /// Past this many calls the rest of the answer is dropped (`parallel_tool_calls: false`).
    max_calls: usize,
    /// Whether the answer so far may be MLC's Python call format (held back while it may).
    python: bool,
}

/// The result of matching an expected literal at a position.
enum Step {
    At(usize),
    More,
    Mismatch,
}

fn expect(s: &str, at: usize, lit: &str) -> Step {
    let rest = &s[at..];
    if rest.starts_with(lit) {
        Step::At(at + lit.len())
    } else if lit.starts_with(rest) {
        Step::More
    } else {
        Step::Mismatch
    }
}

/// `lits` in turn from `at`, each after optional whitespace.
fn literals(s: &str, mut at: usize, lits: &[&str]) -> Step {
    for lit in lits {
        at = skip_ws(s, at);
        match expect(s, at, lit) {
            Step::At(next) => at = next,
            other => return other,
        }
    }
    Step::At(at)
}

fn skip_ws(s: &str, at: usize) -> usize {
    at + (s[at..].len() - s[at..].trim_start().len())
}

/// The longest end of `s` that `tag` starts with.
fn partial_tag(s: &str, tag: &str) -> usize {
    (1..tag.len().min(s.len() + 1))
        .rev()
        .find(|&k| s.is_char_boundary(s.len() - k) && tag.starts_with(&s[s.len() - k..]))
        .unwrap_or(0)
}

impl CallReader {
    /// A reader of calls of the functions named `names`.
    pub fn new(names: Vec<String>) -> CallReader {
        CallReader {
            names,
            state: State::Text,
            buf: String::new(),
            blank: String::new(),
            calls: 0,
            max_calls: usize::MAX,
            python: true,
        }
    }

    /// The reader keeping only the first `max` calls of an answer (and nothing after them).
    pub fn with_max_calls(mut self, max: usize) -> CallReader {
        self.max_calls = max;
        self
    }

    /// The complete calls read so far.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Whether a call was started (complete or not).
    pub fn in_or_after_call(&self) -> bool {
        self.calls > 0 || matches!(self.state, State::Arguments(_) | State::Tail)
    }

    fn text(&mut self, out: &mut Vec<Piece>, t: &str) {
        if t.trim().is_empty() {
            self.blank.push_str(t);
            return;
        }
        let mut s = std::mem::take(&mut self.blank);
        if self.calls > 0 {
            s.clear();
        }
        s.push_str(t);
        match out.last_mut() {
            Some(Piece::Text(prev)) => prev.push_str(&s),
            _ => out.push(Piece::Text(s)),
        }
    }

    /// The head `{"name": "...", "arguments": ` at the start of `buf`: its name and length.
    fn head(&self) -> Result<Option<(String, usize)>, ()> {
        let s = self.buf.as_str();
        let at = match literals(s, 0, &["{", "\"name\"", ":"]) {
            Step::At(at) => skip_ws(s, at),
            Step::More => return Ok(None),
            Step::Mismatch => return Err(()),
        };
        match s[at..].chars().next() {
            None => return Ok(None),
            Some('"') => {}
            Some(_) => return Err(()),
        }
        // The name: a JSON string, up to its closing quote.
        let mut scan = JsonScan {
            started: true,
            in_string: true,
            ..JsonScan::default()
        };
        let Some(len) = s[at + 1..].char_indices().find_map(|(i, ch)| {
            (scan.string_char(ch) && !scan.in_string).then_some(i + ch.len_utf8())
        }) else {
            return Ok(None);
        };
        let end = at + 1 + len;
        let name: String = serde_json::from_str(&s[at..end]).map_err(|_| ())?;
        match literals(s, end, &[",", "\"arguments\"", ":"]) {
            Step::At(at) => Ok(Some((name, at))),
            Step::More => Ok(None),
            Step::Mismatch => Err(()),
        }
    }

    /// A closed call block's text read whole: its name and compact arguments.
    fn block(&self, inner: &str) -> Option<(String, String)> {
        let v: Value = serde_json::from_str(inner.trim()).ok()?;
        let name = v.get("name")?.as_str()?;
        if !self.names.iter().any(|n| n == name) {
            return None;
        }
        let arguments = match v.get("arguments")? {
            Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
            a => a.clone(),
        };
        arguments
            .is_object()
            .then(|| (name.to_string(), arguments.to_string()))
    }

    /// A whole call's pieces.
    fn push_call(&mut self, out: &mut Vec<Piece>, call: Call) {
        let index = self.calls;
        out.push(Piece::CallStart {
            index,
            name: call.name,
        });
        out.push(Piece::Arguments {
            index,
            fragment: call.arguments,
        });
        self.calls += 1;
    }

    /// Takes the next text of the answer; returns the pieces it completes.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        loop {
            match &mut self.state {
                State::Text if self.calls >= self.max_calls => {
                    self.buf.clear();
                    self.blank.clear();
                    return out;
                }
                State::Text if self.python => {
                    let pending = format!("{}{}", self.blank, self.buf);
                    if python_calls::may_start(&pending, &self.names) {
                        return out;
                    }
                    self.python = false;
                }
                State::Text => {
                    if let Some(k) = self.buf.find(OPEN_TAG) {
                        let before: String = self.buf.drain(..k + OPEN_TAG.len()).collect();
                        self.text(&mut out, &before[..k]);
                        self.state = State::Head;
                        continue;
                    }
                    let keep = partial_tag(&self.buf, OPEN_TAG);
                    let give: String = self.buf.drain(..self.buf.len() - keep).collect();
                    self.text(&mut out, &give);
                    return out;
                }
                State::Head => match self.head() {
                    Ok(None) => return out,
                    Ok(Some((name, len))) if self.names.contains(&name) => {
                        self.buf.drain(..len);
                        out.push(Piece::CallStart {
                            index: self.calls,
                            name,
                        });
                        self.state = State::Arguments(JsonScan::default());
                    }
                    _ => self.state = State::Block,
                },
                State::Arguments(scan) => {
                    if !scan.started {
                        let blank = self.buf.len() - self.buf.trim_start().len();
                        self.buf.drain(..blank);
                    }
                    let (n, done) = scan.take(&self.buf);
                    let fragment: String = self.buf.drain(..n).collect();
                    if !fragment.is_empty() {
                        out.push(Piece::Arguments {
                            index: self.calls,
                            fragment,
                        });
                    }
                    if !done {
                        return out;
                    }
                    self.state = State::Tail;
                }
                State::Tail => {
                    let Some(k) = self.buf.find(CLOSE_TAG) else {
                        return out;
                    };
                    self.buf.drain(..k + CLOSE_TAG.len());
                    self.calls += 1;
                    self.state = State::Text;
                }
                State::Block => {
                    let Some(k) = self.buf.find(CLOSE_TAG) else {
                        return out;
                    };
                    let block: String = self.buf.drain(..k + CLOSE_TAG.len()).collect();
                    match self.block(&block[..k]) {
                        Some((name, arguments)) => {
                            self.push_call(&mut out, Call { name, arguments });
                        }
                        None => self.text(&mut out, &format!("{OPEN_TAG}{block}")),
                    }
                    self.state = State::Text;
                }
            }
        }
    }

    /// The answer ended: what was held back, as text (a call cut short keeps what it gave).
    pub fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.buf);
        match self.state {
            State::Text if self.python => {
                let pending = format!("{}{rest}", self.blank);
                match python_calls::read(&pending, &self.names) {
                    Some(calls) => {
                        self.blank.clear();
                        for call in calls.into_iter().take(self.max_calls) {
                            self.push_call(&mut out, call);
                        }
                    }
                    None => self.text(&mut out, &rest),
                }
            }
            State::Text => self.text(&mut out, &rest),
            State::Head | State::Block => self.text(&mut out, &format!("{OPEN_TAG}{rest}")),
            State::Arguments(_) | State::Tail => {}
        }
        if !self.in_or_after_call() && !self.blank.is_empty() {
            let blank = std::mem::take(&mut self.blank);
            match out.last_mut() {
                Some(Piece::Text(t)) => t.push_str(&blank),
                _ => out.push(Piece::Text(blank)),
            }
        }
        out
    }
}

/// One call of an answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub name: String,
    pub arguments: String,
}

/// A whole answer read: its text outside calls (`None` when there is none), its calls, and
/// how many of them are complete.
pub fn read_answer(mut reader: CallReader, text: &str) -> (Option<String>, Vec<Call>, usize) {
    let mut pieces = reader.push(text);
    pieces.extend(reader.finish());
    let mut content = String::new();
    let mut calls: Vec<Call> = Vec::new();
    for p in pieces {
        match p {
            Piece::Text(t) => content.push_str(&t),
            Piece::CallStart { name, .. } => calls.push(Call {
                name,
                arguments: String::new(),
            }),
            Piece::Arguments { fragment, .. } => {
                if let Some(c) = calls.last_mut() {
                    c.arguments.push_str(&fragment);
                }
            }
        }
    }
    (
        (!content.is_empty()).then_some(content),
        calls,
        reader.calls(),
    )
}

/// A new call id, `call_` and 24 random letters and digits (OpenAI's form).
pub fn call_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut id = String::from("call_");
    let state = std::collections::hash_map::RandomState::new();
    let mut h = state.build_hasher();
    for i in 0..24u8 {
        h.write_u8(i);
        id.push(ALPHABET[(h.finish() % ALPHABET.len() as u64) as usize] as char);
    }
    id
}
