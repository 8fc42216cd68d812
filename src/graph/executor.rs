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

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::Arc;

use parking_lot::Mutex;

use super::json::{Graph, NodeOp};
use super::params::{load_params, Params};
use crate::abi::{type_code, DLDevice, DLTensor, TVMBackendPackedCFunc, TVMFFIAny, TVMValue};
use crate::device;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::object::containers::array::new_array;
use crate::object::containers::map::{new_map, Entry};
use crate::object::shape::new_shape;
use crate::tensor::copy::copy_dltensor;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

/// Data must be aligned this much for `set_input_zero_copy` (TVM's `kAllocAlignment`).
const ZERO_COPY_ALIGNMENT: usize = 64;

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
    /// ([`super::debug`]).
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
        let mut entries = allocate_entries(&graph, device)?;
        flatten_entries(&graph, &mut entries)?;
        let ops = build_ops(&graph, &lib, &entries)?;
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

    /// Copies `src` into input `index` (same dtype and element count; TVM copies by bytes).
    ///
    /// # Safety
    /// `src` is a valid DLTensor describing live memory.
    pub unsafe fn set_input(&self, index: usize, src: &DLTensor) -> Result<()> {
        let eid = self.check_input(index)?;
        let state = self.state.lock();
        let dst = &state.entries[eid];
        let name = &self.graph.nodes[self.graph.arg_nodes[index]].name;
        // SAFETY: the caller guarantees `src`; `dst` is a live entry tensor.
        unsafe {
            check_same_layout(src, dst, &format!("set_input `{name}`"))?;
            copy_dltensor(src, &*dst.dltensor())
        }
    }

    /// Makes input `index` read `src`'s memory directly (no copy). `src` must match the entry's
    /// dtype, shape and device and be 64-byte aligned. `keep` (a tensor object holding the
    /// memory) is kept alive; a bare `DLTensor*`'s memory must outlive its use, as in TVM.
    ///
    /// # Safety
    /// `src` is a valid DLTensor describing live memory.
    pub unsafe fn set_input_zero_copy(
        &self,
        index: usize,
        src: &DLTensor,
        keep: Option<Tensor>,
    ) -> Result<()> {
        let eid = self.check_input(index)?;
        let name = &self.graph.nodes[self.graph.arg_nodes[index]].name;
        let mut state = self.state.lock();
        let what = format!("set_input_zero_copy `{name}`");
        // SAFETY: per the contract.
        unsafe { check_same_layout(src, &state.entries[eid], &what)? };
        if src.device != self.device {
            crate::bail_value!(
                "{what}: the tensor is on {}, the graph runs on {} (a zero-copy input must be \
                 on the graph's device; set_input copies)",
                device::device_name(src.device),
                device::device_name(self.device)
            );
        }
        if src.ndim as usize != state.entries[eid].shape().len()
            // SAFETY: `src.shape` holds `ndim` entries (contract).
            || unsafe { std::slice::from_raw_parts(src.shape, src.ndim as usize) }
                != state.entries[eid].shape()
        {
            crate::bail_value!(
                "{what}: shape differs from the input's {:?}",
                state.entries[eid].shape()
            );
        }
        if !src.strides.is_null() {
            // SAFETY: per the contract, `strides` holds `ndim` entries when not null.
            let strides = unsafe { std::slice::from_raw_parts(src.strides, src.ndim as usize) };
            if Some(strides) != state.entries[eid].strides() {
                crate::bail_value!("{what}: the tensor is not compact");
            }
        }
        let data = src
            .data
            .cast::<u8>()
            .wrapping_add(src.byte_offset as usize)
            .cast::<c_void>();
        if !(data as usize).is_multiple_of(ZERO_COPY_ALIGNMENT) {
            crate::bail_value!("{what}: data is not {ZERO_COPY_ALIGNMENT}-byte aligned");
        }
        // Every entry in the same storage block (a reshape `__nop` of the input, say) now
        // reads the new memory too.
        let sid = self.graph.storage_id[eid];
        let peers: Vec<usize> = (0..self.graph.num_entries())
            .filter(|&e| self.graph.storage_id[e] == sid)
            .collect();
        for &e in &peers {
            let entry = &state.entries[e];
            // SAFETY: an entry's descriptor is valid while the entry (held in `state`) lives;
            // it is copied out here, not kept.
            let mut proto = *unsafe { &*entry.dltensor() };
            proto.data = data;
            proto.byte_offset = 0;
            // The view keeps the external tensor (if any) or the old entry alive.
            let parent = keep.clone().unwrap_or_else(|| entry.clone());
            // SAFETY: `proto` is the entry's own descriptor with the data pointer replaced;
            // the caller keeps that memory alive (TVM's zero-copy contract).
            state.entries[e] = unsafe { parent.create_unsafe_view(&proto)? };
        }
        retarget_ops(&mut state, &peers);
        Ok(())
    }

    /// Input `index` (the entry tensor itself, shared).
    pub fn get_input(&self, index: usize) -> Result<Tensor> {
        let eid = self.check_input(index)?;
        Ok(self.state.lock().entries[eid].clone())
    }

    /// Output `index` (the entry tensor itself, shared, as TVM returns it).
    pub fn get_output(&self, index: usize) -> Result<Tensor> {
        let eid = self.check_output(index)?;
        Ok(self.state.lock().entries[eid].clone())
    }

    /// Copies output `index` into `out` (same shape and dtype).
    ///
    /// # Safety
    /// `out` is a valid DLTensor describing live, writable memory.
    pub unsafe fn copy_output_to(&self, index: usize, out: &DLTensor) -> Result<()> {
        let eid = self.check_output(index)?;
        let state = self.state.lock();
        let src = &state.entries[eid];
        let what = format!("get_output {index}");
        // SAFETY: per the contract.
        unsafe {
            check_same_layout(out, src, &what)?;
            if std::slice::from_raw_parts(out.shape, out.ndim as usize) != src.shape() {
                crate::bail_value!(
                    "{what}: the output tensor's shape differs from {:?}",
                    src.shape()
                );
            }
            crate::tensor::check_dltensor_writable(out, &what)?;
            copy_dltensor(&*src.dltensor(), out)
        }
    }

    /// Runs every node once.
    pub fn run(&self) -> Result<()> {
        let mut state = self.state.lock();
        for op in state.ops.iter_mut() {
            self.exec_op(op)?;
        }
        Ok(())
    }

    /// Makes one node's call (the only code `run` and the debug functions run per node).
    #[inline(always)]
    fn exec_op(&self, op: &mut OpCall) -> Result<()> {
        let result = match &op.kind {
            OpKind::Nop => Ok(()),
            // SAFETY: both descriptors describe live entries of this executor.
            OpKind::Copy => unsafe { copy_dltensor(&op.args[0], &op.args[1]) },
            OpKind::Call(f) => {
                // SAFETY: `values` holds `DLTensor*` values into `args`, live for the call.
                let args = unsafe { AnyView::slice_from_raw(op.values.as_ptr(), op.values.len()) };
                f.call(args).map(drop)
            }
            OpKind::Classic(f, _) => {
                let f = *f;
                call_classic(f, op)
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) => Err(self.node_error(op.node, e)),
        }
    }

    /// A node's error, named (off the hot path of `run`).
    #[cold]
    #[inline(never)]
    fn node_error(&self, nid: usize, e: Error) -> Error {
        e.context(format_args!(
            "graph executor: node {nid} (`{}`)",
            self.graph.nodes[nid].name
        ))
    }

    /// Runs the calls of nodes `first..=last` (node ids; input nodes have none), as the debug
    /// executor's `execute_node` and `debug_get_output` do.
    pub fn run_nodes(&self, first: usize, last: usize) -> Result<()> {
        let mut state = self.state.lock();
        for op in state.ops.iter_mut() {
            if (first..=last).contains(&op.node) {
                self.exec_op(op)?;
            }
        }
        Ok(())
    }

    /// One run with every call timed by `prof` (already started): the call's name is its
    /// function's, with its argument shapes, its `hash` attribute and any `*layout*` one, as
    /// TVM's debug executor records them.
    pub fn run_profiled(&self, prof: &mut crate::profiling::Profiler) -> Result<()> {
        use crate::profiling::{shape_string, Metric, Row};
        let mut state = self.state.lock();
        for op in state.ops.iter_mut() {
            let NodeOp::Call(p) = &self.graph.nodes[op.node].op else {
                continue;
            };
            let entered = std::time::Instant::now();
            let mut extra = Row::new();
            for (k, v) in &p.attrs {
                if k.contains("layout") {
                    extra.insert(k.clone(), Metric::Str(v.clone()));
                }
            }
            if let Some((_, h)) = p.attrs.iter().find(|(k, _)| k == "hash") {
                extra.insert("Hash".into(), Metric::Str(h.clone()));
            }
            // The graph's shapes (TVM reads the arrays' shapes, which `flatten_data` does not
            // change, only the descriptors the kernel gets).
            let g = &self.graph;
            let shapes = shape_string(
                op.eids
                    .iter()
                    .map(|&e| (g.dltype[e], g.shape[e].as_slice())),
            );
            extra.insert("Argument Shapes".into(), Metric::Str(shapes));
            prof.start_call(&p.func_name, self.device, extra)?;
            let ran = self.exec_op(op);
            let timed = prof.stop_call()?;
            prof.add_overhead(entered.elapsed().saturating_sub(timed));
            ran?;
        }
        Ok(())
    }

    /// Times node `nid`'s call with TVM's time evaluator (seconds per call, `repeat` values);
    /// zeros for a node without a call (an input).
    pub fn time_node(&self, nid: usize, timing: &crate::profiling::Timing) -> Result<Vec<f64>> {
        if nid >= self.graph.nodes.len() {
            return Err(Error::index(format!(
                "graph executor: node {nid} is out of range ({} nodes)",
                self.graph.nodes.len()
            )));
        }
        let mut state = self.state.lock();
        let Some(op) = state.ops.iter_mut().find(|o| o.node == nid) else {
            return Ok(vec![0.0; timing.repeat]);
        };
        timing.measure(self.device, || self.exec_op(op))
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

    /// Loads parameters from a `save_param_dict` blob: each one that names an input is copied
    /// in; every name is remembered as a parameter.
    pub fn load_params(&self, blob: &[u8]) -> Result<()> {
        let params = load_params(blob)?;
        self.set_params(&params, true)
    }

    /// Copies named tensors into the inputs of those names (others are skipped, as in TVM).
    pub fn set_params(&self, params: &Params, remember: bool) -> Result<()> {
        for (name, t) in params {
            if remember {
                self.state.lock().param_names.insert(name.clone());
            }
            if let Some(i) = self.input_index(name) {
                // SAFETY: a live tensor's descriptor.
                unsafe { self.set_input(i, &*t.dltensor())? };
            }
        }
        Ok(())
    }

    /// Makes this executor's inputs named in `blob` share `other`'s tensors (TVM's
    /// `share_params`: several executors over one set of weights).
    pub fn share_params(&self, other: &GraphExecutor, blob: &[u8]) -> Result<()> {
        let params = load_params(blob)?;
        let mut shared = Vec::new();
        for (name, _) in &params {
            let (Some(mine), Some(theirs)) = (self.input_index(name), other.input_index(name))
            else {
                continue;
            };
            let t = other.get_input(theirs)?;
            let eid = self.input_eids[mine];
            let state = self.state.lock();
            let entry = &state.entries[eid];
            if t.shape() != entry.shape() || t.dtype() != entry.dtype() {
                crate::bail_value!(
                    "share_params `{name}`: the other executor's input has shape {:?} and dtype \
                     {}, this one's {:?} and {}",
                    t.shape(),
                    crate::tensor::layout::dtype_label(t.dtype()),
                    entry.shape(),
                    crate::tensor::layout::dtype_label(entry.dtype())
                );
            }
            drop(state);
            shared.push((eid, t));
        }
        let mut state = self.state.lock();
        let eids: Vec<usize> = shared.iter().map(|(e, _)| *e).collect();
        for (eid, t) in shared {
            state.entries[eid] = t;
        }
        retarget_ops(&mut state, &eids);
        Ok(())
    }

    /// `{"shape": {name: Shape}, "dtype": {name: str}}` for the inputs not loaded as parameters
    /// (`get_input_info`), or for the outputs (`get_output_info`, keyed by node name).
    pub fn io_info(&self, outputs: bool) -> Any {
        let g = &self.graph;
        let params = self.state.lock().param_names.clone();
        let mut shapes = Vec::new();
        let mut dtypes = Vec::new();
        let mut add = |name: &str, eid: usize| {
            shapes.push(Entry {
                key: Any::from(name),
                value: Any::from_object(new_shape(&g.shape[eid])),
            });
            dtypes.push(Entry {
                key: Any::from(name),
                value: Any::from(g.dltype_names[eid].as_str()),
            });
        };
        if outputs {
            for h in &g.heads {
                add(&g.nodes[h.node_id].name, g.entry_id(*h));
            }
        } else {
            for (i, &nid) in g.arg_nodes.iter().enumerate() {
                if !params.contains(&g.nodes[nid].name) {
                    add(&g.nodes[nid].name, self.input_eids[i]);
                }
            }
        }
        let info = vec![
            Entry {
                key: Any::from("shape"),
                value: Any::from_object(new_map(shapes)),
            },
            Entry {
                key: Any::from("dtype"),
                value: Any::from_object(new_map(dtypes)),
            },
        ];
        Any::from_object(new_map(info))
    }

    /// The index an argument names: an integer, or an input name.
    fn input_arg(&self, v: &AnyView<'_>, what: &str) -> Result<Option<usize>> {
        if let Some(name) = v.as_str() {
            return Ok(self.input_index(name));
        }
        let i = v
            .as_i64()
            .ok_or_else(|| v.type_mismatch(what, "int or str"))?;
        usize::try_from(i)
            .map(Some)
            .map_err(|_| Error::index(format!("graph executor: input index {i} is negative")))
    }
}

