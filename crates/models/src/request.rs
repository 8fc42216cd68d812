//! What [`crate::batch::execute`] needs of a server: its requests ([`Pending`]: inputs in,
//! one response out), what runs the model ([`Run`]), and where statistics go ([`Stats`]).
//! The Triton backend implements them for Triton's requests; the OIP server for its own.

use std::borrow::Cow;

use tvmrt::tensor::Tensor;

use crate::runner::Executor;
use crate::types::DataType;

/// An input of a request: its properties and the buffers holding its bytes (in order; owned
/// by the request or borrowed from it until it is released).
pub struct Input<'r> {
    /// Its element type as the request gives it.
    pub dtype: DataType,
    /// Its shape as the request gives it (batch dimension first for a batched model).
    pub shape: Vec<i64>,
    /// The byte size the request declares.
    pub byte_size: u64,
    /// Its bytes, possibly in several pieces.
    pub buffers: Vec<Cow<'r, [u8]>>,
}

/// One output of a response: a slice of the model's output tensor, valid during `respond`.
pub struct OutputData<'a> {
    /// `output0`, `output1`, ...
    pub name: &'a str,
    /// Its element type.
    pub dtype: DataType,
    /// This request's shape of it (its own rows of a batch).
    pub shape: Vec<i64>,
    /// Its bytes, little-endian, row-major.
    pub bytes: &'a [u8],
}

/// A request as `execute` uses it: Triton's, the OIP server's, or a test's.
pub trait Pending {
    /// The input named `name`, or why it cannot be read.
    fn input(&self, name: &str) -> Result<Input<'_>, String>;
    /// The outputs asked for (empty: all).
    fn requested_outputs(&self) -> Result<Vec<String>, String>;
    /// Sends the one response: the outputs, or the error.
    fn respond(&self, outcome: Result<Vec<OutputData<'_>>, String>);
    /// Hands the request back (after its response).
    fn release(&self);
    /// The times of the model run that answered it, as [`Stats::request`] gets them, for a
    /// server that traces its requests (Triton's `COMPUTE_*` timestamps); nothing by default.
    fn computed(&self, _exec_start: u64, _t: Timing, _exec_end: u64) {}
}

/// What runs a batch: an instance's [`Executor`], or a test's.
pub trait Run {
    /// The model's outputs for host input tensors.
    fn run(&self, inputs: &[Tensor]) -> tvmrt::Result<Vec<Tensor>>;
}

impl Run for Executor {
    fn run(&self, inputs: &[Tensor]) -> tvmrt::Result<Vec<Tensor>> {
        Executor::run(self, inputs)
    }
}

/// Timestamps ([`now_ns`]) of one model run, for Triton-style statistics.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// When the inputs started to be stacked.
    pub compute_start: u64,
    /// When the model's outputs were back.
    pub compute_end: u64,
}

/// Where `execute` reports statistics.
pub trait Stats<R> {
    /// One request's (`success`: it got outputs).
    fn request(&self, request: &R, success: bool, exec_start: u64, t: Timing, exec_end: u64);
    /// One model run over `batch_size` items.
    fn batch(&self, batch_size: u64, exec_start: u64, t: Timing, exec_end: u64);
}

/// Nanoseconds of the monotonic clock Triton's own statistics use (`steady_clock`, which is
/// `CLOCK_MONOTONIC` on Linux).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
