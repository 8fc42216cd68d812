//! The graph JSON that `relay.build` writes (TVM 0.7 – 0.19), read as strictly as TVM's
//! `GraphExecutor::Load` and checked further, so that nothing in it can make the executor index
//! out of range: every error names the field.
//!
//! ```text
//! { "nodes": [ {"op": "null", "name": "x", "inputs": []},
//!              {"op": "tvm_op", "name": "f", "inputs": [[0, 0, 0]],
//!               "attrs": {"func_name": "f", "num_inputs": "1", "num_outputs": "1",
//!                         "flatten_data": "0"}} ],
//!   "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
//!   "attrs": { "dltype": ["list_str", ["float32", "float32"]],
//!              "storage_id": ["list_int", [0, 1]],
//!              "shape": ["list_shape", [[4], [4]]],
//!              "device_index": ["list_int", [1, 1]] } }   // optional
//! ```

use serde_json::{Map, Value};

use crate::abi::DLDataType;
use crate::dtype::dtype_from_str;
use crate::error::{Error, Result};

/// An output of a node: `[node_id, index, version]` (version optional, ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    pub node_id: usize,
    pub index: usize,
}

/// What a node does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeOp {
    /// A graph input or parameter (`"op": "null"`).
    Input,
    /// A call of a compiled function (`"op": "tvm_op"`); `__nop` and `__copy` are built in.
    Call(OpParam),
}

/// The attributes of a `tvm_op` node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpParam {
    pub func_name: String,
    pub num_inputs: usize,
    pub num_outputs: usize,
    pub flatten_data: bool,
    /// Every attribute as written (`hash`, layouts, ...), for the profiler.
    pub attrs: Vec<(String, String)>,
}

/// A node of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub op: NodeOp,
    pub name: String,
    pub inputs: Vec<NodeEntry>,
}

/// A parsed and checked graph.
#[derive(Clone, Debug)]
pub struct Graph {
    pub nodes: Vec<Node>,
    /// The input nodes (`arg_nodes`), graph inputs and parameters alike.
    pub arg_nodes: Vec<usize>,
    /// `node_row_ptr[n]` is node `n`'s first entry id; the last element is the entry count.
    pub node_row_ptr: Vec<usize>,
    /// The graph outputs (`heads`).
    pub heads: Vec<NodeEntry>,
    /// Per entry: data type, storage id, shape and (optional) device type.
    pub dltype: Vec<DLDataType>,
    pub dltype_names: Vec<String>,
    pub storage_id: Vec<usize>,
    pub shape: Vec<Vec<i64>>,
    pub device_index: Option<Vec<i32>>,
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::value(format!("invalid graph JSON: {what}"))
}

fn as_array<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| bad(format_args!("`{what}` must be an array, got {}", kind(v))))
}

fn as_index(v: &Value, what: &str) -> Result<usize> {
    v.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= u32::MAX as usize)
        .ok_or_else(|| {
            bad(format_args!(
                "`{what}` must be a non-negative integer, got {v}"
            ))
        })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn index_list(v: &Value, what: &str) -> Result<Vec<usize>> {
    as_array(v, what)?
        .iter()
        .enumerate()
        .map(|(i, x)| as_index(x, &format!("{what}[{i}]")))
        .collect()
}

fn node_entry(v: &Value, what: &str) -> Result<NodeEntry> {
    let items = as_array(v, what)?;
    if items.len() != 2 && items.len() != 3 {
        return Err(bad(format_args!(
            "`{what}` must be [node_id, index] or [node_id, index, version], got {} items",
            items.len()
        )));
    }
    Ok(NodeEntry {
        node_id: as_index(&items[0], &format!("{what}[0] (node id)"))?,
        index: as_index(&items[1], &format!("{what}[1] (output index)"))?,
    })
}

