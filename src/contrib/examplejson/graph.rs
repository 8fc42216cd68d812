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
use crate::error::{Error, Result};

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
    /// Parses and validates `text` (shapes, ids, operands, broadcasting) and plans execution.
    pub fn parse(text: &str) -> Result<Graph> {
        let mut subgraphs: Vec<Subgraph> = Vec::new();
        let mut current: Option<Builder> = None;
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let tokens: Vec<&str> = raw.split_whitespace().collect();
            let Some(&head) = tokens.first() else {
                continue;
            };
            if tokens.len() == 1 && head != "input" && Op::from_name(head).is_none() {
                if !is_identifier(head) {
                    return Err(syntax(
                        line,
                        format!("expected a subgraph name, 'input' or an op, found '{head}'"),
                    ));
                }
                if let Some(done) = current.take() {
                    subgraphs.push(done.finish()?);
                }
                if let Some(prev) = subgraphs.iter().find(|s| s.name == head) {
                    return Err(syntax(
                        line,
                        format!(
                            "subgraph '{head}' is defined twice (first at line {})",
                            prev.line
                        ),
                    ));
                }
                current = Some(Builder::new(head, line));
                continue;
            }
            let Some(builder) = current.as_mut() else {
                return Err(syntax(
                    line,
                    format!("'{head}' statement before any subgraph name line"),
                ));
            };
            if head == "input" {
                builder.add_input(line, &tokens)?;
            } else if let Some(op) = Op::from_name(head) {
                builder.add_compute(line, op, &tokens)?;
            } else {
                return Err(syntax(
                    line,
                    format!("unknown op '{head}' (known ops: {OP_NAMES})"),
                ));
            }
        }
        if let Some(done) = current.take() {
            subgraphs.push(done.finish()?);
        }
        if subgraphs.is_empty() {
            return Err(Error::value("ExampleJSON text declares no subgraph"));
        }
        Ok(Graph {
            text: text.to_owned(),
            subgraphs,
        })
    }

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

