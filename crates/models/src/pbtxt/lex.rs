//! The tokens of protobuf's text format, each with its line: names, strings (quoted, with
//! C escapes, adjacent ones joined), numbers (as JSON numbers) and punctuation; `#` comments
//! dropped.

use serde_json::{Number, Value};

use super::{error, PbtxtError};

/// One token.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Token {
    Ident(String),
    Str(String),
    Num(Value),
    Punct(char),
}

/// A token as an error message names it.
pub(super) fn describe(t: Option<&Token>) -> String {
    match t {
        None => "the end of the text".into(),
        Some(Token::Ident(s)) => format!("`{s}`"),
        Some(Token::Str(s)) => format!("the string {s:?}"),
        Some(Token::Num(n)) => format!("the number {n}"),
        Some(Token::Punct(c)) => format!("`{c}`"),
    }
}

/// Splits the text into tokens, each with its line; comments (`#` to the end of the line)
/// dropped.
pub(super) fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, PbtxtError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1usize);
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' | b'}' | b'[' | b']' | b'<' | b'>' | b':' | b',' | b';' => {
                out.push((Token::Punct(c as char), line));
                i += 1;
            }
            b'"' | b'\'' => {
                let (s, next) = string(bytes, i, line)?;
                // Adjacent strings are one ("a" "b" is "ab").
                match out.last_mut() {
                    Some((Token::Str(prev), _)) => prev.push_str(&s),
                    _ => out.push((Token::Str(s), line)),
                }
                i = next;
            }
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.' || c == b'+' => {
                let start = i;
                i += 1;
                while i < bytes.len() {
                    let d = bytes[i];
                    let exponent_sign = (d == b'-' || d == b'+')
                        && matches!(bytes[i - 1], b'e' | b'E')
                        && (bytes[start].is_ascii_digit() || b"-+.".contains(&bytes[start]));
                    if d.is_ascii_alphanumeric() || d == b'_' || d == b'.' || exponent_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                let word = &text[start..i];
                out.push((word_token(word, line)?, line));
            }
            _ => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return error(line, format!("unexpected character `{ch}`"));
            }
        }
    }
    Ok(out)
}

/// A string literal from its opening quote at `start`: its text and the index after it.
fn string(bytes: &[u8], start: usize, line: usize) -> Result<(String, usize), PbtxtError> {
    let quote = bytes[start];
    let mut out = Vec::new();
    let mut i = start + 1;
    loop {
        let Some(&c) = bytes.get(i) else {
            return error(line, "a string is not closed");
        };
        i += 1;
        match c {
            b'\n' => return error(line, "a string is not closed on its line"),
            _ if c == quote => break,
            b'\\' => {
                let Some(&e) = bytes.get(i) else {
                    return error(line, "a string is not closed");
                };
                i += 1;
                match e {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'v' => out.push(11),
                    b'\\' | b'\'' | b'"' | b'?' => out.push(e),
                    b'x' => {
                        let digits = bytes[i..]
                            .iter()
                            .take(2)
                            .take_while(|d| d.is_ascii_hexdigit())
                            .count();
                        let hex = std::str::from_utf8(&bytes[i..i + digits]).unwrap_or("");
                        let Ok(v) = u8::from_str_radix(hex, 16) else {
                            return error(line, "`\\x` in a string needs hex digits");
                        };
                        out.push(v);
                        i += digits;
                    }
                    b'0'..=b'7' => {
                        let digits = bytes[i - 1..]
                            .iter()
                            .take(3)
                            .take_while(|d| (b'0'..=b'7').contains(d))
                            .count();
                        let oct = std::str::from_utf8(&bytes[i - 1..i - 1 + digits]).unwrap_or("");
                        let v = u32::from_str_radix(oct, 8).unwrap_or(0);
                        out.push(v as u8);
                        i += digits - 1;
                    }
                    _ => {
                        return error(
                            line,
                            format!("unknown escape `\\{}` in a string", e as char),
                        )
                    }
                }
            }
            _ => out.push(c),
        }
    }
    let text = String::from_utf8(out).map_err(|_| PbtxtError {
        line,
        message: "a string is not UTF-8".into(),
    })?;
    Ok((text, i))
}

/// A bare word: a number, or an identifier (a field name, an enum value, `true`).
fn word_token(word: &str, line: usize) -> Result<Token, PbtxtError> {
    let first = word.as_bytes()[0];
    if !(first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.') {
        return Ok(Token::Ident(word.to_string()));
    }
    let bad = || PbtxtError {
        line,
        message: format!("`{word}` is not a number"),
    };
    let (negative, digits) = match word.as_bytes()[0] {
        b'-' => (true, &word[1..]),
        b'+' => (false, &word[1..]),
        _ => (false, word),
    };
    let lower = digits.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" || lower == "nan" {
        return error(line, format!("`{word}` has no JSON number"));
    }
    let int = if let Some(hex) = lower.strip_prefix("0x") {
        Some(u64::from_str_radix(hex, 16).map_err(|_| bad())?)
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|b| b.is_ascii_digit())
    {
        Some(u64::from_str_radix(&lower[1..], 8).map_err(|_| bad())?)
    } else if lower.bytes().all(|b| b.is_ascii_digit()) && !lower.is_empty() {
        Some(lower.parse::<u64>().map_err(|_| bad())?)
    } else {
        None
    };
    let number = match int {
        Some(v) if negative => {
            let v = i64::try_from(v)
                .ok()
                .and_then(i64::checked_neg)
                .ok_or_else(bad)?;
            Number::from(v)
        }
        Some(v) => Number::from(v),
        None => {
            let f: f64 = lower.trim_end_matches('f').parse().map_err(|_| bad())?;
            Number::from_f64(if negative { -f } else { f }).ok_or_else(bad)?
        }
    };
    Ok(Token::Num(Value::Number(number)))
}
