//! `tvmrt serve --model-repository DIR` and `tvmrt serve model.so`: TVM models behind KServe's
//! Open Inference Protocol (v2), the protocol tritonclient, KServe's SDK and MLServer's clients
//! speak, over HTTP ([`http`], served by [`listen`] with read timeouts; bodies compressed or not,
//! [`compression`]) and gRPC ([`grpc`], Triton's `inference.GRPCInferenceService`, a superset of
//! KServe's), with Triton's extensions (binary tensors, model repository, configuration,
//! statistics, system shared memory, trace and logging settings: [`grpc_triton`],
//! [`triton_http`], [`shm`], [`trace`], [`logging`]).
//!
//! The repository has Triton's layout ([`repository`]; a load request may give a model's
//! configuration in place of its file: [`load_request`]); each model is loaded, completed,
//! queued and batched by `tvmrt-models`, the code the Triton backend runs ([`model`]: the
//! checks Triton's core makes before queueing, then `tvmrt_models::batcher`). Tensors are
//! decoded and encoded in [`codec`] and [`infer`] (JSON and Triton's binary extension), each
//! request travels as a [`job`], errors are [`error`]s, [`stats`] writes the statistics as
//! Prometheus text, [`idle`] gives the allocator's free memory back when no request has run
//! for a moment, and [`protojson`] reads the JSON answers into their gRPC messages. [`cli`]
//! runs it all until SIGTERM or SIGINT.

pub mod cli;
pub mod codec;
pub mod compression;
pub mod error;
pub mod grpc;
pub mod grpc_triton;
pub mod http;
pub mod idle;
pub mod infer;
pub mod job;
pub mod listen;
pub mod load_request;
pub mod logging;
pub mod model;
pub mod protojson;
pub mod repository;
pub mod shm;
pub mod stats;
pub mod trace;
pub mod triton_http;
