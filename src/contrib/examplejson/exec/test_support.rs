//! What the ExampleJSON execution tests share: DLTensor arguments, a scalar reference
//! evaluator, exact float comparison and a seeded random generator.

// What every test module of the executor uses, in one import.
pub(super) use crate::contrib::examplejson::graph::{broadcast_shapes, Graph, GUIDE_SEED as SEED};
pub(super) use dlpark::ffi::{DLDataType, DLDevice, DLDeviceType, DLTensor};
pub(super) use std::ptr::null_mut;

use super::Element;
use crate::contrib::examplejson::graph::{NodeKind, Op, Subgraph};
use crate::error::Result;

pub(crate) fn dl<T: Element>(data: &mut [T], shape: &mut [i64]) -> DLTensor {
    DLTensor {
        data: data.as_mut_ptr().cast(),
        device: DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        },
        ndim: shape.len() as i32,
        dtype: DLDataType {
            code: T::CODE,
            bits: T::BITS,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: null_mut(),
        byte_offset: 0,
    }
}

pub(crate) fn dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

/// Runs `sub` through the DLTensor entry on copies of `inputs`.
pub(crate) fn call<T: Element>(sub: &Subgraph, inputs: &[Vec<T>]) -> Result<Vec<T>> {
    let mut ins = inputs.to_vec();
    let mut shapes: Vec<Vec<i64>> = (0..ins.len())
        .map(|k| dims(sub.input_shape(k).unwrap()))
        .collect();
    let mut out = vec![T::default(); sub.output_shape().iter().product()];
    let mut out_shape = dims(sub.output_shape());
    let mut tensors: Vec<DLTensor> = ins
        .iter_mut()
        .zip(shapes.iter_mut())
        .map(|(d, s)| dl(d, s))
        .collect();
    tensors.push(dl(&mut out, &mut out_shape));
    let args: Vec<&DLTensor> = tensors.iter().collect();
    // SAFETY: every tensor points at a live Vec of its declared shape.
    unsafe { sub.run(&args)? };
    Ok(out)
}

/// A plain interpreter: every node over whole tensors, with index arithmetic for
/// broadcasting. The engine must match it exactly.
pub(crate) fn reference<T: Element>(
    sub: &Subgraph,
    inputs: &[Vec<T>],
    f: impl Fn(Op, T, T) -> T,
) -> Vec<T> {
    let nodes = sub.nodes();
    let mut vals: Vec<Vec<T>> = Vec::new();
    for node in nodes {
        let v = match &node.kind {
            NodeKind::Input { arg } => inputs[*arg].clone(),
            NodeKind::Compute { op, operands } => {
                let rank = node.shape.len();
                (0..node.num_elements())
                    .map(|i| {
                        let mut coords = vec![0; rank];
                        let mut rest = i;
                        for d in (0..rank).rev() {
                            coords[d] = rest % node.shape[d];
                            rest /= node.shape[d];
                        }
                        let get = |o: usize| {
                            let s = &nodes[o].shape;
                            let mut idx = 0;
                            for (d, &dim) in s.iter().enumerate() {
                                let c = coords[rank - s.len() + d];
                                idx = idx * dim + if dim == 1 { 0 } else { c };
                            }
                            vals[o][idx]
                        };
                        let a = get(operands[0]);
                        let b = operands.get(1).map_or(a, |&o| get(o));
                        f(*op, a, b)
                    })
                    .collect()
            }
        };
        vals.push(v);
    }
    vals.pop().unwrap()
}

pub(crate) fn float_op(op: Op, a: f64, b: f64) -> f64 {
    match op {
        Op::Add => a + b,
        Op::Sub => a - b,
        Op::Mul => a * b,
        Op::Div => a / b,
        Op::Maximum => {
            if a > b {
                a
            } else {
                b
            }
        }
        Op::Minimum => {
            if a < b {
                a
            } else {
                b
            }
        }
        Op::Relu => {
            if a > 0.0 {
                a
            } else {
                0.0
            }
        }
    }
}

pub(crate) fn int_op(op: Op, a: i64, b: i64) -> i64 {
    match op {
        Op::Add => a.wrapping_add(b),
        Op::Sub => a.wrapping_sub(b),
        Op::Mul => a.wrapping_mul(b),
        Op::Div => a.wrapping_div(b),
        Op::Maximum => a.max(b),
        Op::Minimum => a.min(b),
        Op::Relu => a.max(0),
    }
}

pub(crate) fn same_f64(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

/// A small deterministic generator (no external crates).
pub(crate) struct Lcg(pub(crate) u64);
impl Lcg {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
    pub(crate) fn values(&mut self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| (self.below(41) as f64 - 20.0) * 0.25)
            .collect()
    }
}
