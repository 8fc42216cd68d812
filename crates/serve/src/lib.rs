//! `tvmrt serve`: an OpenAI-compatible server for LLMs MLC-LLM compiles, on tvmrt.
//!
//! - [`model`]: the model library and weights, driven as MLC-LLM's engine drives them;
//! - [`engine`]: continuous batching on one thread that owns the model and its KV cache;
//! - [`sampler`], [`text`], [`config`], [`conversation`]: sampling, tokenizer and
//!   detokenization, `mlc-chat-config.json`, a chat's prompt through its conversation template;
//! - [`api`]: OpenAI request validation and response shapes; [`http`]: the axum server,
//!   [`respond`]: its answers, whole or streamed;
//!   [`tokenize`]: vLLM's tokenizer endpoints;
//!   [`batch`]: one response over the requests of a list of prompts;
//! - [`tools`]: tool calling (the tools in the prompt, the grammar of a forced call, calls read
//!   from the answer);
//! - [`structured`]: structured output (`response_format`, grammar-constrained decoding);
//! - [`metrics`]: the Prometheus metrics.
//!
//! The engine is a library: another program can start an [`engine::Engine`] and submit
//! requests without the HTTP front.

pub mod api;
pub mod batch;
pub mod cli;
pub mod config;
pub mod conversation;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod model;
pub mod respond;
pub mod sampler;
pub mod staging;
pub mod structured;
pub mod text;
pub mod tokenize;
pub mod tools;
