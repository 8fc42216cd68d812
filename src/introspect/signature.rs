//! Kernel signatures as TVM prints them into the code it generates.
//!
//! TVM 0.27's argument checks (`tir/transforms/arg_binder.cc`, `make_packed_api.cc`) report a
//! bad argument with the callee's signature, e.g.
//! `add(A: Tensor([n], float32), B: Tensor([n], float32), C: Tensor([n], float32))`, and that
//! text is stored as one NUL-terminated constant in the library's read-only data. Reading it
//! back tells a tool the parameters of every kernel without running it.

use crate::abi::DLDataType;
use crate::dtype::dtype_from_str;
use crate::error::{Error, Result};

/// One dimension of a tensor parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed extent (`4`, `T.int64(32)`).
    Fixed(i64),
    /// A symbolic extent bound from the arguments (`n`).
    Var(String),
    /// Any other expression (`n * 2`): not checked.
    Expr(String),
}

/// The type of one parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// `Tensor([dims], dtype)`.
    Tensor {
        /// The dimensions, outermost first.
        shape: Vec<Dim>,
        /// The element type, as TVM writes it (`float32`).
        dtype: String,
    },
    /// Anything else (a scalar such as `int32`, or a type this parser does not know), as written.
    Other(String),
}

/// One parameter: its name and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The parameter's name in the TIR function (`A`).
    pub name: String,
    /// Its type.
    pub ty: ParamType,
    /// The type as written (`Tensor([n], float32)`).
    pub text: String,
}

/// A parsed signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The function name.
    pub name: String,
    /// Its parameters, in order.
    pub params: Vec<Param>,
}

impl Param {
    /// The parameter's dtype, for a tensor parameter whose dtype tvmrt can parse.
    pub fn dtype(&self) -> Option<DLDataType> {
        match &self.ty {
            ParamType::Tensor { dtype, .. } => dtype_from_str(dtype).ok(),
            ParamType::Other(_) => None,
        }
    }

    /// The dimensions, for a tensor parameter.
    pub fn shape(&self) -> Option<&[Dim]> {
        match &self.ty {
            ParamType::Tensor { shape, .. } => Some(shape),
            ParamType::Other(_) => None,
        }
    }
}

impl std::fmt::Display for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.text)
    }
}

/// Splits `s` at the commas that are not inside brackets or parentheses.
fn split_top_level(s: &str) -> Result<Vec<&str>> {
    let mut parts = Vec::new();
    let mut depth: i32 = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(Error::value(format!("unbalanced `{c}` in `{s}`")));
                }
            }
            ',' if depth == 0 => {
                parts.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(Error::value(format!("unbalanced brackets in `{s}`")));
    }
    let last = s[start..].trim();
    if !last.is_empty() || !parts.is_empty() {
        parts.push(last);
    }
    Ok(parts)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

fn parse_dim(s: &str) -> Dim {
    let s = s.trim();
    if let Ok(v) = s.parse::<i64>() {
        return Dim::Fixed(v);
    }
    // TVMScript prints 64-bit constants as `T.int64(32)` (and 32-bit ones as `T.int32(...)`
    // when the context type differs).
    for prefix in ["T.int64(", "T.int32("] {
        if let Some(v) = s
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|v| v.trim().parse::<i64>().ok())
        {
            return Dim::Fixed(v);
        }
    }
    if is_identifier(s) {
        Dim::Var(s.to_string())
    } else {
        Dim::Expr(s.to_string())
    }
}

fn parse_type(text: &str) -> Result<ParamType> {
    let Some(inner) = text
        .strip_prefix("Tensor(")
        .and_then(|r| r.strip_suffix(')'))
    else {
        return Ok(ParamType::Other(text.to_string()));
    };
    let parts = split_top_level(inner)?;
    let [shape, dtype] = parts.as_slice() else {
        return Ok(ParamType::Other(text.to_string()));
    };
    let Some(dims) = shape.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
        return Ok(ParamType::Other(text.to_string()));
    };
    let shape = split_top_level(dims)?
        .into_iter()
        .filter(|d| !d.is_empty())
        .map(parse_dim)
        .collect();
    Ok(ParamType::Tensor {
        shape,
        dtype: dtype.to_string(),
    })
}

