//! What a model takes and returns, read from the model itself: a Relax function's parameter
//! annotations, a graph executor's graph, or a compiled kernel's signature. Triton's
//! configuration is completed from this (auto-complete) and requests are checked against it.

use tvmrt::abi::DLDataType;
use tvmrt::dtype::{dtype_from_str, dtype_to_string};
pub use tvmrt::introspect::signature::Dim;
use tvmrt::{Error, Result};

/// One input or output tensor of a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Its name: the Relax parameter's or graph input's; `output0`, `output1`, ... for outputs.
    pub name: String,
    /// Its element type.
    pub dtype: DLDataType,
    /// Its dimensions; `Var` and `Expr` are only known per call.
    pub dims: Vec<Dim>,
}

impl TensorSpec {
    /// `x: float32[n, 8]`, for messages.
    pub fn describe(&self) -> String {
        let dims: Vec<String> = self.dims.iter().map(dim_text).collect();
        let dtype = dtype_to_string(self.dtype).unwrap_or_else(|_| "?".into());
        format!("{}: {dtype}[{}]", self.name, dims.join(", "))
    }

    /// The dimensions as Triton writes them: a fixed size, or -1 for one known per call.
    pub fn triton_dims(&self) -> Vec<i64> {
        self.dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(v) => *v,
                _ => -1,
            })
            .collect()
    }
}

/// `x: float32[n, 8], y: int64[n]`, for messages.
pub fn describe_all(specs: &[TensorSpec]) -> String {
    specs
        .iter()
        .map(TensorSpec::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `n`, `8`.
pub fn dim_text(d: &Dim) -> String {
    match d {
        Dim::Fixed(v) => v.to_string(),
        Dim::Var(s) | Dim::Expr(s) => s.clone(),
    }
}

/// The name of output `k`: models do not name their outputs.
pub fn output_name(k: usize) -> String {
    format!("output{k}")
}

/// The symbolic first dimension every input shares (`n` in `x: [n, 16]`), which makes the model
/// batchable: Triton's batcher stacks requests along it.
pub fn batch_var(inputs: &[TensorSpec]) -> Option<&str> {
    let first = match inputs.first()?.dims.first()? {
        Dim::Var(v) => v.as_str(),
        _ => return None,
    };
    inputs
        .iter()
        .all(|t| matches!(t.dims.first(), Some(Dim::Var(v)) if v == first))
        .then_some(first)
}

/// One parameter of a Relax function, as its annotation describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelaxParam {
    /// A tensor.
    Tensor(TensorSpec),
    /// A tuple (`R.Tuple(...)`, printed `T.Tuple(...)` by TVM 0.27): how models take their
    /// weights packed (`relax.frontend.nn`'s `param_mode="packed"`, MLC-LLM). Each element's
    /// spec when it is a tensor.
    Tuple {
        /// The parameter's name.
        name: String,
        /// Each element's spec, `None` where it is not a tensor.
        elements: Vec<Option<TensorSpec>>,
        /// The annotation as written, for messages.
        text: String,
    },
    /// Anything else (a shape, an object, ...), or no annotation found (`text` empty).
    Other {
        /// The parameter's name.
        name: String,
        /// The annotation as written, for messages.
        text: String,
    },
}

impl RelaxParam {
    /// The parameter's name.
    pub fn name(&self) -> &str {
        match self {
            RelaxParam::Tensor(t) => &t.name,
            RelaxParam::Tuple { name, .. } | RelaxParam::Other { name, .. } => name,
        }
    }

    /// `is `T.Tuple(...)``, for messages.
    pub fn what(&self) -> String {
        match self {
            RelaxParam::Tensor(t) => format!("is {}", t.describe()),
            RelaxParam::Tuple { text, .. } | RelaxParam::Other { text, .. } if !text.is_empty() => {
                format!("is `{text}`")
            }
            _ => "has no annotation the backend can read".into(),
        }
    }
}

/// The parameters of Relax function `func` from the error contexts TVM's compiler stores in
/// the executable's constant pool for the argument checks, one per parameter:
/// `ErrorContext(fn=main, loc=param[0], param=x, annotation=R.Tensor((n, 8), dtype="float32"))`
/// (TVM 0.27 `relax/backend/vm/vm_shape_lower.cc`).
pub fn relax_params<'s>(
    func: &str,
    param_names: &[String],
    constants: impl IntoIterator<Item = &'s str>,
) -> Vec<RelaxParam> {
    let mut found: Vec<RelaxParam> = param_names
        .iter()
        .map(|n| RelaxParam::Other {
            name: n.clone(),
            text: String::new(),
        })
        .collect();
    let prefix = format!("ErrorContext(fn={func}, loc=param[");
    for text in constants {
        let Some(rest) = text.strip_prefix(&prefix) else {
            continue;
        };
        let Some((index, rest)) = rest.split_once(']') else {
            continue;
        };
        let Ok(k) = index.parse::<usize>() else {
            continue;
        };
        let Some(annotation) = rest.split_once("annotation=").map(|p| p.1) else {
            continue;
        };
        // The ErrorContext's own closing parenthesis.
        let annotation = annotation.trim_end();
        let annotation = annotation.strip_suffix(')').unwrap_or(annotation);
        if k >= found.len() {
            continue;
        }
        let name = param_names[k].clone();
        found[k] = if let Some((dims, dtype)) = parse_tensor_annotation(annotation) {
            RelaxParam::Tensor(TensorSpec { name, dtype, dims })
        } else if let Some(elements) = tuple_elements(annotation) {
            RelaxParam::Tuple {
                elements: elements
                    .iter()
                    .enumerate()
                    .map(|(i, e)| {
                        parse_tensor_annotation(e).map(|(dims, dtype)| TensorSpec {
                            name: format!("{name}[{i}]"),
                            dtype,
                            dims,
                        })
                    })
                    .collect(),
                name,
                text: annotation.to_string(),
            }
        } else {
            RelaxParam::Other {
                name,
                text: annotation.to_string(),
            }
        };
    }
    found
}