/// A `tvm_op` node's `attrs`: every value a string, as TVM's reader requires.
fn op_param(attrs: &Map<String, Value>, what: &str) -> Result<OpParam> {
    let text = |key: &str| -> Result<&str> {
        let v = attrs
            .get(key)
            .ok_or_else(|| bad(format_args!("{what}: `attrs` has no `{key}`")))?;
        v.as_str().ok_or_else(|| {
            bad(format_args!(
                "{what}: `attrs.{key}` must be a string, got {}",
                kind(v)
            ))
        })
    };
    let number = |key: &str| -> Result<usize> {
        let s = text(key)?;
        s.parse::<u32>().map(|n| n as usize).map_err(|_| {
            bad(format_args!(
                "{what}: `attrs.{key}` must be a non-negative integer, got \"{s}\""
            ))
        })
    };
    for (k, v) in attrs {
        if !v.is_string() {
            return Err(bad(format_args!(
                "{what}: `attrs.{k}` must be a string, got {}",
                kind(v)
            )));
        }
    }
    Ok(OpParam {
        func_name: text("func_name")?.to_string(),
        num_inputs: number("num_inputs")?,
        num_outputs: number("num_outputs")?,
        flatten_data: number("flatten_data")? != 0,
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect(),
    })
}

fn node(v: &Value, nid: usize) -> Result<Node> {
    let what = format!("nodes[{nid}]");
    let obj = v
        .as_object()
        .ok_or_else(|| bad(format_args!("`{what}` must be an object, got {}", kind(v))))?;
    for key in obj.keys() {
        if !matches!(
            key.as_str(),
            "op" | "name" | "inputs" | "attr" | "attrs" | "control_deps"
        ) {
            return Err(bad(format_args!("{what}: unknown key `{key}`")));
        }
    }
    let field = |key: &str| {
        obj.get(key)
            .ok_or_else(|| bad(format_args!("{what}: missing `{key}`")))
    };
    let op = field("op")?
        .as_str()
        .ok_or_else(|| bad(format_args!("{what}: `op` must be a string")))?;
    let name = field("name")?
        .as_str()
        .ok_or_else(|| bad(format_args!("{what}: `name` must be a string")))?
        .to_string();
    let inputs = as_array(field("inputs")?, &format!("{what}.inputs"))?
        .iter()
        .enumerate()
        .map(|(i, e)| node_entry(e, &format!("{what}.inputs[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    let attrs = obj.get("attrs").or_else(|| obj.get("attr"));
    let op = match op {
        "null" => NodeOp::Input,
        "tvm_op" => {
            let attrs = attrs
                .ok_or_else(|| bad(format_args!("{what} (`{name}`): tvm_op without `attrs`")))?
                .as_object()
                .ok_or_else(|| bad(format_args!("{what}: `attrs` must be an object")))?;
            NodeOp::Call(op_param(attrs, &format!("{what} (`{name}`)"))?)
        }
        other => {
            return Err(bad(format_args!(
                "{what} (`{name}`): op `{other}` is not supported (only `null` and `tvm_op`)"
            )))
        }
    };
    Ok(Node { op, name, inputs })
}

/// One `attrs` entry: `[type, values]` with the expected type tag.
fn tagged<'a>(v: &'a Value, key: &str, tag: &str) -> Result<&'a Vec<Value>> {
    let pair = as_array(v, &format!("attrs.{key}"))?;
    match pair.as_slice() {
        [Value::String(t), values] if t == tag => as_array(values, &format!("attrs.{key}[1]")),
        [Value::String(t), _] => Err(bad(format_args!(
            "`attrs.{key}` has type `{t}`, expected `{tag}`"
        ))),
        _ => Err(bad(format_args!(
            "`attrs.{key}` must be [\"{tag}\", [...]]"
        ))),
    }
}

impl Graph {
    /// Parses and checks graph JSON text.
    pub fn parse(text: &str) -> Result<Graph> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| bad(format_args!("not JSON: {e}")))?;
        let obj = root
            .as_object()
            .ok_or_else(|| bad("the top level must be an object"))?;
        for key in obj.keys() {
            if !matches!(
                key.as_str(),
                "nodes" | "arg_nodes" | "node_row_ptr" | "heads" | "attrs" | "metadata"
            ) {
                return Err(bad(format_args!("unknown key `{key}`")));
            }
        }
        let field = |key: &str| {
            obj.get(key)
                .ok_or_else(|| bad(format_args!("missing `{key}`")))
        };
        let nodes = as_array(field("nodes")?, "nodes")?
            .iter()
            .enumerate()
            .map(|(i, n)| node(n, i))
            .collect::<Result<Vec<_>>>()?;
        let arg_nodes = index_list(field("arg_nodes")?, "arg_nodes")?;
        let node_row_ptr = index_list(field("node_row_ptr")?, "node_row_ptr")?;
        let heads = as_array(field("heads")?, "heads")?
            .iter()
            .enumerate()
            .map(|(i, e)| node_entry(e, &format!("heads[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let attrs = field("attrs")?
            .as_object()
            .ok_or_else(|| bad("`attrs` must be an object"))?;
        let mut dltype_names = None;
        let mut storage_id = None;
        let mut shape = None;
        let mut device_index = None;
        for (key, v) in attrs {
            match key.as_str() {
                "dltype" => {
                    let names = tagged(v, key, "list_str")?
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            s.as_str().map(str::to_string).ok_or_else(|| {
                                bad(format_args!("`attrs.dltype[1][{i}]` must be a string"))
                            })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    dltype_names = Some(names);
                }
                "storage_id" => {
                    storage_id = Some(index_list(
                        &Value::Array(tagged(v, key, "list_int")?.clone()),
                        "attrs.storage_id[1]",
                    )?)
                }
                "device_index" => {
                    let list = tagged(v, key, "list_int")?;
                    let devs = list
                        .iter()
                        .enumerate()
                        .map(|(i, d)| {
                            d.as_i64()
                                .and_then(|d| i32::try_from(d).ok())
                                .ok_or_else(|| {
                                    bad(format_args!(
                                        "`attrs.device_index[1][{i}]` must be an integer"
                                    ))
                                })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    device_index = Some(devs);
                }
                "shape" => {
                    let list = tagged(v, key, "list_shape")?;
                    let mut shapes = Vec::with_capacity(list.len());
                    for (i, s) in list.iter().enumerate() {
                        let what = format!("attrs.shape[1][{i}]");
                        let dims = as_array(s, &what)?
                            .iter()
                            .map(|d| {
                                d.as_i64().filter(|&d| d >= 0).ok_or_else(|| {
                                    bad(format_args!(
                                        "`{what}` must hold non-negative integers, got {d}"
                                    ))
                                })
                            })
                            .collect::<Result<Vec<_>>>()?;
                        shapes.push(dims);
                    }
                    shape = Some(shapes);
                }
                // TVM skips other list_int / size_t / list_str attributes (storage_scope...).
                _ => {
                    let pair = as_array(v, &format!("attrs.{key}"))?;
                    let tag = pair.first().and_then(Value::as_str).unwrap_or("");
                    if !matches!(tag, "list_int" | "size_t" | "list_str") || pair.len() != 2 {
                        return Err(bad(format_args!(
                            "`attrs.{key}`: cannot skip an attribute of type `{tag}`"
                        )));
                    }
                }
            }
        }
        let dltype_names = dltype_names.ok_or_else(|| bad("`attrs` has no `dltype`"))?;
        let storage_id = storage_id.ok_or_else(|| bad("`attrs` has no `storage_id`"))?;
        let shape = shape.ok_or_else(|| bad("`attrs` has no `shape`"))?;
        let dltype = dltype_names
            .iter()
            .enumerate()
            .map(|(i, s)| {
                // TVM 0.19 reads "bool" (and "uint1") as `uint1`: held as `kDLBool` here.
                dtype_from_str(s)
                    .map(crate::dtype::classic_bool::from_classic)
                    .and_then(|t| crate::tensor::layout::check_dtype(t).map(|()| t))
                    .map_err(|e| bad(format_args!("`attrs.dltype[1][{i}]`: {}", e.message)))
            })
            .collect::<Result<Vec<_>>>()?;
        let graph = Graph {
            nodes,
            arg_nodes,
            node_row_ptr,
            heads,
            dltype,
            dltype_names,
            storage_id,
            shape,
            device_index,
        };
        graph.check()?;
        Ok(graph)
    }

    /// Number of node entries (outputs of all nodes).
    pub fn num_entries(&self) -> usize {
        *self
            .node_row_ptr
            .last()
            .expect("checked: node_row_ptr is not empty")
    }

    /// The entry id of output `index` of node `node_id`.
    pub fn entry_id(&self, e: NodeEntry) -> usize {
        self.node_row_ptr[e.node_id] + e.index
    }

    /// Cross-field checks: every index in range, every per-entry list of the right length.
    fn check(&self) -> Result<()> {
        let n = self.nodes.len();
        if self.node_row_ptr.len() != n + 1 {
            return Err(bad(format_args!(
                "`node_row_ptr` has {} items for {n} nodes (expected {})",
                self.node_row_ptr.len(),
                n + 1
            )));
        }
        if self.node_row_ptr[0] != 0 || self.node_row_ptr.windows(2).any(|w| w[0] > w[1]) {
            return Err(bad("`node_row_ptr` must start at 0 and never decrease"));
        }
        let entries = self.num_entries();
        for (key, len) in [
            ("dltype", self.dltype.len()),
            ("storage_id", self.storage_id.len()),
            ("shape", self.shape.len()),
        ] {
            if len != entries {
                return Err(bad(format_args!(
                    "`attrs.{key}` has {len} items for {entries} node entries"
                )));
            }
        }
        if let Some(d) = &self.device_index {
            if d.len() != entries {
                return Err(bad(format_args!(
                    "`attrs.device_index` has {} items for {entries} node entries",
                    d.len()
                )));
            }
        }
        if let Some(&sid) = self.storage_id.iter().find(|&&s| s >= entries.max(1)) {
            return Err(bad(format_args!(
                "`attrs.storage_id` {sid} is out of range: {entries} node entries need at most \
                 {entries} storage ids"
            )));
        }
        let outputs_of = |nid: usize| self.node_row_ptr[nid + 1] - self.node_row_ptr[nid];
        let check_entry = |e: NodeEntry, what: &str| -> Result<()> {
            if e.node_id >= n {
                return Err(bad(format_args!(
                    "{what} points to node {} past the end ({n} nodes)",
                    e.node_id
                )));
            }
            if e.index >= outputs_of(e.node_id) {
                return Err(bad(format_args!(
                    "{what} uses output {} of node {} (`{}`), which has {}",
                    e.index,
                    e.node_id,
                    self.nodes[e.node_id].name,
                    outputs_of(e.node_id)
                )));
            }
            Ok(())
        };
        for (nid, node) in self.nodes.iter().enumerate() {
            for (i, &e) in node.inputs.iter().enumerate() {
                check_entry(e, &format!("nodes[{nid}].inputs[{i}]"))?;
            }
            match &node.op {
                NodeOp::Input => {
                    if outputs_of(nid) != 1 {
                        return Err(bad(format_args!(
                            "input node {nid} (`{}`) has {} entries in `node_row_ptr`, not 1",
                            node.name,
                            outputs_of(nid)
                        )));
                    }
                }
                NodeOp::Call(p) => {
                    if p.num_outputs != outputs_of(nid) {
                        return Err(bad(format_args!(
                            "nodes[{nid}] (`{}`): `num_outputs` is {} but `node_row_ptr` gives \
                             it {} entries",
                            node.name,
                            p.num_outputs,
                            outputs_of(nid)
                        )));
                    }
                    if p.num_inputs != node.inputs.len() {
                        return Err(bad(format_args!(
                            "nodes[{nid}] (`{}`): `num_inputs` is {} but it has {} inputs",
                            node.name,
                            p.num_inputs,
                            node.inputs.len()
                        )));
                    }
                    let builtin_arity = match p.func_name.as_str() {
                        "__nop" => Some((1, 1)),
                        "__copy" => Some((1, 1)),
                        _ => None,
                    };
                    if let Some((ins, outs)) = builtin_arity {
                        if node.inputs.len() != ins || p.num_outputs != outs {
                            return Err(bad(format_args!(
                                "nodes[{nid}]: `{}` takes 1 input and 1 output",
                                p.func_name
                            )));
                        }
                    }
                }
            }
        }
        for (i, &a) in self.arg_nodes.iter().enumerate() {
            if a >= n {
                return Err(bad(format_args!(
                    "`arg_nodes[{i}]` points to node {a} past the end ({n} nodes)"
                )));
            }
            if self.nodes[a].op != NodeOp::Input {
                return Err(bad(format_args!(
                    "`arg_nodes[{i}]` is node {a} (`{}`), which is not an input (`null`) node",
                    self.nodes[a].name
                )));
            }
        }
        for (i, &h) in self.heads.iter().enumerate() {
            check_entry(h, &format!("heads[{i}]"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_NODES: &str = r#"{"nodes": [{"op": "null", "name": "x", "inputs": []},
        {"op": "tvm_op", "name": "f", "inputs": [[0, 0, 0]],
         "attrs": {"func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0",
                   "hash": "abc"}}],
        "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
        "attrs": {"dltype": ["list_str", ["float32", "float32"]],
                  "storage_id": ["list_int", [0, 1]],
                  "shape": ["list_shape", [[2, 3], [2, 3]]]}}"#;

    #[test]
    fn a_small_graph_parses() {
        let g = Graph::parse(TWO_NODES).unwrap();
        assert_eq!(g.nodes.len(), 2);
        assert_eq!(g.num_entries(), 2);
        assert_eq!(
            g.heads,
            [NodeEntry {
                node_id: 1,
                index: 0
            }]
        );
        assert_eq!(g.shape[1], [2, 3]);
        match &g.nodes[1].op {
            NodeOp::Call(p) => assert_eq!((p.func_name.as_str(), p.num_inputs), ("f", 1)),
            NodeOp::Input => panic!("node 1 is a call"),
        }
    }

    fn error_of(text: &str) -> String {
        Graph::parse(text).unwrap_err().message.clone()
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                TWO_NODES.replace("\"heads\": [[1, 0, 0]],", ""),
                "missing `heads`",
            ),
            (
                TWO_NODES.replace("\"arg_nodes\"", "\"extra\": 1, \"arg_nodes\""),
                "unknown key `extra`",
            ),
            (
                TWO_NODES.replace("[[1, 0, 0]]", "[[7, 0, 0]]"),
                "heads[0] points to node 7 past the end (2 nodes)",
            ),
            (
                TWO_NODES.replace("[0, 1]]", "[0, 9]]"),
                "`attrs.storage_id` 9 is out of range",
            ),
            (
                TWO_NODES.replace("\"num_inputs\": \"1\"", "\"num_inputs\": 1"),
                "`attrs.num_inputs` must be a string",
            ),
            (
                TWO_NODES.replace("\"float32\"]]", "\"float33\"]]"),
                "`attrs.dltype[1][1]`",
            ),
            (
                TWO_NODES.replace("[0, 1, 2]", "[0, 1]"),
                "`node_row_ptr` has 2 items for 2 nodes",
            ),
            (
                TWO_NODES.replace("\"op\": \"tvm_op\"", "\"op\": \"tvm_op\", \"bogus\": 0"),
                "nodes[1]: unknown key `bogus`",
            ),
        ];
        for (text, want) in cases {
            let got = error_of(&text);
            assert!(got.contains(want), "want `{want}` in `{got}`");
        }
    }
}
