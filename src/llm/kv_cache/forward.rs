//! Preparing a forward (TVM `BeginForward`, `ConstructTokenTreeMask`,
//! `SyncAuxArrayToDevice`): the page table of the batch, the decode-or-prefill choice per
//! depth, whether new K/V are appended before attention, the token-tree masks, and the
//! auxiliary arrays on the device. Every choice and array follows TVM 0.27, because the
//! attention kernels compute in the order these arrays give them.

use std::collections::HashSet;

use super::blocks::{block_ids_on_depths, chunked_block_ids, Block, MAX_BLOCK_DEPTH};
use super::config::{AttnKind, Config, RopeMode};
use super::state::{internal, not_found, Batch, State};
use super::tree_mask::construct_token_tree_mask;
use crate::error::{Error, Result};

/// `BeginForward`; on failure the cache is as before and no batch is prepared.
pub fn begin_forward(
    st: &mut State,
    cfg: &Config,
    seq_ids: &[i64],
    lengths: &[i64],
    tree: Option<&[i64]>,
) -> Result<()> {
    // A failed call leaves no batch behind: attention then refuses to run on a stale one.
    st.batch = None;
    st.views = None;
    if st.import.is_some() {
        return Err(Error::runtime(
            "PagedAttentionKVCache cannot begin a forward pass before checkpoint import is \
             finished.",
        ));
    }
    if cfg.attn_kinds[0] == AttnKind::Mla && tree.is_some() {
        crate::bail_value!("Tree attention is not supported yet for MLA");
    }
    if seq_ids.len() != lengths.len() {
        crate::bail_value!(
            "The seq_ids size ({}) and append_lengths size ({}) mismatch.",
            seq_ids.len(),
            lengths.len()
        );
    }
    if seq_ids.is_empty() {
        crate::bail_value!("BeginForward needs at least one sequence.");
    }
    // Small batches are checked for repeated ids without allocating.
    let mut seen = (seq_ids.len() > 32).then(|| HashSet::with_capacity(seq_ids.len()));
    for (i, (&id, &len)) in seq_ids.iter().zip(lengths).enumerate() {
        let seq = st.seqs.get(&id).ok_or_else(|| not_found(id))?;
        let repeated = match &mut seen {
            Some(set) => !set.insert(id),
            None => seq_ids[..i].contains(&id),
        };
        if repeated {
            crate::bail_value!("The sequence \"{id}\" appears more than once in the batch.");
        }
        if len <= 0 {
            crate::bail_value!("Append with length {len} is not allowed (sequence \"{id}\").");
        }
        if tree.is_none() && !seq.accepted_indices_committed {
            crate::bail_value!(
                "The input batch does not form a tree, in which case the sequences in the input \
                 batch are expected to have their accepted tokens token tree nodes committed. \
                 Please invoke CommitAcceptedTokenTreeNodes for sequence {id}"
            );
        }
    }
    let total: i64 = lengths.iter().sum();
    if total > cfg.prefill_chunk_size {
        crate::bail_value!(
            "The batch appends {total} tokens, more than the prefill chunk size {} the cache \
             was created with.",
            cfg.prefill_chunk_size
        );
    }
    if let Some(t) = tree {
        if cfg.support_sliding_window {
            crate::bail_value!("Tree attention does not support sliding window.");
        }
        if cfg.rope_mode == RopeMode::Inline {
            crate::bail_value!("Tree attention does not support inline RoPE mode.");
        }
        if t.len() as i64 != total {
            crate::bail_value!(
                "Invalid token tree size. The sum of \"append_lengths\" is {total} while there \
                 are {} elements in \"token_tree_parent_ptr\".",
                t.len()
            );
        }
    }

    // Everything `begin` changes, to put back if it fails half-way: the batch's sequences and
    // their last blocks. Without sliding windows a block only gains pages, so its page count
    // is enough to restore it.
    let saved_seqs: Vec<_> = seq_ids
        .iter()
        .map(|id| (*id, st.seqs[id].clone()))
        .collect();
    let saved_blocks: Vec<SavedBlock> = saved_seqs
        .iter()
        .map(|(_, s)| SavedBlock::of(st.pool.get(s.last_block_idx), cfg.support_sliding_window))
        .collect();
    st.free_pages.begin();
    match begin(st, cfg, seq_ids, lengths, tree) {
        Ok(batch) => {
            st.free_pages.commit();
            st.batch = Some(batch);
            st.dirty = true;
            Ok(())
        }
        Err(e) => {
            st.free_pages.rollback();
            for (id, seq) in saved_seqs {
                st.seqs.insert(id, seq);
            }
            for b in saved_blocks {
                b.restore(&mut st.pool);
            }
            Err(e)
        }
    }
}

