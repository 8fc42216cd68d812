//! The attention entry points of the paged KV cache (TVM `AttentionWithFusedQKV`,
//! `SelfAttention`, `CrossAttention`, `AttentionWithSharedKV`, `AppendMLAKV`,
//! `MergeAttnOutputInplace`, and the internal `AttentionInternal`, `MHASelfAttnInternal`,
//! `MHACrossAttnInternal`, `MLACrossAttnInternal`): which kernel runs on which arrays, in
//! TVM's order, with the same merges of partial results.

use super::aux_sync::sync_aux;
use super::config::{AttnKind, Config};
use super::forward::NO_BATCH;
use super::kernels::{arg, AttnScalars, Kernels};
use super::state::{Batch, State, Views};
use super::Shared;
use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A batch ready for attention: the bookkeeping and its device arrays.
pub struct Ready<'a> {
    pub batch: &'a Batch,
    pub views: &'a Views,
}

/// Synchronizes the device arrays if needed (`ComputeStreamWaitForCopyStream`).
pub fn ready<'a>(st: &'a mut State, sh: &Shared) -> Result<Ready<'a>> {
    if st.batch.is_none() {
        return Err(Error::runtime(NO_BATCH));
    }
    if st.dirty || st.views.is_none() {
        sync_aux(st, sh)?;
    }
    Ok(Ready {
        batch: st.batch.as_ref().unwrap(),
        views: st.views.as_ref().unwrap(),
    })
}

/// Checks a caller's tensor: `want`'s dtype, compact, on the cache's device (the kernels read it
/// there: host memory for a CPU cache, device memory for a GPU one, as TVM's runtime does).
fn check_dtype(
    t: &Tensor,
    want: DLDataType,
    device: DLDevice,
    func: &str,
    name: &str,
) -> Result<()> {
    if t.dtype() != want {
        crate::bail_type!(
            "{func}: {name} has dtype {}, the cache holds {}",
            crate::tensor::layout::dtype_label(t.dtype()),
            crate::tensor::layout::dtype_label(want)
        );
    }
    if !t.is_contiguous() {
        crate::bail_value!("{func}: {name} is not a compact tensor");
    }
    if t.device() != device {
        crate::bail_value!(
            "{func}: {name} is on {}, the KV cache on {}",
            crate::device::device_name(t.device()),
            crate::device::device_name(device)
        );
    }
    Ok(())
}

fn check_shape(t: &Tensor, want: &[Option<i64>], func: &str, name: &str) -> Result<()> {
    let shape = t.shape();
    let ok = shape.len() == want.len()
        && shape
            .iter()
            .zip(want)
            .all(|(&s, w)| w.is_none_or(|w| w == s));
    if !ok {
        let w: Vec<String> = want
            .iter()
            .map(|w| w.map_or("*".to_string(), |v| v.to_string()))
            .collect();
        crate::bail_value!(
            "{func}: {name} has shape {shape:?}, expected ({})",
            w.join(", ")
        );
    }
    Ok(())
}

impl Shared {
    fn scalars(&self, sm_scale: f64) -> AttnScalars {
        AttnScalars {
            rope_mode: self.cfg.rope_mode,
            rotary_scale: self.cfg.rotary_scale,
            rotary_theta: self.cfg.rotary_theta,
            sm_scale,
        }
    }

