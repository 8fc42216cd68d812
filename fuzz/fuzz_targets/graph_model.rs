//! Fuzz target: classic graph models (TVM <= 0.19's graph executor): the graph JSON, a params
//! blob, and an executor built from them and run.
//!
//! Input: a little-endian `u32` length, that many bytes of graph JSON, then a params blob (the
//! format of `tvm.runtime.save_param_dict`). The JSON goes to `Graph::parse` and the blob to
//! `load_params`. When the graph parses and its storage is small, an executor is built over a
//! stand-in library whose every kernel reads each of its tensors in full and writes its
//! outputs in full, so AddressSanitizer sees any tensor the executor hands a kernel beyond its
//! storage. Then the executor is driven as a user drives it: `load_params` with the blob,
//! `set_input` of every input from a tensor of its shape, `run`, `get_output` of every output.
//!
//! Besides "no crash", it checks that a blob `load_params` accepts saves and loads back to the
//! same names, and that an executor's outputs have the shapes the graph declares.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use tvmrt::abi::{DLDevice, DLDeviceType, DLTensor};
use tvmrt::error::Result;
use tvmrt::function::Function;
use tvmrt::graph::params::{load_params, save_params};
use tvmrt::graph::{Graph, GraphExecutor};
use tvmrt::module::{Module, ModuleKind};
use tvmrt::tensor::Tensor;
use tvmrt::value::{Any, AnyView};

/// Graphs whose storage (the largest entry per storage id, summed) is above this are parsed but
/// not built: a declared shape may be legitimately large, too large for a fuzzer's memory.
const MAX_STORAGE_BYTES: u64 = 1 << 22;

const CPU: DLDevice = DLDevice {
    device_type: DLDeviceType::CPU,
    device_id: 0,
};

/// The bytes a tensor's descriptor spans from its data pointer (compact or strided), or `None`
/// when a dimension is negative.
fn span(t: &DLTensor) -> Option<usize> {
    let elem = (t.dtype.bits as usize * t.dtype.lanes as usize).div_ceil(8);
    if t.ndim <= 0 {
        // A scalar: its shape may be null.
        return Some(elem + t.byte_offset as usize);
    }
    // SAFETY: the executor hands kernels descriptors whose shape (and strides, when not null)
    // hold `ndim` entries.
    let shape = unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) };
    if shape.iter().any(|&d| d < 0) {
        return None;
    }
    if shape.contains(&0) {
        return Some(0);
    }
    let last = if t.strides.is_null() {
        shape.iter().product::<i64>() as usize - 1
    } else {
        // SAFETY: as above.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, shape.len()) };
        shape
            .iter()
            .zip(strides)
            .map(|(&d, &s)| (d - 1) as usize * s.max(0) as usize)
            .sum()
    };
    Some((last + 1) * elem + t.byte_offset as usize)
}

/// The stand-in library: every function it is asked for reads all its arguments' bytes and
/// writes the last argument's (the graph's calls put outputs last).
struct TouchEverything;

impl ModuleKind for TouchEverything {
    fn kind(&self) -> &str {
        "fuzz_touch"
    }

    fn get_function(&self, _this: &Module, _name: &str) -> Result<Option<Function>> {
        Ok(Some(Function::from_fn(|args: &[AnyView<'_>]| {
            let mut sum = 0u8;
            for (i, a) in args.iter().enumerate() {
                let Some(t) = a.as_dltensor() else { continue };
                // SAFETY: the executor passes live descriptors.
                let t = unsafe { &*t };
                let Some(n) = span(t) else { continue };
                if n == 0 {
                    continue;
                }
                let data = t.data.cast::<u8>();
                // SAFETY: what the descriptor spans must be the executor's storage; reading it
                // is the check.
                let bytes = unsafe { std::slice::from_raw_parts(data, n) };
                sum = bytes.iter().fold(sum, |s, &b| s.wrapping_add(b));
                if i + 1 == args.len() {
                    // SAFETY: as above; the output is writable storage.
                    unsafe { std::ptr::write_bytes(data, sum, n) };
                }
            }
            Ok(Any::none())
        })))
    }
}

/// The storage a parsed graph asks for, as the executor plans it; `None` when it overflows.
fn storage_bytes(g: &Graph) -> Option<u64> {
    let mut sizes = std::collections::HashMap::<usize, u64>::new();
    for eid in 0..g.num_entries() {
        let dt = g.dltype[eid];
        let elem = (dt.bits as u64 * dt.lanes as u64).div_ceil(8);
        let n = g.shape[eid]
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))?
            .checked_mul(elem)?;
        let s = sizes.entry(g.storage_id[eid]).or_insert(0);
        *s = (*s).max(n);
    }
    sizes.values().try_fold(0u64, |a, &b| a.checked_add(b))
}

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (json, blob) = rest.split_at(len);

    if let Ok(params) = load_params(blob) {
        let again = load_params(&save_params(&params).expect("saving loaded params"))
            .expect("loading saved params");
        let names = |p: &tvmrt::graph::params::Params| -> Vec<String> {
            p.iter().map(|(n, _)| n.clone()).collect()
        };
        assert_eq!(names(&again), names(&params), "params names after a save");
    }

    let Ok(text) = std::str::from_utf8(json) else {
        return;
    };
    let Ok(graph) = Graph::parse(text) else {
        return;
    };
    if storage_bytes(&graph).is_none_or(|n| n > MAX_STORAGE_BYTES) {
        return;
    }
    let declared: Vec<Vec<i64>> = graph
        .heads
        .iter()
        .map(|h| graph.shape[graph.entry_id(*h)].clone())
        .collect();
    let Ok(exec) = GraphExecutor::new(Arc::new(graph), Module::new(TouchEverything), CPU) else {
        return;
    };
    let _ = exec.load_params(blob);
    for i in 0..exec.num_inputs() {
        let Ok(current) = exec.get_input(i) else {
            continue;
        };
        let Ok(src) = Tensor::empty(current.shape(), current.dtype(), CPU) else {
            continue;
        };
        // SAFETY: `src` is a live CPU tensor.
        let _ = unsafe { exec.set_input(i, &*src.dltensor()) };
    }
    if exec.run().is_err() {
        return;
    }
    for (i, shape) in declared.iter().enumerate().take(exec.num_outputs()) {
        if let Ok(out) = exec.get_output(i) {
            let flat = out.shape().len() == 1
                && out.shape()[0] == shape.iter().product::<i64>();
            assert!(
                out.shape() == shape.as_slice() || flat,
                "output {i}: shape {:?}, declared {shape:?}",
                out.shape()
            );
        }
    }
});
