//! The compiled kernels a model hands its paged KV cache, and how the cache calls them (TVM
//! `attn_backend.{h,cc}`). Each attention entry is an array `[backend, kernel...]`; TVM 0.27
//! names the TIR back end `"tirx"` and FlashInfer `"flashinfer"`. The TIR kernels are what a
//! CPU model carries, and are called with exactly TVM's argument lists. FlashInfer kernels
//! run on CUDA only: such a cache is refused until tvmrt drives CUDA devices, and this enum is
//! where that back end goes.

use super::config::RopeMode;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::array_items;
use crate::object::ObjectRef;
use crate::tensor::Tensor;
use crate::value::AnyView;

/// One attention kernel and the back end that defines its calling convention.
pub enum AttnKernel {
    /// A TIR kernel (`TIR*Func` in TVM).
    Tir(Function),
}

/// Reads an attention entry (`Convert*Func`): an empty array is no kernel.
pub fn attn_kernel(arr: &ObjectRef, what: &str, ragged: bool) -> Result<Option<AttnKernel>> {
    let items = array_items(arr).unwrap_or(&[]);
    if items.is_empty() {
        return Ok(None);
    }
    let backend = items[0].expect_str(&format!("{what}[0] (attention back end)"))?;
    match backend {
        "tirx" => {
            if items.len() != 2 {
                crate::bail_value!(
                    "{what}: a `tirx` entry is [\"tirx\", kernel], got {} items",
                    items.len()
                );
            }
            Ok(Some(AttnKernel::Tir(
                items[1].expect_function(&format!("{what}[1] (kernel)"))?,
            )))
        }
        "flashinfer" => {
            let ok = items.len() == 3 || (ragged && items.len() == 5);
            if !ok {
                crate::bail_value!(
                    "{what}: malformed `flashinfer` entry of {} items",
                    items.len()
                );
            }
            Err(Error::runtime(format!(
                "{what}: the FlashInfer attention back end calls FlashInfer's CUDA kernels, \
                 which tvmrt does not provide; build the model with TVM's TIR attention \
                 kernels (the default for CPU targets)"
            )))
        }
        other => crate::bail_value!(
            "{what}: unknown attention back end `{other}` (TVM 0.27 knows `tirx` and `flashinfer`)"
        ),
    }
}

fn rotary_mode(rope_mode: RopeMode) -> i64 {
    (rope_mode == RopeMode::Inline) as i64
}

fn call(f: &Function, args: &[AnyView<'_>]) -> Result<()> {
    f.call(args).map(drop)
}

fn t(x: &Tensor) -> AnyView<'_> {
    AnyView::from(x)
}

/// The most arguments a kernel of TVM's cache takes.
const MAX_KERNEL_ARGS: usize = 20;

