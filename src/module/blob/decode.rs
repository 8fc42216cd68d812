//! Decoding a blob in the tvm-ffi layout or a classic one (with an import tree, or legacy),
//! every length and index checked before it is used.

use std::borrow::Cow;

use super::bytes::Reader;
use super::tree::{check_acyclic, imports_from_csr};
use super::{context, BlobLayout, BlobModule, DecodedBlob, IMPORT_TREE_KEY, LIB_KEY};
use crate::error::Result;

/// Decodes a tvm-ffi blob; `bytes` is what follows the 8-byte size prefix. Byte offsets in
/// errors count from the start of `bytes`.
pub fn decode_ffi(bytes: &[u8]) -> Result<DecodedBlob<'_>> {
    let layout = BlobLayout::TvmFfi;
    let label = layout.label();
    let mut r = Reader::new(bytes);
    let tree_at = r.position();
    let indptr = r
        .read_u64_vec()
        .map_err(|e| context(e, format_args!("{label}: import tree indptr")))?;
    let children = r
        .read_u64_vec()
        .map_err(|e| context(e, format_args!("{label}: import tree child indices")))?;
    // ProcessLibraryBin takes the module count from indptr alone (`indptr.size() - 1`) and
    // returns module 0, so an empty or single-entry indptr has no root.
    if indptr.is_empty() {
        crate::bail_value!(
            "{label}: import tree indptr at byte {tree_at} is empty; it needs one entry per \
             module plus one"
        );
    }
    let count = indptr.len() - 1;
    if count == 0 {
        crate::bail_value!(
            "{label}: module count is zero (import tree indptr at byte {tree_at} has one \
             entry); the root module is missing"
        );
    }
    let imports = imports_from_csr(&indptr, &children, count)
        .map_err(|e| context(e, format_args!("{label}: import tree at byte {tree_at}")))?;

    // Module entries; each takes at least 8 bytes, so the loop is bounded by the input.
    let mut modules = Vec::new();
    for i in 0..count {
        let at = r.position();
        let kind =
            read_key(&mut r).map_err(|e| context(e, format_args!("{label}: module {i} key")))?;
        if kind == IMPORT_TREE_KEY {
            crate::bail_value!(
                "{label}: module {i} at byte {at} has the key `{IMPORT_TREE_KEY}`, which is not \
                 a module kind in this layout"
            );
        }
        // TVM 0.27's BufferInStream rejects an empty payload (its zero-byte read reports
        // failure); we accept one, as a module may well save nothing.
        let payload = if kind == LIB_KEY {
            None
        } else {
            let p = r
                .read_bytes()
                .map_err(|e| context(e, format_args!("{label}: module {i} (`{kind}`) payload")))?;
            Some(Cow::Borrowed(p))
        };
        modules.push(BlobModule {
            kind: kind.to_string(),
            payload,
        });
    }
    // TVM ignores bytes after the last module; its writer never emits any, so they mean the
    // blob or its size prefix is corrupt.
    r.expect_end()
        .map_err(|e| context(e, format_args!("{label}: after the last module")))?;
    let blob = DecodedBlob {
        layout,
        modules,
        imports,
    };
    check_acyclic(&blob.modules, &blob.imports).map_err(|e| context(e, label))?;
    Ok(blob)
}

