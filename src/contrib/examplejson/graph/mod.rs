//! The ExampleJSON text format: parsing it once into validated subgraphs.
//!
//! ExampleJSON is the toy graph format of TVM's "Bring Your Own Codegen" guide (TVM 0.8 docs,
//! section "Implement a Codegen for Your Representation") and of apache/tvm
//! `src/runtime/contrib/example_ext_runtime/example_ext_runtime.cc`. It is plain text, one
//! statement per line:
//!
//! ```text
//! subgraph_0
//!   input 0 10 10
//!   input 1 10 10
//!   add 2 inputs: 0 1 shape: 10 10
//! ```
//!
//! - A line holding a single name opens a subgraph; the whole token is the function name. The
//!   guide writes `subgraph_0`, TVM's own test (`tests/python/relay/test_external_runtime.py`)
//!   writes `json_rt_0`, so any C identifier that is not a keyword is accepted.
//! - `input <id> <dims...>` declares an input. The subgraph's function takes its inputs in
//!   declaration order, then one output tensor.
//! - `<op> <id> inputs: <ids...> shape: <dims...>` computes node `id` from earlier nodes.
//!   Ops: `add`, `sub`, `mul`, `div`, `maximum`, `minimum` (binary, numpy-style broadcasting:
//!   shapes aligned on the right, each dimension equal or 1) and `relu` (unary). Relay's names
//!   `subtract`, `multiply` and `divide` are accepted as aliases.
//! - The last node of a subgraph is its result.
//!
//! Node ids are local to a subgraph (TVM's test restarts them at 0 for every subgraph) and must
//! increase strictly. Blank lines are ignored. Everything else is an error naming the line.

use super::exec::Executor;

/// Largest number of elements of any declared tensor (and of any single dimension), so that a
/// typo in a shape cannot make the runtime allocate gigabytes.
pub const MAX_ELEMENTS: u64 = 1 << 31;

/// Largest rank accepted for a declared shape.
pub const MAX_RANK: usize = 32;

/// An elementwise operator of ExampleJSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `a + b` (integers wrap).
    Add,
    /// `a - b` (integers wrap).
    Sub,
    /// `a * b` (integers wrap).
    Mul,
    /// `a / b`; integers truncate toward zero, an integer division by zero is an error and
    /// `MIN / -1` wraps to `MIN`.
    Div,
    /// `a > b ? a : b`, as TVM's LLVM codegen lowers `max` (codegen_llvm.cc, `MaxNode`).
    Maximum,
    /// `a < b ? a : b`, as TVM's LLVM codegen lowers `min`.
    Minimum,
    /// `x > 0 ? x : 0` (so NaN becomes 0, like TVM's `max(x, 0)`).
    Relu,
}

impl Op {
    /// The op for a name used in the text, including the Relay aliases.
    pub fn from_name(name: &str) -> Option<Op> {
        Some(match name {
            "add" => Op::Add,
            "sub" | "subtract" => Op::Sub,
            "mul" | "multiply" => Op::Mul,
            "div" | "divide" => Op::Div,
            "maximum" => Op::Maximum,
            "minimum" => Op::Minimum,
            "relu" => Op::Relu,
            _ => return None,
        })
    }

    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Sub => "sub",
            Op::Mul => "mul",
            Op::Div => "div",
            Op::Maximum => "maximum",
            Op::Minimum => "minimum",
            Op::Relu => "relu",
        }
    }

    /// Number of operands.
    pub fn arity(self) -> usize {
        match self {
            Op::Relu => 1,
            _ => 2,
        }
    }
}

const OP_NAMES: &str = "add, sub, mul, div, maximum, minimum, relu";

/// What a node is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// The `arg`-th argument of the subgraph's function.
    Input {
        /// Position among the subgraph's inputs (declaration order).
        arg: usize,
    },
    /// An op applied to earlier nodes.
    Compute {
        /// The operator.
        op: Op,
        /// The operands, as indices into [`Subgraph::nodes`] (always earlier nodes).
        operands: Vec<usize>,
    },
}

/// One statement of a subgraph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The id written in the text.
    pub id: u32,
    /// Input or computation.
    pub kind: NodeKind,
    /// The declared shape (every dimension in `1..=MAX_ELEMENTS`).
    pub shape: Vec<usize>,
    /// 1-based line of the statement, for messages.
    pub line: usize,
}

impl Node {
    /// Number of elements of the declared shape (at most [`MAX_ELEMENTS`]).
    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// One subgraph: a function taking its inputs then one output tensor.
pub struct Subgraph {
    pub(super) name: String,
    /// Line of the header, for messages.
    pub(super) line: usize,
    pub(super) nodes: Vec<Node>,
    /// Indices into `nodes` of the inputs, in argument order.
    pub(super) inputs: Vec<usize>,
    pub(super) exec: Executor,
}

impl std::fmt::Debug for Subgraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subgraph")
            .field("name", &self.name)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl Subgraph {
    /// The function name (the header token).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of inputs; the function takes one more argument, the output.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Declared shape of input `i` (argument order).
    pub fn input_shape(&self, i: usize) -> Option<&[usize]> {
        self.inputs.get(i).map(|&n| self.nodes[n].shape.as_slice())
    }

    /// Declared shape of the result (the last node).
    pub fn output_shape(&self) -> &[usize] {
        // A subgraph always has at least one op node (checked by the parser).
        &self.nodes[self.nodes.len() - 1].shape
    }

    /// All statements, in text order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
}

/// A parsed ExampleJSON text: its subgraphs, in text order, and the text itself.
#[derive(Debug)]
pub struct Graph {
    text: String,
    subgraphs: Vec<Subgraph>,
}

impl Graph {
    /// The subgraph (function) names, in text order.
    pub fn subgraph_names(&self) -> Vec<String> {
        self.subgraphs.iter().map(|s| s.name.clone()).collect()
    }

    /// The subgraph called `name`.
    pub fn subgraph(&self, name: &str) -> Option<&Subgraph> {
        self.subgraphs.iter().find(|s| s.name == name)
    }

    /// All subgraphs, in text order.
    pub fn subgraphs(&self) -> &[Subgraph] {
        &self.subgraphs
    }

    /// The original text; the module saves exactly this (SaveToBinary).
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Numpy broadcasting of two shapes: aligned on the right, each pair equal or one of them 1.
pub(super) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for (i, slot) in out.iter_mut().enumerate() {
        let da = dim_aligned(a, rank, i);
        let db = dim_aligned(b, rank, i);
        *slot = match (da, db) {
            _ if da == db => da,
            (1, d) | (d, 1) => d,
            _ => return None,
        };
    }
    Some(out)
}

/// Dimension `i` of `shape` seen as rank `rank` (missing leading dimensions are 1).
pub(super) fn dim_aligned(shape: &[usize], rank: usize, i: usize) -> usize {
    let pad = rank - shape.len();
    if i < pad {
        1
    } else {
        shape[i - pad]
    }
}

/// The subgraph of TVM's BYOC guide, shared by the unit tests of this module and its siblings.
#[cfg(test)]
pub(super) const GUIDE_SEED: &str =
    include_str!("../../../../examples/byoc/subgraph_0.examplejson");

mod parse;
#[cfg(test)]
mod tests;
