//! The ExampleJSON BYOC runtime: TVM's reference custom runtime module (type key
//! `examplejson`), whose payload is a small text graph of elementwise ops.
//!
//! - [`graph`]: the text format, parsed once into validated [`Subgraph`]s.
//! - [`exec`]: the execution plan, kernels and the DLTensor entry point [`Subgraph::run`].

pub mod exec;
pub mod graph;

pub use exec::Element;
pub use graph::{Graph, Node, NodeKind, Op, Subgraph, MAX_ELEMENTS, MAX_RANK};

// ---------------------------------------------------------------------------------------------
// MODULE GLUE (to be added by the lead): the `examplejson` module kind over `Graph`:
// GetFunction(name) -> a function calling `Subgraph::run` on its DLTensor arguments,
// SaveToBinary -> `Graph::text()` as one string, and the registrations
// `runtime.module.loadbinary_examplejson`, `runtime.module.loadfile_examplejson`,
// `module.examplejson_module_create`.
// ---------------------------------------------------------------------------------------------