    /// `AttentionWithFusedQKV`.
    pub fn attention_with_fused_qkv(
        &self,
        st: &mut State,
        layer_id: i64,
        sm_scale: f64,
        qkv: &Tensor,
        o: &Tensor,
    ) -> Result<()> {
        const F: &str = "vm.builtin.attention_kv_cache_attention_with_fused_qkv";
        let cfg = &self.cfg;
        let local = cfg.local_layer(layer_id, F)?;
        check_dtype(qkv, cfg.kv_dtype, cfg.device, F, "qkv_data")?;
        check_dtype(o, cfg.kv_dtype, cfg.device, F, "o_data")?;
        let kind = cfg.kind(layer_id);
        if kind != AttnKind::Mha && kind != AttnKind::MhaSliding {
            crate::bail_value!("{F}: layer {layer_id} is {}, not MHA", kind.name());
        }
        let (hq, hkv, d) = (cfg.num_qo_heads, cfg.num_kv_heads, cfg.qk_head_dim);
        check_shape(qkv, &[None, Some(hq + 2 * hkv), Some(d)], F, "qkv_data")?;
        check_shape(o, &[Some(qkv.shape()[0]), Some(hq), Some(d)], F, "o_data")?;
        let r = ready(st, self)?;
        let total = r.batch.total_length();
        if total > qkv.shape()[0] {
            crate::bail_value!(
                "{F}: qkv_data has {} tokens, the batch has {total}",
                qkv.shape()[0]
            );
        }
        let (q, k, v) = r
            .views
            .temp
            .qkv
            .as_ref()
            .ok_or_else(|| Error::runtime(format!("{F}: the cache has no MHA layer")))?;
        let (qkv_view, o_view) = if total != qkv.shape()[0] {
            (
                qkv.view(&[total, hq + 2 * hkv, d], cfg.kv_dtype, 0)?,
                o.view(&[total, hq, d], cfg.kv_dtype, 0)?,
            )
        } else {
            (qkv.clone(), o.clone())
        };
        // Split q/k/v, applying RoPE to q and k unless it is done inline.
        let rope_arg = match &cfg.rope_ext_factors {
            None => crate::value::AnyView::from(
                (cfg.rope_mode == super::config::RopeMode::Normal) as i64,
            ),
            Some(f) => arg(f),
        };
        Kernels::run(
            &self.kernels.split_rotary,
            &[
                arg(&qkv_view),
                arg(&r.views.q_rope_position_map),
                arg(q),
                arg(k),
                arg(v),
                rope_arg,
            ],
        )?;
        let append = self.kernels.transpose_append_mha.as_ref().ok_or_else(|| {
            Error::runtime(format!(
                "{F}: the cache has no transpose-append kernel for MHA"
            ))
        })?;
        let run_append = || {
            Kernels::run(
                append,
                &[
                    arg(&self.pages[local]),
                    arg(k),
                    arg(v),
                    arg(&r.views.append_position_map),
                ],
            )
        };
        if r.batch.append_before_attn {
            run_append()?;
        }
        self.attention_internal(&r, layer_id, q, k, v, &o_view, sm_scale)?;
        if !r.batch.append_before_attn {
            run_append()?;
        }
        Ok(())
    }

    /// `AttentionInternal`: self attention over the new tokens (unless they were appended
    /// first), then attention over the cached pages, merged.
    #[allow(clippy::too_many_arguments)]
    fn attention_internal(
        &self,
        r: &Ready<'_>,
        layer_id: i64,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        out: &Tensor,
        sm_scale: f64,
    ) -> Result<()> {
        let local = self.cfg.local_layer(layer_id, "attention")?;
        let mut is_first_kernel = true;
        if !r.batch.append_before_attn {
            is_first_kernel = false;
            self.mha_self_attn(r, q, k, v, out, &r.views.temp.merged_attn_lse, sm_scale)?;
        }
        let self_attn_computed = !is_first_kernel;
        let causal = !r.batch.append_before_attn && self.cfg.kind(layer_id) == AttnKind::MhaSliding;
        let cross = self.mha_cross_attn(
            r,
            local,
            q,
            out,
            &r.views.temp.merged_attn_lse,
            sm_scale,
            is_first_kernel,
            causal,
        )?;
        if !self_attn_computed && !cross {
            return Err(Error::runtime(
                "Both self-attention and cross-attention are not computed.",
            ));
        }
        Ok(())
    }

