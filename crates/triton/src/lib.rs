//! `libtriton_tvmrt.so`: a backend for NVIDIA's Triton Inference Server that serves libraries
//! TVM compiled (Relax models, classic graph executor models, compiled kernels) on tvmrt.
//!
//! A model is a repository entry `M/config.pbtxt` with `backend: "tvmrt"` and `M/1/model.so`,
//! plus `M/1/weights/` (a tensor cache) for a Relax model whose weights are kept out of its
//! library ([`weights`]).
//! Triton opens this library from `<backend-directory>/tvmrt/` and calls the `TRITONBACKEND_*`
//! functions of [`entry`]. What is not Triton's is the `tvmrt-models` crate, shared with
//! `tvmrt serve`'s OIP server: the model is loaded and its configuration completed from it
//! (`tvmrt_models::load`), each instance runs its own executor (`tvmrt_models::runner`), and
//! each call of `ModelInstanceExecute` runs its requests in as few model calls as their shapes
//! allow (`tvmrt_models::batch`); [`server`] wraps Triton's requests and responses for it.
//! The library also exports tvmrt's C API, which the model libraries it opens
//! call back into: Triton opens backends with `RTLD_LOCAL`, and tvmrt's loader moves this
//! library into the global scope when a model library needs its symbols (tvmrt's
//! `module::runtime_scope`).

// The unit tests build without `entry` (whose Triton symbols only the server defines), which
// leaves the wrappers it alone uses unused there.
#![cfg_attr(test, allow(dead_code))]

#[cfg(not(test))]
mod entry;
mod server;
mod sys;
