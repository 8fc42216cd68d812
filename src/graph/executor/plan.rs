//! The storage pool as TVM plans it, the entries' views of it, and each node's call with its
//! argument arrays, built once at creation.

use super::{OpCall, OpKind, State};
use crate::abi::{type_code, DLDevice, DLTensor, TVMFFIAny, TVMValue};
use crate::error::{Error, Result};
use crate::graph::json::{Graph, NodeOp};
use crate::module::Module;
use crate::tensor::Tensor;
use crate::value::Any;

/// Allocates the storage pool and makes each entry a view of its block.
pub(super) fn allocate_entries(g: &Graph, device: DLDevice) -> Result<Vec<Tensor>> {
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
pub(super) fn flatten_entries(g: &Graph, entries: &mut [Tensor]) -> Result<()> {
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
pub(super) fn build_ops(g: &Graph, lib: &Module, entries: &[Tensor]) -> Result<Vec<OpCall>> {
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

/// Points the call arguments of entries `eids` at those entries' current tensors (data,
/// shape and strides: the old entry may be gone).
pub(super) fn retarget_ops(state: &mut State, eids: &[usize]) {
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