/// A `ValueError` naming the line.
fn syntax(line: usize, what: String) -> Error {
    Error::value(format!("ExampleJSON line {line}: {what}"))
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The subgraph being read.
struct Builder {
    name: String,
    line: usize,
    nodes: Vec<Node>,
    num_inputs: usize,
}

impl Builder {
    fn new(name: &str, line: usize) -> Self {
        Builder {
            name: name.to_owned(),
            line,
            nodes: Vec::new(),
            num_inputs: 0,
        }
    }

    /// Parses a node id and checks it follows the previous one.
    fn new_id(&self, line: usize, token: Option<&&str>) -> Result<u32> {
        let Some(token) = token else {
            return Err(syntax(line, "missing node id".to_owned()));
        };
        let id: u32 = token
            .parse()
            .map_err(|_| syntax(line, format!("bad node id '{token}'")))?;
        if let Some(last) = self.nodes.last() {
            if self.index_of(id).is_some() {
                return Err(syntax(
                    line,
                    format!("duplicate node id {id} in subgraph '{}'", self.name),
                ));
            }
            if id < last.id {
                return Err(syntax(
                    line,
                    format!(
                        "node id {id} is out of order (ids must increase; previous id {})",
                        last.id
                    ),
                ));
            }
        }
        Ok(id)
    }

    /// Index of node `id` (ids increase strictly, so the list is sorted).
    fn index_of(&self, id: u32) -> Option<usize> {
        self.nodes.binary_search_by_key(&id, |n| n.id).ok()
    }

    fn add_input(&mut self, line: usize, tokens: &[&str]) -> Result<()> {
        let id = self.new_id(line, tokens.get(1))?;
        let shape = parse_shape(line, &tokens[2..])?;
        self.nodes.push(Node {
            id,
            kind: NodeKind::Input {
                arg: self.num_inputs,
            },
            shape,
            line,
        });
        self.num_inputs += 1;
        Ok(())
    }

    fn add_compute(&mut self, line: usize, op: Op, tokens: &[&str]) -> Result<()> {
        let id = self.new_id(line, tokens.get(1))?;
        if tokens.get(2) != Some(&"inputs:") {
            return Err(syntax(
                line,
                format!("expected 'inputs:' after '{} {id}'", tokens[0]),
            ));
        }
        let rest = &tokens[3..];
        let Some(shape_at) = rest.iter().position(|t| *t == "shape:") else {
            return Err(syntax(
                line,
                "expected 'shape:' after the operand ids".to_owned(),
            ));
        };
        let mut operands = Vec::with_capacity(shape_at);
        for token in &rest[..shape_at] {
            let operand: u32 = token
                .parse()
                .map_err(|_| syntax(line, format!("bad operand id '{token}'")))?;
            let Some(index) = self.index_of(operand) else {
                return Err(syntax(
                    line,
                    format!(
                        "node {id} refers to node {operand}, which is not defined before it in \
                         subgraph '{}'",
                        self.name
                    ),
                ));
            };
            operands.push(index);
        }
        if operands.len() != op.arity() {
            return Err(syntax(
                line,
                format!(
                    "node {id} ({}) takes {} operand(s), got {}",
                    op.name(),
                    op.arity(),
                    operands.len()
                ),
            ));
        }
        let shape = parse_shape(line, &rest[shape_at + 1..])?;
        let operand_shapes: Vec<&[usize]> = operands
            .iter()
            .map(|&i| self.nodes[i].shape.as_slice())
            .collect();
        let result = operand_shapes
            .iter()
            .try_fold(Vec::new(), |acc, s| broadcast_shapes(&acc, s));
        if result.as_deref() != Some(shape.as_slice()) {
            let listed: Vec<String> = operand_shapes.iter().map(|s| format!("{s:?}")).collect();
            return Err(syntax(
                line,
                format!(
                    "node {id} ({}): operand shape(s) {} do not broadcast to the declared shape \
                     {shape:?}",
                    op.name(),
                    listed.join(" and ")
                ),
            ));
        }
        self.nodes.push(Node {
            id,
            kind: NodeKind::Compute { op, operands },
            shape,
            line,
        });
        Ok(())
    }

    fn finish(self) -> Result<Subgraph> {
        if !self
            .nodes
            .iter()
            .any(|n| matches!(n.kind, NodeKind::Compute { .. }))
        {
            return Err(syntax(
                self.line,
                format!("subgraph '{}' has no op node", self.name),
            ));
        }
        if !matches!(
            self.nodes.last().map(|n| &n.kind),
            Some(NodeKind::Compute { .. })
        ) {
            return Err(syntax(
                self.line,
                format!(
                    "subgraph '{}' ends with an input; its last statement must be an op (the result)",
                    self.name
                ),
            ));
        }
        let exec = Executor::new(&self.name, &self.nodes)?;
        let inputs = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n.kind, NodeKind::Input { .. }))
            .map(|(i, _)| i)
            .collect();
        Ok(Subgraph {
            name: self.name,
            line: self.line,
            nodes: self.nodes,
            inputs,
            exec,
        })
    }
}

