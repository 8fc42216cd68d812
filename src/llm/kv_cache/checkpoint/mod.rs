//! Checkpoints of one sequence's pages (TVM 0.27 `GetCheckpointMetadata`, `GetLayoutHash`,
//! `ExportPageGroup`, `PrepareImport`, `ImportPageGroup`, `FinishImport`): the layout as
//! JSON with an FNV-1a hash of it, and each layer's pages as one page group
//! `(1, num_logical_pages, 2, num_kv_heads, page_size, head_dim)` in token order, unused
//! slots of the last page zeroed. Only plain MHA caches without sliding windows, sequence 0.

use super::blocks::Sequence;
use super::config::AttnKind;
use super::state::{not_found, State};
use super::PagedKvCache;
use crate::dtype::dtype_to_string;
use crate::error::{Error, Result};
use crate::object::containers::array::new_array;
use crate::object::containers::map::{new_map, Entry};
use crate::value::Any;

mod import_metadata;
mod page_groups;

const RUNTIME: &str = "relax.vm.PagedAttentionKVCache";
const FORMAT_VERSION: i64 = 1;
const GROUP_LAYOUT: &str = "1,num_logical_pages,2,num_kv_heads,page_size,qk_head_dim";

fn fnv1a64(s: &str) -> u64 {
    let mut h: u64 = 14695981039346656037;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(1099511628211);
    }
    h
}

fn err(msg: String) -> Error {
    Error::value(msg)
}

fn map(pairs: Vec<(&str, Any)>) -> Any {
    Any::from_object(new_map(
        pairs
            .into_iter()
            .map(|(k, v)| Entry {
                key: Any::from(k),
                value: v,
            })
            .collect(),
    ))
}

fn arr(items: Vec<Any>) -> Any {
    Any::from_object(new_array(items))
}

impl PagedKvCache {
    fn dtype_name(&self) -> String {
        dtype_to_string(self.shared.cfg.kv_dtype).unwrap_or_default()
    }

    fn check_layout_supported(&self) -> Result<()> {
        let cfg = &self.shared.cfg;
        for layer in cfg.layer_begin..cfg.layer_end {
            if cfg.kind(layer) != AttnKind::Mha {
                return Err(err(
                    "PagedAttentionKVCache checkpointing only supports full-context MHA/GQA \
                     layers."
                        .into(),
                ));
            }
        }
        if cfg.qk_head_dim != cfg.v_head_dim {
            return Err(err(
                "PagedAttentionKVCache checkpointing requires qk_head_dim to equal v_head_dim."
                    .into(),
            ));
        }
        if cfg.support_sliding_window || cfg.support_layer_sliding_window {
            return Err(err(
                "PagedAttentionKVCache checkpointing does not support sliding-window cache \
                 layouts."
                    .into(),
            ));
        }
        if cfg.rope_ext_factors.is_some() {
            return Err(err(
                "PagedAttentionKVCache checkpointing does not support RoPE extension factors."
                    .into(),
            ));
        }
        Ok(())
    }

    fn check_sequence_state(&self, st: &State, seq_id: i64) -> Result<()> {
        if seq_id != 0 {
            return Err(err(format!(
                "PagedAttentionKVCache checkpointing only supports sequence id 0, got {seq_id}."
            )));
        }
        let seq = st.seqs.get(&seq_id).ok_or_else(|| not_found(seq_id))?;
        if !(seq.accepted_indices_committed && seq.is_chain) {
            return Err(err(
                "PagedAttentionKVCache checkpointing requires committed token-chain state.".into(),
            ));
        }
        if seq.sliding_window_size != -1 {
            return Err(err(
                "PagedAttentionKVCache checkpointing does not support sequences with sliding \
                 window."
                    .into(),
            ));
        }
        Ok(())
    }

    fn check_sequence_supported(&self, st: &State, seq_id: i64) -> Result<()> {
        self.check_layout_supported()?;
        if st.import.is_some() {
            return Err(err(
                "PagedAttentionKVCache checkpoint import must be finished before exporting a \
                 checkpoint."
                    .into(),
            ));
        }
        self.check_sequence_state(st, seq_id)
    }

    fn expected_logical_pages(&self, seq_length: i64) -> i64 {
        let p = self.shared.cfg.page_size;
        (seq_length + p - 1) / p
    }

    fn bytes_per_page(&self) -> i64 {
        let cfg = &self.shared.cfg;
        let scalar = (cfg.kv_dtype.bits as i64 * cfg.kv_dtype.lanes as i64 + 7) / 8;
        2 * cfg.num_kv_heads * cfg.page_size * cfg.qk_head_dim * scalar
    }

    /// The page ids of a sequence in token order (`GetCheckpointPageIds`).
    fn checkpoint_page_ids(&self, st: &State, seq: &Sequence, op: &str) -> Result<Vec<i32>> {
        let mut ids = Vec::new();
        for b in st.pool.trace(seq.last_block_idx) {
            for &p in &st.pool.get(b).page_ids {
                if p < 0 || p as i64 >= self.shared.cfg.num_total_pages {
                    return Err(err(format!(
                        "PagedAttentionKVCache {op} found invalid page id {p}."
                    )));
                }
                ids.push(p);
            }
        }
        if ids.len() as i64 != self.expected_logical_pages(seq.seq_length as i64) {
            return Err(err(format!(
                "PagedAttentionKVCache {op} found a page table that does not match the \
                 sequence length."
            )));
        }
        Ok(ids)
    }

