//! Encoding a module tree in the tvm-ffi layout or a classic one, as TVM's exporters write them.

use super::bytes::Writer;
use super::{context, BlobLayout, BlobModule, DecodedBlob, IMPORT_TREE_KEY, LIB_KEY};
use crate::error::Result;

/// Encodes in the tvm-ffi layout, size prefix included, as TVM 0.27's `PackImportsToBytes`
/// does. The blob's `layout` field is not consulted.
pub fn encode_ffi(blob: &DecodedBlob) -> Result<Vec<u8>> {
    let label = BlobLayout::TvmFfi.label();
    blob.validate().map_err(|e| context(e, label))?;
    // tvm-ffi's reader fails on a zero-length string, so an empty payload would make the
    // library unloadable by TVM itself.
    if let Some((i, m)) = blob
        .modules
        .iter()
        .enumerate()
        .find(|(_, m)| m.payload.as_ref().is_some_and(|p| p.is_empty()))
    {
        crate::bail_value!(
            "{label}: module {i} (`{}`) has an empty payload, which TVM's tvm-ffi reader \
             rejects",
            m.kind
        );
    }
    let (indptr, children) = blob.import_csr();
    let mut w = Writer::new();
    w.write_u64_vec(&indptr);
    w.write_u64_vec(&children);
    for m in &blob.modules {
        w.write_string(&m.kind);
        if let Some(p) = &m.payload {
            w.write_bytes(p);
        }
    }
    Ok(w.into_prefixed())
}

/// Encodes in the classic import-tree layout, size prefix included, as TVM <= 0.20's
/// `SerializeModule` does (modules in index order, `_import_tree` last). Payloads are written
/// without a length, so each must be exactly what its `loadbinary_<key>` loader consumes.
pub fn encode_classic(blob: &DecodedBlob) -> Result<Vec<u8>> {
    let label = BlobLayout::ClassicImportTree.label();
    blob.validate().map_err(|e| context(e, label))?;
    let (row_ptr, children) = blob.import_csr();
    let mut w = Writer::new();
    w.write_u64(blob.modules.len() as u64 + 1);
    write_classic_entries(&mut w, &blob.modules);
    w.write_string(IMPORT_TREE_KEY);
    w.write_u64_vec(&row_ptr);
    w.write_u64_vec(&children);
    Ok(w.into_prefixed())
}

/// Encodes in the classic legacy layout, size prefix included. The blob must have the legacy
/// shape (see [`DecodedBlob::legacy`]): module 0 is `_lib` and imports modules `1..n` in order,
/// which import nothing; modules `1..n` are written.
pub fn encode_classic_legacy(blob: &DecodedBlob) -> Result<Vec<u8>> {
    let label = BlobLayout::ClassicLegacy.label();
    blob.validate().map_err(|e| context(e, label))?;
    if !blob.is_legacy_shape() {
        crate::bail_value!(
            "{label}: the module tree does not have the legacy shape (module 0 `{LIB_KEY}` \
             importing modules 1..n in order, which import nothing)"
        );
    }
    let mut w = Writer::new();
    w.write_u64(blob.modules.len() as u64 - 1);
    write_classic_entries(&mut w, &blob.modules[1..]);
    Ok(w.into_prefixed())
}

/// Encodes in the blob's own `layout`.
pub fn encode(blob: &DecodedBlob) -> Result<Vec<u8>> {
    match blob.layout {
        BlobLayout::TvmFfi => encode_ffi(blob),
        BlobLayout::ClassicImportTree => encode_classic(blob),
        BlobLayout::ClassicLegacy => encode_classic_legacy(blob),
    }
}

