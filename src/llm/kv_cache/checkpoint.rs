//! Checkpoints of one sequence's pages (TVM 0.27 `GetCheckpointMetadata`, `GetLayoutHash`,
//! `ExportPageGroup`, `PrepareImport`, `ImportPageGroup`, `FinishImport`): the layout as
//! JSON with an FNV-1a hash of it, and each layer's pages as one page group
//! `(1, num_logical_pages, 2, num_kv_heads, page_size, head_dim)` in token order, unused
//! slots of the last page zeroed. Only plain MHA caches without sliding windows, sequence 0.

use serde_json::Value;

use super::blocks::Sequence;
use super::config::AttnKind;
use super::state::{not_found, State};
use super::PagedKvCache;
use crate::dtype::dtype_to_string;
use crate::error::{Error, Result};
use crate::object::containers::array::new_array;
use crate::object::containers::map::{new_map, Entry};
use crate::tensor::Tensor;
use crate::value::Any;

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

    fn check_group_tensor(&self, t: &Tensor, n_pages: i64, api: &str) -> Result<()> {
        let cfg = &self.shared.cfg;
        let msg = format!(
            "{api} expects the tensor in layout \
             (1,num_logical_pages,2,num_kv_heads,page_size,qk_head_dim)."
        );
        if t.dtype() != cfg.kv_dtype {
            return Err(err(format!(
                "{msg} The dtype mismatches, expected {}, got {}.",
                self.dtype_name(),
                dtype_to_string(t.dtype()).unwrap_or_default()
            )));
        }
        let want = [
            1,
            n_pages,
            2,
            cfg.num_kv_heads,
            cfg.page_size,
            cfg.qk_head_dim,
        ];
        if t.shape() != want {
            return Err(err(format!(
                "{msg} Got shape {:?}, expected {want:?}.",
                t.shape()
            )));
        }
        if !t.is_contiguous() {
            return Err(err(format!("{msg} The tensor is not compact.")));
        }
        Ok(())
    }

    fn check_group_id(&self, group_id: i64, op: &str) -> Result<usize> {
        let n = self.shared.cfg.num_layers;
        if group_id < 0 || group_id >= n {
            return Err(err(format!(
                "PagedAttentionKVCache checkpoint {op} got invalid group id {group_id}, but only \
                 {n} groups are available."
            )));
        }
        Ok(group_id as usize)
    }

    /// Copies `run` whole pages from page `src_at` of `src` to page `dst_at` of `dst`.
    fn copy_page_run(
        &self,
        src: &Tensor,
        src_at: i64,
        dst: &Tensor,
        dst_at: i64,
        run: i64,
    ) -> Result<()> {
        let cfg = &self.shared.cfg;
        let shape = [run, 2, cfg.num_kv_heads, cfg.page_size, cfg.qk_head_dim];
        let bpp = self.bytes_per_page();
        let s = src.view(&shape, src.dtype(), (src_at * bpp) as u64)?;
        let d = dst.view(&shape, dst.dtype(), (dst_at * bpp) as u64)?;
        d.copy_from(&s)
    }

    /// Runs of consecutive page ids: (logical index, page id, run length).
    fn runs(ids: &[i32]) -> Vec<(i64, i32, i64)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < ids.len() {
            let mut len = 1;
            while i + len < ids.len() && ids[i + len] == ids[i] + len as i32 {
                len += 1;
            }
            out.push((i as i64, ids[i], len as i64));
            i += len;
        }
        out
    }

    /// `ExportPageGroup`: layer `group_id`'s pages of sequence 0 into `dst`.
    pub fn export_page_group(&self, seq_id: i64, group_id: i64, dst: &Tensor) -> Result<()> {
        let st = self.lock()?;
        self.check_sequence_supported(&st, seq_id)?;
        let layer = self.check_group_id(group_id, "export")?;
        let seq = &st.seqs[&seq_id];
        let ids = self.checkpoint_page_ids(&st, seq, "checkpoint export")?;
        let n = ids.len() as i64;
        self.check_group_tensor(dst, n, "ExportPageGroup")?;
        let cfg = &self.shared.cfg;
        let pages = &self.shared.pages[layer];
        let seq_length = seq.seq_length as i64;
        let full = seq_length / cfg.page_size;
        let partial = seq_length % cfg.page_size;
        if partial != 0 {
            // The last page: zeros, then each head's valid prefix.
            let bpp = self.bytes_per_page();
            let page = dst.view(
                &[2, cfg.num_kv_heads, cfg.page_size, cfg.qk_head_dim],
                dst.dtype(),
                (full * bpp) as u64,
            )?;
            page.copy_from_bytes(&vec![0u8; bpp as usize])?;
            let scalar = bpp / (2 * cfg.num_kv_heads * cfg.page_size * cfg.qk_head_dim);
            for kv in 0..2 {
                for h in 0..cfg.num_kv_heads {
                    let head = (kv * cfg.num_kv_heads + h) * cfg.page_size * cfg.qk_head_dim;
                    let shape = [partial, cfg.qk_head_dim];
                    let s = pages.view(
                        &shape,
                        pages.dtype(),
                        (ids[full as usize] as i64 * bpp + head * scalar) as u64,
                    )?;
                    let d = dst.view(&shape, dst.dtype(), (full * bpp + head * scalar) as u64)?;
                    d.copy_from(&s)?;
                }
            }
        }
        for (at, page, len) in Self::runs(&ids[..full as usize]) {
            self.copy_page_run(pages, page as i64, dst, at, len)?;
        }
        Ok(())
    }

    /// `PrepareImport`: clears the cache and gives sequence 0 the pages of the checkpoint
    /// `metadata` describes (checked against this cache's layout).
    pub fn prepare_import(&self, seq_id: i64, metadata: &str) -> Result<()> {
        self.check_layout_supported()?;
        if seq_id != 0 {
            return Err(err(format!(
                "PagedAttentionKVCache checkpoint import only supports sequence id 0, got \
                 {seq_id}."
            )));
        }
        let seq_length = self.check_import_metadata(seq_id, metadata)?;
        let n = self.expected_logical_pages(seq_length);
        let mut st = self.lock()?;
        st.clear(&self.shared.cfg);
        let b = st.pool.alloc();
        let mut ids = Vec::with_capacity(n as usize);
        for _ in 0..n {
            ids.push(st.free_pages.pop()?);
        }
        {
            let block = st.pool.get_mut(b);
            block.seq_length = seq_length as i32;
            block.page_ids = ids;
        }
        let seq = st.pool.new_sequence(b);
        st.seqs.insert(seq_id, seq);
        st.import = Some(vec![false; self.shared.cfg.num_layers as usize]);
        st.dirty = true;
        Ok(())
    }

    /// `ImportPageGroup`: layer `group_id`'s pages from `src`.
    pub fn import_page_group(&self, seq_id: i64, group_id: i64, src: &Tensor) -> Result<()> {
        self.check_layout_supported()?;
        let mut st = self.lock()?;
        if st.import.is_none() {
            return Err(err(
                "PagedAttentionKVCache checkpoint import has not been prepared.".into(),
            ));
        }
        self.check_sequence_state(&st, seq_id)?;
        let layer = self.check_group_id(group_id, "import")?;
        if st.import.as_ref().unwrap()[layer] {
            return Err(err(format!(
                "PagedAttentionKVCache checkpoint group {group_id} was already imported."
            )));
        }
        let ids = self.checkpoint_page_ids(&st, &st.seqs[&seq_id], "checkpoint import")?;
        self.check_group_tensor(src, ids.len() as i64, "ImportPageGroup")?;
        let pages = &self.shared.pages[layer];
        for (at, page, len) in Self::runs(&ids) {
            self.copy_page_run(src, at, pages, page as i64, len)?;
        }
        st.import.as_mut().unwrap()[layer] = true;
        Ok(())
    }

    /// `FinishImport`: every group must have been imported.
    pub fn finish_import(&self, seq_id: i64) -> Result<()> {
        self.check_layout_supported()?;
        let mut st = self.lock()?;
        let Some(done) = &st.import else {
            return Err(err(
                "PagedAttentionKVCache checkpoint import has not been prepared.".into(),
            ));
        };
        self.check_sequence_state(&st, seq_id)?;
        if let Some(g) = done.iter().position(|d| !d) {
            return Err(err(format!(
                "PagedAttentionKVCache checkpoint import is missing group {g}."
            )));
        }
        st.import = None;
        Ok(())
    }

    /// `CheckCheckpointImportMetadata`: the metadata must describe this cache's layout;
    /// returns the sequence length.
    fn check_import_metadata(&self, seq_id: i64, text: &str) -> Result<i64> {
        const CTX: &str = "PagedAttentionKVCache checkpoint import metadata";
        let cfg = &self.shared.cfg;
        let v: Value = serde_json::from_str(text).map_err(|e| {
            err(format!(
                "Failed to parse PagedAttentionKVCache checkpoint metadata JSON: {e}."
            ))
        })?;
        let obj = v.as_object().ok_or_else(|| {
            err("PagedAttentionKVCache checkpoint metadata should be a JSON object.".into())
        })?;
        let field = |o: &serde_json::Map<String, Value>, f: &str, ctx: &str| -> Result<Value> {
            o.get(f)
                .cloned()
                .ok_or_else(|| err(format!("{ctx} missing field \"{f}\".")))
        };
        let int = |o: &serde_json::Map<String, Value>, f: &str, ctx: &str| -> Result<i64> {
            field(o, f, ctx)?
                .as_i64()
                .ok_or_else(|| err(format!("{ctx} field \"{f}\" is not an integer.")))
        };
        let expect_int = |o: &serde_json::Map<String, Value>, f: &str, want: i64, ctx: &str| {
            let got = int(o, f, ctx)?;
            if got != want {
                return Err(err(format!(
                    "{ctx} field \"{f}\" mismatch: expected {want}, got {got}."
                )));
            }
            Ok(())
        };
        let string = |o: &serde_json::Map<String, Value>, f: &str| -> Result<String> {
            field(o, f, CTX)?
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| err(format!("{CTX} field \"{f}\" is not a string.")))
        };
        let expect_str = |f: &str, want: &str| {
            let got = string(obj, f)?;
            if got != want {
                return Err(err(format!(
                    "{CTX} field \"{f}\" mismatch: expected {want}, got {got}."
                )));
            }
            Ok(())
        };
        let expect_num = |f: &str, want: f64| {
            let got = field(obj, f, CTX)?
                .as_f64()
                .ok_or_else(|| err(format!("{CTX} field \"{f}\" is not a number.")))?;
            if got != want {
                return Err(err(format!(
                    "{CTX} field \"{f}\" mismatch: expected {want}, got {got}."
                )));
            }
            Ok(())
        };
        let expect_bool = |f: &str, want: bool| {
            let v = field(obj, f, CTX)?;
            let got = v
                .as_bool()
                .or_else(|| v.as_i64().map(|i| i != 0))
                .ok_or_else(|| err(format!("{CTX} field \"{f}\" is not a bool.")))?;
            if got != want {
                return Err(err(format!(
                    "{CTX} field \"{f}\" mismatch: expected {want}, got {got}."
                )));
            }
            Ok(())
        };
        expect_int(obj, "format_version", FORMAT_VERSION, CTX)?;
        expect_str("cache_type", RUNTIME)?;
        expect_int(obj, "page_size", cfg.page_size, CTX)?;
        expect_int(obj, "num_layers", cfg.num_layers, CTX)?;
        expect_int(obj, "layer_begin", cfg.layer_begin, CTX)?;
        expect_int(obj, "layer_end", cfg.layer_end, CTX)?;
        expect_int(obj, "num_qo_heads", cfg.num_qo_heads, CTX)?;
        expect_int(obj, "num_kv_heads", cfg.num_kv_heads, CTX)?;
        expect_int(obj, "qk_head_dim", cfg.qk_head_dim, CTX)?;
        expect_int(obj, "v_head_dim", cfg.v_head_dim, CTX)?;
        expect_str("dtype", &self.dtype_name())?;
        expect_str("rope_mode", cfg.rope_mode.name())?;
        expect_num("rotary_scale", cfg.rotary_scale)?;
        expect_num("rotary_theta", cfg.rotary_theta)?;
        expect_bool("has_rope_ext_factors", cfg.rope_ext_factors.is_some())?;
        expect_bool("support_sliding_window", cfg.support_sliding_window)?;
        expect_bool(
            "support_layer_sliding_window",
            cfg.support_layer_sliding_window,
        )?;
        expect_str("page_group_layout", GROUP_LAYOUT)?;
        for f in ["reserved_num_seqs", "num_total_pages", "prefill_chunk_size"] {
            if int(obj, f, CTX)? <= 0 {
                return Err(err(format!("{CTX} field \"{f}\" must be positive.")));
            }
        }
        let hash = self.layout_hash()?;
        let got = string(obj, "layout_hash")?;
        if got != hash {
            return Err(err(format!(
                "PagedAttentionKVCache checkpoint import layout hash mismatch: expected {hash}, \
                 got {got}."
            )));
        }
        let kinds = field(obj, "attn_kinds", CTX)?;
        let kinds = kinds
            .as_array()
            .ok_or_else(|| err(format!("{CTX} field \"attn_kinds\" is not an array.")))?;
        if kinds.len() as i64 != cfg.num_layers {
            return Err(err(format!("{CTX} field \"attn_kinds\" size mismatch.")));
        }
        for (l, k) in kinds.iter().enumerate() {
            let want = cfg.kind(cfg.layer_begin + l as i64).name();
            if k.as_str() != Some(want) {
                return Err(err(format!(
                    "{CTX} field \"attn_kinds\" mismatch at local layer {l}: expected {want}, \
                     got {k}."
                )));
            }
        }
        expect_int(obj, "seq_id", seq_id, CTX)?;
        let seq_length = int(obj, "seq_length", CTX)?;
        if seq_length < 0 {
            return Err(err(
                "PagedAttentionKVCache checkpoint import seq_length cannot be negative.".into(),
            ));
        }
        if seq_length > i32::MAX as i64 {
            return Err(err(
                "PagedAttentionKVCache checkpoint import seq_length exceeds int32 range.".into(),
            ));
        }
        let n = self.expected_logical_pages(seq_length);
        let source_pages = int(obj, "num_total_pages", CTX)?;
        if n > source_pages {
            return Err(err(format!(
                "PagedAttentionKVCache checkpoint metadata requires {n} pages, but reports a \
                 source cache with only {source_pages} pages."
            )));
        }
        if n > cfg.num_total_pages {
            return Err(err(format!(
                "PagedAttentionKVCache checkpoint import requires {n} pages, but this cache only \
                 has {} pages.",
                cfg.num_total_pages
            )));
        }
        let pages = field(obj, "logical_pages", CTX)?;
        let pages = pages
            .as_array()
            .ok_or_else(|| err(format!("{CTX} field \"logical_pages\" is not an array.")))?;
        if pages.len() as i64 != n {
            return Err(err(format!(
                "PagedAttentionKVCache checkpoint import sequence length mismatch: seq_length \
                 {seq_length} requires {n} logical pages, but metadata has {}.",
                pages.len()
            )));
        }
        let mut start = 0;
        for (i, p) in pages.iter().enumerate() {
            let p = p
                .as_object()
                .ok_or_else(|| err(format!("{CTX} logical page {i} is not an object.")))?;
            let len = cfg.page_size.min(seq_length - start);
            expect_int(p, "logical_page_index", i as i64, CTX)?;
            expect_int(p, "start_pos", start, CTX)?;
            expect_int(p, "length", len, CTX)?;
            start += len;
        }
        const GCTX: &str = "PagedAttentionKVCache checkpoint import group metadata";
        let groups = field(obj, "groups", GCTX)?;
        let groups = groups
            .as_array()
            .ok_or_else(|| err(format!("{GCTX} field \"groups\" is not an array.")))?;
        if groups.len() as i64 != cfg.num_layers {
            return Err(err(format!(
                "{GCTX} size mismatch: expected {}, got {}.",
                cfg.num_layers,
                groups.len()
            )));
        }
        for (l, g) in groups.iter().enumerate() {
            let g = g
                .as_object()
                .ok_or_else(|| err(format!("{GCTX} group {l} is not an object.")))?;
            let l = l as i64;
            expect_int(g, "group_index", l, GCTX)?;
            expect_int(g, "layer_begin", cfg.layer_begin + l, GCTX)?;
            expect_int(g, "layer_end", cfg.layer_begin + l + 1, GCTX)?;
            expect_int(g, "num_logical_pages", n, GCTX)?;
            let dtype = g.get("dtype").and_then(Value::as_str);
            if dtype != Some(self.dtype_name().as_str()) {
                return Err(err(format!("{GCTX} field \"dtype\" mismatch.")));
            }
            let shape = g
                .get("shape")
                .and_then(Value::as_array)
                .ok_or_else(|| err(format!("{GCTX} missing field \"shape\".")))?;
            let want = [1, n, 2, cfg.num_kv_heads, cfg.page_size, cfg.qk_head_dim];
            if shape.len() != want.len() {
                return Err(err(format!("{GCTX} field \"shape\" rank mismatch.")));
            }
            for (i, (s, w)) in shape.iter().zip(want).enumerate() {
                if s.as_i64() != Some(w) {
                    return Err(err(format!(
                        "{GCTX} field \"shape\" mismatch at dim {i}: expected {w}, got {s}."
                    )));
                }
            }
            expect_int(g, "nbytes", n * self.bytes_per_page(), GCTX)?;
        }
        Ok(seq_length)
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

    #[test]
    fn page_runs_split_at_gaps() {
        assert_eq!(
            PagedKvCache::runs(&[4, 5, 6, 2, 3, 9]),
            vec![(0, 4, 3), (3, 2, 2), (5, 9, 1)]
        );
        assert!(PagedKvCache::runs(&[]).is_empty());
    }
}