/// The dtype and element count of `t` match `entry`'s, and its device has a back end.
///
/// # Safety
/// `t` is a valid DLTensor.
unsafe fn check_same_layout(t: &DLTensor, entry: &Tensor, what: &str) -> Result<()> {
    device::api_of(t.device).map_err(|e| e.context(what))?;
    if t.dtype != entry.dtype() {
        crate::bail_value!(
            "{what}: dtype {} differs from the graph's {}",
            crate::tensor::layout::dtype_label(t.dtype),
            crate::tensor::layout::dtype_label(entry.dtype())
        );
    }
    // SAFETY: per the contract.
    let shape = unsafe { crate::tensor::layout::dl_shape(t, what)? };
    let count: u128 = shape.iter().map(|&d| d.max(0) as u128).product();
    let want: u128 = entry.shape().iter().map(|&d| d as u128).product();
    if count != want {
        crate::bail_value!(
            "{what}: shape {shape:?} holds {count} elements, the graph's {:?} holds {want}",
            entry.shape()
        );
    }
    Ok(())
}

/// Allocates the storage pool and makes each entry a view of its block.
fn allocate_entries(g: &Graph, device: DLDevice) -> Result<Vec<Tensor>> {
    let mut sizes: Vec<u64> = Vec::new();
    for eid in 0..g.num_entries() {
        let sid = g.storage_id[eid];
        if sid >= sizes.len() {
            sizes.resize(sid + 1, 0);
        }
        let dt = g.dltype[eid];
        let bits = dt.bits as u64 * dt.lanes as u64;
        let elems = g.shape[eid]
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64));
        let bytes = elems
            .and_then(|n| n.checked_mul(bits.div_ceil(8)))
            .filter(|&b| b <= isize::MAX as u64)
            .ok_or_else(|| {
                Error::value(format!(
                    "graph executor: entry {eid} of shape {:?} is too large",
                    g.shape[eid]
                ))
            })?;
        sizes[sid] = sizes[sid].max(bytes);
    }
    let pool = sizes
        .iter()
        .map(|&n| Tensor::empty(&[n as i64], crate::dtype::dtypes::UINT8, device))
        .collect::<Result<Vec<_>>>()?;
    (0..g.num_entries())
        .map(|eid| pool[g.storage_id[eid]].view(&g.shape[eid], g.dltype[eid], 0))
        .collect()
}

