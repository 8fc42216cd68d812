//! The debug graph executor of TVM 0.19 (`src/runtime/graph_executor/debug/`): a graph
//! executor (every function of [`super::executor`]) with per-node timing and outputs, made by
//! `tvm.graph_executor_debug.create(graph_json, lib, device_type, device_id)` or by a factory's
//! `debug_create(module_name, dev)`.
//!
//! Functions, as TVM 0.19 has them:
//! - `run_individual(number, repeat, min_repeat_ms, limit_zero_time_iterations,
//!   cooldown_interval_ms, repeats_to_cooldown)`: after one whole run, each node's call timed
//!   with TVM's time evaluator; bytes: an `int64` node count, then `repeat` doubles (seconds per
//!   call) per node, zeros for input nodes;
//! - `run_individual_node(node, number, repeat, ...)`: one node's `repeat` doubles;
//! - `profile(collectors)`: three warm-up runs, then one run with every call recorded: a
//!   `runtime.profiling.Report` (names, durations, argument shapes, hashes, shares);
//!   `profile_rpc()`: the same as JSON text;
//! - `execute_node(node)`: runs the calls after the last node executed up to `node` (from the
//!   start when `node` is not after it); `get_node_output(node, index)`: a copy of that output
//!   of the node last executed;
//! - `debug_get_output(node[, out])`: runs the calls up to `node` (an index or a name) and
//!   returns data entry number `node` (or copies it into `out`), as TVM 0.19 does
//!   (`DebugGetNodeOutput` reads `data_entry_[index]`): the node's output when every node before
//!   it has one output, another node's entry after a multi-output node.
//!
//! Metric collectors (PAPI counters) are not supported: `profile` accepts none or an empty list.

use super::executor::GraphExecutor;
use super::factory::devices_from_args;
use super::json::Graph;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::Module;
use crate::object::containers::array::array_items;
use crate::profiling::{new_report, Metric, Profiler, Report, Row, Timing};
use crate::value::{Any, AnyView};
use std::sync::Arc;