fn write_classic_entries(w: &mut Writer, modules: &[BlobModule]) {
    for m in modules {
        w.write_string(&m.kind);
        if let Some(p) = &m.payload {
            w.write_raw(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::blob::test_support::*;
    use crate::module::blob::*;
    use std::borrow::Cow;

    #[test]
    fn ffi_round_trip_three_levels() {
        let blob = three_level_tree(BlobLayout::TvmFfi);
        let bytes = encode_ffi(&blob).unwrap();
        let decoded = decode_ffi(body(&bytes)).unwrap();
        assert_eq!(decoded, blob);
        assert_eq!(encode(&decoded).unwrap(), bytes);
        // Layout: indptr, child indices, then the entries with length-prefixed payloads.
        let mut r = Reader::new(body(&bytes));
        assert_eq!(r.read_u64_vec().unwrap(), vec![0, 2, 3, 5, 5, 5]);
        assert_eq!(r.read_u64_vec().unwrap(), vec![1, 2, 3, 3, 4]);
        assert_eq!(r.read_string().unwrap(), "relax.VMExecutable");
        assert_eq!(r.read_bytes().unwrap(), string_payload("vm bytes"));
        assert_eq!(r.read_string().unwrap(), "_lib");
        assert_eq!(r.read_string().unwrap(), "examplejson");
        assert_eq!(
            r.read_bytes().unwrap(),
            string_payload("subgraph_0\ninput 0 4")
        );
        assert_eq!(r.read_string().unwrap(), "cuda");
        r.read_bytes().unwrap();
        assert_eq!(r.read_string().unwrap(), "metadata");
        assert_eq!(r.read_bytes().unwrap(), 0u64.to_le_bytes());
        assert!(r.is_at_end());
    }

    #[test]
    fn classic_round_trip_three_levels() {
        let blob = three_level_tree(BlobLayout::ClassicImportTree);
        let bytes = encode_classic(&blob).unwrap();
        let decoded = decode_classic(body(&bytes), &string_payload_len).unwrap();
        assert_eq!(decoded, blob);
        assert_eq!(encode(&decoded).unwrap(), bytes);
        // Layout: count (modules + tree), entries with raw payloads, `_import_tree` last.
        let mut r = Reader::new(body(&bytes));
        assert_eq!(r.read_u64().unwrap(), 6);
        assert_eq!(r.read_string().unwrap(), "relax.VMExecutable");
        assert_eq!(r.read_string().unwrap(), "vm bytes");
        assert_eq!(r.read_string().unwrap(), "_lib");
        assert_eq!(r.read_string().unwrap(), "examplejson");
        assert_eq!(r.read_string().unwrap(), "subgraph_0\ninput 0 4");
        assert_eq!(r.read_string().unwrap(), "cuda");
        assert_eq!(r.read_string().unwrap(), "\u{0}\u{1}ptx");
        assert_eq!(r.read_string().unwrap(), "metadata");
        assert_eq!(r.read_string().unwrap(), "");
        assert_eq!(r.read_string().unwrap(), "_import_tree");
        assert_eq!(r.read_u64_vec().unwrap(), vec![0, 2, 3, 5, 5, 5]);
        assert_eq!(r.read_u64_vec().unwrap(), vec![1, 2, 3, 3, 4]);
        assert!(r.is_at_end());
    }

    #[test]
    fn cross_layout_conversion() {
        let classic = three_level_tree(BlobLayout::ClassicImportTree);
        let encoded = encode_ffi(&classic).unwrap();
        let back = decode_ffi(body(&encoded)).unwrap();
        assert_eq!(back.layout, BlobLayout::TvmFfi);
        assert_eq!(back.modules, classic.modules);
        assert_eq!(back.imports, classic.imports);
    }

    #[test]
    fn encode_rejects_invalid_trees() {
        let tree = || three_level_tree(BlobLayout::TvmFfi);
        let invalid = |b: &DecodedBlob| {
            let m = msg(encode_ffi(b));
            assert_eq!(msg(encode_classic(b)).replace(CLASSIC, FFI), m);
            m.strip_prefix(&format!("{FFI}: invalid module tree: "))
                .unwrap()
                .to_string()
        };
        let mut b = tree();
        b.imports[3].push(0);
        assert_eq!(
            invalid(&b),
            "import cycle: module 0 (`relax.VMExecutable`) -> module 1 (`_lib`) -> module 3 \
             (`cuda`) -> module 0 (`relax.VMExecutable`)"
        );
        let mut b = tree();
        b.imports[4].push(9);
        assert_eq!(
            invalid(&b),
            "module 4 imports module 9, but there are only 5 modules"
        );
        let mut b = tree();
        b.imports.pop();
        assert_eq!(invalid(&b), "it has 4 import lists for 5 modules");
        let mut b = tree();
        b.modules[1].payload = Some(Cow::Owned(vec![1]));
        assert_eq!(invalid(&b), "module 1 is `_lib` but has a payload");
        let mut b = tree();
        b.modules[2].payload = None;
        assert_eq!(invalid(&b), "module 2 (`examplejson`) has no payload");
        let mut b = tree();
        b.modules[2].kind = String::new();
        assert_eq!(invalid(&b), "module 2 has an empty type key");
        let mut b = tree();
        b.modules[2].kind = IMPORT_TREE_KEY.into();
        assert_eq!(invalid(&b), "module 2 uses the reserved key `_import_tree`");
        let empty = DecodedBlob {
            layout: BlobLayout::TvmFfi,
            modules: vec![],
            imports: vec![],
        };
        assert_eq!(
            invalid(&empty),
            "it has no modules; module 0 must be the root"
        );
        assert!(empty.root().is_none());
    }
}
