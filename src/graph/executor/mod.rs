//! The graph executor (TVM ≤ 0.19's `GraphExecutor`, module kind `GraphExecutor`): runs a
//! [`Graph`] on one device by calling the library's compiled functions node by node. On a
//! device other than the CPU (`device_type` 4, OpenCL) the storage pool lives on that device,
//! the compiled functions are host launchers that start the device's kernels, `set_input`
//! copies host tensors in and `get_output` returns the device tensor, as in TVM.
//!
//! At creation it allocates the storage pool as TVM plans it (one block per `storage_id`, as
//! large as the largest entry placed there), makes every node entry a view of its block, looks
//! every kernel up once, and builds each node's argument array. `run` then makes one call per
//! node with no allocation.
//!
//! Functions, as TVM 0.19 names them: `set_input` (by name or index; copies; an unknown name is
//! ignored as in TVM), `set_input_zero_copy`, `get_input`, `get_input_index`, `get_num_inputs`,
//! `get_num_outputs`, `get_output` (the entry, or copied into a second argument), `run`,
//! `run_from_inputs`, `load_params` (a `save_param_dict` blob), `share_params`,
//! `get_input_info`, `get_output_info`.
//!
//! - [`plan`]\: the storage pool, the entries' views, each node's call and its arguments;
//! - [`inputs`]\: inputs, outputs and parameters (copies, zero copy, sharing, info);
//! - [`run`]\: the node calls (`run`, the debug executor's partial and timed runs);
//! - [`functions`]\: the executor module's functions, as TVM names them.

mod functions;
mod inputs;
mod plan;
mod run;

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

use super::json::Graph;
use crate::abi::{DLDevice, DLTensor, TVMBackendPackedCFunc, TVMFFIAny, TVMValue};
use crate::device;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::Module;
use crate::tensor::Tensor;

pub(in crate::graph) use functions::method;

/// What a node's call does.
enum OpKind {
    /// A function called through tvm-ffi's convention.
    Call(Function),
    /// A classic compiled function, called straight with classic argument arrays as TVM's
    /// executor calls it (the function object keeps its library loaded).
    Classic(TVMBackendPackedCFunc, #[allow(dead_code)] Function),
    /// `__nop`: the output shares the input's storage.
    Nop,
    /// `__copy`: copies the input into the output.
    Copy,
}

/// One `tvm_op` node, ready to call: its arguments are descriptors of the node entries
/// (inputs then outputs) that live as long as the executor.
struct OpCall {
    node: usize,
    kind: OpKind,
    /// Whether the callee is classic compiled code: its descriptors then type a bool entry as
    /// TVM 0.19's `uint1`, which its argument checks expect (`code * 1000 + bits == 1001`).
    classic: bool,
    /// Entry id of each argument.
    eids: Vec<usize>,
    /// The argument descriptors; boxed so the pointers in `values` stay valid.
    args: Box<[DLTensor]>,
    /// `DLTensor*` values pointing into `args`, in the layout the callee reads.
    values: Box<[TVMFFIAny]>,
    /// The same pointers as classic values, with their type codes (`kTVMDLTensorHandle`).
    classic_values: Box<[TVMValue]>,
    classic_codes: Box<[i32]>,
}

// SAFETY: the raw pointers in `args` and `values` point into this call's own boxes, into the
// shapes of tensors the executor state owns, and into their data; the state is only used
// under its mutex.
unsafe impl Send for OpCall {}

/// Everything `run` and the setters touch, behind one lock.
struct State {
    /// The node entries (views of the pool, or shared/zero-copy tensors).
    entries: Vec<Tensor>,
    ops: Vec<OpCall>,
    /// Names given to `load_params` (left out of `get_input_info`).
    param_names: HashSet<String>,
}

/// A graph executor module.
pub struct GraphExecutor {
    graph: Arc<Graph>,
    device: DLDevice,
    /// Made by `tvm.graph_executor_debug.create`: also has the debug executor's functions
    /// ([`crate::graph::debug`]).
    debug: bool,
    /// The debug executor's last node run by `execute_node` (-1: none).
    last_executed_node: parking_lot::Mutex<i64>,
    /// Entry id of each input (`arg_nodes[i]`'s only entry).
    input_eids: Vec<usize>,
    state: Mutex<State>,
    /// Keeps the library (and so its kernels) loaded.
    _lib: Module,
}

impl std::fmt::Debug for GraphExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GraphExecutor({} nodes, {} inputs, {} outputs)",
            self.graph.nodes.len(),
            self.input_eids.len(),
            self.graph.heads.len()
        )
    }
}