/// Parameter `k` of `func` is not a tensor.
pub fn not_a_tensor(func: &str, k: usize, p: &RelaxParam) -> Error {
    let cache = "put them in a tensor cache, `tensor-cache.json` and its shards, in the \
                 version's `weights` directory or the directory the `weights` parameter names";
    let hint = match p {
        RelaxParam::Tuple { .. } => {
            format!(" (a tuple parameter takes the model's weights: {cache})")
        }
        RelaxParam::Other { text, .. } if text.is_empty() => format!(
            " (TVM records none for a weight past the function's `num_input`, as \
             `detach_params` leaves them: {cache}, named by parameter)"
        ),
        _ => String::new(),
    };
    Error::value(format!(
        "parameter {k} (`{}`) of Relax function `{func}` {}: the tvmrt backend serves functions \
         whose parameters are all tensors, weights aside{hint}",
        p.name(),
        p.what()
    ))
}

/// The elements of `R.Tuple(a, b)` / `T.Tuple(a, b)`, split at the commas outside brackets
/// and quotes.
fn tuple_elements(text: &str) -> Option<Vec<String>> {
    let inner = text
        .strip_prefix("R.Tuple(")
        .or_else(|| text.strip_prefix("T.Tuple("))?
        .strip_suffix(')')?;
    Some(split_top_level(inner))
}

