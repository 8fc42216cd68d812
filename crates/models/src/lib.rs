//! Serving models TVM compiled, on tvmrt: what the Triton backend (`crates/triton`) and
//! `tvmrt serve`'s KServe Open Inference Protocol server (`crates/oip`) share, so that a model
//! is loaded, completed, checked, batched and answered the same way behind both.
//!
//! - [`load`]: one version of a repository model, as its configuration says: [`load::open`]
//!   (reads [`config::Settings`], loads the library into a [`runner::Model`]),
//!   [`load::complete`] (fills what `config.pbtxt` leaves out, [`config::autocomplete`]),
//!   [`load::finish`] (checks the configuration against the model: [`load::Served`]);
//!   [`load::instance_device`] for each instance's [`runner::Executor`]
//!   ([`runner::Model::executor`]).
//! - [`signature`]: what a model takes and returns ([`signature::TensorSpec`],
//!   [`signature::Dim`]), read from the model; [`weights`]: a Relax model's tensor cache.
//! - [`config`]: Triton's model configuration as JSON ([`config::Settings`],
//!   [`config::parameter`], [`config::autocomplete`], [`config::check_against_model`]).
//! - [`pbtxt`]: `config.pbtxt` (protobuf text) read into that JSON ([`pbtxt::parse`]), errors
//!   with their line ([`pbtxt::PbtxtError`]).
//! - [`types`]: element types by the protocol's names ([`types::DataType`]: `FP32`,
//!   `TYPE_FP32`, Triton's numbers) against DLPack's.
//! - [`request`]: what a server gives [`batch::execute`]: requests ([`request::Pending`], their
//!   [`request::Input`]s, answered with [`request::OutputData`]), a runner ([`request::Run`],
//!   implemented by [`runner::Executor`]) and statistics ([`request::Stats`],
//!   [`request::Timing`], [`request::now_ns`]).
//! - [`batch`]: [`batch::execute`] checks requests against the model ([`batch::ModelView`]),
//!   stacks those that fit into one model call, splits the outputs back, and reruns a failing
//!   batch request by request.
//! - [`batcher`]: a dynamic batcher for a server outside Triton: [`batcher::Batcher`] (a
//!   bounded per-model queue, N instance threads, batches of single requests formed within
//!   `max_queue_delay_microseconds` and `preferred_batch_size`, graceful
//!   [`batcher::Batcher::drain`], queue timeouts), set from a configuration by
//!   [`batcher::BatcherConfig`], started on a loaded model with [`batcher::ModelSpec::of`] and
//!   [`batcher::executors`]; refusals are [`batcher::Refused`].
//! - [`stats`]: per-model statistics as Triton's statistics extension reports them
//!   ([`stats::ModelStats`], with per-batch-size compute times).

#![warn(missing_docs)]

pub mod batch;
pub mod batcher;
pub mod config;
pub mod load;
pub mod pbtxt;
pub mod request;
pub mod runner;
pub mod signature;
pub mod stats;
#[cfg(test)]
mod testing;
pub mod types;
pub mod weights;

pub use batch::{execute, ModelView};
pub use batcher::{Batcher, BatcherConfig, ModelSpec, Refused};
pub use config::{autocomplete, Settings};
pub use request::{Input, OutputData, Pending, Run, Stats, Timing};
pub use runner::{Executor, Model};
pub use signature::{Dim, TensorSpec};
pub use stats::ModelStats;
pub use types::DataType;
