//! tvmrt: a runtime for libraries compiled by Apache TVM, behind TVM's two C ABIs.
//!
//! The core is one object model ([`object`]) and one value type ([`value::Any`], laid out as
//! tvm-ffi's `TVMFFIAny`). Functions ([`function`]) and the global registry are shared by the
//! classic door (`TVMFunc*`, `TVMMod*`, ...) and the tvm-ffi door (`TVMFFI*`), both in [`capi`],
//! the only place with exported C functions.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
pub mod backend;
#[macro_use]
pub mod capi;
pub mod cold_sort;
#[cfg(feature = "contrib")]
pub mod contrib;
pub mod device;
// Not scanned for tvmrt.h: tvm-ffi's C++ ABI declares C++ functions and exports no C ones.
/// cbindgen:ignore
pub mod cxx;
pub mod dtype;
pub mod error;
pub mod function;
mod globals;
#[cfg(feature = "graph")]
pub mod graph;
pub mod introspect;
#[cfg(feature = "llm")]
pub mod llm;
pub mod logging;
pub mod mapped;
pub mod module;
pub mod object;
pub mod pack;
#[cfg(feature = "profiling")]
pub mod profiling;
pub mod raised;
pub mod reflection;
#[cfg(feature = "rpc")]
pub mod rpc;
pub mod tensor;
pub mod unwind_guard;
pub mod value;
#[cfg(feature = "vm")]
pub mod vm;

pub use error::{Error, Result};
pub use function::Function;
pub use value::{Any, AnyView};
