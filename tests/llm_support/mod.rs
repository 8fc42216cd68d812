//! Shared by the `llm_*` tests: the fixtures of tests/fixtures/llm (trace.json, the tensors
//! TVM returned in expected.bin, the model with each weight encoding) and comparisons.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use once_cell::sync::OnceCell;
use serde_json::Value;
use tvmrt::abi::DLDataType;
use tvmrt::dtype::dtype_from_str;
use tvmrt::function::{registry, Function};
use tvmrt::llm::generate::LanguageModel;
use tvmrt::object::ObjectRef;
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

/// `tests/fixtures/llm`.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llm")
}

/// The global function `name`.
pub fn global(name: &str) -> Function {
    registry::get(name).unwrap_or_else(|| panic!("global {name} is not registered"))
}

/// An `ffi.Shape` value.
pub fn shape(dims: &[i64]) -> Any {
    Any::from_object(tvmrt::object::shape::new_shape(dims))
}

/// An object value.
pub fn obj(o: &ObjectRef) -> Any {
    Any::from_object(o.clone())
}

/// The integers of a JSON list.
pub fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// The values of a float32 tensor.
pub fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec()
        .unwrap()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The tensors TVM returned.
pub struct Expected {
    blob: Vec<u8>,
}

fn dtype_of(r: &Value) -> DLDataType {
    dtype_from_str(r["dtype"].as_str().unwrap()).unwrap()
}

fn shape_of(r: &Value) -> Vec<i64> {
    r["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect()
}

impl Expected {
    /// The bytes of a recorded tensor.
    pub fn bytes(&self, r: &Value) -> &[u8] {
        let offset = r["offset"].as_u64().unwrap() as usize;
        let t = Expected::empty_like(r);
        &self.blob[offset..offset + t.nbytes()]
    }

    /// A new tensor holding a recorded tensor.
    pub fn tensor(&self, r: &Value) -> Tensor {
        let t = Expected::empty_like(r);
        t.copy_from_bytes(self.bytes(r)).unwrap();
        t
    }

    /// A zeroed tensor of a recorded tensor's shape and dtype.
    pub fn empty_like(r: &Value) -> Tensor {
        Tensor::empty(&shape_of(r), dtype_of(r), cpu()).unwrap()
    }

    /// Asserts `t` is the recorded tensor, bit for bit.
    pub fn assert_same(&self, t: &Tensor, r: &Value, ctx: &str) {
        assert_eq!(t.shape(), &shape_of(r)[..], "{ctx}: shape");
        assert_eq!(t.dtype(), dtype_of(r), "{ctx}: dtype");
        let got = t.to_vec().unwrap();
        let want = self.bytes(r);
        if got != want {
            let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
            panic!("{ctx}: differs from TVM's result from byte {first} on");
        }
    }
}

/// The fixtures, loaded once per test process.
pub struct Fixture {
    pub trace: Value,
    pub expected: Expected,
    models: HashMap<String, LanguageModel>,
}

impl Fixture {
    pub fn get() -> &'static Fixture {
        static FX: OnceCell<Fixture> = OnceCell::new();
        FX.get_or_init(|| {
            let d = dir();
            let trace: Value =
                serde_json::from_str(&std::fs::read_to_string(d.join("trace.json")).unwrap())
                    .unwrap();
            let blob = std::fs::read(d.join("expected.bin")).unwrap();
            let mut models = HashMap::new();
            // Both weight sets use the same names in the process-wide tensor cache: each
            // model takes its parameters right after its own load.
            for w in ["weights", "weights-bf16"] {
                let m = LanguageModel::load(&d.join("model.so"), &d.join(w)).unwrap();
                models.insert(w.to_string(), m);
            }
            Fixture {
                trace,
                expected: Expected { blob },
                models,
            }
        })
    }

    /// The model with weight set `weights`.
    pub fn model(&self, weights: &str) -> &LanguageModel {
        &self.models[weights]
    }
}

/// The argmax of every row of float32 logits (ties: the first, as numpy).
pub fn argmax_rows(logits: &Tensor) -> Vec<i32> {
    let vocab = *logits.shape().last().unwrap() as usize;
    logits
        .to_vec()
        .unwrap()
        .chunks(vocab * 4)
        .map(|row| {
            let v: Vec<f32> = row
                .chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect::<Vec<_>>();
            let mut best = 0;
            for i in 1..v.len() {
                if v[i] > v[best] {
                    best = i;
                }
            }
            best as i32
        })
        .collect()
}