    /// Causal self-attention of the new tokens among themselves with the ragged prefill
    /// kernel (a batch whose depth 0 is a chain).
    #[allow(clippy::too_many_arguments)]
    fn ragged_self_attn(
        &self,
        r: &Ready<'_>,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        o: &Tensor,
        lse: &Tensor,
        s: AttnScalars,
    ) -> Result<()> {
        let f =
            self.kernels.prefill_ragged.as_ref().ok_or_else(|| {
                Error::runtime("The cache has no ragged prefill attention kernel.")
            })?;
        let vw = r.views;
        f.ragged_mha(
            q,
            k,
            v,
            &vw.cur_append_length_indptr,
            &vw.cur_append_length_indptr,
            &vw.q_rope_position_map,
            &vw.k_ragged_rope_pos_offset,
            true,
            s,
            o,
            lse,
        )
    }

    /// `MHASelfAttnInternal`.
    #[allow(clippy::too_many_arguments)]
    fn mha_self_attn(
        &self,
        r: &Ready<'_>,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        o: &Tensor,
        lse: &Tensor,
        sm_scale: f64,
    ) -> Result<()> {
        let vw = r.views;
        if r.batch.is_chain_on_depths[0] {
            self.ragged_self_attn(r, q, k, v, o, lse, self.scalars(sm_scale))
        } else {
            let f = self
                .kernels
                .prefill_with_tree_mask
                .as_ref()
                .ok_or_else(|| {
                    Error::runtime(
                        "Function \"f_attention_prefill_with_tree_mask_\" is not defined.",
                    )
                })?;
            let (mask, mn) = match (&vw.tree_attn_mask[0], &vw.tree_attn_mn_indptr[0]) {
                (Some(m), Some(n)) => (m, n),
                _ => return Err(super::state::internal("no tree mask on depth 0")),
            };
            f.ragged_tree_mha(
                q,
                k,
                v,
                &vw.cur_append_length_indptr,
                &vw.cur_append_length_indptr,
                &vw.q_rope_position_map,
                mn,
                mask,
                self.scalars(sm_scale),
                o,
                lse,
            )
        }
    }

    /// `MHACrossAttnInternal`: attention over the cached pages, depth by depth, each
    /// partial result merged into the output. Returns whether any depth had pages.
    #[allow(clippy::too_many_arguments)]
    fn mha_cross_attn(
        &self,
        r: &Ready<'_>,
        local: usize,
        q: &Tensor,
        o: &Tensor,
        lse: &Tensor,
        sm_scale: f64,
        is_first_kernel: bool,
        causal: bool,
    ) -> Result<bool> {
        let cfg = &self.cfg;
        let kn = &self.kernels;
        let layer_id = local as i64 + cfg.layer_begin;
        let sliding_layer = cfg.kind(layer_id) == AttnKind::MhaSliding;
        let normal = !cfg.support_sliding_window && !sliding_layer;
        let (f_prefill, f_decode) = if normal {
            (&kn.prefill, &kn.decode)
        } else {
            (&kn.prefill_sliding_window, &kn.decode_sliding_window)
        };
        let vw = r.views;
        let pages = &self.pages[local];
        self.over_depths(r, o, lse, is_first_kernel, |d, out, out_lse| {
            let (page_indptr, page_indices, length_info, k_rope_pos, theta, scale) =
                if sliding_layer {
                    let missing = || super::state::internal("no sliding-window page table");
                    (
                        vw.page_indptr_sliding_window[d]
                            .as_ref()
                            .ok_or_else(missing)?,
                        vw.page_indices_sliding_window[d]
                            .as_ref()
                            .ok_or_else(missing)?,
                        vw.layer_sliding_window_length_info[d]
                            .as_ref()
                            .ok_or_else(missing)?,
                        vw.k_rope_pos_offset_sliding_window[d]
                            .as_ref()
                            .ok_or_else(missing)?,
                        // TVM fixes RoPE of per-layer sliding windows to theta 10000, scale 1.
                        10000.0,
                        1.0,
                    )
                } else {
                    (
                        &vw.page_indptr[d],
                        &vw.page_indices[d],
                        &vw.length_info[d],
                        &vw.k_rope_pos_offset[d],
                        cfg.rotary_theta,
                        cfg.rotary_scale,
                    )
                };
            let s = AttnScalars {
                rope_mode: cfg.rope_mode,
                rotary_scale: scale,
                rotary_theta: theta,
                sm_scale,
            };
            if r.batch.append_before_attn && !r.batch.is_chain_on_depths[d] {
                let f = kn.prefill_with_tree_mask_paged_kv.as_ref().ok_or_else(|| {
                    Error::runtime("The cache has no paged tree-attention kernel.")
                })?;
                let (mask, mn) = match (&vw.tree_attn_mask[d], &vw.tree_attn_mn_indptr[d]) {
                    (Some(m), Some(n)) => (m, n),
                    _ => return Err(super::state::internal("no tree mask")),
                };
                f.paged_tree_mha(
                    q,
                    &vw.qo_indptr[d],
                    pages,
                    page_indptr,
                    page_indices,
                    length_info,
                    k_rope_pos,
                    &vw.q_rope_position_map,
                    mn,
                    mask,
                    s,
                    out,
                    out_lse,
                )?;
            } else if r.batch.use_decode_kernel[d] {
                let f = f_decode
                    .as_ref()
                    .ok_or_else(|| Error::runtime("The cache has no decode attention kernel."))?;
                f.paged_decode_mha(
                    q,
                    pages,
                    page_indptr,
                    page_indices,
                    length_info,
                    k_rope_pos,
                    &vw.q_rope_position_map,
                    s,
                    out,
                    out_lse,
                )?;
            } else {
                let f = f_prefill.as_ref().ok_or_else(|| {
                    Error::runtime("The cache has no paged prefill attention kernel.")
                })?;
                f.paged_prefill_mha(
                    q,
                    &vw.qo_indptr[d],
                    pages,
                    page_indptr,
                    page_indices,
                    length_info,
                    &vw.q_rope_position_map,
                    k_rope_pos,
                    causal,
                    s,
                    out,
                    out_lse,
                )?;
            }
            Ok(())
        })
    }