/// The entries a `flatten_data` node touches become one-dimensional, as TVM's executor makes
/// them (it rewrites the shared descriptors in place, so `get_output` shows the flat shape).
fn flatten_entries(g: &Graph, entries: &mut [Tensor]) -> Result<()> {
    for (nid, node) in g.nodes.iter().enumerate() {
        let NodeOp::Call(p) = &node.op else { continue };
        if !p.flatten_data {
            continue;
        }
        let outputs = (0..p.num_outputs).map(|i| g.node_row_ptr[nid] + i);
        for eid in node.inputs.iter().map(|&e| g.entry_id(e)).chain(outputs) {
            let t = &entries[eid];
            let numel: i64 = t.shape().iter().product();
            entries[eid] = t.view(&[numel], t.dtype(), 0)?;
        }
    }
    Ok(())
}

/// Looks every kernel up and builds each call's arguments.
fn build_ops(g: &Graph, lib: &Module, entries: &[Tensor]) -> Result<Vec<OpCall>> {
    let mut ops = Vec::new();
    for (nid, node) in g.nodes.iter().enumerate() {
        let NodeOp::Call(p) = &node.op else { continue };
        let kind = match p.func_name.as_str() {
            "__nop" => OpKind::Nop,
            "__copy" => OpKind::Copy,
            name => {
                let f = lib.get_function(name, true)?.ok_or_else(|| {
                    Error::attribute(format!(
                        "graph executor: node {nid} (`{}`) calls `{name}`, which the library \
                         does not define",
                        node.name
                    ))
                })?;
                match crate::module::library::library_function_of(&f)
                    .and_then(|lf| lf.classic_symbol())
                {
                    Some(sym) => OpKind::Classic(sym, f),
                    None => OpKind::Call(f),
                }
            }
        };
        let mut eids: Vec<usize> = node.inputs.iter().map(|&e| g.entry_id(e)).collect();
        eids.extend((0..p.num_outputs).map(|i| g.node_row_ptr[nid] + i));
        let classic = matches!(kind, OpKind::Classic(..));
        let mut args: Box<[DLTensor]> = eids
            .iter()
            .map(|&e| arg_descriptor(&entries[e], classic))
            .collect();
        let values: Box<[TVMFFIAny]> = args
            .iter_mut()
            .map(|t| Any::dltensor_ptr(t as *mut DLTensor).into_raw())
            .collect();
        let classic_values: Box<[TVMValue]> = args
            .iter_mut()
            .map(|t| TVMValue::handle((t as *mut DLTensor).cast()))
            .collect();
        let classic_codes = vec![type_code::DL_TENSOR_HANDLE; args.len()].into_boxed_slice();
        if let OpKind::Copy = kind {
            let (a, b) = (&entries[eids[0]], &entries[eids[1]]);
            if a.nbytes() != b.nbytes() {
                crate::bail_value!(
                    "graph executor: node {nid} (`{}`): `__copy` from {} bytes to {} bytes",
                    node.name,
                    a.nbytes(),
                    b.nbytes()
                );
            }
        }
        ops.push(OpCall {
            node: nid,
            classic,
            kind,
            eids,
            args,
            values,
            classic_values,
            classic_codes,
        });
    }
    Ok(ops)
}