/// Parses the dimensions of a shape, rejecting zero, huge and too many dimensions.
fn parse_shape(line: usize, tokens: &[&str]) -> Result<Vec<usize>> {
    if tokens.len() > MAX_RANK {
        return Err(syntax(
            line,
            format!(
                "shape has {} dimensions, more than {MAX_RANK}",
                tokens.len()
            ),
        ));
    }
    let mut shape = Vec::with_capacity(tokens.len());
    let mut total: u64 = 1;
    for token in tokens {
        let dim: u64 = token.parse().map_err(|_| {
            syntax(
                line,
                format!("bad dimension '{token}' (expected a positive integer)"),
            )
        })?;
        if dim == 0 || dim > MAX_ELEMENTS {
            return Err(syntax(
                line,
                format!("dimension {dim} is out of range (1 to 2^31)"),
            ));
        }
        // Both factors are at most 2^31, so the product fits in u64.
        total *= dim;
        if total > MAX_ELEMENTS {
            return Err(syntax(
                line,
                format!("shape [{}] has more than 2^31 elements", tokens.join(", ")),
            ));
        }
        // dim <= 2^31 fits usize on the 64-bit targets tvmrt supports; checked for 32-bit.
        shape.push(
            usize::try_from(dim)
                .map_err(|_| syntax(line, format!("dimension {dim} does not fit this machine")))?,
        );
    }
    Ok(shape)
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
pub(super) const GUIDE_SEED: &str = include_str!("../../../examples/byoc/subgraph_0.examplejson");

#[cfg(test)]
mod tests {
    use super::*;

    use super::GUIDE_SEED as SEED;

    fn err(text: &str) -> String {
        let e = Graph::parse(text).expect_err("text should be rejected");
        assert_eq!(e.kind, "ValueError");
        e.message.clone()
    }

    #[test]
    fn parses_the_guide_subgraph() {
        let g = Graph::parse(SEED).unwrap();
        assert_eq!(g.subgraph_names(), vec!["subgraph_0".to_owned()]);
        assert_eq!(g.text(), SEED);
        let s = g.subgraph("subgraph_0").unwrap();
        assert_eq!(s.name(), "subgraph_0");
        assert_eq!(s.num_inputs(), 4);
        assert_eq!(s.input_shape(3), Some(&[10usize, 10][..]));
        assert_eq!(s.input_shape(4), None);
        assert_eq!(s.output_shape(), &[10, 10]);
        let nodes = s.nodes();
        assert_eq!(nodes.len(), 7);
        assert_eq!(nodes[2].kind, NodeKind::Input { arg: 2 });
        assert_eq!(
            nodes[5].kind,
            NodeKind::Compute {
                op: Op::Sub,
                operands: vec![4, 2]
            }
        );
        assert_eq!((nodes[6].id, nodes[6].line), (6, 8));
        assert!(g.subgraph("subgraph_1").is_none());
    }

    #[test]
    fn parses_tvm_test_text_with_two_subgraphs_and_aliases() {
        // tests/python/relay/test_external_runtime.py restarts ids per subgraph and has no
        // trailing newline; Relay op names are aliases.
        let text = "json_rt_0\ninput 0 10 10\ninput 1 10 10\nadd 2 inputs: 0 1 shape: 10 10\n\
                    \r\n   \njson_rt_1\ninput 0 10\ninput 1 10\r\nsubtract 2 inputs: 0 1 shape: 10\n\
                    multiply 3 inputs: 2 2 shape: 10\ndivide 7 inputs: 3 0 shape: 10\n\
                    relu 9 inputs: 7 shape: 10";
        let g = Graph::parse(text).unwrap();
        assert_eq!(g.subgraph_names(), vec!["json_rt_0", "json_rt_1"]);
        let s = g.subgraph("json_rt_1").unwrap();
        let ops: Vec<Op> = s
            .nodes()
            .iter()
            .filter_map(|n| match &n.kind {
                NodeKind::Compute { op, .. } => Some(*op),
                NodeKind::Input { .. } => None,
            })
            .collect();
        assert_eq!(ops, vec![Op::Sub, Op::Mul, Op::Div, Op::Relu]);
        assert_eq!(s.output_shape(), &[10]);
        assert_eq!(g.subgraphs().len(), 2);
    }

    #[test]
    fn accepts_broadcasting_and_scalars() {
        let text = "sg\ninput 0 4 3\ninput 1 3\ninput 2\ninput 3 4 1\n\
                    add 4 inputs: 0 1 shape: 4 3\nmul 5 inputs: 4 2 shape: 4 3\n\
                    maximum 6 inputs: 3 1 shape: 4 3\nminimum 7 inputs: 2 2 shape:\n\
                    sub 8 inputs: 6 5 shape: 4 3\n";
        let g = Graph::parse(text).unwrap();
        let s = g.subgraph("sg").unwrap();
        assert_eq!(s.input_shape(2), Some(&[][..]));
        assert_eq!(s.nodes()[7].shape, Vec::<usize>::new());
    }

    #[test]
    fn op_names_round_trip() {
        for op in [
            Op::Add,
            Op::Sub,
            Op::Mul,
            Op::Div,
            Op::Maximum,
            Op::Minimum,
            Op::Relu,
        ] {
            assert_eq!(Op::from_name(op.name()), Some(op));
            assert_eq!(op.arity(), if op == Op::Relu { 1 } else { 2 });
        }
        assert_eq!(Op::from_name("conv2d"), None);
    }

    #[test]
    fn rejects_unknown_op_with_name_and_line() {
        let m = err("subgraph_0\ninput 0 2\nconv2d 1 inputs: 0 shape: 2\n");
        assert_eq!(
            m,
            "ExampleJSON line 3: unknown op 'conv2d' (known ops: add, sub, mul, div, maximum, \
             minimum, relu)"
        );
    }

    #[test]
    fn rejects_syntax_errors_with_line() {
        let cases: &[(&str, &str)] = &[
            (
                "s\ninput 0 2\nadd 1 0 0 shape: 2\n",
                "ExampleJSON line 3: expected 'inputs:' after 'add 1'",
            ),
            (
                "s\ninput 0 2\nadd 1 inputs: 0 0 2\n",
                "ExampleJSON line 3: expected 'shape:' after the operand ids",
            ),
            ("s\ninput x 2\n", "ExampleJSON line 2: bad node id 'x'"),
            ("s\ninput -1 2\n", "ExampleJSON line 2: bad node id '-1'"),
            ("s\ninput\n", "ExampleJSON line 2: missing node id"),
            ("s\ninput 0 2\nadd\n", "ExampleJSON line 3: missing node id"),
            (
                "s\ninput 0 2\nadd 1 inputs: 0 zero shape: 2\n",
                "ExampleJSON line 3: bad operand id 'zero'",
            ),
            (
                "s\ninput 0 2 x\n",
                "ExampleJSON line 2: bad dimension 'x' (expected a positive integer)",
            ),
            (
                "s\ninput 0 2\nadd 1 inputs: 0 0 shape: -2\n",
                "ExampleJSON line 3: bad dimension '-2' (expected a positive integer)",
            ),
            (
                "s\n42\n",
                "ExampleJSON line 2: expected a subgraph name, 'input' or an op, found '42'",
            ),
            (
                "s\ninput 0 2\nrelu 1 inputs: 0 0 shape: 2\n",
                "ExampleJSON line 3: node 1 (relu) takes 1 operand(s), got 2",
            ),
            (
                "s\ninput 0 2\nadd 1 inputs: 0 shape: 2\n",
                "ExampleJSON line 3: node 1 (add) takes 2 operand(s), got 1",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(&err(text), want, "for {text:?}");
        }
    }

    #[test]
    fn rejects_bad_ids() {
        assert_eq!(
            err("s\ninput 0 2\nadd 1 inputs: 0 5 shape: 2\n"),
            "ExampleJSON line 3: node 1 refers to node 5, which is not defined before it in \
             subgraph 's'"
        );
        // A node cannot read itself.
        assert_eq!(
            err("s\ninput 0 2\nadd 1 inputs: 0 1 shape: 2\n"),
            "ExampleJSON line 3: node 1 refers to node 1, which is not defined before it in \
             subgraph 's'"
        );
        assert_eq!(
            err("s\ninput 0 2\ninput 0 2\n"),
            "ExampleJSON line 3: duplicate node id 0 in subgraph 's'"
        );
        assert_eq!(
            err("s\ninput 3 2\ninput 5 2\nadd 4 inputs: 3 5 shape: 2\n"),
            "ExampleJSON line 4: node id 4 is out of order (ids must increase; previous id 5)"
        );
        // Ids are per subgraph: the second subgraph cannot see the first one's nodes.
        assert_eq!(
            err("a\ninput 0 2\nrelu 1 inputs: 0 shape: 2\nb\ninput 5 2\nrelu 6 inputs: 1 shape: 2\n"),
            "ExampleJSON line 6: node 6 refers to node 1, which is not defined before it in \
             subgraph 'b'"
        );
    }

    #[test]
    fn rejects_structure_errors() {
        assert_eq!(
            err("input 0 2\n"),
            "ExampleJSON line 1: 'input' statement before any subgraph name line"
        );
        assert_eq!(
            err("\n\nadd 1 inputs: 0 0 shape: 2\n"),
            "ExampleJSON line 3: 'add' statement before any subgraph name line"
        );
        assert_eq!(
            err("a\nb\ninput 0 1\nrelu 1 inputs: 0 shape: 1\n"),
            "ExampleJSON line 1: subgraph 'a' has no op node"
        );
        assert_eq!(
            err("a\ninput 0 1\nrelu 1 inputs: 0 shape: 1\nb\ninput 0 1\n"),
            "ExampleJSON line 4: subgraph 'b' has no op node"
        );
        assert_eq!(
            err("a\ninput 0 1\nrelu 1 inputs: 0 shape: 1\ninput 2 1\n"),
            "ExampleJSON line 1: subgraph 'a' ends with an input; its last statement must be an \
             op (the result)"
        );
        assert_eq!(
            err("a\ninput 0 1\nrelu 1 inputs: 0 shape: 1\na\ninput 0 1\nrelu 1 inputs: 0 shape: 1\n"),
            "ExampleJSON line 4: subgraph 'a' is defined twice (first at line 1)"
        );
        assert_eq!(err(""), "ExampleJSON text declares no subgraph");
        assert_eq!(err(" \n\n"), "ExampleJSON text declares no subgraph");
    }

    #[test]
    fn rejects_absurd_shapes() {
        assert_eq!(
            err("s\ninput 0 10 0\n"),
            "ExampleJSON line 2: dimension 0 is out of range (1 to 2^31)"
        );
        assert_eq!(
            err("s\ninput 0 4294967296\n"),
            "ExampleJSON line 2: dimension 4294967296 is out of range (1 to 2^31)"
        );
        assert_eq!(
            err("s\ninput 0 99999999999999999999999\n"),
            "ExampleJSON line 2: bad dimension '99999999999999999999999' (expected a positive \
             integer)"
        );
        assert_eq!(
            err("s\ninput 0 65536 65536\n"),
            "ExampleJSON line 2: shape [65536, 65536] has more than 2^31 elements"
        );
        let rank33 = format!("s\ninput 0{}\n", " 1".repeat(33));
        assert_eq!(
            err(&rank33),
            "ExampleJSON line 2: shape has 33 dimensions, more than 32"
        );
        // Exactly 2^31 elements is allowed: nothing is allocated at parse time.
        assert!(
            Graph::parse("s\ninput 0 32768 65536\nrelu 1 inputs: 0 shape: 32768 65536\n").is_ok()
        );
    }

    #[test]
    fn rejects_operands_that_do_not_broadcast() {
        assert_eq!(
            err("s\ninput 0 10 10\ninput 1 3\nadd 2 inputs: 0 1 shape: 10 10\n"),
            "ExampleJSON line 4: node 2 (add): operand shape(s) [10, 10] and [3] do not broadcast \
             to the declared shape [10, 10]"
        );
        // Operands broadcast, but not to the declared shape.
        assert_eq!(
            err("s\ninput 0 10\ninput 1 10\nmul 2 inputs: 0 1 shape: 5 10\n"),
            "ExampleJSON line 4: node 2 (mul): operand shape(s) [10] and [10] do not broadcast to \
             the declared shape [5, 10]"
        );
        assert_eq!(
            err("s\ninput 0 4 1\nrelu 1 inputs: 0 shape: 4 3\n"),
            "ExampleJSON line 3: node 1 (relu): operand shape(s) [4, 1] do not broadcast to the \
             declared shape [4, 3]"
        );
    }

    #[test]
    fn rejects_huge_broadcast_intermediates() {
        // Two 2^30-element broadcast intermediates feeding a 2^31-element result: 2^31 + 2^31
        // scratch elements would be needed.
        let text = "s\ninput 0 2 1 1\ninput 1 1 32768 32768\n\
                    add 2 inputs: 1 1 shape: 1 32768 32768\nmul 3 inputs: 2 2 shape: 1 32768 32768\n\
                    sub 4 inputs: 3 0 shape: 2 32768 32768\n\
                    input 5 1 1 1\nadd 6 inputs: 1 5 shape: 1 32768 32768\n\
                    add 7 inputs: 4 6 shape: 2 32768 32768\n";
        assert_eq!(
            err(text),
            "ExampleJSON subgraph 's': its broadcast intermediates need 3221225472 elements, more \
             than the limit 2^31"
        );
    }
}