/// What a forward may change in a block.
enum SavedBlock {
    /// Page count and lengths (the block only grows).
    Mark {
        index: i32,
        pages: usize,
        seq_length: i32,
        sink_length: i32,
        sliding_window_offset: i32,
    },
    /// The whole block (sliding windows drop pages from the middle).
    Full(Block),
}

impl SavedBlock {
    fn of(b: &Block, full: bool) -> SavedBlock {
        if full {
            return SavedBlock::Full(b.clone());
        }
        SavedBlock::Mark {
            index: b.index,
            pages: b.page_ids.len(),
            seq_length: b.seq_length,
            sink_length: b.sink_length,
            sliding_window_offset: b.sliding_window_offset,
        }
    }

    fn restore(self, pool: &mut super::blocks::BlockPool) {
        match self {
            SavedBlock::Full(b) => {
                let idx = b.index;
                *pool.get_mut(idx) = b;
            }
            SavedBlock::Mark {
                index,
                pages,
                seq_length,
                sink_length,
                sliding_window_offset,
            } => {
                let b = pool.get_mut(index);
                b.page_ids.truncate(pages);
                b.seq_length = seq_length;
                b.sink_length = sink_length;
                b.sliding_window_offset = sliding_window_offset;
            }
        }
    }
}

fn begin(
    st: &mut State,
    cfg: &Config,
    seq_ids: &[i64],
    lengths: &[i64],
    tree: Option<&[i64]>,
) -> Result<Batch> {
    let n = seq_ids.len();
    let mut is_decode_request = true;
    let mut last_block_len_before = Vec::with_capacity(n);
    let mut last_blocks = Vec::with_capacity(n);
    st.host.k_ragged_rope_pos_offset.clear();
    for (&id, &len) in seq_ids.iter().zip(lengths) {
        let seq = st.seqs.get_mut(&id).ok_or_else(|| not_found(id))?;
        last_block_len_before.push(st.pool.get(seq.last_block_idx).seq_length);
        let mut k_rope_offset = seq.seq_length;
        if !seq.accepted_indices_committed {
            k_rope_offset -= seq.token_tree_parent_ptr.len() as i32;
        }
        st.host.k_ragged_rope_pos_offset.push(k_rope_offset);
        seq.seq_length += len as i32;
        if len != 1 {
            is_decode_request = false;
        }
        last_blocks.push(seq.last_block_idx);
    }

    let (on_depths, trailing) = block_ids_on_depths(&st.pool, &last_blocks);
    let num_depths = on_depths.len().min(MAX_BLOCK_DEPTH);
    let mut chunked = Vec::with_capacity(num_depths);
    let mut use_decode_kernel = Vec::with_capacity(num_depths);
    for (d, ids) in on_depths.iter().enumerate().take(num_depths) {
        // The last depth never coalesces, so trailing blocks line up with the batch.
        let (chunks, decode) = chunked_block_ids(
            &st.pool,
            ids,
            d != MAX_BLOCK_DEPTH - 1,
            lengths,
            is_decode_request,
        );
        chunked.push(chunks);
        use_decode_kernel.push(decode);
    }
    if num_depths == MAX_BLOCK_DEPTH && chunked[num_depths - 1].len() != n {
        return Err(internal("the last depth was coalesced"));
    }
    let mut append_before_attn =
        !cfg.support_sliding_window && *use_decode_kernel.last().unwrap_or(&false);
    let has_previous_tree = seq_ids
        .iter()
        .any(|id| !st.seqs[id].accepted_indices_committed);
    if has_previous_tree {
        append_before_attn = true;
    }

    let mut is_chain_on_depths = [true; MAX_BLOCK_DEPTH];
    if let Some(t) = tree {
        construct_token_tree_mask(
            st,
            seq_ids,
            lengths,
            t,
            &on_depths,
            &trailing,
            append_before_attn,
            num_depths,
            &mut is_chain_on_depths,
        )?;
    } else {
        for id in seq_ids {
            let seq = st.seqs.get_mut(id).unwrap();
            seq.is_chain = true;
            seq.token_tree_parent_ptr.clear();
            seq.token_tree_node_depths.clear();
        }
    }

    // With append-before-attention (decode) the page table covers the new tokens; otherwise
    // it describes the cache before the append.
    if append_before_attn {
        for (&id, &len) in seq_ids.iter().zip(lengths) {
            st.reserve_append_length(cfg, id, len)?;
        }
    }
    fill_page_tables(st, cfg, &chunked, &trailing, num_depths)?;
    if !append_before_attn {
        for (&id, &len) in seq_ids.iter().zip(lengths) {
            st.reserve_append_length(cfg, id, len)?;
        }
    }
    fill_position_maps(st, cfg, seq_ids, lengths, &last_block_len_before)?;
    Ok(Batch {
        seq_ids: seq_ids.to_vec(),
        append_lengths: lengths.to_vec(),
        num_depths,
        append_before_attn,
        use_decode_kernel,
        is_chain_on_depths,
    })
}

