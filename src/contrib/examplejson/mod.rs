//! The ExampleJSON BYOC runtime: TVM's reference custom runtime module (type key
//! `examplejson`), whose payload is a small text graph of elementwise ops.
//!
//! - [`graph`]: the text format, parsed once into validated [`Subgraph`]s.
//! - [`exec`]: the execution plan, kernels and the DLTensor entry point [`Subgraph::run`].
//! - [`module`]: the `examplejson` module kind over a [`Graph`] and its registered loaders.

pub mod exec;
pub mod graph;
pub mod module;

pub use exec::Element;
pub use graph::{Graph, Node, NodeKind, Op, Subgraph, MAX_ELEMENTS, MAX_RANK};
pub use module::ExampleJsonModule;
