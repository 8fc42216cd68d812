//! The globals of the paged KV cache, with TVM 0.27's names and argument lists
//! (`paged_kv_cache.cc`, `kv_state.cc`). Attention functions are called by the model through
//! `call_dps_packed`, so their outputs come last.

use super::{cache_arg, with_state, PagedKvCache};
use crate::error::Result;
use crate::function::Function;
use crate::llm::args::Args;
use crate::object::containers::array::new_array;
use crate::object::new_object;
use crate::object::shape::new_shape;
use crate::value::{Any, AnyView};

/// The body of a cache global.
type Body = fn(&PagedKvCache, &Args<'_, '_>) -> Result<Any>;

/// A global taking the cache as argument 0 and `count` arguments in all. `f` is a function
/// pointer so that the globals share one wrapper (a closure type each was a copy of the
/// argument checks and the function's glue each: BENCHMARKS.md, "Library size").
fn global(name: &'static str, count: usize, f: Body) -> (&'static str, Function) {
    (
        name,
        Function::from_fn(move |raw: &[AnyView<'_>]| {
            let args = Args::exact(name, raw, count)?;
            let obj = args.object(0, "kv_cache")?;
            f(cache_arg(&args, &obj)?, &args)
        }),
    )
}

/// `vm.builtin.paged_attention_kv_cache_create` and `vm.builtin.attention_kv_cache_*`.
pub fn builtins() -> Vec<(&'static str, Function)> {
    const CREATE: &str = "vm.builtin.paged_attention_kv_cache_create";
    vec![
        (
            CREATE,
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::between(CREATE, raw, 28, 29)?;
                Ok(Any::from_object(new_object(PagedKvCache::create(&args)?)))
            }),
        ),
        global("vm.builtin.attention_kv_cache_empty", 1, |c, _| {
            Ok(Any::from(c.is_empty()?))
        }),
        global(
            "vm.builtin.attention_kv_cache_get_num_available_pages",
            1,
            |c, _| Ok(Any::from(c.num_available_pages()?)),
        ),
        global(
            "vm.builtin.attention_kv_cache_get_total_sequence_length",
            1,
            |c, _| Ok(Any::from(c.total_sequence_length()?)),
        ),
        global(
            "vm.builtin.attention_kv_cache_get_sequence_length",
            2,
            |c, a| Ok(Any::from(c.sequence_length(a.i64(1, "seq_id")?)?)),
        ),
        global(
            "vm.builtin.attention_kv_cache_enable_sliding_window_for_seq",
            4,
            |c, a| {
                c.enable_sliding_window_for_seq(
                    a.i64(1, "seq_id")?,
                    a.i32(2, "sliding_window_size")?,
                    a.i32(3, "attn_sink_size")?,
                )?;
                Ok(Any::none())
            },
        ),
        global(
            "vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes",
            3,
            |c, a| {
                c.commit_accepted_token_tree_nodes(
                    &a.shape(1, "seq_ids")?,
                    &a.shape(2, "leaf_indices")?,
                )?;
                Ok(Any::none())
            },
        ),
        global(
            "vm.builtin.attention_kv_cache_get_query_positions",
            1,
            |c, _| Ok(Any::from(with_state(c, |sh, st| sh.query_positions(st))?)),
        ),
        global("vm.builtin.attention_kv_cache_debug_get_kv", 6, |c, a| {
            c.debug_get_kv(
                a.i64(1, "seq_id")?,
                a.i64(2, "start_pos")?,
                a.i64(3, "end_pos")?,
                &a.tensor(4, "k_data")?,
                &a.tensor(5, "v_data")?,
            )?;
            Ok(Any::none())
        }),
        global(
            "vm.builtin.attention_kv_cache_debug_get_kv_mla",
            5,
            |c, a| {
                c.debug_get_kv_mla(
                    a.i64(1, "seq_id")?,
                    a.i64(2, "start_pos")?,
                    a.i64(3, "end_pos")?,
                    &a.tensor(4, "kv_data")?,
                )?;
                Ok(Any::none())
            },
        ),
        global(
            "vm.builtin.attention_kv_cache_attention_with_fused_qkv",
            5,
            |c, a| {
                let (layer, sm) = (a.i64(1, "layer_id")?, a.f64(2, "sm_scale")?);
                let (qkv, o) = (a.tensor(3, "qkv_data")?, a.tensor(4, "o_data")?);
                with_state(c, |sh, st| {
                    sh.attention_with_fused_qkv(st, layer, sm, &qkv, &o)
                })?;
                Ok(Any::none())
            },
        ),
        global("vm.builtin.attention_kv_cache_self_attention", 8, |c, a| {
            let (layer, sm) = (a.i64(1, "layer_id")?, a.f64(2, "sm_scale")?);
            let q = a.tensor(3, "q_data")?;
            let k = a.tensor(4, "k_data")?;
            let v = a.tensor(5, "v_data")?;
            let o = a.tensor(6, "o_data")?;
            let lse = a.tensor(7, "lse_data")?;
            with_state(c, |sh, st| {
                sh.self_attention(st, layer, sm, &q, &k, &v, &o, &lse)
            })?;
            Ok(Any::none())
        }),
        global(
            "vm.builtin.attention_kv_cache_cross_attention",
            6,
            |c, a| {
                let (layer, sm) = (a.i64(1, "layer_id")?, a.f64(2, "sm_scale")?);
                let q = a.tensor(3, "q_data")?;
                let o = a.tensor(4, "o_data")?;
                let lse = a.tensor(5, "lse_data")?;
                with_state(c, |sh, st| sh.cross_attention(st, layer, sm, &q, &o, &lse))?;
                Ok(Any::none())
            },
        ),
        global(
            "vm.builtin.attention_kv_cache_attention_with_shared_kv",
            7,
            |c, a| {
                let (layer, sm) = (a.i64(1, "source_layer_id")?, a.f64(2, "sm_scale")?);
                let q = a.tensor(3, "q_data")?;
                let k = a.tensor(4, "current_k_data")?;
                let v = a.tensor(5, "current_v_data")?;
                let o = a.tensor(6, "o_data")?;
                with_state(c, |sh, st| {
                    sh.attention_with_shared_kv(st, layer, sm, &q, &k, &v, &o)
                })?;
                Ok(Any::none())
            },
        ),
        (
            "vm.builtin.attention_kv_cache_append_mla_kv",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::exact("vm.builtin.attention_kv_cache_append_mla_kv", raw, 3)?;
                let obj = args.object(0, "kv_cache")?;
                let c = cache_arg(&args, &obj)?;
                let layer = args.i64(1, "layer_id")?;
                let kv = args.tensor(2, "kv_data")?;
                with_state(c, |sh, st| sh.append_mla_kv(st, layer, &kv))?;
                Ok(Any::from_object(obj.clone()))
            }),
        ),
        global(
            "vm.builtin.attention_kv_cache_merge_attn_output_inplace",
            5,
            |c, a| {
                let o1 = a.tensor(1, "o_self_attn")?;
                let l1 = a.tensor(2, "lse_self_attn")?;
                let o2 = a.tensor(3, "o_cross_attn")?;
                let l2 = a.tensor(4, "lse_cross_attn")?;
                c.shared.merge_attn_output_inplace(&o1, &l1, &o2, &l2)?;
                Ok(Any::from_object(new_array(vec![
                    Any::from(o1),
                    Any::from(l1),
                ])))
            },
        ),
        global("vm.builtin.kv_cache_disagg_prepare_recv", 3, |c, a| {
            let dims = c.disagg_prepare_recv(a.i64(1, "seq_id")?, a.i64(2, "length")?)?;
            Ok(Any::from_object(new_shape(&dims)))
        }),
        global("vm.builtin.kv_cache_disagg_mark_send", 5, |_, _| {
            Err(crate::error::Error::runtime(
                "vm.builtin.kv_cache_disagg_mark_send: KV transfer needs NVSHMEM, which tvmrt \
                 does not provide (no cache is created with KV transfer enabled)",
            ))
        }),
        global(
            "vm.builtin.attention_kv_cache_get_checkpoint_metadata",
            2,
            |c, a| Ok(Any::from(c.checkpoint_metadata(a.i64(1, "seq_id")?)?)),
        ),
        global(
            "vm.builtin.attention_kv_cache_get_layout_hash",
            1,
            |c, _| Ok(Any::from(c.layout_hash()?)),
        ),
        global(
            "vm.builtin.attention_kv_cache_export_page_group",
            4,
            |c, a| {
                c.export_page_group(
                    a.i64(1, "seq_id")?,
                    a.i64(2, "group_id")?,
                    &a.tensor(3, "dst")?,
                )?;
                Ok(Any::none())
            },
        ),
        global("vm.builtin.attention_kv_cache_prepare_import", 3, |c, a| {
            c.prepare_import(a.i64(1, "seq_id")?, a.str(2, "metadata_json")?)?;
            Ok(Any::none())
        }),
        global(
            "vm.builtin.attention_kv_cache_import_page_group",
            4,
            |c, a| {
                c.import_page_group(
                    a.i64(1, "seq_id")?,
                    a.i64(2, "group_id")?,
                    &a.tensor(3, "src")?,
                )?;
                Ok(Any::none())
            },
        ),
        global("vm.builtin.attention_kv_cache_finish_import", 2, |c, a| {
            c.finish_import(a.i64(1, "seq_id")?)?;
            Ok(Any::none())
        }),
    ]
}