fn int_arg(args: &[AnyView<'_>], i: usize, what: &str) -> Result<i64> {
    args.get(i)
        .ok_or_else(|| {
            Error::type_error(format!(
                "missing argument {i} (`{what}`): got {} arguments",
                args.len()
            ))
        })?
        .expect_i64(what)
}

/// The time evaluator's settings from arguments `first..`, checked as TVM checks them.
fn timing(args: &[AnyView<'_>], first: usize) -> Result<Timing> {
    let names = [
        "number",
        "repeat",
        "min_repeat_ms",
        "limit_zero_time_iterations",
        "cooldown_interval_ms",
        "repeats_to_cooldown",
    ];
    let mut v = [0i64; 6];
    for (k, name) in names.iter().enumerate() {
        v[k] = int_arg(args, first + k, name)?;
    }
    // TVM: number > 0, repeat > 0, the rest >= 0, repeats_to_cooldown > 0.
    for (k, name) in names.iter().enumerate() {
        let positive = matches!(k, 0 | 1 | 5);
        if (positive && v[k] <= 0) || v[k] < 0 {
            return Err(Error::value(format!(
                "{name} must be {}, got {}",
                if positive { "> 0" } else { ">= 0" },
                v[k]
            )));
        }
    }
    Ok(Timing {
        number: v[0] as usize,
        repeat: v[1] as usize,
        min_repeat_ms: v[2] as u64,
        limit_zero_time_iterations: v[3] as usize,
        cooldown_interval_ms: v[4] as u64,
        repeats_to_cooldown: v[5] as usize,
    })
}

fn doubles(values: impl IntoIterator<Item = f64>) -> Vec<u8> {
    values
        .into_iter()
        .flat_map(|v| if v.is_nan() { 0.0f64 } else { v }.to_ne_bytes())
        .collect()
}

/// A node index from an argument: an int, or a node name (TVM's `GetNodeIndex`).
fn node_arg(e: &GraphExecutor, v: &AnyView<'_>) -> Result<usize> {
    let g = e.graph();
    if let Some(name) = v.as_str() {
        return g
            .nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| Error::value(format!("cannot find {name} among nodes")));
    }
    let i = v.expect_i64("node index")?;
    usize::try_from(i)
        .ok()
        .filter(|&i| i < g.nodes.len())
        .ok_or_else(|| {
            Error::index(format!(
                "node index {i} is out of range ({} nodes)",
                g.nodes.len()
            ))
        })
}

/// `profile`: three warm-up runs, then one recorded run.
pub fn profile(e: &GraphExecutor) -> Result<Report> {
    for _ in 0..3 {
        e.run()?;
    }
    profile_once(e)
}

/// One run with every call recorded (no warm-up; any executor, as `tvmrt bench --profile`
/// uses it).
pub fn profile_once(e: &GraphExecutor) -> Result<Report> {
    let config = Row::from([("Executor".to_string(), Metric::Str("Graph".into()))]);
    let mut prof = Profiler::new(vec![e.device()], config);
    prof.start()?;
    let ran = e.run_profiled(&mut prof);
    prof.stop()?;
    ran?;
    Ok(prof.report())
}

/// The debug executor's functions (`None` for other names).
pub(super) fn get_function(this: &Module, name: &str) -> Option<Function> {
    let with = |f| super::executor::method(this, f);
    Some(match name {
        "run_individual" => with(|e, args| {
            let t = timing(args, 0)?;
            e.run()?;
            let n = e.graph().nodes.len();
            let mut out = (n as i64).to_ne_bytes().to_vec();
            for nid in 0..n {
                out.extend(doubles(e.time_node(nid, &t)?));
            }
            Ok(Any::bytes(&out))
        }),
        "run_individual_node" => with(|e, args| {
            let nid = int_arg(args, 0, "node_index")?;
            let nid = usize::try_from(nid)
                .ok()
                .filter(|&i| i < e.graph().nodes.len())
                .ok_or_else(|| {
                    Error::index(format!(
                        "node index {nid} is out of range ({} nodes)",
                        e.graph().nodes.len()
                    ))
                })?;
            let t = timing(args, 1)?;
            Ok(Any::bytes(&doubles(e.time_node(nid, &t)?)))
        }),
        "profile" => with(|e, args| {
            if let Some(c) = args.first() {
                let empty = c.is_none()
                    || c.as_object()
                        .and_then(|o| array_items(&o).map(<[AnyView<'_>]>::is_empty))
                        .unwrap_or(false);
                if !empty {
                    crate::bail_value!(
                        "profile: metric collectors are not supported by tvmrt (pass none)"
                    );
                }
            }
            Ok(Any::from_object(new_report(profile(e)?)))
        }),
        "profile_rpc" => with(|e, _| Ok(Any::from(profile(e)?.to_json()))),
        "execute_node" => with(|e, args| {
            let node = node_arg(
                e,
                args.first()
                    .ok_or_else(|| Error::type_error("missing node"))?,
            )?;
            let mut last = e.last_executed_node();
            let first = match (node as i64).cmp(&*last) {
                std::cmp::Ordering::Less => 0,
                std::cmp::Ordering::Greater => (*last + 1) as usize,
                std::cmp::Ordering::Equal => return Ok(Any::none()),
            };
            e.run_nodes(first, node)?;
            *last = node as i64;
            Ok(Any::none())
        }),
        "get_node_output" => with(|e, args| {
            let node = node_arg(
                e,
                args.first()
                    .ok_or_else(|| Error::type_error("missing node"))?,
            )?;
            let index = int_arg(args, 1, "output index")?;
            let last = *e.last_executed_node();
            if node as i64 != last {
                crate::bail_value!(
                    "get_node_output: node {node} is not the last node executed ({last}); call \
                     execute_node({node}) first"
                );
            }
            let g = e.graph();
            let outputs = g.node_row_ptr[node + 1] - g.node_row_ptr[node];
            let i = usize::try_from(index)
                .ok()
                .filter(|&i| i < outputs)
                .ok_or_else(|| {
                    Error::index(format!("node {node} has {outputs} output(s), not {index}"))
                })?;
            let t = e.entry(g.node_row_ptr[node] + i)?;
            let copy = crate::tensor::Tensor::empty(t.shape(), t.dtype(), t.device())?;
            copy.copy_from(&t)?;
            Ok(copy.into())
        }),
        "debug_get_output" => with(|e, args| {
            let node = node_arg(
                e,
                args.first()
                    .ok_or_else(|| Error::type_error("missing node"))?,
            )?;
            e.run_nodes(0, node)?;
            // TVM 0.19 reads entry id `node`, not the node's first entry (see the module doc).
            let t = e.entry(node)?;
            if let Some(out) = args.get(1) {
                let dst = out
                    .as_dltensor()
                    .filter(|p| !p.is_null())
                    .ok_or_else(|| out.type_mismatch("out", "DLTensor* or ffi.Tensor"))?;
                // SAFETY: a non-null tensor handed in for the call.
                unsafe {
                    crate::tensor::check_dltensor_writable(dst, "debug_get_output out")?;
                    crate::tensor::copy::copy_dltensor(t.dl(), &*dst)?;
                }
                return Ok(Any::none());
            }
            Ok(t.into())
        }),
        _ => return None,
    })
}

/// `tvm.graph_executor_debug.create(graph_json, lib, device_type, device_id, ...)`.
pub(super) fn create(args: &[AnyView<'_>]) -> Result<Any> {
    if args.len() < 4 {
        crate::bail_type!(
            "tvm.graph_executor_debug.create expects at least 4 arguments (graph_json, lib, \
             device_type, device_id), got {}",
            args.len()
        );
    }
    let json = args[0].expect_str("graph_json")?;
    let lib = Module::from_view(&args[1], "lib")?;
    if args[2].as_function().is_some() {
        crate::bail_value!(
            "tvm.graph_executor_debug.create: a linked-parameter lookup function was given; \
             tvmrt does not support linked parameters (build without link-params)"
        );
    }
    let devices = devices_from_args(&args[2..])?;
    let graph = Arc::new(Graph::parse(json)?);
    let exec = GraphExecutor::new(graph, lib, super::executor::host_device(&devices)?)?;
    Ok(exec.with_debug().into_module().into())
}
