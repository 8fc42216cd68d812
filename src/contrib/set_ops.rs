//! `relax.run.nonzero` and `relax.run.unique`: the packed functions a Relax model calls for
//! `R.nonzero` and `R.unique` (ONNX `NonZero`, `Compress`, `Unique`). TVM registers them from
//! its Python package over numpy (`python/tvm/relax/op/set.py`); these give the same results
//! natively:
//!
//! - `nonzero(x)`: an `int64` tensor of shape `(max(ndim, 1), count)`, the coordinates of the
//!   nonzero elements in row-major order (`np.stack(np.atleast_1d(x).nonzero())`).
//! - `unique(x, sorted, return_index, return_inverse, return_counts[, axis])`: numpy's
//!   `unique` (elements of the flattened tensor, or slices along `axis`), in sorted order or, when
//!   `sorted` is false, in order of first occurrence; the unique values alone, or an array of
//!   the values followed by the requested `int64` outputs (first indices, inverse indices,
//!   counts).

use super::elements::{sort_pairs, TensorArg};
use crate::dtype::dtypes;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::new_array;
use crate::tensor::layout::cpu;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

fn int64_tensor(shape: &[i64], values: &[i64]) -> Result<Tensor> {
    let t = Tensor::empty(shape, dtypes::INT64, cpu())?;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    t.copy_from_bytes(&bytes)?;
    Ok(t)
}

fn nonzero(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "relax.run.nonzero";
    if args.len() != 1 {
        crate::bail_type!("{WHAT} expects 1 argument (x), got {}", args.len());
    }
    let x = TensorArg::of(args, 0, WHAT)?;
    let shape: Vec<i64> = if x.shape.is_empty() {
        vec![1]
    } else {
        x.shape.to_vec()
    };
    let ndim = shape.len();
    let kind = x.keys()?;
    let mut coords: Vec<Vec<i64>> = vec![Vec::new(); ndim];
    for i in 0..x.numel() {
        if kind.is_nonzero(x.bytes(i)) {
            let mut rest = i as i64;
            for d in (0..ndim).rev() {
                coords[d].push(rest % shape[d]);
                rest /= shape[d];
            }
        }
    }
    let count = coords[0].len();
    let flat: Vec<i64> = coords.concat();
    Ok(int64_tensor(&[ndim as i64, count as i64], &flat)?.into())
}

/// A flag argument (bool, or an integer as a PrimValue arrives).
fn flag(args: &[AnyView<'_>], i: usize, what: &str) -> Result<bool> {
    let v = args
        .get(i)
        .ok_or_else(|| Error::type_error(format!("relax.run.unique: missing `{what}`")))?;
    v.as_bool()
        .or_else(|| v.as_i64().map(|n| n != 0))
        .ok_or_else(|| v.type_mismatch(what, "bool or int"))
}

fn unique(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "relax.run.unique";
    if args.len() != 5 && args.len() != 6 {
        crate::bail_type!(
            "{WHAT} expects x, sorted, return_index, return_inverse, return_counts[, axis]; got \
             {} arguments",
            args.len()
        );
    }
    let x = TensorArg::of(args, 0, WHAT)?;
    let sorted = flag(args, 1, "sorted")?;
    let (want_index, want_inverse, want_counts) = (
        flag(args, 2, "return_index")?,
        flag(args, 3, "return_inverse")?,
        flag(args, 4, "return_counts")?,
    );
    let axis = match args.get(5) {
        Some(v) if !v.is_none() => {
            let a = v.expect_i64("axis")?;
            let nd = x.shape.len() as i64;
            let a = if a < 0 { a + nd } else { a };
            if a < 0 || a >= nd {
                crate::bail_value!("{WHAT}: axis {a} is out of range for a {nd}-d tensor");
            }
            Some(a as usize)
        }
        _ => None,
    };
    // The items: each element, or each slice along `axis` (as flat element indices).
    let (count, before, len, after) = match axis {
        None => (x.numel(), 1, x.numel(), 1),
        Some(a) => {
            let before = x.shape[..a].iter().product::<i64>() as usize;
            let after = x.shape[a + 1..].iter().product::<i64>() as usize;
            (x.shape[a] as usize, before, x.shape[a] as usize, after)
        }
    };
    // Each item's order keys, one row of `width` per item, in the order items compare.
    let width = before * after;
    let kind = x.keys()?;
    let mut keys = Vec::with_capacity(count * width);
    for k in 0..count {
        for i in 0..before {
            for j in 0..after {
                keys.push(kind.key(x.bytes(i * len * after + k * after + j)));
            }
        }
    }
    let row = |k: usize| &keys[k * width..(k + 1) * width];
    // The items in sorted order (stable: equal items in index order).
    let order: Vec<usize> = if width == 1 {
        let mut pairs: Vec<(u64, usize)> = keys.iter().copied().zip(0..count).collect();
        sort_pairs(&mut pairs);
        pairs.into_iter().map(|p| p.1).collect()
    } else {
        crate::cold_sort::sorted_order(count, &|a, b| row(a).cmp(row(b)))
    };
    // Groups of equal items, in sorted order: (first index, count); and each item's group.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut group_of = vec![0usize; count];
    for (pos, &k) in order.iter().enumerate() {
        if pos == 0 || row(order[pos - 1]) != row(k) {
            groups.push((k, 0));
        }
        let g = groups.len() - 1;
        groups[g].1 += 1;
        group_of[k] = g;
    }
    // Unsorted: groups in order of first occurrence; inverse indices follow.
    let mut rank: Vec<usize> = (0..groups.len()).collect();
    if !sorted {
        // First indices are distinct items: listing the groups by item index orders them.
        let mut group_at = vec![usize::MAX; count];
        for (g, &(first, _)) in groups.iter().enumerate() {
            group_at[first] = g;
        }
        let by_first: Vec<usize> = group_at.into_iter().filter(|&g| g != usize::MAX).collect();
        for (r, &g) in by_first.iter().enumerate() {
            rank[g] = r;
        }
        groups = by_first.iter().map(|&g| groups[g]).collect();
    }
    let n = groups.len();
    let mut out_shape = x.shape.to_vec();
    match axis {
        None => out_shape = vec![n as i64],
        Some(a) => out_shape[a] = n as i64,
    }
    let values = Tensor::empty(&out_shape, x.dl.dtype, cpu())?;
    let mut bytes = Vec::with_capacity(values.nbytes());
    // Row-major over the output: for each `before` block, each group's slice.
    for i in 0..before {
        for &(first, _) in &groups {
            for j in 0..after {
                bytes.extend_from_slice(x.bytes(i * len * after + first * after + j));
            }
        }
    }
    values.copy_from_bytes(&bytes)?;
    if !(want_index || want_inverse || want_counts) {
        return Ok(values.into());
    }
    let mut outs = vec![Any::from(values)];
    if want_index {
        let first: Vec<i64> = groups.iter().map(|g| g.0 as i64).collect();
        outs.push(int64_tensor(&[n as i64], &first)?.into());
    }
    if want_inverse {
        let inverse: Vec<i64> = group_of.iter().map(|&g| rank[g] as i64).collect();
        outs.push(int64_tensor(&[count as i64], &inverse)?.into());
    }
    if want_counts {
        let counts: Vec<i64> = groups.iter().map(|g| g.1 as i64).collect();
        outs.push(int64_tensor(&[n as i64], &counts)?.into());
    }
    Ok(Any::from_object(new_array(outs)))
}

/// The set functions, with TVM's names.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        ("relax.run.nonzero", Function::from_fn(nonzero)),
        ("relax.run.unique", Function::from_fn(unique)),
    ]
}
