//! `ConstructTokenTreeMask`: the intervals, in depth-first order, that encode each sequence's
//! token tree for the tree-attention kernels (TVM 0.27's order, which the kernels rely on).

use std::collections::HashMap;

use super::blocks::{MAX_BLOCK_DEPTH, MAX_TREE_SIZE};
use super::state::State;
use crate::error::{Error, Result};

/// `ConstructTokenTreeMask`: the DFS-order intervals that encode each sequence's token tree.
#[allow(clippy::too_many_arguments)]
pub(super) fn construct_token_tree_mask(
    st: &mut State,
    seq_ids: &[i64],
    lengths: &[i64],
    tree: &[i64],
    on_depths: &[Vec<i32>],
    trailing: &[Vec<i32>],
    append_before_attn: bool,
    num_depths: usize,
    is_chain_on_depths: &mut [bool; MAX_BLOCK_DEPTH],
) -> Result<()> {
    let n = seq_ids.len();
    for d in 0..num_depths {
        let mut in_depth = vec![false; n];
        is_chain_on_depths.fill(true);
        let mut is_chain = true;
        let mn_indptr = &mut st.host.tree_attn_mn_indptr[d];
        mn_indptr.clear();
        mn_indptr.push(0);
        let mut offset = 0usize;
        for i in 0..n {
            let seq = st.seqs.get_mut(&seq_ids[i]).unwrap();
            let len = lengths[i] as usize;
            in_depth[i] = !append_before_attn
                || on_depths[d][i] == seq.last_block_idx
                || (d + 1 == MAX_BLOCK_DEPTH && !trailing[i].is_empty());
            if !in_depth[i] {
                mn_indptr.push(*mn_indptr.last().unwrap());
                offset += len;
                continue;
            }
            if seq.token_tree_parent_ptr.len() as i32 > st.pool.get(seq.last_block_idx).seq_length {
                crate::bail_value!(
                    "The token tree size is larger than the sequence length of the last block."
                );
            }
            let new = tree
                .get(offset..offset + len)
                .ok_or_else(|| Error::value("Invalid token tree size."))?;
            for &p in new {
                let p = i32::try_from(p)
                    .map_err(|_| Error::value(format!("Invalid token tree parent {p}")))?;
                seq.token_tree_parent_ptr.push(p);
            }
            offset += len;
            if seq.token_tree_parent_ptr.len() > MAX_TREE_SIZE {
                crate::bail_value!(
                    "The tree size is {len} which exceeds the maximum tree size limit \
                     {MAX_TREE_SIZE}"
                );
            }
            mn_indptr.push(mn_indptr.last().unwrap() + seq.token_tree_parent_ptr.len() as i32);
        }
        if offset != tree.len() {
            crate::bail_value!(
                "Invalid token tree size. The sum of \"append_lengths\" is {offset} while there \
                 are {} elements in \"token_tree_parent_ptr\".",
                tree.len()
            );
        }
        let mask = &mut st.host.tree_attn_mask[d];
        mask.clear();
        for i in 0..n {
            if !in_depth[i] {
                continue;
            }
            let seq = st.seqs.get_mut(&seq_ids[i]).unwrap();
            let size = seq.token_tree_parent_ptr.len();
            let mut depth: Vec<i32> = Vec::with_capacity(size);
            seq.is_chain = true;
            seq.accepted_indices_committed = false;
            let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
            let mut roots = Vec::new();
            for node in 0..size as i32 {
                let p = seq.token_tree_parent_ptr[node as usize];
                if p >= node {
                    crate::bail_value!(
                        "Invalid token tree. The parent of node {node} in tree {i} is {p}, \
                         which is not smaller than {node}"
                    );
                }
                if p < -1 {
                    crate::bail_value!(
                        "Invalid token tree. The parent of node {node} in tree {i} is {p}"
                    );
                }
                if p != node - 1 {
                    seq.is_chain = false;
                    is_chain = false;
                }
                children.entry(p).or_default().push(node);
                if p != -1 {
                    depth.push(depth[p as usize] + 1);
                } else {
                    depth.push(0);
                    roots.push(node);
                }
            }
            // Each node gets [its DFS order, one past the last order in its subtree).
            let mut order = vec![(0i32, 0i32); size];
            let mut counter = 0i32;
            for &root in &roots {
                dfs_order(root, &children, &mut order, &mut counter);
            }
            for &(first, second) in &order {
                mask.push(first);
                mask.push(second);
            }
            seq.token_tree_node_depths = depth;
        }
        is_chain_on_depths[d] = is_chain;
        if !append_before_attn {
            break;
        }
    }
    Ok(())
}

fn dfs_order(
    node: i32,
    children: &HashMap<i32, Vec<i32>>,
    order: &mut [(i32, i32)],
    counter: &mut i32,
) -> i32 {
    order[node as usize].0 = *counter;
    *counter += 1;
    let mut upper = order[node as usize].0 + 1;
    if let Some(kids) = children.get(&node) {
        for &c in kids {
            upper = upper.max(dfs_order(c, children, order, counter));
        }
    }
    order[node as usize].1 = upper;
    upper
}