/// Calls a classic kernel with the op's classic arrays; a failure takes the error the kernel
/// raised. Inlined: it is the per-node path of `run`.
#[inline(always)]
fn call_classic(f: TVMBackendPackedCFunc, op: &mut OpCall) -> Result<()> {
    let mut ret = TVMValue { v_int64: 0 };
    let mut code = type_code::NULLPTR;
    // SAFETY: the arrays hold one `DLTensor*` (into `op.args`, live) per argument; the return
    // slots are ours; the library stays loaded while the op's function object lives.
    let status = unsafe {
        f(
            op.classic_values.as_mut_ptr(),
            op.classic_codes.as_mut_ptr(),
            op.classic_values.len() as i32,
            &mut ret,
            &mut code,
            std::ptr::null_mut(),
        )
    };
    if status != 0 {
        return Err(crate::raised::take_raised().unwrap_or_else(|| {
            Error::runtime(format!(
                "compiled function returned {status} without setting an error"
            ))
        }));
    }
    if code != type_code::NULLPTR {
        // SAFETY: the callee wrote this value and code for us; dropping releases any object.
        drop(unsafe { crate::module::library::take_classic_result(ret, code)? });
    }
    Ok(())
}

/// Points the call arguments of entries `eids` at those entries' current tensors (data,
/// shape and strides: the old entry may be gone).
fn retarget_ops(state: &mut State, eids: &[usize]) {
    let State { entries, ops, .. } = state;
    for op in ops.iter_mut() {
        for (arg, eid) in op.args.iter_mut().zip(&op.eids) {
            if eids.contains(eid) {
                *arg = arg_descriptor(&entries[*eid], op.classic);
            }
        }
    }
}

