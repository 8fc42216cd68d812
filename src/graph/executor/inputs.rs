//! Inputs, outputs and parameters: copies in and out, zero-copy inputs, shared parameters and
//! the input/output info.

use std::ffi::c_void;

use super::plan::retarget_ops;
use super::GraphExecutor;
use crate::abi::DLTensor;
use crate::device;
use crate::error::{Error, Result};
use crate::graph::params::{load_params, Params};
use crate::object::containers::map::{new_map, Entry};
use crate::object::shape::new_shape;
use crate::tensor::copy::copy_dltensor;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

/// Data must be aligned this much for `set_input_zero_copy` (TVM's `kAllocAlignment`).
const ZERO_COPY_ALIGNMENT: usize = 64;
impl GraphExecutor {
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
    pub(super) fn input_arg(&self, v: &AnyView<'_>, what: &str) -> Result<Option<usize>> {
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
