//! JSON text as tvm-ffi reads and writes it (`ffi.json.Parse`, `ffi.json.Stringify`; C++
//! `json::Parse`, `json::Stringify`; tvm-ffi `src/ffi/extra/json_parser.cc`,
//! `json_writer.cc`).
//!
//! JSON values are ffi values: `ffi.Map` objects (keys in insertion order), `ffi.Array`s,
//! strings, integers, floats, booleans and `None`.
//!
//! Reading accepts JSON plus what Python's `json` module accepts: `NaN`, `Infinity`,
//! `-Infinity`; an integer that fits int64 is an int, other numbers floats. Errors are
//! `ValueError`s worded as Python's, with the position: `Expecting value: line 1 column 1
//! (char 0)` (column from 1, char offset from 0, in bytes).
//!
//! Writing is compact unless an indent is given (then one entry per line, `": "` after keys);
//! floats with an integral value as `2.0`, others with 17 significant digits; `NaN`,
//! `Infinity`. Object keys must be strings; `ffi.List`s are written like arrays (a list that
//! contains itself is an error).

use std::collections::HashSet;

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::object::containers::array::new_array;
use crate::object::containers::list::seq_items;
use crate::object::containers::map::{map_entries, new_map, set, Entry};
use crate::object::type_registry::static_index;
use crate::value::{Any, AnyView};

// ---------- reading ----------

/// Parses JSON text (tvm-ffi's `json::Parse`).
pub fn parse(text: &[u8]) -> Result<Any> {
    let mut p = Parser {
        s: text,
        cur: 0,
        line: 1,
        line_begin: 0,
        error: None,
        depth: 0,
    };
    match p.value() {
        Some(v) if p.tail() => Ok(v),
        _ => Err(Error::value(p.error.take().unwrap_or_else(|| {
            // tvm-ffi's message when a sequence ends with the text (after a comma).
            p.context("Syntax error near")
        }))),
    }
}

/// Nesting deeper than this is refused rather than overflowing the stack (Python's `json` stops
/// near the same depth, its recursion limit).
const MAX_DEPTH: usize = 1000;