/// Decodes a classic blob (either classic layout); `bytes` is what follows the 8-byte size
/// prefix. A classic payload has no length of its own, so `payload_len(key, rest)` must say how
/// many bytes of `rest` (everything after the key) the loader of `key` consumes; its errors are
/// returned with their kind, prefixed with where in the blob they happened.
pub fn decode_classic<'a>(
    bytes: &'a [u8],
    payload_len: &dyn Fn(&str, &[u8]) -> Result<usize>,
) -> Result<DecodedBlob<'a>> {
    let label = BlobLayout::ClassicImportTree.label();
    let mut r = Reader::new(bytes);
    let count = r
        .read_u64()
        .map_err(|e| context(e, format_args!("{label}: entry count")))?;
    // Each entry starts with an 8-byte key length.
    if count > (r.remaining() / 8) as u64 {
        crate::bail_value!(
            "{label}: entry count {count} at byte 0 is more than the {} remaining bytes can hold",
            r.remaining()
        );
    }
    let mut modules = Vec::new();
    // (byte offset, row_ptr, child_indices) of the `_import_tree` entry.
    let mut tree: Option<(usize, Vec<u64>, Vec<u64>)> = None;
    for e in 0..count {
        let at = r.position();
        let key =
            read_key(&mut r).map_err(|err| context(err, format_args!("{label}: entry {e} key")))?;
        if key == LIB_KEY {
            modules.push(BlobModule::library());
        } else if key == IMPORT_TREE_KEY {
            // ProcessModuleBlob would let a second tree overwrite the first; TVM's writer emits
            // one, so two mean corruption.
            if let Some((first, _, _)) = &tree {
                crate::bail_value!(
                    "{label}: second `{IMPORT_TREE_KEY}` entry at byte {at} (the first is at \
                     byte {first})"
                );
            }
            let row_ptr = r
                .read_u64_vec()
                .map_err(|err| context(err, format_args!("{label}: import tree indptr")))?;
            let child = r
                .read_u64_vec()
                .map_err(|err| context(err, format_args!("{label}: import tree child indices")))?;
            tree = Some((at, row_ptr, child));
        } else {
            let rest = r.rest();
            let payload_at = r.position();
            // The loader's own offsets count from the start of its payload.
            let n = payload_len(key, rest).map_err(|err| {
                context(
                    err,
                    format_args!("{label}: entry {e} (`{key}`), payload at byte {payload_at}"),
                )
            })?;
            if n > rest.len() {
                crate::bail_value!(
                    "{label}: the loader of `{key}` (entry {e}) claims {n} bytes at byte \
                     {payload_at}, but only {} remain",
                    rest.len()
                );
            }
            let payload = r.read_raw(n)?;
            modules.push(BlobModule {
                kind: key.to_string(),
                payload: Some(Cow::Borrowed(payload)),
            });
        }
    }
    r.expect_end()
        .map_err(|e| context(e, format_args!("{label}: after the last entry")))?;

    let Some((tree_at, row_ptr, child)) = tree else {
        return Ok(DecodedBlob::legacy(modules));
    };
    // A classic blob may lack `_lib` (TVM's writer omits it when no module of the tree is
    // compiled into the library, and ProcessModuleBlob then returns module 0), but with an
    // import tree it needs a root.
    if modules.is_empty() {
        crate::bail_value!(
            "{label}: `{IMPORT_TREE_KEY}` at byte {tree_at} but the blob has no modules"
        );
    }
    let imports = imports_from_csr(&row_ptr, &child, modules.len())
        .map_err(|e| context(e, format_args!("{label}: import tree at byte {tree_at}")))?;
    check_acyclic(&modules, &imports).map_err(|e| context(e, label))?;
    Ok(DecodedBlob {
        layout: BlobLayout::ClassicImportTree,
        modules,
        imports,
    })
}