/// The page table of each depth: which pages each chunk of queries reads.
fn fill_page_tables(
    st: &mut State,
    cfg: &Config,
    chunked: &[Vec<(i32, i32)>],
    trailing: &[Vec<i32>],
    num_depths: usize,
) -> Result<()> {
    let page_size = cfg.page_size;
    let layer_sw = cfg.support_layer_sliding_window;
    let h = &mut st.host;
    let pool = &st.pool;
    for (d, chunks) in chunked.iter().enumerate().take(num_depths) {
        let qo_indptr = &mut h.qo_indptr[d];
        let page_indptr = &mut h.page_indptr[d];
        let page_indices = &mut h.page_indices[d];
        let sw_indptr = &mut h.page_indptr_sliding_window[d];
        let sw_indices = &mut h.page_indices_sliding_window[d];
        let last_page_len = &mut h.last_page_len[d];
        let sw_offset = &mut h.sliding_window_offset[d];
        let sink_size = &mut h.sink_size[d];
        let k_rope = &mut h.k_rope_pos_offset[d];
        let k_rope_sw = &mut h.k_rope_pos_offset_sliding_window[d];
        for v in [
            &mut *qo_indptr,
            &mut *page_indptr,
            &mut *page_indices,
            &mut *sw_indptr,
            &mut *sw_indices,
            &mut *last_page_len,
            &mut *sw_offset,
            &mut *sink_size,
            &mut *k_rope,
            &mut *k_rope_sw,
        ] {
            v.clear();
        }
        qo_indptr.push(0);
        page_indptr.push(0);
        sw_indptr.push(0);
        for (i, &(block_id, chunk_len)) in chunks.iter().enumerate() {
            qo_indptr.push(qo_indptr.last().unwrap() + chunk_len);
            if block_id == -1 {
                page_indptr.push(*page_indptr.last().unwrap());
                sw_indptr.push(*sw_indptr.last().unwrap());
                last_page_len.push(0);
                sw_offset.push(0);
                sink_size.push(0);
                k_rope.push(0);
                k_rope_sw.push(0);
                continue;
            }
            let block = pool.get(block_id);
            // Below the last depth a chunk reads one block; at the last depth also the
            // blocks beneath it.
            let mut num_pages = block.page_ids.len() as i64;
            let mut total_len = block.seq_length as i64;
            let mut last_block = block;
            page_indices.extend_from_slice(&block.page_ids);
            if d == MAX_BLOCK_DEPTH - 1 {
                for &t in &trailing[i] {
                    let tb = pool.get(t);
                    page_indices.extend_from_slice(&tb.page_ids);
                    num_pages += tb.page_ids.len() as i64;
                    total_len += tb.seq_length as i64;
                    last_block = tb;
                }
            }
            page_indptr.push(page_indptr.last().unwrap() + num_pages as i32);
            let sliding_pages =
                (num_pages as i32).min(cfg.layer_sliding_window_num_pages(total_len));
            sw_indptr.push(sw_indptr.last().unwrap() + sliding_pages);
            let from = page_indices.len() - sliding_pages.max(0) as usize;
            sw_indices.extend_from_slice(&page_indices[from..]);
            last_page_len.push(if total_len == 0 {
                0
            } else {
                ((total_len - last_block.sink_length as i64
                    + last_block.sliding_window_offset as i64
                    - 1)
                    % page_size
                    + 1) as i32
            });
            sw_offset.push(if layer_sw {
                cfg.layer_sliding_window_offset(total_len)
            } else {
                last_block.sliding_window_offset
            });
            sink_size.push(last_block.sink_length);
            k_rope.push(block.start_pos);
            if layer_sw {
                k_rope_sw.push(
                    (block.start_pos as i64 + total_len - cfg.layer_sliding_window_size).max(0)
                        as i32,
                );
            }
        }
    }
    Ok(())
}

