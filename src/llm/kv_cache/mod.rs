//! The paged KV cache of TVM 0.27 (`relax.vm.PagedAttentionKVCache`,
//! `src/runtime/vm/paged_kv_cache.cc`): K/V of many sequences in fixed-size pages, prefixes
//! shared between forked sequences, sliding windows with attention sinks, token trees for
//! speculative decoding, and checkpoints of a sequence's pages.
//!
//! A model creates its cache through `vm.builtin.paged_attention_kv_cache_create`, handing it
//! its compiled attention kernels; the driver calls the `vm.builtin.kv_state_*` functions
//! around each forward, and the model calls `vm.builtin.attention_kv_cache_*` in each layer.
//! The cache calls the model's kernels with the pages, auxiliary arrays and kernel choices
//! TVM's runtime would use, so a model gives the same logits, bit for bit.
//!
//! Every operation either succeeds or fails with the cache as it was: a bad sequence id, a
//! batch that does not fit the free pages or a malformed token tree leaves the other
//! sequences intact.

mod attention;
mod aux_data;
mod aux_sync;
pub mod blocks;
mod checkpoint;
pub mod config;
mod forward;
mod globals;
mod kernels;
mod pages;
mod state;
mod tree_mask;

use self::blocks::TEMP_PAGE_ID;
use self::config::{AttnKind, Config, RawConfig};
use self::kernels::{arg, attn_kernel, Kernels};
use self::state::{internal, not_found, State};
use super::args::Args;
use super::guarded::{Guarded, Locked};
use super::kv_state::KvState;
use crate::dtype::dtypes;
use crate::error::{Error, Result};
use crate::object::ObjectPayload;
use crate::tensor::Tensor;

pub use self::globals::builtins;

/// Scratch tensors the attention writes between kernels (TVM's `temp_attn_*_device_`).
struct TempBuffers {
    /// q, k, v split from fused QKV (when the cache has MHA layers).
    qkv: Option<(Tensor, Tensor, Tensor)>,
    output: Tensor,
    lse: Tensor,
    merged_lse: Tensor,
}

/// What does not change after creation.
pub struct Shared {
    cfg: Config,
    kernels: Kernels,
    /// One tensor of pages per layer.
    pages: Vec<Tensor>,
    temp: TempBuffers,
}

/// A paged KV cache object.
pub struct PagedKvCache {
    shared: Shared,
    state: Guarded<State>,
}

// SAFETY: no public cell (TVM's object is private to its runtime); the payload is
// thread-safe (a mutex guards the state, the rest is immutable). The index is registered
// once under `relax.vm.PagedAttentionKVCache`.
unsafe impl ObjectPayload for PagedKvCache {
    const TYPE_INDEX: i32 = crate::abi::type_index::OBJECT;
    fn type_index() -> i32 {
        super::types::paged_kv_cache()
    }
}

// The payload is shared between threads (the safety claim above): checked here.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<PagedKvCache>();
};

const CREATE: &str = "vm.builtin.paged_attention_kv_cache_create";

impl PagedKvCache {
    /// `vm.builtin.paged_attention_kv_cache_create` with TVM 0.27's 28 arguments (a 29th,
    /// reserved by TVM for CUDA graphs, is accepted and ignored).
    pub fn create(args: &Args<'_, '_>) -> Result<PagedKvCache> {
        let init = args.tensor(12, "init")?;
        let raw = RawConfig {
            cache_config: args.shape(0, "cache_config")?,
            layer_indptr: args.shape(1, "layer_indptr")?,
            num_qo_heads: args.i64(2, "num_qo_heads")?,
            num_kv_heads: args.i64(3, "num_kv_heads")?,
            qk_head_dim: args.i64(4, "qk_head_dim")?,
            v_head_dim: args.i64(5, "v_head_dim")?,
            attn_kinds: args.shape(6, "attn_kinds")?,
            enable_kv_transfer: args.bool(7, "enable_kv_transfer")?,
            rope_mode: args.i64(8, "rope_mode")?,
            rotary_scale: args.f64(9, "rotary_scale")?,
            rotary_theta: args.f64(10, "rotary_theta")?,
            rope_ext_factors: match args.get(11).type_index() {
                crate::abi::type_index::TENSOR => Some(args.tensor(11, "rope_ext_factors")?),
                _ => None,
            },
            kv_dtype: init.dtype(),
            device: init.device(),
        };
        let cfg = Config::new(raw)?;
        let entry = |i: usize, name: &str, ragged: bool| {
            let arr = args.array(i, name)?;
            attn_kernel(&arr, &format!("{CREATE} argument {i} ({name})"), ragged)
        };
        let merge_inplace = args.functions(23, "f_merge_inplace")?;
        if merge_inplace.is_empty() {
            crate::bail_value!("Merge inplace function is not defined.");
        }
        let kernels = Kernels {
            transpose_append_mha: args.opt_function(13),
            transpose_append_mla: args.opt_function(14),
            prefill_ragged: entry(15, "f_attention_prefill_ragged", true)?,
            prefill: entry(16, "f_attention_prefill", false)?,
            decode: entry(17, "f_attention_decode", false)?,
            prefill_sliding_window: entry(18, "f_attention_prefill_sliding_window", false)?,
            decode_sliding_window: entry(19, "f_attention_decode_sliding_window", false)?,
            prefill_with_tree_mask_paged_kv: entry(
                20,
                "f_attention_prefill_with_tree_mask_paged_kv",
                false,
            )?,
            prefill_with_tree_mask: entry(21, "f_attention_prefill_with_tree_mask", false)?,
            mla_prefill: entry(22, "f_mla_prefill", false)?,
            merge_inplace,
            split_rotary: args.function(24, "f_split_rotary")?,
            copy_single_page: args.function(25, "f_copy_single_page")?,
            debug_get_kv: args.function(26, "f_debug_get_kv")?,
            compact_copy: args.function(27, "f_compact_copy")?,
        };
        PagedKvCache::new(cfg, kernels)
    }