/// A call argument: a copy of the entry's descriptor (its shape and strides live as long as
/// the entry, which the state keeps), typed for a classic callee when `classic`.
fn arg_descriptor(entry: &Tensor, classic: bool) -> DLTensor {
    let mut d = *entry.dl();
    if classic {
        d.dtype = crate::dtype::classic_bool::to_classic(d.dtype);
    }
    d
}

fn arg<'a, 'b>(args: &'a [AnyView<'b>], i: usize, what: &str) -> Result<&'a AnyView<'b>> {
    args.get(i).ok_or_else(|| {
        Error::type_error(format!(
            "missing argument {i} (`{what}`): got {} arguments",
            args.len()
        ))
    })
}

fn tensor_arg(v: &AnyView<'_>, what: &str) -> Result<*mut DLTensor> {
    v.as_dltensor()
        .filter(|p| !p.is_null())
        .ok_or_else(|| v.type_mismatch(what, "DLTensor* or ffi.Tensor"))
}

fn index_arg(v: &AnyView<'_>, what: &str) -> Result<usize> {
    let i = v.expect_i64(what)?;
    usize::try_from(i).map_err(|_| Error::index(format!("{what} {i} is negative")))
}

impl ModuleKind for GraphExecutor {
    fn kind(&self) -> &str {
        "GraphExecutor"
    }

