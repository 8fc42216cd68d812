//! The page table of the paged KV cache (TVM `attn_utils.h`: `Block`, `Sequence`,
//! `GetBlockIdsOnDepth`, `GetChunkedBlockIds`).
//!
//! A sequence is a chain of blocks, root first; a block owns pages of `page_size` token slots
//! and is shared by the sequences forked from it (its `external_ref_cnt` counts the sequences
//! and child blocks pointing at it). Only the last block of a sequence, referenced by that
//! sequence alone, receives new tokens. Every block but a sequence's last holds whole pages.

/// The most block levels one attention pass walks (`kPagedKVCacheMaxBlockDepth`); blocks
/// deeper than this are handled together with the block at the last level.
pub const MAX_BLOCK_DEPTH: usize = 2;
/// Largest token tree of one sequence (`kTreeAttnMaxTreeSize`).
pub const MAX_TREE_SIZE: usize = 256;
/// A page borrowed while a sliding window is being applied (`kPagedKVCacheTempPageId`).
pub const TEMP_PAGE_ID: i32 = -1;

/// A run of pages holding consecutive tokens of one or more sequences.
#[derive(Clone, Debug)]
pub struct Block {
    /// The pages, in token order; all full but the last.
    pub page_ids: Vec<i32>,
    /// Tokens in the block.
    pub seq_length: i32,
    /// Position in the sequence of the block's first token (for RoPE).
    pub start_pos: i32,
    /// Leading tokens kept when a sliding window moves (attention sink).
    pub sink_length: i32,
    /// Slot where the sliding window starts (0 without sliding window).
    pub sliding_window_offset: i32,
    /// This block's index in the pool.
    pub index: i32,
    /// The parent block, or -1.
    pub parent_idx: i32,
    /// Sequences and child blocks pointing at this block.
    pub external_ref_cnt: i32,
}

impl Block {
    fn new(index: i32) -> Block {
        Block {
            page_ids: Vec::new(),
            seq_length: 0,
            start_pos: 0,
            sink_length: 0,
            sliding_window_offset: 0,
            index,
            parent_idx: -1,
            external_ref_cnt: 0,
        }
    }

    fn reset(&mut self) {
        *self = Block::new(self.index);
    }
}

/// A sequence: its last block and its token-tree state.
#[derive(Clone, Debug)]
pub struct Sequence {
    /// The block new tokens go to; earlier blocks are found through `parent_idx`.
    pub last_block_idx: i32,
    /// Tokens in all of the sequence's blocks.
    pub seq_length: i32,
    /// Sliding window size, or -1 when the window is not enabled.
    pub sliding_window_size: i32,
    /// Attention sink size of the last block.
    pub last_block_attn_sink_size: i32,
    /// Whether the tokens appended last form a chain (not a tree).
    pub is_chain: bool,
    /// Parents of the uncommitted token-tree nodes.
    pub token_tree_parent_ptr: Vec<i32>,
    /// Depths of the uncommitted token-tree nodes.
    pub token_tree_node_depths: Vec<i32>,
    /// Whether the accepted nodes of the last token tree were committed.
    pub accepted_indices_committed: bool,
}

/// All blocks ever allocated, with the free ones listed for reuse.
#[derive(Clone, Debug, Default)]
pub struct BlockPool {
    pub blocks: Vec<Block>,
    pub free: Vec<i32>,
}

impl BlockPool {
    /// A block by index.
    pub fn get(&self, idx: i32) -> &Block {
        &self.blocks[idx as usize]
    }

    /// A block by index, to change.
    pub fn get_mut(&mut self, idx: i32) -> &mut Block {
        &mut self.blocks[idx as usize]
    }

    /// A reset block: a freed one if any (most recently freed first), else a new one.
    pub fn alloc(&mut self) -> i32 {
        if let Some(idx) = self.free.pop() {
            self.blocks[idx as usize].reset();
            return idx;
        }
        let idx = self.blocks.len() as i32;
        self.blocks.push(Block::new(idx));
        idx
    }

    /// Drops every block.
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.free.clear();
    }

    /// A new sequence ending at `last_block_idx` (which gains a reference); its length sums
    /// the blocks up to the root.
    pub fn new_sequence(&mut self, last_block_idx: i32) -> Sequence {
        self.get_mut(last_block_idx).external_ref_cnt += 1;
        let mut seq_length = 0;
        let mut b = last_block_idx;
        while b != -1 {
            let block = self.get(b);
            seq_length += block.seq_length;
            b = block.parent_idx;
        }
        Sequence {
            last_block_idx,
            seq_length,
            sliding_window_size: -1,
            last_block_attn_sink_size: 0,
            is_chain: true,
            token_tree_parent_ptr: Vec::new(),
            token_tree_node_depths: Vec::new(),
            accepted_indices_committed: true,
        }
    }

    /// The blocks of a sequence ending at `last_block_idx`, root first.
    pub fn trace(&self, last_block_idx: i32) -> Vec<i32> {
        let mut trace = Vec::new();
        let mut b = last_block_idx;
        while b != -1 {
            trace.push(b);
            b = self.get(b).parent_idx;
        }
        trace.reverse();
        trace
    }
}