    fn new(cfg: Config, kernels: Kernels) -> Result<PagedKvCache> {
        let mut pages = Vec::with_capacity(cfg.num_layers as usize);
        for layer in cfg.layer_begin..cfg.layer_end {
            let shape = cfg.page_shape(cfg.kind(layer));
            pages.push(
                Tensor::empty(&shape, cfg.kv_dtype, cfg.device)
                    .map_err(|e| e.context(format!("allocating the KV pages of layer {layer}")))?,
            );
        }
        let chunk = cfg.prefill_chunk_size;
        let has_mha = cfg
            .attn_kinds
            .iter()
            .any(|k| matches!(k, AttnKind::Mha | AttnKind::MhaSliding));
        let qkv = if has_mha {
            Some((
                Tensor::empty(
                    &[chunk, cfg.num_qo_heads, cfg.qk_head_dim],
                    cfg.kv_dtype,
                    cfg.device,
                )?,
                Tensor::empty(
                    &[chunk, cfg.num_kv_heads, cfg.qk_head_dim],
                    cfg.kv_dtype,
                    cfg.device,
                )?,
                Tensor::empty(
                    &[chunk, cfg.num_kv_heads, cfg.v_head_dim],
                    cfg.kv_dtype,
                    cfg.device,
                )?,
            ))
        } else {
            None
        };
        let temp = TempBuffers {
            qkv,
            output: Tensor::empty(
                &[chunk, cfg.num_qo_heads, cfg.v_head_dim],
                cfg.kv_dtype,
                cfg.device,
            )?,
            lse: Tensor::empty(&[chunk, cfg.num_qo_heads], dtypes::FLOAT32, cfg.device)?,
            merged_lse: Tensor::empty(&[chunk, cfg.num_qo_heads], dtypes::FLOAT32, cfg.device)?,
        };
        let state = State::new(&cfg)?;
        Ok(PagedKvCache {
            shared: Shared {
                cfg,
                kernels,
                pages,
                temp,
            },
            state: Guarded::new(state),
        })
    }

    fn lock(&self) -> Result<Locked<'_, State>> {
        self.state.lock("paged KV cache")
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// Bytes of device memory the cache holds: pages, scratch tensors, auxiliary arrays.
    pub fn device_bytes(&self) -> Result<usize> {
        let sh = &self.shared;
        let mut n: usize = sh.pages.iter().map(Tensor::nbytes).sum();
        if let Some((q, k, v)) = &sh.temp.qkv {
            n += q.nbytes() + k.nbytes() + v.nbytes();
        }
        n += sh.temp.output.nbytes() + sh.temp.lse.nbytes() + sh.temp.merged_lse.nbytes();
        let st = self.lock()?;
        Ok(n + st.aux.device_bytes() + st.compact_aux.device_bytes())
    }

    /// `Empty`: no sequence, every block and page free.
    pub fn is_empty(&self) -> Result<bool> {
        let st = self.lock()?;
        Ok(st.seqs.is_empty()
            && st.pool.free.len() == st.pool.blocks.len()
            && st.free_pages.len() as i64 == self.shared.cfg.num_total_pages)
    }

    /// `GetNumAvailablePages`.
    pub fn num_available_pages(&self) -> Result<i64> {
        Ok(self.lock()?.free_pages.len() as i64)
    }