    /// Runnable, as TVM 0.19's `GraphExecutor`.
    fn property_mask(&self) -> i32 {
        2
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let with = |f| method(this, f);
        let f = match name {
            "set_input" => with(|e, args| {
                let t = tensor_arg(arg(args, 1, "value")?, "value")?;
                if let Some(i) = e.input_arg(arg(args, 0, "key")?, "key")? {
                    // SAFETY: a non-null DLTensor handed in for the call.
                    unsafe { e.set_input(i, &*t)? };
                }
                Ok(Any::none())
            }),
            "set_input_zero_copy" => with(|e, args| {
                let v = arg(args, 1, "value")?;
                let t = tensor_arg(v, "value")?;
                let keep = Tensor::from_any_view(v, "value").ok();
                if let Some(i) = e.input_arg(arg(args, 0, "key")?, "key")? {
                    // SAFETY: a non-null DLTensor handed in for the call.
                    unsafe { e.set_input_zero_copy(i, &*t, keep)? };
                }
                Ok(Any::none())
            }),
            "get_input" => with(|e, args| match e.input_arg(arg(args, 0, "key")?, "key")? {
                Some(i) => Ok(e.get_input(i)?.into()),
                None => Ok(Any::none()),
            }),
            "get_output" => with(|e, args| {
                let key = arg(args, 0, "index")?;
                let index = match key.as_str() {
                    Some(name) => e
                        .graph
                        .heads
                        .iter()
                        .rposition(|h| e.graph.nodes[h.node_id].name == name)
                        .ok_or_else(|| Error::value(format!("Invalid output node: {name}")))?,
                    None => index_arg(key, "index")?,
                };
                if args.len() == 2 {
                    let out = tensor_arg(&args[1], "out")?;
                    // SAFETY: a non-null DLTensor handed in for the call.
                    unsafe { e.copy_output_to(index, &*out)? };
                    return Ok(Any::none());
                }
                Ok(e.get_output(index)?.into())
            }),
            "get_input_index" => with(|e, args| {
                let name = arg(args, 0, "name")?.expect_str("name")?;
                Ok(Any::from(e.input_index(name).map_or(-1, |i| i as i64)))
            }),
            "get_num_inputs" => with(|e, _| Ok(Any::from(e.num_inputs() as i64))),
            "get_num_outputs" => with(|e, _| Ok(Any::from(e.num_outputs() as i64))),
            "run" => with(|e, _| e.run().map(|()| Any::none())),
            "run_from_inputs" => with(run_from_inputs),
            "load_params" => with(|e, args| {
                let v = arg(args, 0, "params")?;
                let bytes = v
                    .as_byte_slice()
                    .ok_or_else(|| v.type_mismatch("params", "bytes"))?;
                e.load_params(bytes).map(|()| Any::none())
            }),
            "share_params" => with(|e, args| {
                let v = arg(args, 0, "module")?;
                let other = Module::from_view(v, "module")?;
                let other = other.downcast::<GraphExecutor>().ok_or_else(|| {
                    Error::type_error(format!(
                        "share_params: expected a GraphExecutor module, got `{}`",
                        other.kind()
                    ))
                })?;
                let b = arg(args, 1, "params")?;
                let bytes = b
                    .as_byte_slice()
                    .ok_or_else(|| b.type_mismatch("params", "bytes"))?;
                e.share_params(other, bytes).map(|()| Any::none())
            }),
            "get_input_info" => with(|e, _| Ok(e.io_info(false))),
            "get_output_info" => with(|e, _| Ok(e.io_info(true))),
            _ if self.debug => return Ok(super::debug::get_function(this, name)),
            _ => return Ok(None),
        };
        Ok(Some(f))
    }
}