struct Parser<'a> {
    s: &'a [u8],
    cur: usize,
    line: usize,
    line_begin: usize,
    error: Option<String>,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.cur).copied()
    }

    fn skip_spaces(&mut self) {
        while let Some(c @ (b' ' | b'\t' | b'\n' | b'\r')) = self.peek() {
            if c == b'\n' {
                self.line += 1;
                self.line_begin = self.cur + 1;
            }
            self.cur += 1;
        }
    }

    /// Consumes `pattern` as far as it matches; whether all of it did.
    fn literal(&mut self, pattern: &[u8]) -> bool {
        for &c in pattern {
            if self.peek() != Some(c) {
                return false;
            }
            self.cur += 1;
        }
        true
    }

    fn context(&self, what: &str) -> String {
        format!(
            "{what}: line {} column {} (char {})",
            self.line,
            self.cur - self.line_begin + 1,
            self.cur
        )
    }

    /// Records the error `what` at the current position; returns `None` for `?`.
    fn fail<T>(&mut self, what: &str) -> Option<T> {
        self.error = Some(self.context(what));
        None
    }

    /// Records the error `what` at byte `at`.
    fn fail_at<T>(&mut self, at: usize, what: &str) -> Option<T> {
        self.cur = at;
        self.fail(what)
    }

    fn tail(&mut self) -> bool {
        self.skip_spaces();
        if self.peek().is_some() {
            self.error = Some(self.context("Extra data"));
            return false;
        }
        true
    }

    fn value(&mut self) -> Option<Any> {
        self.skip_spaces();
        let start = self.cur;
        let word = |p: &mut Self, rest: &[u8], v: Any| {
            p.cur += 1;
            if p.literal(rest) {
                Some(v)
            } else {
                p.fail_at(start, "Expecting value")
            }
        };
        match self.peek() {
            None => self.fail("Expecting value"),
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string(),
            Some(b't') => word(self, b"rue", Any::from(true)),
            Some(b'f') => word(self, b"alse", Any::from(false)),
            Some(b'n') => word(self, b"ull", Any::none()),
            Some(_) => self.number(),
        }
    }

    fn nested(&mut self, parse: fn(&mut Self) -> Option<Any>) -> Option<Any> {
        if self.depth >= MAX_DEPTH {
            return self.fail("Nesting too deep at");
        }
        self.depth += 1;
        let v = parse(self);
        self.depth -= 1;
        v
    }

    fn object(&mut self) -> Option<Any> {
        self.cur += 1;
        self.skip_spaces();
        match self.peek() {
            None => return self.fail("Expecting property name enclosed in double quotes"),
            Some(b'}') => {
                self.cur += 1;
                return Some(Any::from_object(new_map(Vec::new())));
            }
            Some(_) => {}
        }
        let mut entries: Vec<Entry> = Vec::new();
        while let Some(c) = self.peek() {
            if c != b'"' {
                return self.fail("Expecting property name enclosed in double quotes");
            }
            let key = self.string()?;
            self.skip_spaces();
            if self.peek() != Some(b':') {
                return self.fail("Expecting ':' delimiter");
            }
            self.cur += 1;
            let value = self.value()?;
            set(&mut entries, key, value);
            self.skip_spaces();
            match self.peek() {
                Some(b'}') => {
                    self.cur += 1;
                    return Some(Any::from_object(new_map(entries)));
                }
                Some(b',') => {
                    self.cur += 1;
                    self.skip_spaces();
                }
                _ => return self.fail("Expecting ',' delimiter"),
            }
        }
        None
    }

    fn array(&mut self) -> Option<Any> {
        self.cur += 1;
        self.skip_spaces();
        match self.peek() {
            None => return self.fail("Expecting value"),
            Some(b']') => {
                self.cur += 1;
                return Some(Any::from_object(new_array(Vec::new())));
            }
            Some(_) => {}
        }
        let mut items = Vec::new();
        while self.peek().is_some() {
            items.push(self.value()?);
            self.skip_spaces();
            match self.peek() {
                Some(b',') => {
                    self.cur += 1;
                    self.skip_spaces();
                }
                Some(b']') => {
                    self.cur += 1;
                    return Some(Any::from_object(new_array(items)));
                }
                _ => return self.fail("Expecting ',' delimiter"),
            }
        }
        None
    }

    /// A string; the current byte is its opening quote.
    fn string(&mut self) -> Option<Any> {
        let start = self.cur;
        self.cur += 1;
        let mut out: Vec<u8> = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.cur += 1;
                    return Some(Any::string_compact(&String::from_utf8_lossy(&out)));
                }
                c if c < b' ' => return self.fail("Invalid control character at"),
                b'\\' => {
                    self.cur += 1;
                    let unescaped = match self.peek() {
                        Some(b'"') => b'"',
                        Some(b'\\') => b'\\',
                        Some(b'/') => b'/',
                        Some(b'b') => 8,
                        Some(b'f') => 12,
                        Some(b'n') => b'\n',
                        Some(b'r') => b'\r',
                        Some(b't') => b'\t',
                        Some(b'u') => {
                            let code = self.unicode_escape()?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(code.encode_utf8(&mut buf).as_bytes());
                            continue;
                        }
                        _ => return self.fail("Invalid \\escape"),
                    };
                    self.cur += 1;
                    out.push(unescaped);
                }
                c => {
                    out.push(c);
                    self.cur += 1;
                }
            }
        }
        self.fail_at(start, "Unterminated string starting at")
    }

    /// `\uXXXX`, or a surrogate pair of them; the current byte is the `u`.
    fn unicode_escape(&mut self) -> Option<char> {
        let escape = self.cur;
        self.cur += 1;
        let Some(first) = self.hex4() else {
            return self.fail_at(escape, "Invalid \\uXXXX escape");
        };
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.literal(b"\\u") {
                    return self.fail_at(escape, "Invalid surrogate pair of \\uXXXX escapes");
                }
                let second_at = self.cur;
                let Some(second) = self.hex4() else {
                    return self.fail_at(second_at, "Invalid \\uXXXX escape");
                };
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return self.fail_at(second_at, "Invalid surrogate pair of \\uXXXX escapes");
                }
                ((first - 0xD800) << 10) + (second - 0xDC00) + 0x10000
            }
            0xDC00..=0xDFFF => {
                return self.fail_at(escape, "Invalid surrogate pair of \\uXXXX escapes")
            }
            c => c,
        };
        Some(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER))
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.s.get(self.cur..self.cur + 4)?;
        let mut v = 0u32;
        for &d in digits {
            v = v * 16 + char::from(d).to_digit(16)?;
            self.cur += 1;
        }
        Some(v)
    }

    fn number(&mut self) -> Option<Any> {
        let start = self.cur;
        let special = |p: &mut Self, word: &[u8], v: f64| {
            if p.literal(word) {
                Some(Any::from(v))
            } else {
                p.fail_at(start, "Expecting value")
            }
        };
        match self.peek() {
            Some(b'-') if self.s.get(self.cur + 1) == Some(&b'I') => {
                self.cur += 1;
                return special(self, b"Infinity", f64::NEG_INFINITY);
            }
            Some(b'I') => return special(self, b"Infinity", f64::INFINITY),
            Some(b'N') => return special(self, b"NaN", f64::NAN),
            _ => {}
        }
        let len = self.s[self.cur..]
            .iter()
            .take_while(|c| matches!(c, b'0'..=b'9' | b'e' | b'E' | b'+' | b'-' | b'.'))
            .count();
        if len == 0 {
            return self.fail("Expecting value");
        }
        self.cur += len;
        // Only the bytes matched above: ASCII.
        let text = std::str::from_utf8(&self.s[start..self.cur]).unwrap_or_default();
        if !text.contains(['.', 'e', 'E']) {
            if let Some(i) = parse_int(text) {
                return Some(Any::from(i));
            }
        }
        match parse_float(text) {
            Some(f) => Some(Any::from(f)),
            None => self.fail_at(start, "Expecting value"),
        }
    }
}

