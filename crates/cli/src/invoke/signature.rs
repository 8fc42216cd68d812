//! Checking the inputs and outputs against a kernel's signature before the call, so a wrong
//! count, dtype or shape names the file or option at fault.

use tvmrt::abi::DLDataType;
use tvmrt::introspect::signature::{Dim, Signature};
use tvmrt::{Error, Result};

use super::args::OutputSpec;
use super::messages::arg_label;
use crate::npyio::{dtype_name, HostArray};

/// Checks the inputs and outputs against a kernel's signature before calling it, so that a
/// wrong count, dtype or shape is reported naming the file or option at fault. Checks only what
/// the signature states: non-tensor parameters or dimension expressions are left to the kernel.
pub(super) fn check_signature(
    sig: &Signature,
    paths: &[String],
    inputs: &[&HostArray],
    outputs: &[OutputSpec],
) -> Result<()> {
    if sig.params.iter().any(|p| p.shape().is_none()) {
        return Ok(());
    }
    let n = sig.params.len();
    let list = sig
        .params
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let got = inputs.len() + outputs.len();
    if got != n {
        let mut msg = format!(
            "wrong number of arguments: `{}` takes {n} tensors ({list}), but {} inputs and {} \
             outputs were given",
            sig.name,
            inputs.len(),
            outputs.len()
        );
        if got < n && outputs.is_empty() {
            msg.push_str(&suggest_outputs(sig, inputs));
        }
        return Err(Error::type_error(msg));
    }
    let mut bound: Vec<(String, i64, usize)> = Vec::new();
    for (k, p) in sig.params.iter().enumerate() {
        let (dtype, shape): (DLDataType, &[i64]) = match inputs.get(k) {
            Some(a) => (a.dtype, &a.shape),
            None => {
                let o = &outputs[k - inputs.len()];
                (o.dtype, &o.shape)
            }
        };
        let who = arg_label(k, paths, outputs);
        let expected = format!("`{}` expects {p}", sig.name);
        if let Some(want) = p.dtype() {
            if want != dtype {
                return Err(Error::type_error(format!(
                    "{who}: dtype {}, but {expected}",
                    dtype_name(dtype)
                )));
            }
        }
        let dims = p.shape().unwrap_or_default();
        if dims.len() != shape.len() {
            return Err(Error::value(format!(
                "{who}: shape {shape:?} has {} dimensions, but {expected}",
                shape.len()
            )));
        }
        for (axis, (d, &v)) in dims.iter().zip(shape).enumerate() {
            match d {
                Dim::Fixed(want) if *want != v => {
                    return Err(Error::value(format!(
                        "{who}: shape {shape:?}, but {expected} (dimension {axis} must be {want})"
                    )));
                }
                Dim::Var(name) => match bound.iter().find(|b| &b.0 == name) {
                    Some((_, value, from)) if *value != v => {
                        return Err(Error::value(format!(
                            "{who}: shape {shape:?}, but {expected} with {name} = {value} (from {})",
                            arg_label(*from, paths, outputs)
                        )));
                    }
                    Some(_) => {}
                    None => bound.push((name.clone(), v, k)),
                },
                _ => {}
            }
        }
    }
    Ok(())
}

/// `; pass the outputs as --output-shape float32:16` when the remaining parameters' shapes
/// follow from the inputs.
pub(super) fn suggest_outputs(sig: &Signature, inputs: &[&HostArray]) -> String {
    let mut bound: Vec<(String, i64)> = Vec::new();
    for (p, a) in sig.params.iter().zip(inputs) {
        for (d, &v) in p.shape().unwrap_or_default().iter().zip(&a.shape) {
            if let Dim::Var(n) = d {
                bound.push((n.clone(), v));
            }
        }
    }
    let mut flags = Vec::new();
    for p in sig.params.iter().skip(inputs.len()) {
        let Some(dtype) = p.dtype() else {
            return String::new();
        };
        let mut dims = Vec::new();
        for d in p.shape().unwrap_or_default() {
            let v = match d {
                Dim::Fixed(v) => *v,
                Dim::Var(n) => match bound.iter().find(|b| &b.0 == n) {
                    Some((_, v)) => *v,
                    None => return String::new(),
                },
                Dim::Expr(_) => return String::new(),
            };
            dims.push(v.to_string());
        }
        if dims.is_empty() {
            return String::new();
        }
        flags.push(format!(
            "--output-shape {}:{}",
            dtype_name(dtype),
            dims.join("x")
        ));
    }
    format!("; if the rest are outputs, pass {}", flags.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    use tvmrt::dtype::dtypes;
    use tvmrt::introspect::signature::parse;

    fn arr(dtype: DLDataType, shape: &[i64]) -> HostArray {
        HostArray {
            dtype,
            shape: shape.to_vec(),
            data: Vec::new(),
        }
    }

    #[test]
    fn signature_checks_name_the_argument() {
        let sig =
            parse("add(A: Tensor([n], float32), B: Tensor([n], float32), C: Tensor([n], float32))")
                .unwrap();
        let paths = vec!["a.npy".to_string(), "b.npy".to_string()];
        let out: Vec<OutputSpec> = vec!["float32:4".parse().unwrap()];
        let f32_4 = arr(dtypes::FLOAT32, &[4]);
        check_signature(&sig, &paths, &[&f32_4, &f32_4], &out).unwrap();

        let e = check_signature(&sig, &paths, &[&f32_4, &arr(dtypes::FLOAT32, &[5])], &out)
            .unwrap_err();
        assert_eq!(
            e.message,
            "input 2 (`b.npy`): shape [5], but `add` expects B: Tensor([n], float32) with n = 4 \
             (from input 1 (`a.npy`))"
        );
        let e =
            check_signature(&sig, &paths, &[&arr(dtypes::INT64, &[4]), &f32_4], &out).unwrap_err();
        assert_eq!(e.kind, "TypeError");
        assert_eq!(
            e.message,
            "input 1 (`a.npy`): dtype int64, but `add` expects A: Tensor([n], float32)"
        );
        let e = check_signature(&sig, &paths, &[&f32_4, &f32_4], &[]).unwrap_err();
        assert!(
            e.message.ends_with(
                "but 2 inputs and 0 outputs were given; if the rest are outputs, pass \
                 --output-shape float32:4"
            ),
            "{}",
            e.message
        );
        let bad_out: Vec<OutputSpec> = vec!["float32:4x1".parse().unwrap()];
        let e = check_signature(&sig, &paths, &[&f32_4, &f32_4], &bad_out).unwrap_err();
        assert!(
            e.message.starts_with(
                "output 1 (--output-shape float32:4x1): shape [4, 1] has 2 dimensions"
            ),
            "{}",
            e.message
        );

        let fixed = parse("add(A: Tensor([4, 4], float32), B: Tensor([4, 4], float32))").unwrap();
        let e = check_signature(
            &fixed,
            &paths,
            &[
                &arr(dtypes::FLOAT32, &[3, 4]),
                &arr(dtypes::FLOAT32, &[4, 4]),
            ],
            &[],
        )
        .unwrap_err();
        assert!(
            e.message.ends_with("(dimension 0 must be 4)"),
            "{}",
            e.message
        );
    }
}