/// Calls `f` with `head`, the four rotary and scale scalars, then `tail`: the order every MHA
/// kernel of TVM's takes them in. The arguments are gathered on the stack (no allocation).
fn call_with_scalars(
    f: &Function,
    head: &[AnyView<'_>],
    s: AttnScalars,
    tail: &[AnyView<'_>],
) -> Result<()> {
    let scalars = [
        AnyView::from(rotary_mode(s.rope_mode)),
        AnyView::from(s.rotary_scale),
        AnyView::from(s.rotary_theta),
        AnyView::from(s.sm_scale),
    ];
    let n = head.len() + scalars.len() + tail.len();
    debug_assert!(n <= MAX_KERNEL_ARGS);
    let mut args = [scalars[0]; MAX_KERNEL_ARGS];
    for (slot, v) in args.iter_mut().zip(head.iter().chain(&scalars).chain(tail)) {
        *slot = *v;
    }
    call(f, &args[..n])
}

/// Rotary and scaling parameters shared by the MHA kernels.
#[derive(Clone, Copy)]
pub struct AttnScalars {
    pub rope_mode: RopeMode,
    pub rotary_scale: f64,
    pub rotary_theta: f64,
    pub sm_scale: f64,
}

impl AttnKernel {
    fn f(&self) -> &Function {
        match self {
            AttnKernel::Tir(f) => f,
        }
    }

    /// Ragged prefill (`RaggedPrefillFunc::MHA`): new queries against new keys.
    #[allow(clippy::too_many_arguments)]
    pub fn ragged_mha(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        qo_indptr: &Tensor,
        kv_indptr: &Tensor,
        q_rope_position: &Tensor,
        k_rope_pos_offset: &Tensor,
        causal: bool,
        s: AttnScalars,
        out: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        call_with_scalars(
            self.f(),
            &[
                t(q),
                t(qo_indptr),
                t(k),
                t(v),
                t(kv_indptr),
                t(q_rope_position),
                t(k_rope_pos_offset),
                t(out),
                t(lse),
                AnyView::from(causal as i64),
            ],
            s,
            &[],
        )
    }

    /// Paged prefill (`PagedPrefillFunc::MHA`): queries against cached pages.
    #[allow(clippy::too_many_arguments)]
    pub fn paged_prefill_mha(
        &self,
        q: &Tensor,
        qo_indptr: &Tensor,
        pages: &Tensor,
        page_indptr: &Tensor,
        page_indices: &Tensor,
        length_info: &Tensor,
        q_rope_position: &Tensor,
        k_rope_pos_offset: &Tensor,
        causal: bool,
        s: AttnScalars,
        out: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        call_with_scalars(
            self.f(),
            &[
                t(q),
                t(qo_indptr),
                t(pages),
                t(page_indptr),
                t(page_indices),
                t(length_info),
                t(k_rope_pos_offset),
                t(q_rope_position),
                t(out),
                t(lse),
                AnyView::from(causal as i64),
            ],
            s,
            &[],
        )
    }

    /// Paged prefill of multi-head latent attention (`PagedPrefillFunc::MLA`).
    #[allow(clippy::too_many_arguments)]
    pub fn paged_prefill_mla(
        &self,
        q: &Tensor,
        qo_indptr: &Tensor,
        pages: &Tensor,
        page_indptr: &Tensor,
        page_indices: &Tensor,
        length_info: &Tensor,
        causal: bool,
        sm_scale: f64,
        out: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        call(
            self.f(),
            &[
                t(q),
                t(qo_indptr),
                t(pages),
                t(page_indptr),
                t(page_indices),
                t(length_info),
                t(out),
                t(lse),
                AnyView::from(causal as i64),
                AnyView::from(sm_scale),
            ],
        )
    }

    /// Paged decode (`PagedDecodeFunc::MHA`): one query per sequence.
    #[allow(clippy::too_many_arguments)]
    pub fn paged_decode_mha(
        &self,
        q: &Tensor,
        pages: &Tensor,
        page_indptr: &Tensor,
        page_indices: &Tensor,
        length_info: &Tensor,
        k_rope_pos_offset: &Tensor,
        q_rope_position: &Tensor,
        s: AttnScalars,
        out: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        call_with_scalars(
            self.f(),
            &[
                t(q),
                t(pages),
                t(page_indptr),
                t(page_indices),
                t(length_info),
                t(k_rope_pos_offset),
                t(q_rope_position),
                t(out),
                t(lse),
            ],
            s,
            &[],
        )
    }

    /// Paged prefill under a token-tree mask (`PagedPrefillTreeMaskFunc::MHA`).
    #[allow(clippy::too_many_arguments)]
    pub fn paged_tree_mha(
        &self,
        q: &Tensor,
        qo_indptr: &Tensor,
        pages: &Tensor,
        page_indptr: &Tensor,
        page_indices: &Tensor,
        length_info: &Tensor,
        k_rope_pos_offset: &Tensor,
        q_rope_position: &Tensor,
        tree_attn_mn_indptr: &Tensor,
        tree_attn_mask: &Tensor,
        s: AttnScalars,
        out: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        call_with_scalars(
            self.f(),
            &[
                t(q),
                t(qo_indptr),
                t(pages),
                t(page_indptr),
                t(page_indices),
                t(length_info),
                t(k_rope_pos_offset),
                t(q_rope_position),
                t(out),
                t(lse),
            ],
            s,
            &[t(tree_attn_mn_indptr), t(tree_attn_mask)],
        )
    }

    /// Ragged prefill under a token-tree mask (`RaggedPrefillTreeMaskFunc::MHA`).
    #[allow(clippy::too_many_arguments)]
    pub fn ragged_tree_mha(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        qo_indptr: &Tensor,
        kv_indptr: &Tensor,
        q_rope_position: &Tensor,
        tree_attn_mn_indptr: &Tensor,
        tree_attn_mask: &Tensor,
        s: AttnScalars,
        out: &Tensor,
        lse: &Tensor,
    ) -> Result<()> {
        call_with_scalars(
            self.f(),
            &[
                t(q),
                t(qo_indptr),
                t(k),
                t(v),
                t(kv_indptr),
                t(q_rope_position),
                t(tree_attn_mn_indptr),
                t(tree_attn_mask),
                t(out),
                t(lse),
            ],
            s,
            &[],
        )
    }
}

/// Every function the cache calls.
pub struct Kernels {
    pub transpose_append_mha: Option<Function>,
    pub transpose_append_mla: Option<Function>,
    pub prefill_ragged: Option<AttnKernel>,
    pub prefill: Option<AttnKernel>,
    pub decode: Option<AttnKernel>,
    pub prefill_sliding_window: Option<AttnKernel>,
    pub decode_sliding_window: Option<AttnKernel>,
    pub prefill_with_tree_mask_paged_kv: Option<AttnKernel>,
    pub prefill_with_tree_mask: Option<AttnKernel>,
    pub mla_prefill: Option<AttnKernel>,
    pub merge_inplace: Vec<Function>,
    pub split_rotary: Function,
    pub copy_single_page: Function,
    pub debug_get_kv: Function,
    pub compact_copy: Function,
}

impl Kernels {
    /// Calls a plain kernel with tensors and integers.
    pub fn run(f: &Function, args: &[AnyView<'_>]) -> Result<()> {
        call(f, args)
    }
}

/// `x` as a kernel argument (borrowed: no reference count changes).
pub fn arg(x: &Tensor) -> AnyView<'_> {
    t(x)
}
