//! The node calls: `run`, and the debug executor's partial, profiled and timed runs.

use super::{GraphExecutor, OpCall, OpKind};
use crate::abi::TVMBackendPackedCFunc;
use crate::error::{Error, Result};
use crate::graph::json::NodeOp;
use crate::tensor::copy::copy_dltensor;
use crate::value::AnyView;

impl GraphExecutor {
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
}

/// Calls a classic kernel with the op's classic arrays; a failure takes the error the kernel
/// raised. Inlined: it is the per-node path of `run`.
#[inline(always)]
fn call_classic(f: TVMBackendPackedCFunc, op: &mut OpCall) -> Result<()> {
    // SAFETY: the arrays hold one `DLTensor*` (into `op.args`, live) per argument; the library
    // stays loaded while the op's function object lives. Dropping the result releases any object.
    drop(unsafe {
        crate::module::library::invoke_classic(
            f,
            &mut op.classic_values,
            &mut op.classic_codes,
            None,
        )?
    });
    Ok(())
}