/// `inner` split at the commas outside brackets and quotes, each part trimmed, empty parts
/// dropped.
fn split_top_level(inner: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut quoted, mut start) = (0i32, false, 0usize);
    for (i, c) in inner.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '(' | '[' if !quoted => depth += 1,
            ')' | ']' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                out.push(inner[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(inner[start..].trim().to_string());
    out.retain(|p| !p.is_empty());
    out
}

/// `R.Tensor((n, 8), dtype="float32")` or `R.Tensor(dtype="float32", ndim=2)` (the dimensions
/// then unknown): the dimensions and dtype.
fn parse_tensor_annotation(text: &str) -> Option<(Vec<Dim>, DLDataType)> {
    let body = text.strip_prefix("R.Tensor(")?;
    let dtype_text = body.split("dtype=\"").nth(1)?.split('"').next()?;
    let dtype = dtype_from_str(dtype_text).ok()?;
    if let Some(shape) = body.strip_prefix('(') {
        // Up to the parenthesis that closes the shape (sizes may be `T.int64(16)`).
        let mut depth = 0;
        let end = shape.char_indices().find_map(|(i, c)| match c {
            '(' => {
                depth += 1;
                None
            }
            ')' if depth == 0 => Some(i),
            ')' => {
                depth -= 1;
                None
            }
            _ => None,
        })?;
        let dims = split_top_level(&shape[..end])
            .iter()
            .map(|d| parse_dim(d))
            .collect();
        return Some((dims, dtype));
    }
    let ndim: i64 = body
        .split("ndim=")
        .nth(1)?
        .split([',', ')'])
        .next()?
        .trim()
        .parse()
        .ok()?;
    if ndim < 0 {
        return None;
    }
    Some((
        (0..ndim).map(|i| Dim::Expr(format!("d{i}"))).collect(),
        dtype,
    ))
}

fn parse_dim(d: &str) -> Dim {
    if let Ok(v) = d.parse::<i64>() {
        return Dim::Fixed(v);
    }
    // Inside a tuple TVM prints fixed sizes with their type: `T.int64(16)`.
    let typed = ["T.int64(", "T.int32("]
        .iter()
        .find_map(|p| d.strip_prefix(p)?.strip_suffix(')')?.parse::<i64>().ok());
    if let Some(v) = typed {
        return Dim::Fixed(v);
    }
    let ident = d
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && d.chars().all(|c| c.is_alphanumeric() || c == '_');
    if ident {
        Dim::Var(d.to_string())
    } else {
        Dim::Expr(d.to_string())
    }
}

/// A spec from a graph JSON's name, dtype string and fixed shape.
pub fn graph_tensor(name: &str, dtype: &str, shape: &[i64]) -> Result<TensorSpec> {
    Ok(TensorSpec {
        name: name.to_string(),
        dtype: dtype_from_str(dtype)?,
        dims: shape.iter().map(|&v| Dim::Fixed(v)).collect(),
    })
}

/// Checks each shape's rank and fixed dimensions against its spec. Symbolic sizes that two
/// inputs share are left to the model, whose own check names them.
pub fn check_shapes(specs: &[TensorSpec], shapes: &[&[i64]]) -> std::result::Result<(), String> {
    for (spec, shape) in specs.iter().zip(shapes) {
        let fits = spec.dims.len() == shape.len()
            && spec
                .dims
                .iter()
                .zip(shape.iter())
                .all(|(d, &v)| !matches!(d, Dim::Fixed(w) if *w != v));
        if !fits {
            return Err(format!(
                "input `{}` has shape {shape:?}, but the model takes {}",
                spec.name,
                spec.describe()
            ));
        }
    }
    Ok(())
}

/// The value of each `Var` of `specs` in `shapes`, the first occurrence winning: a kernel
/// checks that its arguments agree itself, with TVM's message (`Mismatched B.shape[0]`).
pub fn bind_vars(specs: &[TensorSpec], shapes: &[&[i64]]) -> Vec<(String, i64)> {
    let mut bound: Vec<(String, i64)> = Vec::new();
    for (spec, shape) in specs.iter().zip(shapes) {
        for (d, &v) in spec.dims.iter().zip(shape.iter()) {
            if let Dim::Var(name) = d {
                if !bound.iter().any(|b| &b.0 == name) {
                    bound.push((name.clone(), v));
                }
            }
        }
    }
    bound
}

/// The shape of a destination tensor from the variables the inputs bound.
pub fn resolve_shape(spec: &TensorSpec, bound: &[(String, i64)]) -> Result<Vec<i64>> {
    spec.dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(v) => Ok(*v),
            Dim::Var(n) => bound
                .iter()
                .find(|b| &b.0 == n)
                .map(|b| b.1)
                .ok_or_else(|| {
                    Error::value(format!(
                        "`{}`: `{n}` is not the size of any input",
                        spec.name
                    ))
                }),
            Dim::Expr(e) => Err(Error::value(format!(
                "`{}`: the size `{e}` cannot be computed from the inputs",
                spec.name
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tvmrt::dtype::dtypes::FLOAT32;

    /// The inputs when there are no weights: every parameter must be a tensor.
    fn relax_inputs<'s>(
        func: &str,
        names: &[String],
        consts: impl IntoIterator<Item = &'s str>,
    ) -> Result<Vec<TensorSpec>> {
        crate::weights::bind(func, relax_params(func, names, consts), None, None).map(|r| r.0)
    }

    #[test]
    fn relax_annotations() {
        let names = vec!["x".to_string(), "w".to_string(), "b".to_string()];
        let consts = [
            "float32",
            "ErrorContext(fn=main, loc=param[0], param=x, annotation=R.Tensor((n, 8), dtype=\"float32\")) ",
            "ErrorContext(fn=main, loc=param[1], param=w, annotation=R.Tensor((8, 4), dtype=\"float32\")) ",
            "ErrorContext(fn=main, loc=param[2], param=b, annotation=R.Tensor((4,), dtype=\"float32\")) ",
            "ErrorContext(fn=other, loc=param[0], param=z, annotation=R.Tensor((2,), dtype=\"int8\")) ",
            "ErrorContext(fn=main, loc=return, annotation=R.Tensor((n, 4), dtype=\"float32\")) ",
        ];
        let specs = relax_inputs("main", &names, consts).unwrap();
        assert_eq!(specs[0].dims, vec![Dim::Var("n".into()), Dim::Fixed(8)]);
        assert_eq!(specs[2].dims, vec![Dim::Fixed(4)]);
        assert_eq!(specs[1].dtype, FLOAT32);
        assert_eq!(specs[0].describe(), "x: float32[n, 8]");
        assert_eq!(batch_var(&specs), None);
        assert_eq!(batch_var(&specs[..1]), Some("n"));

        let e = relax_inputs("other", &names, consts).unwrap_err();
        assert!(e.message.contains("parameter 1 (`w`)"), "{}", e.message);

        let shape = ["ErrorContext(fn=f, loc=param[0], param=s, annotation=R.Shape([2, 3])) "];
        let e = relax_inputs("f", &names[..1], shape).unwrap_err();
        assert!(e.message.contains("is `R.Shape([2, 3])`"), "{}", e.message);

        let tuple = "ErrorContext(fn=main, loc=param[1], param=params, annotation=T.Tuple(\
            R.Tensor((T.int64(16), T.int64(32)), dtype=\"float32\"), R.Tensor((vocab, \
            T.int64(64)), dtype=\"float32\"), R.Shape([2]))) ";
        let params = relax_params("main", &names[..2], [consts[1], tuple]);
        assert!(matches!(&params[0], RelaxParam::Tensor(t) if t.name == "x"));
        let RelaxParam::Tuple { name, elements, .. } = &params[1] else {
            panic!("{:?}", params[1]);
        };
        assert_eq!(name, "w");
        assert_eq!(elements.len(), 3);
        assert_eq!(
            elements[0].as_ref().unwrap().describe(),
            "w[0]: float32[16, 32]"
        );
        assert_eq!(
            elements[1].as_ref().unwrap().dims,
            vec![Dim::Var("vocab".into()), Dim::Fixed(64)]
        );
        assert_eq!(elements[2], None);
        let e = relax_inputs("main", &names[..2], [consts[1], tuple]).unwrap_err();
        assert!(
            e.message
                .contains("a tuple parameter takes the model's weights"),
            "{e}"
        );

        let (dims, _) = parse_tensor_annotation("R.Tensor(dtype=\"float32\", ndim=2)").unwrap();
        assert_eq!(dims.len(), 2);
        assert_eq!(parse_dim("n * 2"), Dim::Expr("n * 2".into()));
    }

    #[test]
    fn shapes_bind_and_check() {
        let spec = |name: &str, dims: Vec<Dim>| TensorSpec {
            name: name.into(),
            dtype: FLOAT32,
            dims,
        };
        let n = || Dim::Var("n".into());
        let specs = vec![spec("a", vec![n()]), spec("b", vec![n()])];
        let bound = bind_vars(&specs, &[&[4], &[5]]);
        assert_eq!(bound, vec![("n".to_string(), 4)]);
        assert_eq!(
            resolve_shape(&spec("c", vec![n(), Dim::Fixed(2)]), &bound).unwrap(),
            vec![4, 2]
        );
        assert!(resolve_shape(&spec("c", vec![Dim::Var("m".into())]), &bound).is_err());
        check_shapes(&specs, &[&[4], &[5]]).unwrap();
        let fixed = vec![spec("x", vec![Dim::Fixed(1), Dim::Fixed(16)])];
        assert_eq!(
            check_shapes(&fixed, &[&[1, 15]]).unwrap_err(),
            "input `x` has shape [1, 15], but the model takes x: float32[1, 16]"
        );
        assert_eq!(
            check_shapes(&fixed, &[&[16]]).unwrap_err(),
            "input `x` has shape [16], but the model takes x: float32[1, 16]"
        );
    }
}
