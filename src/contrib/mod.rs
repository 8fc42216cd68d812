//! Built-in runtimes for "bring your own codegen" backends.

pub mod examplejson;