/// Where each new token's query position is (RoPE) and where its K/V go in the pages.
fn fill_position_maps(
    st: &mut State,
    cfg: &Config,
    seq_ids: &[i64],
    lengths: &[i64],
    last_block_len_before: &[i32],
) -> Result<()> {
    let page_size = cfg.page_size as i32;
    let h = &mut st.host;
    h.q_rope_position_map.clear();
    h.append_position_map.clear();
    for (i, (&id, &len)) in seq_ids.iter().zip(lengths).enumerate() {
        let seq = &st.seqs[&id];
        let block = st.pool.get(seq.last_block_idx);
        let slot = |offset: i32| -> Result<i32> {
            let page = block
                .page_ids
                .get((offset / page_size) as usize)
                .ok_or_else(|| internal("append position past the block's pages"))?;
            Ok(page * page_size + offset % page_size)
        };
        let len = len as i32;
        for pos in 0..len {
            if seq.token_tree_node_depths.is_empty() {
                h.q_rope_position_map
                    .push(h.k_ragged_rope_pos_offset[i] + pos);
            } else {
                let offset_in_tree = seq.token_tree_parent_ptr.len() as i32 - len;
                if offset_in_tree < 0 {
                    return Err(internal("token tree shorter than the append"));
                }
                h.q_rope_position_map.push(
                    h.k_ragged_rope_pos_offset[i]
                        + seq.token_tree_node_depths[(offset_in_tree + pos) as usize],
                );
            }
            let pos_in_block = block.seq_length - len + pos;
            if last_block_len_before[i] + pos < block.sink_length {
                // Part of the attention sink.
                h.append_position_map
                    .push(slot(last_block_len_before[i] + pos)?);
            } else if pos_in_block < block.sink_length {
                // Pinned by the sink before this append: not written.
                h.append_position_map.push(-1);
            } else {
                h.append_position_map.push(slot(
                    pos_in_block - block.sink_length + block.sliding_window_offset,
                )?);
            }
        }
    }
    Ok(())
}

/// The error for attention without a prepared batch.
pub const NO_BATCH: &str = "the paged KV cache has no forward prepared: call \
    vm.builtin.kv_state_begin_forward (after the last change to the sequences) before \
    attention";
