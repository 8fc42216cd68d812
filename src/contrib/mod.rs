//! Built-in runtimes for "bring your own codegen" backends, and the runtime library functions
//! compiled models call (`tvm.contrib.sort.*`, `tvm.contrib.random.*`, `relax.run.*`); docs/runtime_globals.md lists them.

pub mod elements;
pub mod examplejson;
pub mod random;
pub mod set_ops;
pub mod shape_ops;
pub mod sort;