    /// `MLACrossAttnInternal`.
    fn mla_cross_attn(
        &self,
        r: &Ready<'_>,
        local: usize,
        q: &Tensor,
        o: &Tensor,
        lse: &Tensor,
        sm_scale: f64,
    ) -> Result<bool> {
        let vw = r.views;
        self.over_depths(r, o, lse, true, |d, out, out_lse| {
            if !r.batch.is_chain_on_depths[d] {
                crate::bail_value!("Tree attn not able for MLA for now.");
            }
            let f =
                self.kernels.mla_prefill.as_ref().ok_or_else(|| {
                    Error::runtime("The cache has no MLA prefill attention kernel.")
                })?;
            f.paged_prefill_mla(
                q,
                &vw.qo_indptr[d],
                &self.pages[local],
                &vw.page_indptr[d],
                &vw.page_indices[d],
                &vw.length_info[d],
                false,
                sm_scale,
                out,
                out_lse,
            )
        })
    }

    /// Runs `attend(depth, out, lse)` for each depth whose page table is not empty: the first
    /// result goes into `o`/`lse` (unless `is_first_kernel` is false: they hold one already),
    /// later ones into the scratch tensors, merged into `o`/`lse` right after. Returns whether
    /// any depth ran.
    fn over_depths(
        &self,
        r: &Ready<'_>,
        o: &Tensor,
        lse: &Tensor,
        mut is_first_kernel: bool,
        mut attend: impl FnMut(usize, &Tensor, &Tensor) -> Result<()>,
    ) -> Result<bool> {
        let vw = r.views;
        let mut computed = false;
        for d in 0..r.batch.num_depths {
            if vw.page_indices[d].shape()[0] == 0 {
                continue;
            }
            if is_first_kernel {
                attend(d, o, lse)?;
                is_first_kernel = false;
            } else {
                attend(d, &vw.temp.attn_output, &vw.temp.attn_lse)?;
                self.merge(0, o, lse, &vw.temp.attn_output, &vw.temp.attn_lse)?;
            }
            computed = true;
        }
        Ok(computed)
    }

