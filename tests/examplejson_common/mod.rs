//! Helpers shared by the `examplejson_*` and `pack_*` tests: host tensors over Rust vectors,
//! passed as `DLTensor*`, and the guide's subgraph with its expected values.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tvmrt::abi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLTensor};
use tvmrt::value::Any;

/// The subgraph of TVM's BYOC guide, as in `examples/byoc/subgraph_0.examplejson`.
pub const GUIDE_TEXT: &str = include_str!("../../examples/byoc/subgraph_0.examplejson");

/// `examples/byoc` (these helpers are also compiled into the tool's tests, in crates/cli).
pub fn examples() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = if here.join("examples").is_dir() {
        here.to_path_buf()
    } else {
        here.join("../..")
    };
    root.join("examples/byoc")
}

/// An element type with its DLPack dtype.
pub trait Elem: Copy + Default + PartialEq + std::fmt::Debug {
    /// The DLPack dtype of this element type.
    fn dtype() -> DLDataType;
}

macro_rules! elem {
    ($t:ty, $code:expr, $bits:expr) => {
        impl Elem for $t {
            fn dtype() -> DLDataType {
                DLDataType {
                    code: $code,
                    bits: $bits,
                    lanes: 1,
                }
            }
        }
    };
}
elem!(f32, DLDataTypeCode::FLOAT, 32);
elem!(f64, DLDataTypeCode::FLOAT, 64);
elem!(i32, DLDataTypeCode::INT, 32);
elem!(i64, DLDataTypeCode::INT, 64);

/// A CPU tensor over a vector; its `DLTensor` points into the vector and the shape.
pub struct Host<T> {
    data: Vec<T>,
    shape: Vec<i64>,
    dl: Box<DLTensor>,
}

// SAFETY: the tensor owns its buffers; the raw pointers in `dl` only point into them.
unsafe impl<T: Send> Send for Host<T> {}

impl<T: Elem> Host<T> {
    /// A tensor of `shape` holding `data` (row-major).
    pub fn new(shape: &[i64], data: Vec<T>) -> Host<T> {
        let n: i64 = shape.iter().product();
        assert_eq!(n as usize, data.len(), "data does not match the shape");
        let mut data = data;
        let mut shape = shape.to_vec();
        let dl = Box::new(DLTensor {
            data: data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: DLDeviceType::CPU,
                device_id: 0,
            },
            ndim: shape.len() as i32,
            dtype: T::dtype(),
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        });
        Host { data, shape, dl }
    }

    /// A zero tensor of `shape`.
    pub fn zeros(shape: &[i64]) -> Host<T> {
        let n: i64 = shape.iter().product();
        Host::new(shape, vec![T::default(); n as usize])
    }

    /// The tensor as a `DLTensor*` argument (type index 7).
    pub fn arg(&mut self) -> Any {
        Any::dltensor_ptr(&mut *self.dl)
    }

    /// The raw DLTensor, for tests that corrupt fields.
    pub fn dl_mut(&mut self) -> &mut DLTensor {
        &mut self.dl
    }

    /// The values (read after a call wrote them through the DLTensor).
    pub fn values(&self) -> &[T] {
        // Read through the pointer the callee wrote through.
        // SAFETY: `dl.data` points to `data.len()` initialized elements owned by `self`.
        unsafe { std::slice::from_raw_parts(self.dl.data.cast::<T>(), self.data.len()) }
    }
}

/// Deterministic pseudo-random floats in [-4, 4), exactly representable (multiples of 1/8).
pub fn floats(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x % 64) as f32 - 32.0) / 8.0
        })
        .collect()
}

/// The guide's inputs (seeded) and the expected `(a + b - c) * d`.
pub fn guide_case(seed: u64) -> (Vec<Host<f32>>, Vec<f32>) {
    let ins: Vec<Vec<f32>> = (0..4).map(|k| floats(100, seed * 10 + k)).collect();
    let expected = (0..100)
        .map(|i| (ins[0][i] + ins[1][i] - ins[2][i]) * ins[3][i])
        .collect();
    let hosts = ins.into_iter().map(|v| Host::new(&[10, 10], v)).collect();
    (hosts, expected)
}

/// Calls `f` on the guide's inputs and a fresh output; returns the output values.
pub fn run_guide(f: &tvmrt::Function, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let (mut ins, expected) = guide_case(seed);
    let mut out = Host::<f32>::zeros(&[10, 10]);
    let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
    args.push(out.arg());
    f.call_values(&args).unwrap();
    (out.values().to_vec(), expected)
}

/// Checks a library packed from the guide's C sources and its ExampleJSON subgraph: `gcc_0`
/// and `gcc_1` are the library's own, `subgraph_0` is found through its imports, and all three
/// compute the guide's values.
pub fn check_guide_library(root: &tvmrt::module::Module) {
    assert_eq!(root.kind(), "library");
    for (name, own) in [("gcc_0", true), ("gcc_1", true), ("subgraph_0", false)] {
        // The library's own functions are found without the imports; subgraphs through them.
        assert_eq!(
            root.get_function(name, false).unwrap().is_some(),
            own,
            "{name} in the library itself"
        );
        let f = root.get_function(name, true).unwrap().unwrap();
        let (got, want) = run_guide(&f, 7);
        assert_eq!(got, want, "{name}");
    }
}