/// Checks that `devices` (what `default(dev...)` or `create` got) have back ends, and returns
/// the first, where the graph runs (TVM puts every entry there when the graph has no
/// `device_index`).
pub fn host_device(devices: &[DLDevice]) -> Result<DLDevice> {
    let first = *devices
        .first()
        .ok_or_else(|| Error::value("graph executor: no device given"))?;
    for d in devices {
        device::api_of(*d).map_err(|e| e.context("graph executor device"))?;
    }
    Ok(first)
}

impl GraphExecutor {
    /// Builds an executor for `graph` whose kernels come from `lib` (searched with its
    /// imports), on `device`.
    pub fn new(graph: Arc<Graph>, lib: Module, device: DLDevice) -> Result<GraphExecutor> {
        device::usable(device).map_err(|e| e.context("graph executor device"))?;
        if let Some(devs) = &graph.device_index {
            if let Some(d) = devs
                .iter()
                .find(|&&d| d as i64 != device.device_type.0 as i64)
            {
                crate::bail_value!(
                    "graph executor: the graph places an entry on device type {d} ({}) and runs \
                     on {}; tvmrt runs a graph on one device (heterogeneous graphs are not \
                     supported)",
                    device::device_type_name(*d as u32),
                    device::device_name(device)
                );
            }
        }
        let mut entries = plan::allocate_entries(&graph, device)?;
        plan::flatten_entries(&graph, &mut entries)?;
        let ops = plan::build_ops(&graph, &lib, &entries)?;
        let input_eids = graph
            .arg_nodes
            .iter()
            .map(|&nid| graph.node_row_ptr[nid])
            .collect();
        Ok(GraphExecutor {
            graph,
            device,
            debug: false,
            last_executed_node: parking_lot::Mutex::new(-1),
            input_eids,
            state: Mutex::new(State {
                entries,
                ops,
                param_names: HashSet::new(),
            }),
            _lib: lib,
        })
    }

    /// Wraps the executor in a module object.
    pub fn into_module(self) -> Module {
        Module::new(self)
    }

    /// This executor with the debug executor's functions as well (TVM 0.19's
    /// `GraphExecutorDebug`).
    pub fn with_debug(mut self) -> GraphExecutor {
        self.debug = true;
        self
    }

    /// The debug executor's `execute_node` position.
    pub(crate) fn last_executed_node(&self) -> parking_lot::MutexGuard<'_, i64> {
        self.last_executed_node.lock()
    }

    /// The graph this executor runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Number of inputs (parameters included), as `get_num_inputs`.
    pub fn num_inputs(&self) -> usize {
        self.input_eids.len()
    }

    /// Number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.graph.heads.len()
    }

    /// The index of input `name`, if there is one.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.graph
            .arg_nodes
            .iter()
            .position(|&nid| self.graph.nodes[nid].name == name)
    }

    fn check_input(&self, index: usize) -> Result<usize> {
        self.input_eids.get(index).copied().ok_or_else(|| {
            Error::index(format!(
                "graph executor: input index {index} is out of range ({} inputs)",
                self.input_eids.len()
            ))
        })
    }

    fn check_output(&self, index: usize) -> Result<usize> {
        let head = self.graph.heads.get(index).ok_or_else(|| {
            Error::index(format!(
                "graph executor: output index {index} is out of range ({} outputs)",
                self.graph.heads.len()
            ))
        })?;
        Ok(self.graph.entry_id(*head))
    }

    /// The tensor of node entry `eid` (shared, not copied).
    pub fn entry(&self, eid: usize) -> Result<Tensor> {
        self.state.lock().entries.get(eid).cloned().ok_or_else(|| {
            Error::index(format!(
                "graph executor: entry {eid} is out of range ({} entries)",
                self.graph.num_entries()
            ))
        })
    }

    /// The device the executor runs on.
    pub fn device(&self) -> DLDevice {
        self.device
    }
}