/// An integer as `strtoimax` reads one that fills the whole text: optional sign, decimal
/// digits, no overflow.
fn parse_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.strip_prefix('+').unwrap_or(text).parse().ok()
}

/// A decimal float as `strtod` reads one that fills the whole text, failing where it reports
/// a range error (overflow, or a nonzero value that underflows to zero or a subnormal).
fn parse_float(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int_part.len() + frac.len() == 0 || !all_digits(int_part) || !all_digits(frac) {
        return None;
    }
    if let Some(e) = exponent {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        if e.is_empty() || !all_digits(e) {
            return None;
        }
    }
    let v: f64 = text.strip_prefix('+').unwrap_or(text).parse().ok()?;
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    if v.is_infinite() || (nonzero && v.abs() < f64::MIN_POSITIVE) {
        return None;
    }
    Some(v)
}

// ---------- writing ----------

/// Writes a JSON value (tvm-ffi's `json::Stringify`): compact, or with `indent` spaces per
/// level when `indent` is nonzero.
pub fn stringify(v: &AnyView<'_>, indent: i64) -> Result<String> {
    let mut w = Writer {
        out: String::new(),
        indent,
        level: 0,
        active_lists: HashSet::new(),
        depth: 0,
    };
    w.value(v)?;
    Ok(w.out)
}

