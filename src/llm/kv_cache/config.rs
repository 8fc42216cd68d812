//! The configuration of a paged KV cache, read from the arguments of
//! `vm.builtin.paged_attention_kv_cache_create` (TVM 0.27 `paged_kv_cache.cc`), with the
//! checks TVM makes and those it leaves to a crash.

use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// How a layer attends (TVM `AttnKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnKind {
    /// Multi-head attention (also multi-query and grouped-query).
    Mha,
    /// Multi-head latent attention.
    Mla,
    /// Linear attention.
    LinearAttn,
    /// Multi-head attention over a per-layer sliding window.
    MhaSliding,
}

impl AttnKind {
    /// From TVM's code (0 MHA, 1 MLA, 2 linear, 3 sliding MHA).
    pub fn from_code(code: i64) -> Result<AttnKind> {
        Ok(match code {
            0 => AttnKind::Mha,
            1 => AttnKind::Mla,
            2 => AttnKind::LinearAttn,
            3 => AttnKind::MhaSliding,
            _ => crate::bail_value!(
                "unknown attention kind {code} (0 MHA, 1 MLA, 2 linear attention, 3 sliding MHA)"
            ),
        })
    }

    /// TVM's name (checkpoint metadata).
    pub fn name(self) -> &'static str {
        match self {
            AttnKind::Mha => "mha",
            AttnKind::Mla => "mla",
            AttnKind::LinearAttn => "linear",
            AttnKind::MhaSliding => "mha_sliding",
        }
    }
}

/// Where rotary position embedding is applied (TVM `RoPEMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeMode {
    /// Never.
    None,
    /// To q and k by the split kernel, before k enters the cache.
    Normal,
    /// Inside the attention kernels.
    Inline,
}

impl RopeMode {
    /// From TVM's code (0 none, 1 normal, 2 inline).
    pub fn from_code(code: i64) -> Result<RopeMode> {
        Ok(match code {
            0 => RopeMode::None,
            1 => RopeMode::Normal,
            2 => RopeMode::Inline,
            _ => crate::bail_value!("unknown RoPE mode {code} (0 none, 1 normal, 2 inline)"),
        })
    }

    /// TVM's name (checkpoint metadata).
    pub fn name(self) -> &'static str {
        match self {
            RopeMode::None => "none",
            RopeMode::Normal => "normal",
            RopeMode::Inline => "inline",
        }
    }
}

/// The fixed shape of a cache.
pub struct Config {
    pub page_size: i64,
    /// Layers this cache holds (`layer_end - layer_begin`).
    pub num_layers: i64,
    pub layer_begin: i64,
    pub layer_end: i64,
    pub num_qo_heads: i64,
    pub num_kv_heads: i64,
    pub qk_head_dim: i64,
    pub v_head_dim: i64,
    pub reserved_num_seqs: i64,
    pub num_total_pages: i64,
    pub prefill_chunk_size: i64,
    /// Sequences may slide (and no layer has its own window).
    pub support_sliding_window: bool,
    /// Some layers attend over their own sliding window.
    pub support_layer_sliding_window: bool,
    pub layer_sliding_window_size: i64,
    /// Per model layer (indexed by the global layer id).
    pub attn_kinds: Vec<AttnKind>,
    pub rope_mode: RopeMode,
    pub rotary_scale: f64,
    pub rotary_theta: f64,
    pub rope_ext_factors: Option<Tensor>,
    pub kv_dtype: DLDataType,
    pub device: DLDevice,
}

/// What `cache_config` and the scalar arguments say, before the kernels.
pub struct RawConfig {
    pub cache_config: Vec<i64>,
    pub layer_indptr: Vec<i64>,
    pub num_qo_heads: i64,
    pub num_kv_heads: i64,
    pub qk_head_dim: i64,
    pub v_head_dim: i64,
    pub attn_kinds: Vec<i64>,
    pub enable_kv_transfer: bool,
    pub rope_mode: i64,
    pub rotary_scale: f64,
    pub rotary_theta: f64,
    pub rope_ext_factors: Option<Tensor>,
    pub kv_dtype: DLDataType,
    pub device: DLDevice,
}

const CREATE: &str = "vm.builtin.paged_attention_kv_cache_create";

fn positive(v: i64, what: &str) -> Result<i64> {
    if v <= 0 {
        crate::bail_value!("{CREATE}: {what} must be positive, got {v}");
    }
    Ok(v)
}