    fn merge(
        &self,
        which: usize,
        o1: &Tensor,
        l1: &Tensor,
        o2: &Tensor,
        l2: &Tensor,
    ) -> Result<()> {
        let f = self
            .kernels
            .merge_inplace
            .get(which)
            .ok_or_else(|| Error::runtime("The attention merge function is not defined."))?;
        Kernels::run(f, &[arg(o1), arg(l1), arg(o2), arg(l2)])
    }

    /// `SelfAttention`: ragged attention of the new queries over the new keys (no append).
    #[allow(clippy::too_many_arguments)]
    pub fn self_attention(
        &self,
        st: &mut State,
        layer_id: i64,
        sm_scale: f64,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        o: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        const F: &str = "vm.builtin.attention_kv_cache_self_attention";
        let cfg = &self.cfg;
        cfg.local_layer(layer_id, F)?;
        for (t, n) in [(q, "q_data"), (k, "k_data"), (v, "v_data"), (o, "o_data")] {
            check_dtype(t, cfg.kv_dtype, cfg.device, F, n)?;
        }
        check_lse_dtype(lse, cfg, F)?;
        let r = ready(st, self)?;
        let total = r.batch.total_length();
        let (hq, hkv) = (Some(cfg.num_qo_heads), Some(cfg.num_kv_heads));
        let kind = cfg.kind(layer_id);
        if kind == AttnKind::Mha {
            check_shape(q, &[Some(total), hq, Some(cfg.qk_head_dim)], F, "q_data")?;
            check_shape(k, &[Some(total), hkv, Some(cfg.qk_head_dim)], F, "k_data")?;
            check_shape(v, &[Some(total), hkv, Some(cfg.v_head_dim)], F, "v_data")?;
            check_shape(o, &[Some(total), hq, Some(cfg.v_head_dim)], F, "o_data")?;
            check_shape(lse, &[Some(total), hq], F, "lse_data")?;
            self.mha_self_attn(&r, q, k, v, o, lse, sm_scale)
        } else {
            for (t, n) in [(q, "q_data"), (k, "k_data"), (v, "v_data"), (o, "o_data")] {
                check_shape(t, &[Some(total), None, None], F, n)?;
            }
            if !r.batch.is_chain_on_depths[0] {
                crate::bail_value!("Tree attn not able for MLA for now.");
            }
            let s = AttnScalars {
                rope_mode: super::config::RopeMode::None,
                ..self.scalars(sm_scale)
            };
            self.ragged_self_attn(&r, q, k, v, o, lse, s)
        }
    }

    /// `CrossAttention`: attention of the new queries over the cached pages.
    pub fn cross_attention(
        &self,
        st: &mut State,
        layer_id: i64,
        sm_scale: f64,
        q: &Tensor,
        o: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        const F: &str = "vm.builtin.attention_kv_cache_cross_attention";
        let cfg = &self.cfg;
        let local = cfg.local_layer(layer_id, F)?;
        check_dtype(q, cfg.kv_dtype, cfg.device, F, "q_data")?;
        check_dtype(o, cfg.kv_dtype, cfg.device, F, "o_data")?;
        check_lse_dtype(lse, cfg, F)?;
        let r = ready(st, self)?;
        let total = r.batch.total_length();
        let hq = Some(cfg.num_qo_heads);
        check_shape(q, &[Some(total), hq, Some(cfg.qk_head_dim)], F, "q_data")?;
        check_shape(o, &[Some(total), hq, Some(cfg.v_head_dim)], F, "o_data")?;
        check_shape(lse, &[Some(total), hq], F, "lse_data")?;
        if cfg.kind(layer_id) == AttnKind::Mha {
            self.mha_cross_attn(&r, local, q, o, lse, sm_scale, true, false)?;
        } else {
            self.mla_cross_attn(&r, local, q, o, lse, sm_scale)?;
        }
        Ok(())
    }

