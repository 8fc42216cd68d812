//! A checkpoint's page groups: exporting a sequence's pages, and importing them back
//! (`PrepareImport`, `ImportPageGroup`, `FinishImport`).

use crate::dtype::dtype_to_string;
use crate::error::Result;
use crate::llm::kv_cache::PagedKvCache;
use crate::tensor::Tensor;

use super::err;

impl PagedKvCache {
    pub(super) fn check_group_tensor(&self, t: &Tensor, n_pages: i64, api: &str) -> Result<()> {
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

    pub(super) fn check_group_id(&self, group_id: i64, op: &str) -> Result<usize> {
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
    pub(super) fn copy_page_run(
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
    pub(super) fn runs(ids: &[i32]) -> Vec<(i64, i32, i64)> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_runs_split_at_gaps() {
        assert_eq!(
            PagedKvCache::runs(&[4, 5, 6, 2, 3, 9]),
            vec![(0, 4, 3), (3, 2, 2), (5, 9, 1)]
        );
        assert!(PagedKvCache::runs(&[]).is_empty());
    }
}
