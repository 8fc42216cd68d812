//! The C doors: every `extern "C"` function of tvmrt lives below this module (and, in
//! `cxx_abi`, the C++ functions and data tvm-ffi's C++ headers declare).
//!
//! Each export is a thin translation onto safe Rust wrapped in [`boundary::run`] (through the
//! `ffi_try!` macro): panics are caught, errors become the thread's raised error, and the
//! function returns 0 on success and -1 on failure, as both of TVM's C APIs do.

#[macro_use]
pub mod boundary;
pub mod backend;
pub mod classic_error;
pub mod classic_extra;
pub mod classic_func;
// Not scanned for tvmrt.h: tvm-ffi's C++ functions, declared by tvm-ffi's C++ headers.
/// cbindgen:ignore
#[cfg(tvmrt_cxx)]
pub mod cxx_abi;
pub mod dlpack;
pub mod env;
pub mod ffi_core;
pub mod ffi_misc;
pub mod ffi_types;
pub mod module;
pub mod tensor;