    fn layout_pairs(&self) -> Vec<(&'static str, Any)> {
        let cfg = &self.shared.cfg;
        let kinds = (cfg.layer_begin..cfg.layer_end)
            .map(|l| Any::from(cfg.kind(l).name()))
            .collect();
        vec![
            ("format_version", Any::from(FORMAT_VERSION)),
            ("cache_type", Any::from(RUNTIME)),
            ("page_size", Any::from(cfg.page_size)),
            ("num_layers", Any::from(cfg.num_layers)),
            ("layer_begin", Any::from(cfg.layer_begin)),
            ("layer_end", Any::from(cfg.layer_end)),
            ("num_qo_heads", Any::from(cfg.num_qo_heads)),
            ("num_kv_heads", Any::from(cfg.num_kv_heads)),
            ("qk_head_dim", Any::from(cfg.qk_head_dim)),
            ("v_head_dim", Any::from(cfg.v_head_dim)),
            ("reserved_num_seqs", Any::from(cfg.reserved_num_seqs)),
            ("num_total_pages", Any::from(cfg.num_total_pages)),
            ("prefill_chunk_size", Any::from(cfg.prefill_chunk_size)),
            ("dtype", Any::from(self.dtype_name())),
            ("attn_kinds", arr(kinds)),
            ("rope_mode", Any::from(cfg.rope_mode.name())),
            ("rotary_scale", Any::from(cfg.rotary_scale)),
            ("rotary_theta", Any::from(cfg.rotary_theta)),
            (
                "has_rope_ext_factors",
                Any::from(cfg.rope_ext_factors.is_some()),
            ),
            (
                "support_sliding_window",
                Any::from(cfg.support_sliding_window),
            ),
            (
                "support_layer_sliding_window",
                Any::from(cfg.support_layer_sliding_window),
            ),
            ("page_group_layout", Any::from(GROUP_LAYOUT)),
        ]
    }

    /// The text the layout hash covers (`GetLayoutDescriptor`): C++ stream formatting, floats
    /// with 17 significant digits and bools as 0/1.
    fn layout_descriptor(&self) -> String {
        use crate::reflection::json::format_g17;
        let cfg = &self.shared.cfg;
        let b = |v: bool| v as i32;
        let kinds: Vec<&str> = (cfg.layer_begin..cfg.layer_end)
            .map(|l| cfg.kind(l).name())
            .collect();
        format!(
            "format_version={FORMAT_VERSION};cache_type={RUNTIME};page_size={};num_layers={};\
             layer_begin={};layer_end={};num_qo_heads={};num_kv_heads={};qk_head_dim={};\
             v_head_dim={};dtype={};rope_mode={};rotary_scale={};rotary_theta={};\
             has_rope_ext_factors={};support_sliding_window={};\
             support_layer_sliding_window={};page_group_layout={GROUP_LAYOUT};attn_kinds={}",
            cfg.page_size,
            cfg.num_layers,
            cfg.layer_begin,
            cfg.layer_end,
            cfg.num_qo_heads,
            cfg.num_kv_heads,
            cfg.qk_head_dim,
            cfg.v_head_dim,
            self.dtype_name(),
            cfg.rope_mode.name(),
            format_g17(cfg.rotary_scale),
            format_g17(cfg.rotary_theta),
            b(cfg.rope_ext_factors.is_some()),
            b(cfg.support_sliding_window),
            b(cfg.support_layer_sliding_window),
            kinds.join(",")
        )
    }

    /// `GetLayoutHash`: FNV-1a 64 of the layout descriptor, 16 hex digits.
    pub fn layout_hash(&self) -> Result<String> {
        self.check_layout_supported()?;
        Ok(format!("{:016x}", fnv1a64(&self.layout_descriptor())))
    }

    /// `GetCheckpointMetadata`: JSON describing the layout, the sequence's logical pages
    /// and its page groups.
    pub fn checkpoint_metadata(&self, seq_id: i64) -> Result<String> {
        let st = self.lock()?;
        self.check_sequence_supported(&st, seq_id)?;
        let seq = &st.seqs[&seq_id];
        let cfg = &self.shared.cfg;
        let seq_length = seq.seq_length as i64;
        let n_pages = self.checkpoint_page_ids(&st, seq, "checkpointing")?.len() as i64;
        let logical = (0..self.expected_logical_pages(seq_length))
            .map(|i| {
                let start = i * cfg.page_size;
                map(vec![
                    ("logical_page_index", Any::from(i)),
                    ("start_pos", Any::from(start)),
                    ("length", Any::from(cfg.page_size.min(seq_length - start))),
                ])
            })
            .collect();
        let groups = (0..cfg.num_layers)
            .map(|g| {
                let shape = [
                    1,
                    n_pages,
                    2,
                    cfg.num_kv_heads,
                    cfg.page_size,
                    cfg.qk_head_dim,
                ]
                .iter()
                .map(|&d| Any::from(d))
                .collect();
                map(vec![
                    ("group_index", Any::from(g)),
                    ("layer_begin", Any::from(cfg.layer_begin + g)),
                    ("layer_end", Any::from(cfg.layer_begin + g + 1)),
                    ("num_logical_pages", Any::from(n_pages)),
                    ("dtype", Any::from(self.dtype_name())),
                    ("shape", arr(shape)),
                    ("nbytes", Any::from(n_pages * self.bytes_per_page())),
                ])
            })
            .collect();
        let mut pairs = self.layout_pairs();
        pairs.push(("layout_hash", Any::from(self.layout_hash()?)));
        pairs.push(("seq_id", Any::from(seq_id)));
        pairs.push(("seq_length", Any::from(seq_length)));
        pairs.push(("logical_pages", arr(logical)));
        pairs.push(("groups", arr(groups)));
        crate::reflection::json::stringify(&map(pairs).view(), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a64(""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64("a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64("foobar"), 0x85944171f73967e8);
    }
}