    /// `GetTotalSequenceLength`.
    pub fn total_sequence_length(&self) -> Result<i64> {
        let st = self.lock()?;
        Ok(st.seqs.values().map(|s| s.seq_length as i64).sum())
    }

    /// `GetSequenceLength`.
    pub fn sequence_length(&self, seq_id: i64) -> Result<i64> {
        let st = self.lock()?;
        if st.import.is_some() {
            return Err(Error::runtime(
                "PagedAttentionKVCache sequence length is unavailable until checkpoint import \
                 is finished.",
            ));
        }
        Ok(st.seq(seq_id)?.seq_length as i64)
    }

    /// `EnableSlidingWindowForSeq`.
    pub fn enable_sliding_window_for_seq(&self, seq_id: i64, window: i32, sink: i32) -> Result<()> {
        self.lock()?
            .enable_sliding_window(&self.shared.cfg, seq_id, window, sink)
    }

    /// `CommitAcceptedTokenTreeNodes`: keeps the path from each sequence's root to its
    /// accepted leaf (-1: none) and drops the rest of the token tree.
    pub fn commit_accepted_token_tree_nodes(&self, seq_ids: &[i64], leaves: &[i64]) -> Result<()> {
        let mut st = self.lock()?;
        if seq_ids.len() != leaves.len() {
            crate::bail_value!("The given seq_ids and leaf_indices have different size.");
        }
        let mut is_chain = true;
        for (&id, &leaf) in seq_ids.iter().zip(leaves) {
            let seq = st.seq(id)?;
            is_chain = seq.is_chain;
            if leaf != -1 && seq.accepted_indices_committed {
                crate::bail_value!("The accepted nodes of sequence {id} are already committed.");
            }
            if leaf < -1 {
                crate::bail_value!("Invalid tree index {leaf} which is less than -1");
            }
            if leaf >= seq.token_tree_parent_ptr.len() as i64 {
                crate::bail_value!(
                    "Invalid tree index {leaf} which is larger than or equals to the append \
                     length {} of the sequence",
                    seq.token_tree_parent_ptr.len()
                );
            }
        }
        let batch_lengths = match &st.batch {
            Some(b) if b.seq_ids.len() >= seq_ids.len() => b.append_lengths.clone(),
            _ => {
                crate::bail_value!(
                    "CommitAcceptedTokenTreeNodes needs the batch of the last forward (its \
                     sequences in the same order)"
                )
            }
        };
        let batch_ids = st.batch.as_ref().unwrap().seq_ids.clone();
        let snap = st.snapshot();
        let r = self.commit_inner(
            &mut st,
            seq_ids,
            leaves,
            &batch_ids,
            &batch_lengths,
            is_chain,
        );
        if r.is_err() {
            st.restore(snap);
        }
        r
    }

    fn commit_inner(
        &self,
        st: &mut State,
        seq_ids: &[i64],
        leaves: &[i64],
        batch_ids: &[i64],
        batch_lengths: &[i64],
        is_chain: bool,
    ) -> Result<()> {
        let sh = &self.shared;
        if !is_chain {
            let h = &mut st.host;
            h.commit_copy_length_indptr.clear();
            h.commit_copy_src_pos.clear();
            h.commit_copy_dst_pos.clear();
            h.commit_copy_length_indptr.push(0);
            let mut append_offset = 0usize;
            for (i, (&id, &leaf)) in seq_ids.iter().zip(leaves).enumerate() {
                if i > 0 {
                    append_offset += batch_lengths[i - 1] as usize;
                }
                let last = *h.commit_copy_length_indptr.last().unwrap();
                if leaf == -1 {
                    h.commit_copy_length_indptr.push(last);
                    continue;
                }
                let seq = &st.seqs[&id];
                // The accepted path, leaf first, and where each node goes (its depth).
                let mut path = Vec::new();
                let mut node = leaf as i32;
                while node != -1 {
                    path.push(node);
                    node = seq.token_tree_parent_ptr[node as usize];
                }
                let depth = seq.token_tree_node_depths[leaf as usize] as usize;
                if path.len() != depth + 1 {
                    return Err(internal("token tree path length differs from the depth"));
                }
                let mut dst: Vec<i32> = (0..path.len() as i32).rev().collect();
                // Nodes already in place need no copy.
                while let (Some(&p), Some(&d)) = (path.last(), dst.last()) {
                    if p != d {
                        break;
                    }
                    path.pop();
                    dst.pop();
                }
                path.reverse();
                dst.reverse();
                for (&p, &d) in path.iter().zip(&dst) {
                    let at = |k: i32| {
                        h.append_position_map
                            .get(append_offset + k as usize)
                            .copied()
                            .ok_or_else(|| internal("commit past the append positions"))
                    };
                    h.commit_copy_src_pos.push(at(p)?);
                    h.commit_copy_dst_pos.push(at(d)?);
                }
                h.commit_copy_length_indptr.push(last + path.len() as i32);
            }
            self.compact_kv_copy(st, batch_ids.len() as i64)?;
        }
        for (i, (&id, &leaf)) in seq_ids.iter().zip(leaves).enumerate() {
            let accepted = if leaf != -1 {
                st.seqs[&id].token_tree_node_depths[leaf as usize] as i64 + 1
            } else {
                0
            };
            let pop = batch_lengths[i] - accepted;
            let pop_id = batch_ids[i];
            st.popn(sh, pop_id, pop as i32)?;
            let seq = st.seqs.get_mut(&id).ok_or_else(|| not_found(id))?;
            seq.accepted_indices_committed = true;
            seq.token_tree_parent_ptr.clear();
            seq.token_tree_node_depths.clear();
        }
        Ok(())
    }

