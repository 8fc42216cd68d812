//! What the blob tests share: a real TVM 0.27 blob, a stand-in classic loader, a three-level
//! tree, and builders of raw blob bytes.

use std::fmt;

use super::*;
use crate::error::Result;

/// The `__tvm_ffi__library_bin` symbol (size prefix included) of a Relax model exported by
/// apache-tvm 0.27 (`tests/fixtures/blobs/gen_blobs.py`).
pub(crate) const REAL_FFI_BLOB: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/blobs/relax_add.library_bin"
));

pub(crate) const FFI: &str = "library blob (tvm-ffi layout)";
pub(crate) const CLASSIC: &str = "library blob (classic layout)";

/// A stand-in for a classic loader whose `SaveToBinary` writes one string (as ExampleJSON's
/// does): it consumes a `u64` length and that many bytes.
pub(crate) fn string_payload_len(_key: &str, rest: &[u8]) -> Result<usize> {
    let mut r = Reader::new(rest);
    r.read_bytes()?;
    Ok(r.position())
}

pub(crate) fn string_payload(text: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_string(text);
    w.into_inner()
}

/// Three levels and a shared module: 0 vm imports {1 _lib, 2 examplejson}; 1 _lib imports
/// {3 cuda}; 2 examplejson imports {3 cuda, 4 metadata}.
pub(crate) fn three_level_tree(layout: BlobLayout) -> DecodedBlob<'static> {
    DecodedBlob {
        layout,
        modules: vec![
            BlobModule::serialized("relax.VMExecutable", string_payload("vm bytes")),
            BlobModule::library(),
            BlobModule::serialized("examplejson", string_payload("subgraph_0\ninput 0 4")),
            BlobModule::serialized("cuda", string_payload("\u{0}\u{1}ptx")),
            BlobModule::serialized("metadata", string_payload("")),
        ],
        imports: vec![vec![1, 2], vec![3], vec![3, 4], vec![], vec![]],
    }
}

/// The message of an expected `ValueError`.
pub(crate) fn msg<T: fmt::Debug>(r: Result<T>) -> String {
    let e = r.expect_err("expected an error");
    assert_eq!(e.kind, "ValueError", "unexpected kind for {e}");
    e.message.clone()
}

/// The body of an encoded blob, checking that its prefix counts exactly the rest.
pub(crate) fn body(blob: &[u8]) -> &[u8] {
    let b = split_size_prefix(blob).unwrap();
    assert_eq!(b.len() + SIZE_PREFIX_LEN, blob.len());
    b
}

/// A tvm-ffi body built by hand: indptr, child indices, then keys and optional payloads.
pub(crate) fn ffi_bytes(
    indptr: &[u64],
    children: &[u64],
    entries: &[(&str, Option<&[u8]>)],
) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_u64_vec(indptr);
    w.write_u64_vec(children);
    for (k, p) in entries {
        w.write_string(k);
        if let Some(p) = p {
            w.write_bytes(p);
        }
    }
    w.into_inner()
}

/// A classic body built by hand: entry count, then each key and its raw bytes.
pub(crate) fn classic_bytes(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_u64(entries.len() as u64);
    for (k, raw) in entries {
        w.write_string(k);
        w.write_raw(raw);
    }
    w.into_inner()
}

/// The bytes after an `_import_tree` key.
pub(crate) fn tree_bytes(row_ptr: &[u64], children: &[u64]) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_u64_vec(row_ptr);
    w.write_u64_vec(children);
    w.into_inner()
}