    /// `AttentionWithSharedKV`: a layer attending over another layer's cache (no append).
    #[allow(clippy::too_many_arguments)]
    pub fn attention_with_shared_kv(
        &self,
        st: &mut State,
        source_layer_id: i64,
        sm_scale: f64,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        o: &Tensor,
    ) -> Result<()> {
        const F: &str = "vm.builtin.attention_kv_cache_attention_with_shared_kv";
        let cfg = &self.cfg;
        cfg.local_layer(source_layer_id, F)?;
        for (t, n) in [
            (q, "q_data"),
            (k, "current_k_data"),
            (v, "current_v_data"),
            (o, "o_data"),
        ] {
            check_dtype(t, cfg.kv_dtype, cfg.device, F, n)?;
        }
        let kind = cfg.kind(source_layer_id);
        if kind != AttnKind::Mha && kind != AttnKind::MhaSliding {
            crate::bail_value!(
                "Querying K/V from another logical layer is only supported for MHA caches."
            );
        }
        let r = ready(st, self)?;
        let total = Some(r.batch.total_length());
        let (hq, hkv) = (Some(cfg.num_qo_heads), Some(cfg.num_kv_heads));
        check_shape(q, &[total, hq, Some(cfg.qk_head_dim)], F, "q_data")?;
        check_shape(k, &[total, hkv, Some(cfg.qk_head_dim)], F, "current_k_data")?;
        check_shape(v, &[total, hkv, Some(cfg.v_head_dim)], F, "current_v_data")?;
        check_shape(o, &[total, hq, Some(cfg.v_head_dim)], F, "o_data")?;
        self.attention_internal(&r, source_layer_id, q, k, v, o, sm_scale)
    }

    /// `AppendMLAKV`.
    pub fn append_mla_kv(&self, st: &mut State, layer_id: i64, kv: &Tensor) -> Result<()> {
        const F: &str = "vm.builtin.attention_kv_cache_append_mla_kv";
        let cfg = &self.cfg;
        let local = cfg.local_layer(layer_id, F)?;
        check_dtype(kv, cfg.kv_dtype, cfg.device, F, "kv_data")?;
        if cfg.kind(layer_id) != AttnKind::Mla {
            crate::bail_value!("{F}: layer {layer_id} is not an MLA layer");
        }
        let r = ready(st, self)?;
        check_shape(kv, &[None, Some(cfg.qk_head_dim)], F, "kv_data")?;
        if kv.shape()[0] > r.batch.total_length() {
            crate::bail_value!("{F}: kv_data has more tokens than the batch");
        }
        let f = self.kernels.transpose_append_mla.as_ref().ok_or_else(|| {
            Error::runtime(format!(
                "{F}: the cache has no transpose-append kernel for MLA"
            ))
        })?;
        Kernels::run(
            f,
            &[
                arg(&self.pages[local]),
                arg(kv),
                arg(&r.views.append_position_map),
            ],
        )
    }

    /// `MergeAttnOutputInplace`: merges the second result into the first, in place.
    pub fn merge_attn_output_inplace(
        &self,
        o1: &Tensor,
        l1: &Tensor,
        o2: &Tensor,
        l2: &Tensor,
    ) -> Result<()> {
        if self.kernels.merge_inplace.len() < 2 {
            return Err(Error::runtime(
                "The general attention merge function is not defined.",
            ));
        }
        self.merge(1, o1, l1, o2, l2)
    }

    /// `GetQueryPositions`.
    pub fn query_positions(&self, st: &mut State) -> Result<Tensor> {
        let r = ready(st, self)?;
        Ok(r.views.q_rope_position_map.clone())
    }
}

/// The log-sum-exp output every attention entry takes: float32 on the cache's device.
fn check_lse_dtype(lse: &Tensor, cfg: &Config, f: &str) -> Result<()> {
    use crate::dtype::dtypes::FLOAT32;
    check_dtype(lse, FLOAT32, cfg.device, f, "lse_data")
}
