//! `CheckCheckpointImportMetadata`: checkpoint metadata must describe this cache's layout.

use serde_json::Value;

use crate::error::Result;
use crate::llm::kv_cache::PagedKvCache;

use super::{err, FORMAT_VERSION, GROUP_LAYOUT, RUNTIME};

impl PagedKvCache {
    /// `CheckCheckpointImportMetadata`: the metadata must describe this cache's layout;
    /// returns the sequence length.
    pub(super) fn check_import_metadata(&self, seq_id: i64, text: &str) -> Result<i64> {
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
