//! `tvm.contrib.sort.{argsort, sort, topk}`: the CPU sorting functions of TVM's runtime
//! (`src/runtime/contrib/sort/sort.cc`) that models compiled by TVM call (ONNX `TopK`,
//! `NonMaxSuppression`, `argsort`...). Same arguments, same results:
//!
//! - `argsort(input, output, axis, is_ascend)` / `sort(...)`: a stable sort of every line
//!   along `axis` (a negative axis counts from the end); ties keep their input order.
//! - `topk(input, [values], [indices], k, axis, ret_type, is_ascend)`: `ret_type` is `both`,
//!   `values` or `indices`; the first `k` (all when `k < 1`) of each line by value, ties broken
//!   by the smaller index, in that order.
//!
//! Indices are written in the output's dtype (integer or float, as TVM allows).

use super::elements::{sort_pairs, write_index, KeyKind, TensorArg};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::value::{Any, AnyView};

/// The lines along `axis`: (count before, length, count after).
fn lines(shape: &[i64], axis: usize) -> (usize, usize, usize) {
    let before = shape[..axis].iter().product::<i64>() as usize;
    let after = shape[axis + 1..].iter().product::<i64>() as usize;
    (before, shape[axis] as usize, after)
}

fn axis_arg(args: &[AnyView<'_>], i: usize, ndim: usize, what: &str) -> Result<usize> {
    let v = args
        .get(i)
        .ok_or_else(|| Error::type_error(format!("{what}: missing argument {i} (axis)")))?;
    let a = v.expect_i64("axis")?;
    let a = if a < 0 { a + ndim as i64 } else { a };
    if a < 0 || a >= ndim as i64 {
        crate::bail_value!("{what}: Axis out of boundary for input ndim {ndim}");
    }
    Ok(a as usize)
}

fn bool_arg(args: &[AnyView<'_>], i: usize, what: &str) -> Result<bool> {
    let v = args
        .get(i)
        .ok_or_else(|| Error::type_error(format!("{what}: missing argument {i} (is_ascend)")))?;
    v.as_bool()
        .or_else(|| v.as_i64().map(|n| n != 0))
        .ok_or_else(|| v.type_mismatch("is_ascend", "bool"))
}

/// Line `base, base + stride, ...` of `len` elements as (order key, index) pairs sorted by key
/// in the given direction, ties in index order (`!key` reverses the order and keeps ties).
fn sorted_line(
    input: &TensorArg<'_>,
    kind: KeyKind,
    ascend: bool,
    (base, len, stride): (usize, usize, usize),
    line: &mut Vec<(u64, usize)>,
) {
    let flip = if ascend { 0 } else { u64::MAX };
    line.clear();
    line.extend((0..len).map(|k| (kind.key(input.bytes(base + k * stride)) ^ flip, k)));
    sort_pairs(line);
}

fn same_shape(a: &TensorArg<'_>, b: &TensorArg<'_>, what: &str) -> Result<()> {
    if a.shape != b.shape {
        crate::bail_value!(
            "{what}: output shape {:?} differs from the input's {:?}",
            b.shape,
            a.shape
        );
    }
    Ok(())
}

/// `argsort` and `sort`: stable sort of every line; `values` writes the sorted elements,
/// otherwise their indices.
fn sort_lines(args: &[AnyView<'_>], values: bool, what: &str) -> Result<Any> {
    if args.len() != 4 {
        crate::bail_type!(
            "{what} expects 4 arguments (input, output, axis, is_ascend), got {}",
            args.len()
        );
    }
    let input = TensorArg::of(args, 0, what)?;
    let output = TensorArg::of(args, 1, what)?;
    same_shape(&input, &output, what)?;
    if values && output.dl.dtype != input.dl.dtype {
        crate::bail_type!(
            "{what}: output dtype {} differs from the input's {}",
            output.dtype_name(),
            input.dtype_name()
        );
    }
    if input.shape.is_empty() {
        crate::bail_value!("{what}: Axis out of boundary for input ndim 0");
    }
    let axis = axis_arg(args, 2, input.shape.len(), what)?;
    let ascend = bool_arg(args, 3, what)?;
    let (before, len, after) = lines(input.shape, axis);
    let kind = input.keys()?;
    let mut line = Vec::with_capacity(len);
    for i in 0..before {
        for j in 0..after {
            let base = i * len * after + j;
            sorted_line(&input, kind, ascend, (base, len, after), &mut line);
            for (k, &(_, src)) in line.iter().enumerate() {
                let at = base + k * after;
                if values {
                    output.write(at, input.bytes(base + src * after));
                } else {
                    write_index(&output, at, src as i64)?;
                }
            }
        }
    }
    Ok(Any::none())
}

fn topk(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "tvm.contrib.sort.topk";
    if args.len() != 6 && args.len() != 7 {
        crate::bail_type!(
            "{WHAT} expects input, the output tensor(s), k, axis, ret_type and is_ascend; got {} \
             arguments",
            args.len()
        );
    }
    let n = args.len();
    let input = TensorArg::of(args, 0, WHAT)?;
    let ret_type = args[n - 2].expect_str("ret_type")?;
    let (values, indices) = match (ret_type, n) {
        ("both", 7) => (
            Some(TensorArg::of(args, 1, WHAT)?),
            Some(TensorArg::of(args, 2, WHAT)?),
        ),
        ("values", 6) => (Some(TensorArg::of(args, 1, WHAT)?), None),
        ("indices", 6) => (None, Some(TensorArg::of(args, 1, WHAT)?)),
        ("both" | "values" | "indices", _) => {
            crate::bail_type!("{WHAT}: ret_type `{ret_type}` with {n} arguments")
        }
        _ => crate::bail_value!("{WHAT}: Unsupported ret type: {ret_type}"),
    };
    if input.shape.is_empty() {
        crate::bail_value!("{WHAT}: Axis out of boundary for input ndim 0");
    }
    let axis = axis_arg(args, n - 3, input.shape.len(), WHAT)?;
    let ascend = bool_arg(args, n - 1, WHAT)?;
    let (before, len, after) = lines(input.shape, axis);
    let k = args[n - 4].expect_i64("k")?;
    let k = if k < 1 { len } else { k as usize };
    let kept = k.min(len);
    for out in values.iter().chain(indices.iter()) {
        let mut want = input.shape.to_vec();
        want[axis] = k as i64;
        if out.shape != want.as_slice() {
            crate::bail_value!("{WHAT}: output shape {:?}, expected {want:?}", out.shape);
        }
    }
    if let Some(v) = &values {
        if v.dl.dtype != input.dl.dtype {
            crate::bail_type!(
                "{WHAT}: values dtype {} differs from the input's {}",
                v.dtype_name(),
                input.dtype_name()
            );
        }
    }
    let kind = input.keys()?;
    let mut line = Vec::with_capacity(len);
    for i in 0..before {
        for j in 0..after {
            let src = i * len * after + j;
            let dst = i * k * after + j;
            // Ties by the smaller index: the stable order.
            sorted_line(&input, kind, ascend, (src, len, after), &mut line);
            for (t, &(_, from)) in line.iter().take(kept).enumerate() {
                if let Some(v) = &values {
                    v.write(dst + t * after, input.bytes(src + from * after));
                }
                if let Some(ix) = &indices {
                    write_index(ix, dst + t * after, from as i64)?;
                }
            }
        }
    }
    Ok(Any::none())
}

/// The sorting functions, with TVM's names.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "tvm.contrib.sort.argsort",
            Function::from_fn(|a| sort_lines(a, false, "tvm.contrib.sort.argsort")),
        ),
        (
            "tvm.contrib.sort.sort",
            Function::from_fn(|a| sort_lines(a, true, "tvm.contrib.sort.sort")),
        ),
        ("tvm.contrib.sort.topk", Function::from_fn(topk)),
    ]
}
