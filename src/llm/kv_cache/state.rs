//! The mutable state of a paged KV cache and the sequence operations on it (TVM
//! `PagedAttentionKVCacheObj`: `AddSequence`, `RemoveSequence`, `ForkSequence`, `PopN`,
//! `EnableSlidingWindowForSeq`, `ReserveAppendLengthInSeq`, `SlideWindowForSequence`,
//! `CopySinglePage`), in TVM's order of page and block allocation, so pages hold the same
//! tokens as in TVM's cache.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::aux_data::AuxBuffer;
use super::blocks::{BlockPool, Sequence, MAX_BLOCK_DEPTH, TEMP_PAGE_ID};
use super::config::Config;
use super::kernels::{arg, Kernels};
use super::pages::FreePages;
use super::Shared;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Hashes sequence ids with one multiplication (Fibonacci hashing): ids are chosen by the
/// driver, not by an attacker, and SipHash cost more than the rest of a lookup.
#[derive(Default)]
pub struct SeqIdHasher(u64);

impl Hasher for SeqIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_i64(&mut self, v: i64) {
        self.0 = (v as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

/// Sequences by id.
pub type SeqMap = HashMap<i64, Sequence, BuildHasherDefault<SeqIdHasher>>;

/// Host copies of the auxiliary arrays of the current batch (TVM's `*_host_` vectors).
#[derive(Default)]
pub struct HostArrays {
    pub qo_indptr: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub page_indptr: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub page_indices: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub page_indptr_sliding_window: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub page_indices_sliding_window: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub last_page_len: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub sliding_window_offset: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub sink_size: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub k_rope_pos_offset: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub k_rope_pos_offset_sliding_window: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub tree_attn_mask: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub tree_attn_mn_indptr: [Vec<i32>; MAX_BLOCK_DEPTH],
    pub k_ragged_rope_pos_offset: Vec<i32>,
    pub q_rope_position_map: Vec<i32>,
    pub append_position_map: Vec<i32>,
    pub cur_append_lengths_indptr: Vec<i32>,
    pub commit_copy_length_indptr: Vec<i32>,
    pub commit_copy_src_pos: Vec<i32>,
    pub commit_copy_dst_pos: Vec<i32>,
}

/// The batch prepared by the last `begin_forward`.
pub struct Batch {
    pub seq_ids: Vec<i64>,
    pub append_lengths: Vec<i64>,
    pub num_depths: usize,
    /// New K/V go into the pages before attention (decode), else after (prefill).
    pub append_before_attn: bool,
    pub use_decode_kernel: Vec<bool>,
    pub is_chain_on_depths: [bool; MAX_BLOCK_DEPTH],
}

impl Batch {
    /// Tokens in the batch.
    pub fn total_length(&self) -> i64 {
        self.append_lengths.iter().sum()
    }
}

/// The auxiliary arrays of the batch on the device (TVM's `*_view_` tensors).
pub struct Views {
    pub q_rope_position_map: Tensor,
    pub qo_indptr: Vec<Tensor>,
    pub page_indptr: Vec<Tensor>,
    pub page_indices: Vec<Tensor>,
    pub page_indptr_sliding_window: Vec<Option<Tensor>>,
    pub page_indices_sliding_window: Vec<Option<Tensor>>,
    pub length_info: Vec<Tensor>,
    pub layer_sliding_window_length_info: Vec<Option<Tensor>>,
    pub k_rope_pos_offset: Vec<Tensor>,
    pub k_rope_pos_offset_sliding_window: Vec<Option<Tensor>>,
    pub tree_attn_mask: Vec<Option<Tensor>>,
    pub tree_attn_mn_indptr: Vec<Option<Tensor>>,
    pub cur_append_length_indptr: Tensor,
    pub k_ragged_rope_pos_offset: Tensor,
    pub append_position_map: Tensor,
    pub temp: TempViews,
}

/// Views of the scratch tensors for a batch of `total` tokens (kept while the batch size
/// stays the same, as in a run of decode steps).
#[derive(Clone)]
pub struct TempViews {
    pub total: i64,
    /// q, k, v split from fused QKV (when the cache has MHA layers).
    pub qkv: Option<(Tensor, Tensor, Tensor)>,
    pub attn_output: Tensor,
    pub attn_lse: Tensor,
    pub merged_attn_lse: Tensor,
}

/// Everything that changes.
pub struct State {
    pub pool: BlockPool,
    pub seqs: SeqMap,
    pub free_pages: FreePages,
    /// While a checkpoint import runs: which page groups were imported.
    pub import: Option<Vec<bool>>,
    pub batch: Option<Batch>,
    pub host: HostArrays,
    /// The device arrays are older than the host arrays.
    pub dirty: bool,
    pub views: Option<Views>,
    /// The scratch views of the last batch.
    pub temp_views: Option<TempViews>,
    pub aux: AuxBuffer,
    pub compact_aux: AuxBuffer,
}

/// A copy of the bookkeeping, restored when a rare operation fails half-way.
pub struct Snapshot {
    pool: BlockPool,
    seqs: SeqMap,
    free_pages: Vec<i32>,
}

impl State {
    /// An empty cache of `cfg`.
    pub fn new(cfg: &Config) -> Result<State> {
        let seqs = cfg.reserved_num_seqs as usize;
        let depth_elems = 5 * (seqs + 1)
            + 2 * cfg.num_total_pages as usize
            + 8 * seqs
            + 2 * super::blocks::MAX_TREE_SIZE * seqs;
        let capacity = MAX_BLOCK_DEPTH * depth_elems
            + 2 * (seqs + 1)
            + 2 * cfg.prefill_chunk_size as usize
            + 128;
        Ok(State {
            pool: BlockPool::default(),
            seqs: SeqMap::default(),
            free_pages: FreePages::all(cfg.num_total_pages),
            import: None,
            batch: None,
            host: HostArrays::default(),
            dirty: false,
            views: None,
            temp_views: None,
            aux: AuxBuffer::new(cfg.device, capacity)?,
            compact_aux: AuxBuffer::new(cfg.device, 2 * seqs + 8)?,
        })
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            pool: self.pool.clone(),
            seqs: self.seqs.clone(),
            free_pages: self.free_pages.snapshot(),
        }
    }

    pub fn restore(&mut self, s: Snapshot) {
        self.pool = s.pool;
        self.seqs = s.seqs;
        self.free_pages.restore(s.free_pages);
    }

    /// The bookkeeping changed: the next attention needs a new `begin_forward`.
    fn touched(&mut self) {
        self.dirty = true;
        self.batch = None;
        self.views = None;
    }

    pub fn seq(&self, seq_id: i64) -> Result<&Sequence> {
        self.seqs.get(&seq_id).ok_or_else(|| not_found(seq_id))
    }

    fn no_import(&self, what: &str) -> Result<()> {
        if self.import.is_some() {
            return Err(Error::runtime(format!(
                "PagedAttentionKVCache cannot {what} before checkpoint import is finished."
            )));
        }
        Ok(())
    }

    /// `Clear`.
    pub fn clear(&mut self, cfg: &Config) {
        self.seqs.clear();
        self.import = None;
        self.free_pages = FreePages::all(cfg.num_total_pages);
        self.pool.clear();
        self.dirty = false;
        self.batch = None;
        self.views = None;
    }

    /// `AddSequence`.
    pub fn add_sequence(&mut self, seq_id: i64) -> Result<()> {
        self.no_import("add a sequence")?;
        if self.seqs.contains_key(&seq_id) {
            return Err(Error::value(format!(
                "The sequence \"{seq_id}\" is already in the KV cache."
            )));
        }
        let b = self.pool.alloc();
        let seq = self.pool.new_sequence(b);
        self.seqs.insert(seq_id, seq);
        self.touched();
        Ok(())
    }

    /// `RemoveSequence`.
    pub fn remove_sequence(&mut self, seq_id: i64) -> Result<()> {
        self.no_import("remove a sequence")?;
        let seq = self.seqs.get(&seq_id).ok_or_else(|| not_found(seq_id))?;
        let mut b = seq.last_block_idx;
        if self.pool.get(b).external_ref_cnt < 1 {
            return Err(internal("a sequence's last block has no reference"));
        }
        while b != -1 && self.pool.get(b).external_ref_cnt == 1 {
            let block = self.pool.get(b);
            for &p in &block.page_ids {
                if p != TEMP_PAGE_ID {
                    self.free_pages.push(p);
                }
            }
            let parent = block.parent_idx;
            self.pool.free.push(b);
            b = parent;
        }
        if b != -1 {
            self.pool.get_mut(b).external_ref_cnt -= 1;
        }
        self.seqs.remove(&seq_id);
        self.touched();
        Ok(())
    }

    /// `ForkSequence`; on failure the cache is as before.
    pub fn fork_sequence(&mut self, sh: &Shared, parent: i64, child: i64, pos: i64) -> Result<()> {
        self.no_import("fork a sequence")?;
        let snap = self.snapshot();
        let r = self.fork_inner(sh, parent, child, pos);
        if r.is_err() {
            self.restore(snap);
        }
        self.touched();
        r
    }

    fn fork_inner(&mut self, sh: &Shared, parent_id: i64, child_id: i64, pos: i64) -> Result<()> {
        let cfg = &sh.cfg;
        let parent = self.seqs.get(&parent_id).ok_or_else(|| {
            Error::value(format!(
                "The parent sequence \"{parent_id}\" cannot be found in KV cache."
            ))
        })?;
        if self.seqs.contains_key(&child_id) {
            return Err(Error::value(format!(
                "The child sequence \"{child_id}\" is already in the KV cache."
            )));
        }
        if pos < -1 {
            return Err(Error::value(format!(
                "The forked position should be non-negative, or -1 for last position as \
                 default (got {pos})."
            )));
        }
        if pos > parent.seq_length as i64 {
            return Err(Error::value(format!(
                "The forked position should not exceed the total length of parent sequence \
                 (fork position {pos}, parent length {}).",
                parent.seq_length
            )));
        }
        if !parent.accepted_indices_committed {
            return Err(Error::value(
                "The parent sequence's token tree computed in the last round of forward has \
                 not been committed with accepted nodes.",
            ));
        }
        let fork_pos = if pos == -1 {
            parent.seq_length as i64
        } else {
            pos
        };
        if parent.sliding_window_size != -1 {
            let sink = parent.seq_length - self.pool.get(parent.last_block_idx).seq_length
                + parent.last_block_attn_sink_size;
            if fork_pos > sink as i64 {
                return Err(Error::value(format!(
                    "The parent sequence \"{parent_id}\" is enabled with sliding window and thus \
                     only can be forked within sink size = {sink}. But the forked position = \
                     {fork_pos}."
                )));
            }
        }
        let page_size = cfg.page_size;
        let parent_seq_length = parent.seq_length as i64;
        let parent_last = parent.last_block_idx;
        if fork_pos == parent_seq_length
            && fork_pos % page_size == 0
            && self.pool.get(parent_last).seq_length > 0
        {
            // The parent keeps decoding into a new empty block after the fork.
            let nb = self.pool.alloc();
            let block = self.pool.get_mut(nb);
            block.start_pos = parent_seq_length as i32;
            block.parent_idx = parent_last;
            block.external_ref_cnt = 1;
            self.seqs.get_mut(&parent_id).unwrap().last_block_idx = nb;
        }
        let child_block = self.pool.alloc();
        let trace = self.pool.trace(self.seqs[&parent_id].last_block_idx);
        let last_in_trace = *trace.last().unwrap();
        let mut in_block_offset = fork_pos;
        for &forked in &trace {
            let forked_len = self.pool.get(forked).seq_length as i64;
            if forked != last_in_trace {
                if forked_len <= 0 || forked_len % page_size != 0 {
                    return Err(internal("a shared block does not hold whole pages"));
                }
                if forked_len <= in_block_offset {
                    in_block_offset -= forked_len;
                    continue;
                }
            }
            let in_page_offset = in_block_offset % page_size;
            let moved_offset = in_block_offset - in_page_offset;
            let moved_pages = (moved_offset / page_size) as usize;
            if moved_pages == 0 {
                // Forked inside the block's first page.
                let pb = self.pool.get(forked).parent_idx;
                if pb != -1 {
                    self.pool.get_mut(pb).external_ref_cnt += 1;
                }
                self.pool.get_mut(child_block).parent_idx = pb;
            } else {
                // Split the block: its leading pages become a new parent of both.
                let pb = self.pool.alloc();
                let forked_parent = self.pool.get(forked).parent_idx;
                let moved: Vec<i32> = self
                    .pool
                    .get_mut(forked)
                    .page_ids
                    .drain(..moved_pages)
                    .collect();
                let forked_start = self.pool.get(forked).start_pos;
                {
                    let p = self.pool.get_mut(pb);
                    p.parent_idx = forked_parent;
                    p.external_ref_cnt = 2;
                    p.page_ids = moved;
                    p.start_pos = forked_start;
                    p.seq_length = moved_offset as i32;
                }
                {
                    let f = self.pool.get_mut(forked);
                    f.parent_idx = pb;
                    f.start_pos += moved_offset as i32;
                    f.seq_length -= moved_offset as i32;
                }
                self.pool.get_mut(child_block).parent_idx = pb;
                let parent = self.seqs.get_mut(&parent_id).unwrap();
                if parent.sliding_window_size != -1 && forked == parent.last_block_idx {
                    if moved_offset > parent.last_block_attn_sink_size as i64 {
                        return Err(internal("fork moved past the attention sink"));
                    }
                    parent.last_block_attn_sink_size -= moved_offset as i32;
                }
            }
            {
                let c = self.pool.get_mut(child_block);
                c.start_pos = (fork_pos - in_page_offset) as i32;
                c.seq_length = in_page_offset as i32;
            }
            if in_page_offset > 0 {
                // The child copies the shared part of the page the fork falls in.
                let src = *self
                    .pool
                    .get(forked)
                    .page_ids
                    .first()
                    .ok_or_else(|| internal("the forked block has no page"))?;
                let tgt = self.free_pages.pop()?;
                self.pool.get_mut(child_block).page_ids.push(tgt);
                copy_single_page(sh, src, tgt, in_page_offset)?;
            }
            break;
        }
        let child = self.pool.new_sequence(child_block);
        self.seqs.insert(child_id, child);
        Ok(())
    }

    /// `EnableSlidingWindowForSeq`.
    pub fn enable_sliding_window(
        &mut self,
        cfg: &Config,
        seq_id: i64,
        window: i32,
        sink: i32,
    ) -> Result<()> {
        if !cfg.support_sliding_window && !cfg.support_layer_sliding_window {
            crate::bail_value!("The KV cache does not support sliding window.");
        }
        let last_len = {
            let seq = self.seq(seq_id)?;
            self.pool.get(seq.last_block_idx).seq_length
        };
        if sink < 0 {
            crate::bail_value!("The specified attention sink size is expected to be non negative");
        }
        if window <= 0 {
            crate::bail_value!("The specified sliding window size should be positive.");
        }
        if sink >= window {
            crate::bail_value!("The attn sink size should be less than the sliding window size.");
        }
        let seq = self.seqs.get_mut(&seq_id).unwrap();
        if seq.sliding_window_size != -1 {
            crate::bail_value!("A sequence cannot be enabled twice for sliding window.");
        }
        let prefix_length = seq.seq_length - last_len;
        if prefix_length < 0 {
            return Err(internal("negative prefix length"));
        }
        // Prefix blocks cannot slide: they already sink attention.
        seq.last_block_attn_sink_size = (sink - prefix_length).max(0);
        seq.sliding_window_size = window;
        Ok(())
    }

    /// `PopN`; on failure the cache is as before.
    pub fn popn(&mut self, sh: &Shared, seq_id: i64, n: i32) -> Result<()> {
        self.no_import("pop tokens")?;
        let seq = self.seq(seq_id)?;
        if n < 0 {
            crate::bail_value!("The length of popping {n} cannot be negative.");
        }
        if n > seq.seq_length {
            crate::bail_value!(
                "The sequence only has length {}, while the length of pop is {n} which exceeds \
                 the whole sequence length.",
                seq.seq_length
            );
        }
        if n == 0 {
            return Ok(());
        }
        let snap = self.snapshot();
        let r = self.popn_inner(sh, seq_id, n);
        if r.is_err() {
            self.restore(snap);
        }
        self.touched();
        r
    }

    fn popn_inner(&mut self, sh: &Shared, seq_id: i64, mut n: i32) -> Result<()> {
        let page_size = sh.cfg.page_size;
        let mut b = self.seqs[&seq_id].last_block_idx;
        if self.pool.get(b).external_ref_cnt < 1 {
            return Err(internal("a sequence's last block has no reference"));
        }
        while b != -1 && self.pool.get(b).external_ref_cnt == 1 {
            let block_len = self.pool.get(b).seq_length;
            if n > block_len {
                n -= block_len;
                let parent = self.pool.get(b).parent_idx;
                for p in std::mem::take(&mut self.pool.get_mut(b).page_ids) {
                    if p != TEMP_PAGE_ID {
                        self.free_pages.push(p);
                    }
                }
                self.pool.free.push(b);
                let seq = self.seqs.get_mut(&seq_id).unwrap();
                seq.seq_length -= block_len;
                seq.last_block_idx = parent;
                b = parent;
                continue;
            }
            let block = self.pool.get_mut(b);
            let target = (block.seq_length as i64 - n as i64 + page_size - 1) / page_size;
            while block.page_ids.len() as i64 > target {
                let p = block.page_ids.pop().unwrap();
                if p != TEMP_PAGE_ID {
                    self.free_pages.push(p);
                }
            }
            block.seq_length -= n;
            self.seqs.get_mut(&seq_id).unwrap().seq_length -= n;
            n = 0;
            break;
        }
        if n > 0 {
            // The rest lies in blocks shared with other sequences: fork the kept prefix under
            // a temporary id, drop the sequence, and rename the fork.
            let temp_id = -1 - seq_id;
            if self.seqs.contains_key(&temp_id) {
                return Err(Error::value(format!(
                    "popn needs the temporary sequence id {temp_id}, which is in use"
                )));
            }
            let keep = self.seqs[&seq_id].seq_length - n;
            self.fork_inner(sh, seq_id, temp_id, keep as i64)?;
            self.remove_sequence(seq_id)?;
            let seq = self.seqs.remove(&temp_id).unwrap();
            self.seqs.insert(seq_id, seq);
        }
        Ok(())
    }

    /// `ReserveAppendLengthInSeq`: pages for `append_length` more tokens in the sequence's
    /// last block, then the sliding window applied.
    pub fn reserve_append_length(
        &mut self,
        cfg: &Config,
        seq_id: i64,
        append_length: i64,
    ) -> Result<()> {
        let seq = self
            .seqs
            .get_mut(&seq_id)
            .ok_or_else(|| not_found(seq_id))?;
        let block = self.pool.get_mut(seq.last_block_idx);
        if append_length <= 0 {
            crate::bail_value!("Append with length 0 is not allowed.");
        }
        if block.external_ref_cnt != 1 {
            crate::bail_value!(
                "The block is {}-time referenced by other blocks, thus cannot accept new KV \
                 values.",
                block.external_ref_cnt - 1
            );
        }
        let page_size = cfg.page_size;
        let cur = block.page_ids.len() as i64;
        let target = (block.seq_length as i64 - block.sink_length as i64
            + block.sliding_window_offset as i64
            + append_length
            + page_size
            - 1)
            / page_size;
        let may_borrow = seq.sliding_window_size != -1 && cfg.support_sliding_window;
        for _ in cur..target {
            if self.free_pages.is_empty() && may_borrow {
                block.page_ids.push(TEMP_PAGE_ID);
            } else {
                block.page_ids.push(self.free_pages.pop()?);
            }
        }
        block.seq_length += append_length as i32;
        slide_window(seq, &mut self.pool, &mut self.free_pages, cfg)?;
        if cfg.support_sliding_window {
            let block = self.pool.get_mut(seq.last_block_idx);
            for p in block.page_ids.iter_mut() {
                if *p == TEMP_PAGE_ID {
                    *p = self.free_pages.pop()?;
                }
            }
        }
        self.dirty = true;
        Ok(())
    }
}

/// `SlideWindowForSequence`: frees the pages a sequence's window has moved past.
fn slide_window(
    seq: &mut Sequence,
    pool: &mut BlockPool,
    free_pages: &mut FreePages,
    cfg: &Config,
) -> Result<()> {
    if seq.sliding_window_size == -1 || !cfg.support_sliding_window {
        return Ok(());
    }
    if seq.seq_length <= seq.sliding_window_size {
        return Ok(());
    }
    let page_size = cfg.page_size as i32;
    let length_to_slide = seq.seq_length - seq.sliding_window_size;
    let block = pool.get_mut(seq.last_block_idx);
    if seq.last_block_attn_sink_size > 0 && block.sink_length == 0 {
        // First slide: pin the sink.
        if block.sliding_window_offset != 0 {
            return Err(internal("sliding window offset set before the first slide"));
        }
        block.sink_length = seq.last_block_attn_sink_size;
        block.sliding_window_offset = seq.last_block_attn_sink_size;
    }
    let num_sink_pages = (block.sink_length + page_size - 1) / page_size;
    let mut page_idx_after = (block.sliding_window_offset + length_to_slide) / page_size;
    let page_start_offset_after = (block.sliding_window_offset + length_to_slide) % page_size;
    while page_idx_after > num_sink_pages {
        let p = block.page_ids.remove(num_sink_pages as usize);
        if p != TEMP_PAGE_ID {
            free_pages.push(p);
        }
        page_idx_after -= 1;
    }
    if page_idx_after != num_sink_pages - 1 && page_idx_after != num_sink_pages {
        return Err(internal("sliding window left an unexpected first page"));
    }
    seq.seq_length = seq.sliding_window_size;
    block.seq_length -= length_to_slide;
    block.sliding_window_offset = page_idx_after * page_size + page_start_offset_after;
    let expected_pages =
        (block.sliding_window_offset + (block.seq_length - block.sink_length) + page_size - 1)
            / page_size;
    if block.seq_length < block.sink_length
        || block.sliding_window_offset < block.sink_length
        || expected_pages as usize != block.page_ids.len()
    {
        return Err(internal("sliding window left inconsistent pages"));
    }
    Ok(())
}

/// `CopySinglePage`: the first `copy_length` slots of page `src` into page `tgt`, every layer.
pub fn copy_single_page(sh: &Shared, src: i32, tgt: i32, copy_length: i64) -> Result<()> {
    for pages in &sh.pages {
        Kernels::run(
            &sh.kernels.copy_single_page,
            &[
                arg(pages),
                crate::value::AnyView::from(src as i64),
                crate::value::AnyView::from(tgt as i64),
                crate::value::AnyView::from(copy_length),
            ],
        )?;
    }
    Ok(())
}

/// The message TVM gives for an unknown sequence id.
pub fn not_found(seq_id: i64) -> Error {
    Error::value(format!(
        "The sequence \"{seq_id}\" cannot be found in KV cache."
    ))
}

/// A broken invariant of the page table (a bug, reported rather than crashed on).
pub fn internal(what: &str) -> Error {
    Error::runtime(format!("internal error in the paged KV cache: {what}"))
}
