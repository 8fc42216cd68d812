//! `tvmrt serve --model-repository DIR`: TVM models behind KServe's Open Inference Protocol
//! (v2), the protocol tritonclient, KServe's SDK and MLServer's clients speak, with Triton's
//! extensions (binary tensors, model repository, configuration, statistics).
//!
//! The repository has Triton's layout ([`repository`]); each model is loaded, completed and
//! batched by `tvmrt-models`, the code the Triton backend runs. The protocol's tensors are
//! decoded and encoded in [`codec`] (JSON and Triton's binary extension), requests answered in
//! [`http`], statistics kept in [`stats`].

pub mod cli;
pub mod codec;
pub mod error;
pub mod grpc;
pub mod http;
pub mod infer;
pub mod job;
pub mod model;
pub mod repository;
pub mod stats;