    /// `CompactKVCopy`: moves the K/V of accepted tree nodes into place, every layer.
    fn compact_kv_copy(&self, st: &mut State, batch_size: i64) -> Result<()> {
        let h = &st.host;
        let total = *h.commit_copy_length_indptr.last().unwrap();
        if total == 0 {
            return Ok(());
        }
        let aux = &mut st.compact_aux;
        aux.reset();
        let indptr = aux.push(&[&h.commit_copy_length_indptr]);
        let pos = aux.push(&[&h.commit_copy_src_pos, &h.commit_copy_dst_pos]);
        aux.commit()?;
        let indptr = aux.view(indptr, &[indptr.len() as i64])?;
        let pos = aux.view(pos, &[2, pos.len() as i64 / 2])?;
        for pages in &self.shared.pages {
            Kernels::run(
                &self.shared.kernels.compact_copy,
                &[
                    arg(pages),
                    arg(&indptr),
                    arg(&pos),
                    crate::value::AnyView::from(batch_size),
                ],
            )?;
        }
        Ok(())
    }

    /// `DebugGetKV`: the K/V of tokens `[start, end)` of a sequence into
    /// `(num_layers, end - start, num_kv_heads, head_dim)` tensors.
    pub fn debug_get_kv(
        &self,
        seq_id: i64,
        start: i64,
        end: i64,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<()> {
        let cfg = &self.shared.cfg;
        let map = self.position_map(seq_id, start, end)?;
        const MSG: &str = "DebugGetKV expects the k_data in layout (num_layers, seq_length, \
                           num_kv_heads, qk_head_dim).";
        for t in [k, v] {
            let want = [
                cfg.num_layers,
                end - start,
                cfg.num_kv_heads,
                cfg.qk_head_dim,
            ];
            if t.shape() != want {
                crate::bail_value!("{MSG} Got shape {:?}, expected {want:?}.", t.shape());
            }
            if t.dtype() != cfg.kv_dtype {
                crate::bail_type!("DebugGetKV: the output dtype differs from the cache's");
            }
        }
        for (layer, pages) in self.shared.pages.iter().enumerate() {
            if cfg.kind(layer as i64) != AttnKind::Mha {
                crate::bail_value!("Only MHA is supported for DebugGetKV");
            }
            Kernels::run(
                &self.shared.kernels.debug_get_kv,
                &[
                    arg(pages),
                    arg(&map),
                    arg(k),
                    arg(v),
                    crate::value::AnyView::from(layer as i64),
                ],
            )?;
        }
        Ok(())
    }

    /// `DebugGetKVMLA`: the MLA latent K/V into `(num_layers, end - start, qk_head_dim)`.
    pub fn debug_get_kv_mla(&self, seq_id: i64, start: i64, end: i64, kv: &Tensor) -> Result<()> {
        let cfg = &self.shared.cfg;
        let map = self.position_map(seq_id, start, end)?;
        let want = [cfg.num_layers, end - start, cfg.qk_head_dim];
        if kv.shape() != want {
            crate::bail_value!(
                "DebugGetKV expects the kv_data in layout (num_layers, seq_length, \
                 qk_head_dim). Got shape {:?}, expected {want:?}.",
                kv.shape()
            );
        }
        for (layer, pages) in self.shared.pages.iter().enumerate() {
            if cfg.kind(layer as i64) != AttnKind::Mla {
                crate::bail_value!("Only MLA is supported for DebugGetKVMLA");
            }
            Kernels::run(
                &self.shared.kernels.debug_get_kv,
                &[
                    arg(pages),
                    arg(&map),
                    arg(kv),
                    crate::value::AnyView::from(layer as i64),
                ],
            )?;
        }
        Ok(())
    }

    /// The page slots of tokens `[start, end)` of a sequence, on the device.
    fn position_map(&self, seq_id: i64, start: i64, end: i64) -> Result<Tensor> {
        let st = self.lock()?;
        let seq = st.seq(seq_id)?;
        if start < 0 {
            crate::bail_value!("DebugGetKV does not accept negative start_pos {start}");
        }
        if end > seq.seq_length as i64 {
            crate::bail_value!("DebugGetKV does not accept out-of-range end_pos");
        }
        if start >= end {
            crate::bail_value!("DebugGetKV does not accept \"start_pos >= end_pos\"");
        }
        let page_size = self.shared.cfg.page_size as i32;
        let mut map = Vec::with_capacity(seq.seq_length as usize);
        for b in st.pool.trace(seq.last_block_idx) {
            let block = st.pool.get(b);
            for i in 0..block.seq_length {
                let offset = if i < block.sink_length {
                    i
                } else {
                    i - block.sink_length + block.sliding_window_offset
                };
                let page = *block
                    .page_ids
                    .get((offset / page_size) as usize)
                    .filter(|&&p| p != TEMP_PAGE_ID)
                    .ok_or_else(|| internal("token past its block's pages"))?;
                map.push(page * page_size + offset % page_size);
            }
        }
        crate::llm::transfer::tensor_from_i32(
            &map[start as usize..end as usize],
            self.shared.cfg.device,
        )
    }

    /// `DisaggPrepareRecv`: prepares a one-sequence forward and returns where its tokens go,
    /// as `[n, begin_1, length_1, ..., begin_n, length_n]` runs of slots.
    pub fn disagg_prepare_recv(&self, seq_id: i64, length: i64) -> Result<Vec<i64>> {
        self.begin_forward(&[seq_id], &[length], None)?;
        let st = self.lock()?;
        let map = &st.host.append_position_map;
        if map.len() as i64 != length || map.is_empty() {
            return Err(internal("receive positions do not match the length"));
        }
        let mut out = vec![1i64, map[0] as i64];
        for i in 1..map.len() {
            if map[i] != map[i - 1] + 1 {
                let begin = *out.last().unwrap();
                out.push(map[i - 1] as i64 - begin + 1);
                out[0] += 1;
                out.push(map[i] as i64);
            }
        }
        let begin = *out.last().unwrap();
        out.push(*map.last().unwrap() as i64 - begin + 1);
        Ok(out)
    }
}

impl KvState for PagedKvCache {
    fn clear(&self) -> Result<()> {
        self.lock()?.clear(&self.shared.cfg);
        Ok(())
    }