/// tvm-ffi's `EscapeStringJSON`: quoted, with `"`, `\`, `/`, `\b`, `\f`, `\n`, `\r`, `\t`
/// escaped and other control bytes (and DEL) as `\u00XX`.
pub fn escape(s: &[u8], out: &mut String) {
    out.push('"');
    let text = String::from_utf8_lossy(s);
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as tvm-ffi writes it: `NaN`, `Infinity`, `-Infinity`; an integral value below 2^53
/// with one decimal (`2.0`); anything else with 17 significant digits (`%.17g`).
pub fn write_float(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v < 0.0 { "-Infinity" } else { "Infinity" });
    } else if v.abs() < (1u64 << 53) as f64 && v.fract() == 0.0 {
        out.push_str(&format!("{v:.1}"));
    } else {
        out.push_str(&format_g17(v));
    }
}

/// `v` as C's `%.17g` writes it (what C++ streams write with `setprecision(17)`).
pub fn format_g17(v: f64) -> String {
    let mut buf = [0u8; 40];
    // SAFETY: the buffer holds any `%.17g` output; snprintf NUL-terminates it.
    unsafe {
        libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17g".as_ptr(), v);
        std::ffi::CStr::from_ptr(buf.as_ptr().cast())
            .to_string_lossy()
            .into_owned()
    }
}

struct Writer {
    out: String,
    indent: i64,
    level: i64,
    active_lists: HashSet<usize>,
    depth: usize,
}

impl Writer {
    fn newline(&mut self) {
        self.out.push('\n');
        for _ in 0..self.level.max(0) {
            self.out.push(' ');
        }
    }

    fn value(&mut self, v: &AnyView<'_>) -> Result<()> {
        if self.depth > MAX_DEPTH {
            return Err(Error::value("json.Stringify: nesting too deep"));
        }
        // SAFETY (payload reads): the payload is of the kind the index says.
        let p = v.raw().payload;
        match v.type_index() {
            ti::NONE => self.out.push_str("null"),
            ti::BOOL => self.out.push_str(if unsafe { p.v_int64 } != 0 {
                "true"
            } else {
                "false"
            }),
            ti::INT => self.out.push_str(&unsafe { p.v_int64 }.to_string()),
            ti::FLOAT => write_float(unsafe { p.v_float64 }, &mut self.out),
            ti::SMALL_STR | ti::STR | ti::RAW_STR => {
                escape(v.as_byte_slice().unwrap_or(&[]), &mut self.out)
            }
            ti::ARRAY => {
                let items = v
                    .as_object()
                    .and_then(|o| seq_items(&o))
                    .unwrap_or_default();
                self.sequence(&items)?;
            }
            static_index::LIST => {
                let obj = v.as_object().expect("a list is an object");
                let id = obj.as_ptr() as usize;
                if !self.active_lists.insert(id) {
                    return Err(Error::value("Cycle detected: List contains itself"));
                }
                let items = seq_items(&obj).unwrap_or_default();
                let r = self.sequence(&items);
                self.active_lists.remove(&id);
                r?;
            }
            ti::MAP | static_index::DICT => {
                let entries = v
                    .as_object()
                    .and_then(|o| map_entries(&o))
                    .unwrap_or_else(|| Ok(Vec::new()))?;
                self.object(&entries)?;
            }
            other => {
                return Err(Error::value(format!(
                    "Unsupported type: `{}`",
                    crate::value::type_name(other)
                )))
            }
        }
        Ok(())
    }

    fn open(&mut self, c: char) {
        self.out.push(c);
        self.level += self.indent;
        self.depth += 1;
    }

    fn close(&mut self, c: char) {
        self.level -= self.indent;
        self.depth -= 1;
        if self.indent != 0 {
            self.newline();
        }
        self.out.push(c);
    }