/// Reads a module key: a non-empty UTF-8 string (TVM looks its loader up by name).
fn read_key<'a>(r: &mut Reader<'a>) -> Result<&'a str> {
    let at = r.position();
    let key = r.read_string()?;
    if key.is_empty() {
        crate::bail_value!("empty key at byte {at}");
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::blob::test_support::*;
    use crate::module::blob::*;

    #[test]
    fn real_tvm_027_relax_blob() {
        let blob = decode_ffi(body(REAL_FFI_BLOB)).unwrap();
        assert_eq!(blob.layout, BlobLayout::TvmFfi);
        assert_eq!(blob.modules.len(), 2);
        assert_eq!(blob.modules[0].kind, "relax.VMExecutable");
        let payload = blob.modules[0].payload.as_ref().unwrap();
        assert_eq!(payload.len(), 1443);
        // The Relax VM executable starts with its magic number, then its version string.
        let mut r = Reader::new(payload);
        assert_eq!(r.read_u64().unwrap(), 0xD225_DE2F_4214_151E);
        assert_eq!(r.read_string().unwrap(), "0.14");
        assert_eq!(blob.modules[1], BlobModule::library());
        assert_eq!(blob.imports, vec![vec![1], vec![]]);
        assert_eq!(blob.root().unwrap().kind, "relax.VMExecutable");
        assert_eq!(blob.library_indices(), vec![1]);
        assert_eq!(blob.import_csr(), (vec![0, 1, 1], vec![1]));
        // Our writer reproduces TVM's bytes exactly.
        assert_eq!(encode_ffi(&blob).unwrap(), REAL_FFI_BLOB);
        assert_eq!(encode(&blob).unwrap(), REAL_FFI_BLOB);
    }

    #[test]
    fn classic_legacy_layout() {
        let fatbin = string_payload("fatbin");
        let graph = string_payload("subgraph_0");
        let mods = vec![
            BlobModule::serialized("cuda", fatbin.clone()),
            BlobModule::serialized("examplejson", graph.clone()),
        ];
        let blob = DecodedBlob::legacy(mods.clone());
        let bytes = encode_classic_legacy(&blob).unwrap();
        assert_eq!(
            body(&bytes),
            classic_bytes(&[("cuda", &fatbin), ("examplejson", &graph)])
        );
        let decoded = decode_classic(body(&bytes), &string_payload_len).unwrap();
        assert_eq!(decoded.layout, BlobLayout::ClassicLegacy);
        assert_eq!(decoded.modules[0], BlobModule::library());
        assert_eq!(&decoded.modules[1..], &mods[..]);
        assert_eq!(decoded.imports, vec![vec![1, 2], vec![], vec![]]);
        assert_eq!(decoded, blob);
        assert_eq!(encode(&decoded).unwrap(), bytes);

        // TVM's classic writer emits a bare count of 0 for a lone library root.
        let zero = 0u64.to_le_bytes();
        let lone = decode_classic(&zero, &string_payload_len).unwrap();
        assert_eq!(lone, DecodedBlob::legacy(vec![]));
        assert_eq!(lone.imports, vec![Vec::<usize>::new()]);
        assert_eq!(body(&encode(&lone).unwrap()), 0u64.to_le_bytes());

        // Not every tree has the legacy shape.
        let tree = three_level_tree(BlobLayout::ClassicLegacy);
        assert_eq!(
            msg(encode(&tree)),
            "library blob (classic legacy layout): the module tree does not have the legacy \
             shape (module 0 `_lib` importing modules 1..n in order, which import nothing)"
        );
    }

    #[test]
    fn accepted_like_tvm() {
        let p = string_payload("g");
        // Several `_lib` entries: TVM's readers make one library module per entry.
        let two = ffi_bytes(&[0, 1, 1], &[1], &[("_lib", None), ("_lib", None)]);
        assert_eq!(decode_ffi(&two).unwrap().library_indices(), vec![0, 1]);
        let two = classic_bytes(&[
            ("_lib", &[]),
            ("_lib", &[]),
            ("_import_tree", &tree_bytes(&[0, 1, 1], &[1])),
        ]);
        let blob = decode_classic(&two, &string_payload_len).unwrap();
        assert_eq!(blob.library_indices(), vec![0, 1]);
        // A `_lib` in a legacy blob is one more library module under the root.
        let legacy = classic_bytes(&[("_lib", &[]), ("examplejson", &p)]);
        let blob = decode_classic(&legacy, &string_payload_len).unwrap();
        assert_eq!(blob.layout, BlobLayout::ClassicLegacy);
        assert_eq!(blob.library_indices(), vec![0, 1]);
        assert_eq!(encode(&blob).unwrap()[8..], legacy[..]);

        // No `_lib` at all: nothing of the tree was compiled into the library.
        let no_lib = ffi_bytes(&[0, 0], &[], &[("examplejson", Some(b"x"))]);
        assert!(decode_ffi(&no_lib).unwrap().library_indices().is_empty());
        let no_lib = classic_bytes(&[
            ("examplejson", &p),
            ("_import_tree", &tree_bytes(&[0, 0], &[])),
        ]);
        let blob = decode_classic(&no_lib, &string_payload_len).unwrap();
        assert_eq!(blob.layout, BlobLayout::ClassicImportTree);
        assert_eq!(
            blob.modules,
            vec![BlobModule::serialized("examplejson", p.clone())]
        );

        // `_import_tree` need not be last; modules keep their order around it.
        let middle = classic_bytes(&[
            ("_lib", &[]),
            ("_import_tree", &tree_bytes(&[0, 1, 1], &[1])),
            ("examplejson", &p),
        ]);
        let blob = decode_classic(&middle, &string_payload_len).unwrap();
        assert_eq!(blob.modules[1].kind, "examplejson");
        assert_eq!(blob.imports, vec![vec![1], vec![]]);

        // A module shared by two parents, and a module nothing imports.
        let dag = ffi_bytes(
            &[0, 2, 3, 3, 3],
            &[1, 2, 2],
            &[
                ("_lib", None),
                ("a", Some(b"1")),
                ("b", Some(b"2")),
                ("c", Some(b"3")),
            ],
        );
        let blob = decode_ffi(&dag).unwrap();
        assert_eq!(blob.imports, vec![vec![1, 2], vec![2], vec![], vec![]]);

        // An empty payload decodes (TVM 0.27's reader fails on it) but is not written.
        let empty = ffi_bytes(&[0, 0], &[], &[("examplejson", Some(b""))]);
        let blob = decode_ffi(&empty).unwrap();
        assert_eq!(blob.modules[0].payload, Some(Cow::Borrowed(&[][..])));
        assert_eq!(
            msg(encode_ffi(&blob)),
            "library blob (tvm-ffi layout): module 0 (`examplejson`) has an empty payload, \
             which TVM's tvm-ffi reader rejects"
        );
        assert!(encode_classic(&blob).is_ok());
    }

    #[test]
    fn ffi_errors() {
        let lib: (&str, Option<&[u8]>) = ("_lib", None);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                vec![],
                "import tree indptr: truncated at byte 0: need 8 bytes, 0 remain",
            ),
            (
                ffi_bytes(&[], &[], &[]),
                "import tree indptr at byte 0 is empty; it needs one entry per module plus one",
            ),
            (
                ffi_bytes(&[0], &[], &[]),
                "module count is zero (import tree indptr at byte 0 has one entry); the root \
                 module is missing",
            ),
            (
                ffi_bytes(&[1, 1], &[0], &[lib]),
                "import tree at byte 0: indptr[0] is 1, not 0",
            ),
            (
                ffi_bytes(&[0, 2, 1], &[1, 1], &[lib, lib]),
                "import tree at byte 0: indptr decreases: indptr[2] = 1 after indptr[1] = 2",
            ),
            (
                ffi_bytes(&[0, 1, 1], &[1, 1], &[lib, lib]),
                "import tree at byte 0: last indptr entry is 1, but there are 2 child indices",
            ),
            (
                ffi_bytes(&[0, 1, 1], &[2], &[lib, lib]),
                "import tree at byte 0: child index 2 (child_indices[0], an import of module 0) \
                 is out of range for 2 modules",
            ),
            (
                ffi_bytes(&[0, 1], &[0], &[lib]),
                "import cycle: module 0 (`_lib`) imports itself",
            ),
            (
                ffi_bytes(
                    &[0, 1, 2, 3],
                    &[1, 2, 0],
                    &[("a", Some(b"1")), ("b", Some(b"2")), ("c", Some(b"3"))],
                ),
                "import cycle: module 0 (`a`) -> module 1 (`b`) -> module 2 (`c`) -> module 0 \
                 (`a`)",
            ),
            (
                ffi_bytes(&[0, 0], &[], &[("", None)]),
                "module 0 key: empty key at byte 32",
            ),
            (
                ffi_bytes(&[0, 0], &[], &[("_import_tree", Some(b"x"))]),
                "module 0 at byte 32 has the key `_import_tree`, which is not a module kind in \
                 this layout",
            ),
            (
                ffi_bytes(&[0, 0], &[], &[("examplejson", None)]),
                "module 0 (`examplejson`) payload: truncated at byte 51: need 8 bytes, 0 remain",
            ),
            (
                [ffi_bytes(&[0, 0], &[], &[lib]), vec![9, 9, 9]].concat(),
                "after the last module: 3 trailing bytes at byte 44",
            ),
            (
                ffi_bytes(&[0, 0, 0], &[], &[lib]),
                "module 1 key: truncated at byte 52: need 8 bytes, 0 remain",
            ),
        ];
        for (bytes, expected) in cases {
            assert_eq!(msg(decode_ffi(&bytes)), format!("{FFI}: {expected}"));
        }

        // Invalid UTF-8 in a key.
        let mut bad = ffi_bytes(&[0, 0], &[], &[("ab", Some(b"x"))]);
        bad[41] = 0xff;
        assert_eq!(
            msg(decode_ffi(&bad)),
            format!(
                "{FFI}: module 0 key: the string at byte 32 is not valid UTF-8 (bad byte at \
                 string offset 1)"
            )
        );
        // Lengths and counts larger than what remains are refused before any allocation.
        let mut huge = ffi_bytes(&[0, 0], &[], &[("k", Some(b"abc"))]);
        huge[41..49].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(
            msg(decode_ffi(&huge)),
            format!(
                "{FFI}: module 0 (`k`) payload: length 18446744073709551615 at byte 41 needs \
                 18446744073709551615 bytes, 3 remain"
            )
        );
        let mut count = ffi_bytes(&[0, 0], &[], &[lib]);
        count[..8].copy_from_slice(&(1u64 << 61).to_le_bytes());
        assert_eq!(
            msg(decode_ffi(&count)),
            format!(
                "{FFI}: import tree indptr: count 2305843009213693952 at byte 0 needs \
                 18446744073709551616 bytes, 36 remain"
            )
        );
        let mut count = ffi_bytes(&[0, 0], &[], &[lib]);
        count[24..32].copy_from_slice(&3u64.to_le_bytes());
        assert_eq!(
            msg(decode_ffi(&count)),
            format!(
                "{FFI}: import tree child indices: count 3 at byte 24 needs 24 bytes, 12 remain"
            )
        );
    }

    #[test]
    fn classic_errors() {
        let p = string_payload("g");
        let lib: (&str, &[u8]) = ("_lib", &[]);
        let with_tree = |rp: &[u64], ch: &[u64], entries: &[(&str, &[u8])]| {
            let t = tree_bytes(rp, ch);
            let mut all = entries.to_vec();
            all.push(("_import_tree", &t));
            classic_bytes(&all)
        };
        let ej: (&str, &[u8]) = ("examplejson", &p);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                vec![1, 0],
                "entry count: truncated at byte 0: need 8 bytes, 2 remain",
            ),
            (
                u64::MAX.to_le_bytes().to_vec(),
                "entry count 18446744073709551615 at byte 0 is more than the 0 remaining bytes \
                 can hold",
            ),
            (
                classic_bytes(&[("", &[])]),
                "entry 0 key: empty key at byte 8",
            ),
            (
                with_tree(&[], &[], &[]),
                "`_import_tree` at byte 8 but the blob has no modules",
            ),
            (
                with_tree(&[0, 0], &[], &[lib, lib]),
                "import tree at byte 32: indptr has 2 entries, but 2 modules need 3",
            ),
            (
                with_tree(&[], &[], &[lib]),
                "import tree at byte 20: indptr has 0 entries, but 1 modules need 2",
            ),
            (
                with_tree(&[0, 1, 1], &[0], &[lib, ej]),
                "import cycle: module 0 (`_lib`) imports itself",
            ),
            (
                with_tree(&[0, 1, 2], &[1, 0], &[lib, ej]),
                "import cycle: module 0 (`_lib`) -> module 1 (`examplejson`) -> module 0 \
                 (`_lib`)",
            ),
            (
                with_tree(&[0, 1, 1], &[5], &[lib, ej]),
                "import tree at byte 48: child index 5 (child_indices[0], an import of module 0) \
                 is out of range for 2 modules",
            ),
            (
                with_tree(&[0, 1, 1], &[1], &[lib, ej])[..90].to_vec(),
                "import tree indptr: count 3 at byte 68 needs 24 bytes, 14 remain",
            ),
            (
                with_tree(&[0, 1, 1], &[1], &[lib, ej])[..110].to_vec(),
                "import tree child indices: count 1 at byte 100 needs 8 bytes, 2 remain",
            ),
            (
                [with_tree(&[0, 0], &[], &[lib]), vec![0]].concat(),
                "after the last entry: 1 trailing bytes at byte 72",
            ),
            (
                classic_bytes(&[("examplejson", &p[..8])]),
                "entry 0 (`examplejson`), payload at byte 27: length 1 at byte 0 needs 1 bytes, \
                 0 remain",
            ),
            (
                classic_bytes(&[
                    lib,
                    ("_import_tree", &tree_bytes(&[0, 0], &[])),
                    ("_import_tree", &tree_bytes(&[0, 0], &[])),
                ]),
                "second `_import_tree` entry at byte 72 (the first is at byte 20)",
            ),
        ];
        for (bytes, expected) in cases {
            assert_eq!(
                msg(decode_classic(&bytes, &string_payload_len)),
                format!("{CLASSIC}: {expected}")
            );
        }

        // A loader that claims more than remains; a loader's error keeps its kind.
        let one = classic_bytes(&[ej]);
        assert_eq!(
            msg(decode_classic(&one, &|_, rest| Ok(rest.len() + 1))),
            format!(
                "{CLASSIC}: the loader of `examplejson` (entry 0) claims 10 bytes at byte 27, \
                 but only 9 remain"
            )
        );
        let e = decode_classic(&one, &|k, _| {
            Err(Error::attribute(format!("no loader for {k}")))
        })
        .unwrap_err();
        assert_eq!(e.kind, "AttributeError");
        assert_eq!(
            e.message,
            format!(
                "{CLASSIC}: entry 0 (`examplejson`), payload at byte 27: no loader for examplejson"
            )
        );
        // A loader that consumes too little leaves bytes that cannot pass for the rest.
        assert_eq!(
            msg(decode_classic(&one, &|_, _| Ok(0))),
            format!("{CLASSIC}: after the last entry: 9 trailing bytes at byte 27")
        );

        // Invalid UTF-8 in a key.
        let mut bad = classic_bytes(&[lib]);
        bad[17] = 0xc3;
        assert_eq!(
            msg(decode_classic(&bad, &string_payload_len)),
            format!(
                "{CLASSIC}: entry 0 key: the string at byte 8 is not valid UTF-8 (bad byte at \
                 string offset 1)"
            )
        );
    }

    /// Every strict prefix of a valid blob is an error (all its lengths are explicit), and every
    /// one-byte corruption either fails or gives a tree that passes validation; none panics.
    #[test]
    fn truncation_and_corruption_sweep() {
        let ffi_blobs = [
            body(REAL_FFI_BLOB).to_vec(),
            body(&encode_ffi(&three_level_tree(BlobLayout::TvmFfi)).unwrap()).to_vec(),
        ];
        let legacy = DecodedBlob::legacy(vec![BlobModule::serialized(
            "cuda",
            string_payload("fatbin"),
        )]);
        let classic_blobs = [
            body(&encode_classic(&three_level_tree(BlobLayout::ClassicImportTree)).unwrap())
                .to_vec(),
            body(&encode_classic_legacy(&legacy).unwrap()).to_vec(),
        ];
        let is_short = |e: &Error| e.message.contains("truncated") || e.message.contains("remain");
        for full in &ffi_blobs {
            for n in 0..full.len() {
                let e = decode_ffi(&full[..n]).unwrap_err();
                assert!(is_short(&e), "prefix {n}: {e}");
            }
        }
        for full in &classic_blobs {
            for n in 0..full.len() {
                let e = decode_classic(&full[..n], &string_payload_len).unwrap_err();
                assert!(is_short(&e), "prefix {n}: {e}");
            }
        }
        // xorshift64: deterministic corruption without a dependency.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut decoded = 0;
        for full in ffi_blobs.iter().chain(&classic_blobs) {
            for i in 0..full.len() {
                for _ in 0..3 {
                    let mut bad = full.clone();
                    bad[i] = next() as u8;
                    let results = [decode_ffi(&bad), decode_classic(&bad, &string_payload_len)];
                    for blob in results.into_iter().flatten() {
                        decoded += 1;
                        blob.validate().unwrap();
                        if let Ok(again) = encode(&blob) {
                            assert_eq!(split_size_prefix(&again).unwrap().len() + 8, again.len());
                        }
                    }
                }
            }
        }
        // Payload bytes carry no structure, so many corruptions still decode.
        assert!(decoded > 1000, "{decoded}");
    }
}