impl Config {
    /// Checks and derives the configuration as TVM's constructor does.
    pub fn new(raw: RawConfig) -> Result<Config> {
        let c = &raw.cache_config;
        if c.len() != 5 && c.len() != 6 {
            crate::bail_value!(
                "KV cache config must contain five legacy fields and an optional per-layer \
                 sliding window size (got {} fields)",
                c.len()
            );
        }
        let reserved_num_seqs = positive(c[0], "reserved_num_seqs (cache_config[0])")?;
        let total_token_capacity = c[1];
        if total_token_capacity < 0 {
            crate::bail_value!(
                "{CREATE}: total token capacity must not be negative, got {}",
                c[1]
            );
        }
        let prefill_chunk_size = positive(c[2], "prefill_chunk_size (cache_config[2])")?;
        let page_size = positive(c[3], "page_size (cache_config[3])")?;
        let sliding_flag = c[4] != 0;
        let layer_sliding_window_size = if c.len() == 6 { c[5] } else { 1024 };
        if layer_sliding_window_size <= 0 {
            crate::bail_value!("Per-layer sliding window size must be positive.");
        }
        // One pipeline group: TVM reads the group of the Disco worker running it; tvmrt has no
        // Disco workers, so the layer partition has exactly one group.
        let p = &raw.layer_indptr;
        if p.len() != 2 {
            crate::bail_value!(
                "{CREATE}: layer partition must have 2 entries (one pipeline group), got {}",
                p.len()
            );
        }
        let (layer_begin, layer_end) = (p[0], p[1]);
        if layer_begin < 0 || layer_end <= layer_begin {
            crate::bail_value!("{CREATE}: invalid layer partition [{layer_begin}, {layer_end}]");
        }
        let num_qo_heads = positive(raw.num_qo_heads, "num_qo_heads")?;
        let num_kv_heads = positive(raw.num_kv_heads, "num_kv_heads")?;
        if num_qo_heads % num_kv_heads != 0 {
            crate::bail_value!(
                "{CREATE}: num_qo_heads ({num_qo_heads}) must be a multiple of num_kv_heads \
                 ({num_kv_heads})"
            );
        }
        let qk_head_dim = positive(raw.qk_head_dim, "qk_head_dim")?;
        let v_head_dim = positive(raw.v_head_dim, "v_head_dim")?;
        let attn_kinds = raw
            .attn_kinds
            .iter()
            .map(|&k| AttnKind::from_code(k))
            .collect::<Result<Vec<_>>>()?;
        if (attn_kinds.len() as i64) < layer_end {
            crate::bail_value!(
                "{CREATE}: {} attention kinds given for layers up to {layer_end}",
                attn_kinds.len()
            );
        }
        let has_layer_sliding = attn_kinds.contains(&AttnKind::MhaSliding);
        let support_sliding_window = !has_layer_sliding && sliding_flag;
        let mut rope_mode = RopeMode::from_code(raw.rope_mode)?;
        // TVM: the sliding-window flag as passed (not as kept) turns RoPE inline.
        if sliding_flag && rope_mode != RopeMode::None {
            rope_mode = RopeMode::Inline;
        }
        if attn_kinds.contains(&AttnKind::Mla) {
            if support_sliding_window {
                crate::bail_value!("Sliding window not supported yet for MLA");
            }
            if raw.enable_kv_transfer {
                crate::bail_value!("KV transfer not supported yet for MLA");
            }
        }
        if raw.enable_kv_transfer {
            return Err(Error::runtime(
                "KV transfer (disaggregated serving) needs NVSHMEM, which tvmrt does not \
                 provide; create the cache with enable_kv_transfer = false",
            ));
        }
        if raw.rope_ext_factors.is_some() && rope_mode != RopeMode::Normal {
            crate::bail_value!("The RoPE mode must be normal to support RoPE extension factors.");
        }
        let mut num_total_pages = (total_token_capacity + page_size - 1) / page_size + 1;
        if sliding_flag {
            // Each sliding sequence may hold two more pages while its window moves.
            num_total_pages += reserved_num_seqs * 2;
        }
        if num_total_pages > i32::MAX as i64 || reserved_num_seqs > i32::MAX as i64 {
            crate::bail_value!("{CREATE}: {num_total_pages} pages do not fit 32-bit page ids");
        }
        Ok(Config {
            page_size,
            num_layers: layer_end - layer_begin,
            layer_begin,
            layer_end,
            num_qo_heads,
            num_kv_heads,
            qk_head_dim,
            v_head_dim,
            reserved_num_seqs,
            num_total_pages,
            prefill_chunk_size,
            support_sliding_window,
            support_layer_sliding_window: has_layer_sliding,
            layer_sliding_window_size,
            attn_kinds,
            rope_mode,
            rotary_scale: raw.rotary_scale,
            rotary_theta: raw.rotary_theta,
            rope_ext_factors: raw.rope_ext_factors,
            kv_dtype: raw.kv_dtype,
            device: raw.device,
        })
    }

    /// The shape of one layer's pages (`GetKVCacheShape`).
    pub fn page_shape(&self, kind: AttnKind) -> Vec<i64> {
        match kind {
            AttnKind::Mha | AttnKind::MhaSliding => vec![
                self.num_total_pages,
                2,
                self.num_kv_heads,
                self.page_size,
                self.qk_head_dim,
            ],
            AttnKind::Mla => vec![self.num_total_pages, self.page_size, self.qk_head_dim],
            AttnKind::LinearAttn => vec![
                self.reserved_num_seqs,
                self.num_kv_heads,
                self.qk_head_dim,
                self.v_head_dim,
            ],
        }
    }

    /// The attention kind of a global layer id.
    pub fn kind(&self, layer_id: i64) -> AttnKind {
        self.attn_kinds[layer_id as usize]
    }

    /// The local index of a global layer id this cache holds, or an error.
    pub fn local_layer(&self, layer_id: i64, func: &str) -> Result<usize> {
        let local = layer_id - self.layer_begin;
        if local < 0 || local >= self.num_layers {
            crate::bail_value!(
                "{func}: layer {layer_id} is not in this cache (layers {}..{})",
                self.layer_begin,
                self.layer_end
            );
        }
        Ok(local as usize)
    }

    /// Sliding window of a layer kind: the number of pages a window covers in a block of
    /// `seq_length` tokens (`GetLayerSlidingWindowNumPages`).
    pub fn layer_sliding_window_num_pages(&self, seq_length: i64) -> i32 {
        if seq_length == 0 {
            return 0;
        }
        let window = seq_length.min(self.layer_sliding_window_size);
        ((self.layer_sliding_window_offset(seq_length) as i64 + window + self.page_size - 1)
            / self.page_size) as i32
    }

    /// Where a per-layer window starts in its first page (`GetLayerSlidingWindowOffset`).
    pub fn layer_sliding_window_offset(&self, seq_length: i64) -> i32 {
        if seq_length <= self.layer_sliding_window_size {
            return 0;
        }
        ((seq_length - self.layer_sliding_window_size) % self.page_size) as i32
    }
}