/// Parses `name(p0: T0, p1: T1, ...)`.
pub fn parse(text: &str) -> Result<Signature> {
    let bad = |why: &str| Error::value(format!("not a kernel signature ({why}): `{text}`"));
    let open = text.find('(').ok_or_else(|| bad("no `(`"))?;
    let name = text[..open].trim();
    if !is_identifier(name) {
        return Err(bad("the name is not an identifier"));
    }
    let body = text[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| bad("it does not end with `)`"))?;
    let mut params = Vec::new();
    for p in split_top_level(body)? {
        let (pname, ty) = p
            .split_once(':')
            .ok_or_else(|| bad("a parameter has no `name: type`"))?;
        let (pname, ty) = (pname.trim(), ty.trim());
        if !is_identifier(pname) || ty.is_empty() {
            return Err(bad("a parameter has no `name: type`"));
        }
        params.push(Param {
            name: pname.to_string(),
            ty: parse_type(ty)?,
            text: ty.to_string(),
        });
    }
    Ok(Signature {
        name: name.to_string(),
        params,
    })
}

/// Finds the signature text of `name` among the NUL-separated strings of `rodata`: a string
/// that is exactly `name(...)` with balanced parentheses and parses.
pub fn find_in_strings<'a>(
    strings: impl IntoIterator<Item = &'a str>,
    name: &str,
) -> Option<String> {
    strings
        .into_iter()
        .filter(|s| {
            s.len() > name.len() + 1
                && s.starts_with(name)
                && s.as_bytes()[name.len()] == b'('
                && s.ends_with(')')
        })
        .find(|s| parse(s).is_ok())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dynamic_and_static_shapes() {
        let s =
            parse("add(A: Tensor([n], float32), B: Tensor([n], float32), C: Tensor([n], float32))")
                .unwrap();
        assert_eq!(s.name, "add");
        assert_eq!(s.params.len(), 3);
        assert_eq!(s.params[1].name, "B");
        assert_eq!(s.params[1].shape().unwrap(), &[Dim::Var("n".into())]);
        assert_eq!(s.params[2].dtype(), Some(crate::dtype::dtypes::FLOAT32));
        assert_eq!(s.params[0].to_string(), "A: Tensor([n], float32)");

        let s = parse(
            "matmul(x: Tensor([T.int64(1), T.int64(16)], float32), B: Tensor([T.int64(16), \
             T.int64(32)], float32), matmul: Tensor([T.int64(1), T.int64(32)], float32))",
        )
        .unwrap();
        assert_eq!(
            s.params[1].shape().unwrap(),
            &[Dim::Fixed(16), Dim::Fixed(32)]
        );
        let s = parse("f(A: Tensor([4, n * 2], bool), k: int32)").unwrap();
        assert_eq!(
            s.params[0].shape().unwrap(),
            &[Dim::Fixed(4), Dim::Expr("n * 2".into())]
        );
        assert_eq!(s.params[0].dtype(), Some(crate::dtype::dtypes::BOOL));
        assert_eq!(s.params[1].ty, ParamType::Other("int32".into()));
        assert!(parse("g()").unwrap().params.is_empty());
        assert_eq!(
            parse("h(s: Tensor([], float16))").unwrap().params[0]
                .shape()
                .unwrap(),
            &[]
        );
    }

    #[test]
    fn rejects_other_text() {
        assert!(parse("Mismatched type on argument #0").is_err());
        assert!(parse("add(A: Tensor([n], float32)").is_err());
        assert!(parse("add(A)").is_err());
        assert!(parse("f(a: Tensor([n)], x))").is_err());
    }

    #[test]
    fn finds_among_strings() {
        let strings = [
            "addx(A: Tensor([n], float32))",
            "add(A: not closed",
            "add(A: Tensor([n], float32), B: Tensor([n], float32))",
        ];
        assert_eq!(
            find_in_strings(strings, "add").as_deref(),
            Some("add(A: Tensor([n], float32), B: Tensor([n], float32))")
        );
        assert_eq!(find_in_strings(strings, "sub"), None);
    }
}