    fn add_sequence(&self, seq_id: i64) -> Result<()> {
        self.lock()?.add_sequence(seq_id)
    }

    fn remove_sequence(&self, seq_id: i64) -> Result<()> {
        self.lock()?.remove_sequence(seq_id)
    }

    fn fork_sequence(&self, parent: i64, child: i64, fork_pos: i64) -> Result<()> {
        self.lock()?
            .fork_sequence(&self.shared, parent, child, fork_pos)
    }

    fn popn(&self, seq_id: i64, n: i32) -> Result<()> {
        self.lock()?.popn(&self.shared, seq_id, n)
    }

    fn begin_forward(
        &self,
        seq_ids: &[i64],
        append_lengths: &[i64],
        token_tree_parent_ptr: Option<&[i64]>,
    ) -> Result<()> {
        let mut st = self.lock()?;
        forward::begin_forward(
            &mut st,
            &self.shared.cfg,
            seq_ids,
            append_lengths,
            token_tree_parent_ptr,
        )
    }

    fn end_forward(&self) -> Result<()> {
        Ok(())
    }
}

/// A `PagedKvCache` argument.
fn cache_arg<'o>(
    args: &Args<'_, '_>,
    obj: &'o crate::object::ObjectRef,
) -> Result<&'o PagedKvCache> {
    obj.downcast_ref::<PagedKvCache>().ok_or_else(|| {
        args.get(0).type_mismatch(
            &format!("{} argument 0 (kv_cache)", args.func()),
            "relax.vm.PagedAttentionKVCache",
        )
    })
}

/// Locks a cache's state for one of the attention calls.
fn with_state<R>(c: &PagedKvCache, f: impl FnOnce(&Shared, &mut State) -> Result<R>) -> Result<R> {
    let mut st = c.lock()?;
    f(&c.shared, &mut st)
}
