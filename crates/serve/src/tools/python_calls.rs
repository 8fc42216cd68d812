//! MLC's own call format: an answer that is a Python call, or a list of them, with literal
//! keyword arguments (`get_weather(city="Oslo", days=3)`, `[f(a=1), g(b=[1, 2])]`), as Gorilla
//! models answer and MLC's server reads them (`convert_function_str_to_json` in its
//! engine_base.py: `ast.literal_eval` of each keyword's value). Read into JSON arguments.

use serde_json::{Map, Number, Value};

use super::calls::Call;

/// A cursor over the answer's text.
struct Cursor<'a> {
    s: &'a str,
    at: usize,
}

impl Cursor<'_> {
    fn ws(&mut self) {
        self.at = self.s.len() - self.s[self.at..].trim_start().len();
    }

    fn peek(&mut self) -> Option<char> {
        self.ws();
        self.s[self.at..].chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += c.len_utf8();
            return true;
        }
        false
    }

    fn identifier(&mut self) -> Option<&str> {
        self.ws();
        let rest = &self.s[self.at..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len());
        (len > 0).then(|| {
            self.at += len;
            &rest[..len]
        })
    }

    /// Items up to `close`, separated by commas (a trailing comma allowed).
    fn items(&mut self, close: char, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        loop {
            if self.eat(close) {
                return Some(());
            }
            item(self)?;
            if !self.eat(',') {
                return self.eat(close).then_some(());
            }
        }
    }

    fn string(&mut self, quote: char) -> Option<String> {
        let mut out = String::new();
        let mut chars = self.s[self.at..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => out.push(match chars.next()?.1 {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    other => other,
                }),
                c if c == quote => {
                    self.at += i + 1;
                    return Some(out);
                }
                c => out.push(c),
            }
        }
        None
    }

    /// A Python literal as JSON: strings, numbers, True/False/None, lists, tuples, dicts.
    fn literal(&mut self) -> Option<Value> {
        match self.peek()? {
            q @ ('"' | '\'') => {
                self.at += 1;
                self.string(q).map(Value::String)
            }
            open @ ('[' | '(') => {
                self.at += 1;
                let mut list = Vec::new();
                self.items(if open == '[' { ']' } else { ')' }, |c| {
                    list.push(c.literal()?);
                    Some(())
                })?;
                Some(Value::Array(list))
            }
            '{' => {
                self.at += 1;
                let mut map = Map::new();
                self.items('}', |c| {
                    let Value::String(k) = c.literal()? else {
                        return None;
                    };
                    c.eat(':').then_some(())?;
                    map.insert(k, c.literal()?);
                    Some(())
                })?;
                Some(Value::Object(map))
            }
            _ => {
                let rest = &self.s[self.at..];
                let len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "+-._".contains(c)))
                    .unwrap_or(rest.len());
                let word = rest[..len].replace('_', "");
                self.at += len;
                match word.as_str() {
                    "True" => Some(Value::Bool(true)),
                    "False" => Some(Value::Bool(false)),
                    "None" => Some(Value::Null),
                    w => match w.parse::<i64>() {
                        Ok(i) => Some(Value::from(i)),
                        Err(_) => Number::from_f64(w.parse().ok()?).map(Value::Number),
                    },
                }
            }
        }
    }

    /// `name(key=literal, ...)`.
    fn call(&mut self, names: &[String]) -> Option<Call> {
        let name = self.identifier()?.to_string();
        if !names.contains(&name) || !self.eat('(') {
            return None;
        }
        let mut arguments = Map::new();
        self.items(')', |c| {
            let key = c.identifier()?.to_string();
            c.eat('=').then_some(())?;
            arguments.insert(key, c.literal()?);
            Some(())
        })?;
        Some(Call {
            name,
            arguments: Value::Object(arguments).to_string(),
        })
    }
}

/// `text` read as one Python call or a list of them, each naming one of `names`; `None` where
/// it is anything else.
pub fn read(text: &str, names: &[String]) -> Option<Vec<Call>> {
    let mut c = Cursor { s: text, at: 0 };
    let mut calls = Vec::new();
    if c.eat('[') {
        c.items(']', |c| {
            calls.push(c.call(names)?);
            Some(())
        })?;
    } else {
        calls.push(c.call(names)?);
    }
    c.ws();
    (c.at == text.len() && !calls.is_empty()).then_some(calls)
}

/// Whether `text` (trimmed at its start) may still become, or already starts, a Python call of
/// one of `names`: an answer is held back while it may be one.
pub fn may_start(text: &str, names: &[String]) -> bool {
    let t = text.trim_start();
    let t = t.strip_prefix('[').map_or(t, str::trim_start);
    names.iter().any(|n| {
        let head = format!("{n}(");
        t.starts_with(&head) || head.starts_with(t)
    })
}

#[cfg(test)]
mod tests {
    use super::super::calls::{read_answer, CallReader, Piece};
    use super::read as read_python;

    #[test]
    fn mlcs_python_call_format_is_read_too() {
        let names = || vec!["get_weather".to_string(), "get_time".to_string()];
        let read = |text: &str| read_answer(CallReader::new(names()), text);
        let known = names();
        let got = |text: &str| {
            read_python(text, &known).map(|calls| {
                calls
                    .into_iter()
                    .map(|c| (c.name, c.arguments))
                    .collect::<Vec<_>>()
            })
        };
        let pair = |n: &str, a: &str| (n.to_string(), a.to_string());
        assert_eq!(
            got(r#"get_weather(city="Oslo", unit='c', days=3, x=-1.5, ok=True, no=None)"#),
            Some(vec![pair(
                "get_weather",
                r#"{"city":"Oslo","unit":"c","days":3,"x":-1.5,"ok":true,"no":null}"#
            )])
        );
        assert_eq!(
            got(r#" [get_time(), get_weather(l=[1, (2, 3)], d={'a': "b\"c"},)] "#),
            Some(vec![
                pair("get_time", "{}"),
                pair("get_weather", r#"{"l":[1,[2,3]],"d":{"a":"b\"c"}}"#)
            ])
        );
        for bad in [
            "get_news(a=1)",
            "get_time(1)",
            "get_time(a=b)",
            "get_time(a=1",
            "get_time() and more",
            "[]",
            "hello",
            "get_time(a='x)",
        ] {
            assert_eq!(got(bad), None, "{bad}");
        }
        // A whole answer in that format is calls, streamed or not; text that only starts like a
        // call's name goes out as text.
        let (content, calls, complete) = read("get_time(zone=2)");
        assert_eq!((content, calls.len(), complete), (None, 1, 1));
        assert_eq!(calls[0].arguments, r#"{"zone":2}"#);
        let mut reader = CallReader::new(names());
        assert!(reader.push("get_ti").is_empty() && reader.push("me(zone=").is_empty());
        let pieces = [reader.push("2)"), reader.finish()].concat();
        assert_eq!(
            pieces,
            [
                Piece::CallStart {
                    index: 0,
                    name: "get_time".into()
                },
                Piece::Arguments {
                    index: 0,
                    fragment: r#"{"zone":2}"#.into()
                }
            ]
        );
        let mut reader = CallReader::new(names());
        assert!(reader.push("get").is_empty());
        assert_eq!(
            reader.push("ting there"),
            [Piece::Text("getting there".into())]
        );
        let (content, calls, _) = read("get_time(zone=2) is what I would call");
        assert_eq!(
            (content.as_deref(), calls.len()),
            (Some("get_time(zone=2) is what I would call"), 0)
        );
    }
}