/// The blocks each sequence of a batch uses at each depth (-1 where a sequence is shallower),
/// and, for sequences deeper than [`MAX_BLOCK_DEPTH`], the blocks below the last depth
/// (`GetBlockIdsOnDepth`).
pub fn block_ids_on_depths(
    pool: &BlockPool,
    last_blocks: &[i32],
) -> (Vec<Vec<i32>>, Vec<Vec<i32>>) {
    let mut num_depths = 0;
    let mut traces = Vec::with_capacity(last_blocks.len());
    let mut trailing = Vec::with_capacity(last_blocks.len());
    for &last in last_blocks {
        let mut trace = pool.trace(last);
        if trace.len() <= MAX_BLOCK_DEPTH {
            num_depths = num_depths.max(trace.len());
            trailing.push(Vec::new());
        } else {
            trailing.push(trace.split_off(MAX_BLOCK_DEPTH));
            num_depths = MAX_BLOCK_DEPTH;
        }
        traces.push(trace);
    }
    let on_depths = (0..num_depths)
        .map(|d| {
            traces
                .iter()
                .map(|t| t.get(d).copied().unwrap_or(-1))
                .collect()
        })
        .collect();
    (on_depths, trailing)
}

/// The (block, query length) pairs attention runs over at one depth, and whether the decode
/// kernel runs them (`GetChunkedBlockIds`): consecutive sequences reading the same block are
/// merged into one prefill-style chunk, unless this is a decode step that merging would not
/// shrink much (fewer than 32 times the pages), which the decode kernel runs unmerged.
pub fn chunked_block_ids(
    pool: &BlockPool,
    block_ids: &[i32],
    enable_coalesce: bool,
    append_lengths: &[i64],
    is_decode_request: bool,
) -> (Vec<(i32, i32)>, bool) {
    let pages = |b: i32| {
        if b == -1 {
            0
        } else {
            pool.get(b).page_ids.len() as i64
        }
    };
    let n = block_ids.len();
    let mut uncoalesced = Vec::with_capacity(n);
    let mut coalesced = Vec::with_capacity(n);
    let mut cur_block = block_ids[0];
    let mut chunk_length = append_lengths[0] as i32;
    let mut pages_coalesced = 0i64;
    let mut pages_uncoalesced = pages(block_ids[0]);
    for i in 1..n {
        pages_uncoalesced += pages(block_ids[i]);
        uncoalesced.push((block_ids[i - 1], append_lengths[i - 1] as i32));
        if block_ids[i] == cur_block {
            chunk_length += append_lengths[i] as i32;
        } else {
            coalesced.push((cur_block, chunk_length));
            pages_coalesced += pages(cur_block);
            cur_block = block_ids[i];
            chunk_length = append_lengths[i] as i32;
        }
    }
    uncoalesced.push((block_ids[n - 1], append_lengths[n - 1] as i32));
    coalesced.push((cur_block, chunk_length));
    pages_coalesced += pages(cur_block);
    let ratio = if pages_coalesced > 0 {
        pages_uncoalesced as f64 / pages_coalesced as f64
    } else {
        0.0
    };
    let use_decode_kernel = is_decode_request && ratio < 32.0;
    if use_decode_kernel || !enable_coalesce {
        (uncoalesced, use_decode_kernel)
    } else {
        (coalesced, use_decode_kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool_with_chain(lengths: &[(usize, i32)]) -> (BlockPool, i32) {
        let mut pool = BlockPool::default();
        let mut parent = -1;
        for (i, &(pages, len)) in lengths.iter().enumerate() {
            let b = pool.alloc();
            let block = pool.get_mut(b);
            block.page_ids = (0..pages as i32).map(|p| p + 10 * i as i32).collect();
            block.seq_length = len;
            block.parent_idx = parent;
            if parent != -1 {
                pool.get_mut(parent).external_ref_cnt += 1;
            }
            parent = b;
        }
        (pool, parent)
    }

    #[test]
    fn sequence_length_sums_its_blocks() {
        let (mut pool, last) = pool_with_chain(&[(2, 32), (1, 5)]);
        let seq = pool.new_sequence(last);
        assert_eq!(seq.seq_length, 37);
        assert_eq!(pool.trace(last), vec![0, 1]);
        assert_eq!(pool.get(last).external_ref_cnt, 1);
    }

    #[test]
    fn deep_sequences_put_their_tail_in_trailing_blocks() {
        let (pool, last) = pool_with_chain(&[(1, 16), (1, 16), (1, 3)]);
        let (on_depths, trailing) = block_ids_on_depths(&pool, &[last, 0]);
        assert_eq!(on_depths, vec![vec![0, 0], vec![1, -1]]);
        assert_eq!(trailing, vec![vec![2], vec![]]);
    }

    #[test]
    fn shared_blocks_coalesce_unless_decoding() {
        let (pool, _) = pool_with_chain(&[(4, 64)]);
        let (chunks, decode) = chunked_block_ids(&pool, &[0, 0], true, &[3, 2], false);
        assert_eq!(chunks, vec![(0, 5)]);
        assert!(!decode);
        let (chunks, decode) = chunked_block_ids(&pool, &[0, 0], true, &[1, 1], true);
        assert_eq!(chunks, vec![(0, 1), (0, 1)]);
        assert!(decode, "a ratio of 2 keeps the decode kernel");
        let (chunks, _) = chunked_block_ids(&pool, &[0, 0], false, &[3, 2], false);
        assert_eq!(chunks, vec![(0, 3), (0, 2)]);
    }

    #[test]
    fn freed_blocks_are_reused_reset() {
        let mut pool = BlockPool::default();
        let a = pool.alloc();
        pool.get_mut(a).seq_length = 9;
        pool.free.push(a);
        assert_eq!(pool.alloc(), a);
        assert_eq!(pool.get(a).seq_length, 0);
        assert_eq!(pool.alloc(), 1);
    }
}
