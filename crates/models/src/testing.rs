//! What the unit tests of [`crate::batch`] and [`crate::batcher`] share: float32 bytes, and a
//! test model that doubles its input.

use std::sync::Mutex;

use tvmrt::dtype::dtypes::FLOAT32;
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::Error;

use crate::request::Run;
use crate::signature::{Dim, TensorSpec};

/// Little-endian bytes of `v`.
pub fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The floats of little-endian bytes.
pub fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The test model's input `x: float32[dims]`.
pub fn input_x(dims: Vec<Dim>) -> TensorSpec {
    TensorSpec {
        name: "x".into(),
        dtype: FLOAT32,
        dims,
    }
}

/// The symbolic batch dimension `n`.
pub fn n() -> Dim {
    Dim::Var("n".into())
}

/// Doubles its input; fails on a 13 anywhere in the batch. Records each call's rows.
#[derive(Default)]
pub struct Doubler {
    /// The first dimension of each call's input.
    pub calls: Mutex<Vec<i64>>,
}

impl Doubler {
    /// The rows of each call so far.
    pub fn calls(&self) -> Vec<i64> {
        self.calls.lock().unwrap().clone()
    }
}

impl Run for Doubler {
    fn run(&self, inputs: &[Tensor]) -> tvmrt::Result<Vec<Tensor>> {
        let t = &inputs[0];
        self.calls.lock().unwrap().push(t.shape()[0]);
        let v = floats(&t.to_vec()?);
        if v.contains(&13.0) {
            return Err(Error::value("unlucky\n  13"));
        }
        let out = Tensor::empty(t.shape(), FLOAT32, cpu())?;
        out.copy_from_bytes(&bytes(&v.iter().map(|x| x * 2.0).collect::<Vec<_>>()))?;
        Ok(vec![out])
    }
}
