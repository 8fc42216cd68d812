//! Fuzz target: the ExampleJSON runtime (BYOC reference module): parse, restore from bytes,
//! and run every subgraph.
//!
//! Input: one control byte, then the payload. The payload goes to the module loaders'
//! entry points (`ExampleJsonModule::from_bytes` / `from_stream`, what
//! `ffi.Module.load_from_bytes.examplejson` and `runtime.module.loadbinary_examplejson` call)
//! and, when it is UTF-8, to `Graph::parse`. Each parsed subgraph small enough to run quickly
//! is run on slices (f32) and on DLTensors whose dtype, and sometimes shape or argument count,
//! the control byte picks, so the argument checks see wrong input too.
#![no_main]

use std::ffi::c_void;

use libfuzzer_sys::fuzz_target;
use tvmrt::abi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLTensor};
use tvmrt::contrib::examplejson::{ExampleJsonModule, Graph, Subgraph};

/// Subgraphs with a node larger than this are parsed but not run (a declared shape may be
/// up to 2^31 elements, which is legitimate input but too slow for a fuzzer).
const MAX_RUN_ELEMENTS: usize = 1 << 14;

fn values(n: usize, seed: u8) -> impl Iterator<Item = i64> {
    // Small values with zeros among them (integer division by zero must be an error).
    (0..n).map(move |i| ((i as i64 * 7 + seed as i64) % 13) - 6)
}

/// An owned argument: shape, and 8-byte-aligned storage large enough for it.
struct Arg {
    shape: Vec<i64>,
    data: Vec<u64>,
}

impl Arg {
    fn new(shape: Vec<i64>, elem_bytes: usize, seed: u8, code: u8) -> Option<Arg> {
        let n: usize = shape.iter().map(|&d| d.max(0) as usize).product();
        if n > MAX_RUN_ELEMENTS {
            return None;
        }
        let mut data = vec![0u64; (n * elem_bytes).div_ceil(8).max(1)];
        // SAFETY: the buffer holds at least `n * elem_bytes` bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), n * elem_bytes)
        };
        for (chunk, v) in bytes.chunks_exact_mut(elem_bytes).zip(values(n, seed)) {
            match (code, elem_bytes) {
                (2, 4) => chunk.copy_from_slice(&(v as f32).to_le_bytes()),
                (2, 8) => chunk.copy_from_slice(&(v as f64).to_le_bytes()),
                (_, 4) => chunk.copy_from_slice(&(v as i32).to_le_bytes()),
                (_, 8) => chunk.copy_from_slice(&v.to_le_bytes()),
                _ => chunk.fill(v as u8),
            }
        }
        Some(Arg { shape, data })
    }

    fn dl(&mut self, dtype: DLDataType, device_type: DLDeviceType) -> DLTensor {
        DLTensor {
            data: self.data.as_mut_ptr().cast::<c_void>(),
            device: DLDevice {
                device_type,
                device_id: 0,
            },
            ndim: self.shape.len() as i32,
            dtype,
            shape: self.shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        }
    }
}

fn run_slices(sg: &Subgraph, seed: u8) {
    let inputs: Vec<Vec<f32>> = (0..sg.num_inputs())
        .map(|i| {
            let n: usize = sg.input_shape(i).unwrap_or(&[]).iter().product();
            values(n, seed.wrapping_add(i as u8))
                .map(|v| v as f32)
                .collect()
        })
        .collect();
    let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let mut out = vec![0f32; sg.output_shape().iter().product()];
    if let Err(e) = sg.run_slices(&refs, &mut out) {
        assert!(!e.message.is_empty());
    }
}

fn run_dltensors(sg: &Subgraph, control: u8) {
    let (code, bits) = match control & 7 {
        0 | 1 => (2u8, 32u8),
        2 => (2, 64),
        3 => (0, 32),
        4 => (0, 64),
        5 => (2, 16), // unsupported: must be a TypeError
        6 => (1, 8),  // unsupported
        _ => (2, 32),
    };
    let dtype = DLDataType {
        code: DLDataTypeCode(code),
        bits,
        lanes: 1,
    };
    let elem_bytes = (bits as usize).div_ceil(8);
    let device = if control & 0x80 != 0 && control & 0x40 != 0 {
        DLDeviceType::CUDA
    } else {
        DLDeviceType::CPU
    };
    let mut shapes: Vec<Vec<i64>> = (0..sg.num_inputs())
        .map(|i| {
            sg.input_shape(i)
                .unwrap_or(&[])
                .iter()
                .map(|&d| d as i64)
                .collect()
        })
        .collect();
    shapes.push(sg.output_shape().iter().map(|&d| d as i64).collect());
    // Wrong input on purpose, half of the time.
    match (control >> 3) & 7 {
        1 => {
            if let Some(s) = shapes.last_mut().and_then(|s| s.last_mut()) {
                *s += 1;
            }
        }
        2 => {
            shapes.pop();
        }
        3 => {
            if let Some(s) = shapes.first_mut() {
                s.push(1);
            }
        }
        _ => {}
    }
    let mut args = Vec::new();
    for (i, shape) in shapes.into_iter().enumerate() {
        match Arg::new(shape, elem_bytes, control.wrapping_add(i as u8), code) {
            Some(a) => args.push(a),
            None => return,
        }
    }
    let dls: Vec<DLTensor> = args.iter_mut().map(|a| a.dl(dtype, device)).collect();
    let refs: Vec<&DLTensor> = dls.iter().collect();
    // SAFETY: every DLTensor's shape has `ndim` entries and its data holds the elements that
    // shape describes, in storage owned by `args`, which outlives the call.
    if let Err(e) = unsafe { sg.run(&refs) } {
        assert!(!e.message.is_empty());
    }
}

fn exercise(graph: &Graph, control: u8) {
    for sg in graph.subgraphs() {
        if sg
            .nodes()
            .iter()
            .any(|n| n.num_elements() > MAX_RUN_ELEMENTS)
        {
            continue;
        }
        run_slices(sg, control);
        run_dltensors(sg, control);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, payload)) = data.split_first() else {
        return;
    };
    if let Ok(m) = ExampleJsonModule::from_bytes(payload) {
        // Saving must give back what a loader reads.
        let again = ExampleJsonModule::new(m.text()).expect("the module's own text parses");
        assert_eq!(again.text(), m.text());
    }
    if let Ok((m, used)) = ExampleJsonModule::from_stream(payload) {
        assert!(
            used <= payload.len(),
            "consumed {used} of {} bytes",
            payload.len()
        );
        let _ = m.graph().subgraph_names();
    }
    if let Ok(text) = std::str::from_utf8(payload) {
        match Graph::parse(text) {
            Ok(g) => exercise(&g, control),
            Err(e) => assert!(!e.message.is_empty()),
        }
    }
});