/// A function of the executor module `this` (which keeps it alive) running `f` on it.
pub(super) fn method(
    this: &Module,
    f: fn(&GraphExecutor, &[AnyView<'_>]) -> Result<Any>,
) -> Function {
    let me = this.clone();
    Function::from_fn(move |args| {
        let exec = me
            .downcast::<GraphExecutor>()
            .expect("a GraphExecutor module holds a GraphExecutor");
        f(exec, args)
    })
}

/// `run_from_inputs(device_type, device_id, key, tensor, ...)`: sets the inputs, runs, and
/// returns copies of the outputs on the given (host) device.
fn run_from_inputs(e: &GraphExecutor, args: &[AnyView<'_>]) -> Result<Any> {
    if !args.len().is_multiple_of(2) || args.len() < 2 {
        crate::bail_value!(
            "run_from_inputs: expected device type, device id, then key/value pairs; got {} \
             arguments",
            args.len()
        );
    }
    let device = DLDevice {
        device_type: crate::abi::DLDeviceType(args[0].expect_i64("device_type")? as u32),
        device_id: args[1].expect_i64("device_id")? as i32,
    };
    device::api_of(device).map_err(|e| e.context("run_from_inputs host device"))?;
    for pair in args[2..].chunks(2) {
        let t = tensor_arg(&pair[1], "value")?;
        let index = match pair[0].as_str() {
            Some(name) => e
                .input_index(name)
                .ok_or_else(|| Error::value(format!("{name} is not a valid input name")))?,
            None => index_arg(&pair[0], "input index")?,
        };
        // SAFETY: a non-null DLTensor handed in for the call.
        unsafe { e.set_input(index, &*t)? };
    }
    e.run()?;
    let outputs = (0..e.num_outputs())
        .map(|i| {
            let out = e.get_output(i)?;
            let copy = Tensor::empty(out.shape(), out.dtype(), e.device)?;
            copy.copy_from(&out)?;
            Ok(Any::from(copy))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Any::from_object(new_array(outputs)))
}
