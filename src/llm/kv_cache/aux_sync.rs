//! `SyncAuxArrayToDevice`: a prepared forward's auxiliary arrays (page tables, position maps,
//! lengths, tree masks) copied to the device, and the views of the scratch tensors.

use super::forward::NO_BATCH;
use super::state::{internal, State, Views};
use super::Shared;
use crate::error::{Error, Result};

/// `SyncAuxArrayToDevice`: every auxiliary array of the batch to the device, in one copy.
pub fn sync_aux(st: &mut State, sh: &Shared) -> Result<()> {
    let cfg = &sh.cfg;
    let batch = st.batch.as_ref().ok_or_else(|| Error::runtime(NO_BATCH))?;
    let h = &mut st.host;
    h.cur_append_lengths_indptr.clear();
    h.cur_append_lengths_indptr.push(0);
    for &l in &batch.append_lengths {
        let last = *h.cur_append_lengths_indptr.last().unwrap();
        h.cur_append_lengths_indptr.push(last + l as i32);
    }
    let total = *h.cur_append_lengths_indptr.last().unwrap() as i64;
    if total != h.append_position_map.len() as i64 || total != h.q_rope_position_map.len() as i64 {
        return Err(internal("position maps do not match the batch"));
    }
    let nd = batch.num_depths;
    let temp = match &st.temp_views {
        Some(t) if t.total == total => t.clone(),
        _ => {
            let t = temp_views(sh, total)?;
            st.temp_views = Some(t.clone());
            t
        }
    };
    let aux = &mut st.aux;
    aux.reset();
    // In TVM's order: the query position map first (offset 0), then per depth.
    let q_rope = aux.push(&[&h.q_rope_position_map]);
    let qo: Vec<_> = (0..nd).map(|d| aux.push(&[&h.qo_indptr[d]])).collect();
    let pi: Vec<_> = (0..nd).map(|d| aux.push(&[&h.page_indptr[d]])).collect();
    let pv: Vec<_> = (0..nd).map(|d| aux.push(&[&h.page_indices[d]])).collect();
    let layer_sw = cfg.support_layer_sliding_window;
    let (swi, swv): (Vec<_>, Vec<_>) = if layer_sw {
        (
            (0..nd)
                .map(|d| Some(aux.push(&[&h.page_indptr_sliding_window[d]])))
                .collect(),
            (0..nd)
                .map(|d| Some(aux.push(&[&h.page_indices_sliding_window[d]])))
                .collect(),
        )
    } else {
        (vec![None; nd], vec![None; nd])
    };
    let mut li = Vec::with_capacity(nd);
    let mut lsw = Vec::with_capacity(nd);
    for d in 0..nd {
        let n = h.last_page_len[d].len();
        if h.sliding_window_offset[d].len() != n || h.sink_size[d].len() != n {
            return Err(internal("length info arrays differ in length"));
        }
        let three = [
            h.last_page_len[d].as_slice(),
            &h.sliding_window_offset[d],
            &h.sink_size[d],
        ];
        li.push(if cfg.support_sliding_window {
            (aux.push(&three), vec![3, n as i64])
        } else {
            (aux.push(&[&h.last_page_len[d]]), vec![n as i64])
        });
        lsw.push(layer_sw.then(|| aux.push(&three)));
    }
    let kr: Vec<_> = (0..nd)
        .map(|d| aux.push(&[&h.k_rope_pos_offset[d]]))
        .collect();
    let krs: Vec<_> = (0..nd)
        .map(|d| layer_sw.then(|| aux.push(&[&h.k_rope_pos_offset_sliding_window[d]])))
        .collect();
    let cur = aux.push(&[&h.cur_append_lengths_indptr]);
    let kragged = aux.push(&[&h.k_ragged_rope_pos_offset]);
    let append = aux.push(&[&h.append_position_map]);
    let trees: Vec<_> = (0..nd)
        .map(|d| {
            (!batch.is_chain_on_depths[d]).then(|| {
                (
                    aux.push(&[&h.tree_attn_mask[d]]),
                    aux.push(&[&h.tree_attn_mn_indptr[d]]),
                )
            })
        })
        .collect();
    aux.commit()?;

    let one = |s: super::aux_data::Segment| aux.view(s, &[s.len() as i64]);
    let opt = |s: Option<super::aux_data::Segment>| s.map(one).transpose();
    let sw_len = |s: Option<super::aux_data::Segment>| {
        s.map(|s| aux.view(s, &[3, s.len() as i64 / 3])).transpose()
    };
    let mut views = Views {
        q_rope_position_map: one(q_rope)?,
        qo_indptr: qo.into_iter().map(one).collect::<Result<_>>()?,
        page_indptr: pi.into_iter().map(one).collect::<Result<_>>()?,
        page_indices: pv.into_iter().map(one).collect::<Result<_>>()?,
        page_indptr_sliding_window: swi.into_iter().map(opt).collect::<Result<_>>()?,
        page_indices_sliding_window: swv.into_iter().map(opt).collect::<Result<_>>()?,
        length_info: li
            .into_iter()
            .map(|(s, shape)| aux.view(s, &shape))
            .collect::<Result<_>>()?,
        layer_sliding_window_length_info: lsw.into_iter().map(sw_len).collect::<Result<_>>()?,
        k_rope_pos_offset: kr.into_iter().map(one).collect::<Result<_>>()?,
        k_rope_pos_offset_sliding_window: krs.into_iter().map(opt).collect::<Result<_>>()?,
        tree_attn_mask: Vec::with_capacity(nd),
        tree_attn_mn_indptr: Vec::with_capacity(nd),
        cur_append_length_indptr: one(cur)?,
        k_ragged_rope_pos_offset: one(kragged)?,
        append_position_map: one(append)?,
        temp,
    };
    for t in trees {
        match t {
            Some((mask, mn)) => {
                views
                    .tree_attn_mask
                    .push(Some(aux.view(mask, &[mask.len() as i64 / 2, 2])?));
                views.tree_attn_mn_indptr.push(Some(one(mn)?));
            }
            None => {
                views.tree_attn_mask.push(None);
                views.tree_attn_mn_indptr.push(None);
            }
        }
    }
    st.views = Some(views);
    st.dirty = false;
    Ok(())
}

/// Views of the scratch tensors for `total` tokens.
fn temp_views(sh: &Shared, total: i64) -> Result<super::state::TempViews> {
    let cfg = &sh.cfg;
    let (hq, hkv) = (cfg.num_qo_heads, cfg.num_kv_heads);
    let qkv = match &sh.temp.qkv {
        Some((q, k, v)) => Some((
            q.view(&[total, hq, cfg.qk_head_dim], cfg.kv_dtype, 0)?,
            k.view(&[total, hkv, cfg.qk_head_dim], cfg.kv_dtype, 0)?,
            v.view(&[total, hkv, cfg.v_head_dim], cfg.kv_dtype, 0)?,
        )),
        None => None,
    };
    let f32 = crate::dtype::dtypes::FLOAT32;
    Ok(super::state::TempViews {
        total,
        qkv,
        attn_output: sh
            .temp
            .output
            .view(&[total, hq, cfg.v_head_dim], cfg.kv_dtype, 0)?,
        attn_lse: sh.temp.lse.view(&[total, hq], f32, 0)?,
        merged_attn_lse: sh.temp.merged_lse.view(&[total, hq], f32, 0)?,
    })
}
