//! Reading the ExampleJSON text: line by line into checked subgraphs, each planned for
//! execution as it closes.

use super::{
    broadcast_shapes, Graph, Node, NodeKind, Op, Subgraph, MAX_ELEMENTS, MAX_RANK, OP_NAMES,
};
use crate::contrib::examplejson::exec::Executor;
use crate::error::{Error, Result};

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