    fn sequence(&mut self, items: &[Any]) -> Result<()> {
        self.open('[');
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            if self.indent != 0 {
                self.newline();
            }
            self.value(&x.view())?;
        }
        self.close(']');
        Ok(())
    }

    fn object(&mut self, entries: &[Entry]) -> Result<()> {
        self.open('{');
        for (i, e) in entries.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            if self.indent != 0 {
                self.newline();
            }
            let k = e.key.view();
            let key = k
                .as_byte_slice()
                .filter(|_| matches!(k.type_index(), ti::SMALL_STR | ti::STR))
                .ok_or_else(|| {
                    Error::value(format!("Expect key to be string, got `{}`", k.type_name()))
                })?;
            escape(key, &mut self.out);
            self.out.push(':');
            if self.indent != 0 {
                self.out.push(' ');
            }
            self.value(&e.value.view())?;
        }
        self.close('}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text.as_bytes()).unwrap_err().message.clone()
    }

    fn round_trip(text: &str, indent: i64) -> String {
        stringify(&parse(text.as_bytes()).unwrap().view(), indent).unwrap()
    }

    #[test]
    fn values_and_order() {
        assert_eq!(
            round_trip(
                r#" {"z": [1, -2.5, true, null], "a": {"x": "\u00e9\n"}} "#,
                0
            ),
            r#"{"z":[1,-2.5,true,null],"a":{"x":"é\n"}}"#
        );
        assert_eq!(
            round_trip("[NaN, Infinity, -Infinity, 1e2, 3.0]", 0),
            "[NaN,Infinity,-Infinity,100.0,3.0]"
        );
        assert_eq!(round_trip("9223372036854775807", 0), "9223372036854775807");
        assert_eq!(
            round_trip("9223372036854775808", 0),
            "9.2233720368547758e+18"
        );
        assert_eq!(round_trip(r#""\ud83d\ude00""#, 0), "\"😀\"");
        assert_eq!(round_trip(r#"{"a": 1, "a": 2}"#, 0), r#"{"a":2}"#);
    }

    #[test]
    fn indentation() {
        assert_eq!(
            round_trip(r#"{"a": [1, 2], "b": {}}"#, 2),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {\n  }\n}"
        );
    }

    #[test]
    fn errors_name_the_position_as_python_does() {
        assert_eq!(err(""), "Expecting value: line 1 column 1 (char 0)");
        assert_eq!(err("tru"), "Expecting value: line 1 column 1 (char 0)");
        assert_eq!(
            err("[1, 2"),
            "Expecting ',' delimiter: line 1 column 6 (char 5)"
        );
        assert_eq!(err("[1,"), "Syntax error near: line 1 column 4 (char 3)");
        assert_eq!(
            err("{\"a\" 1}"),
            "Expecting ':' delimiter: line 1 column 6 (char 5)"
        );
        assert_eq!(
            err("{1: 2}"),
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        );
        assert_eq!(err("[1] x"), "Extra data: line 1 column 5 (char 4)");
        assert_eq!(
            err("\"abc"),
            "Unterminated string starting at: line 1 column 1 (char 0)"
        );
        assert_eq!(
            err("\n \"\\q\""),
            "Invalid \\escape: line 2 column 4 (char 4)"
        );
        assert_eq!(
            err("\"\\u12\""),
            "Invalid \\uXXXX escape: line 1 column 3 (char 2)"
        );
        assert_eq!(
            err("\"\\udc00\""),
            "Invalid surrogate pair of \\uXXXX escapes: line 1 column 3 (char 2)"
        );
        assert_eq!(err("1e400"), "Expecting value: line 1 column 1 (char 0)");
        assert_eq!(err("-"), "Expecting value: line 1 column 1 (char 0)");
        assert!(err(&"[".repeat(5000)).contains("Nesting too deep"));
    }

    #[test]
    fn writer_refuses_what_json_cannot_hold() {
        let m = new_map(vec![Entry {
            key: Any::from(1i64),
            value: Any::none(),
        }]);
        let e = stringify(&Any::from_object(m).view(), 0).unwrap_err();
        assert_eq!(e.message, "Expect key to be string, got `int`");
    }
}
