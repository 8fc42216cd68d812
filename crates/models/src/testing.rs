//! What the unit tests of [`crate::batch`] and [`crate::batcher`] share: float32 bytes, a
//! test model that doubles its input, and requests answered over a channel.

use std::borrow::Cow;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tvmrt::dtype::dtypes::FLOAT32;
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::Error;

use crate::batcher::Batcher;
use crate::request::{Input, OutputData, Pending, Run};
use crate::signature::{Dim, TensorSpec};
use crate::stats::ModelStats;
use crate::types::DataType;

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

/// A request with input `x`, answered over a channel with the floats of `output0`.
pub struct Job {
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its bytes.
    pub data: Vec<u8>,
    reply: Sender<Result<Vec<f32>, String>>,
}

impl Pending for Job {
    fn input(&self, name: &str) -> Result<Input<'_>, String> {
        if name != "x" {
            return Err(format!("the request has no input `{name}`"));
        }
        Ok(Input {
            dtype: DataType::Fp32,
            shape: self.shape.clone(),
            byte_size: self.data.len() as u64,
            buffers: vec![Cow::Borrowed(&self.data[..])],
        })
    }
    fn requested_outputs(&self) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
    fn respond(&self, outcome: Result<Vec<OutputData<'_>>, String>) {
        let _ = self.reply.send(outcome.map(|o| floats(o[0].bytes)));
    }
    fn release(&self) {}
}

/// Where a [`Job`]'s answer comes.
pub type Answer = Receiver<Result<Vec<f32>, String>>;

/// A job of `shape` holding `values`, and where its answer comes.
pub fn job(shape: &[i64], values: &[f32]) -> (Job, Answer) {
    let (reply, answer) = channel();
    let job = Job {
        shape: shape.to_vec(),
        data: bytes(values),
        reply,
    };
    (job, answer)
}

/// The answer (waiting at most 20 s).
pub fn answer(a: &Answer) -> Result<Vec<f32>, String> {
    a.recv_timeout(Duration::from_secs(20))
        .expect("no answer within 20 s")
}

/// The statistics once `settled` holds (they are recorded just after the answers are sent).
pub fn stats_when(b: &Batcher<Job>, settled: impl Fn(&ModelStats) -> bool) -> ModelStats {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = b.stats();
        if settled(&stats) {
            return stats;
        }
        assert!(
            Instant::now() < deadline,
            "statistics never settled: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
