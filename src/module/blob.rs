//! The library blob: the serialized module tree that TVM embeds in an exported library.
//!
//! `export_library` serializes every module of the tree that is not compiled into the library
//! itself and stores the bytes in one symbol; loading the library reads them back and rebuilds
//! the import tree. This file turns those bytes into a [`DecodedBlob`] and back. It knows nothing
//! of module loaders: the tvm-ffi layout carries each payload's length, and for the classic
//! layouts the caller says how many bytes each loader consumes.
//!
//! All integers are little-endian; a string or byte string is a `u64` length and the bytes; a
//! `u64` vector is a `u64` count and the items. The symbol starts with a `u64` giving the number
//! of bytes that follow it (checked against a real TVM 0.27 export: the symbol of the fixture
//! `tests/fixtures/blobs/relax_add.library_bin` is 1545 bytes and its prefix says 1537).
//!
//! Layouts (sources: tvm-ffi `src/ffi/extra/library_module.cc` `ProcessLibraryBin`; TVM 0.27
//! `src/target/codegen.cc` `ModuleSerializer::SerializeModuleToBytes`; TVM <= 0.20
//! `src/target/codegen.cc` `ModuleSerializer::SerializeModule` and `src/runtime/library_module.cc`
//! `ProcessModuleBlob`):
//!
//! - tvm-ffi (`__tvm_ffi__library_bin`): `vec<u64> indptr`, `vec<u64> child_indices`, then for
//!   each of the `indptr.len() - 1` modules its key and, unless the key is `_lib`, its payload as
//!   a length-prefixed byte string.
//! - classic with import tree (`__tvm_dev_mblob`): `u64 entry_count`, then entries `key` +
//!   payload. `_lib` has no payload; `_import_tree` is followed by `vec<u64> row_ptr` and
//!   `vec<u64> child_indices` and is not a module; any other key is followed by whatever that
//!   module's `SaveToBinary` wrote, with no length of its own.
//! - classic legacy: the same entries without `_import_tree`. The library module is then the
//!   root and imports every module of the blob in order. TVM's own classic writer still emits
//!   this form (`entry_count` 0) when the root is the only library module and has no imports.
//!
//! In every layout module 0 is the root.

use std::borrow::Cow;
use std::fmt;

use crate::error::{Error, Result};

/// The symbol holding the blob in a tvm-ffi library (TVM 0.21+; tvm-ffi
/// `include/tvm/ffi/extra/module.h`, `symbol::tvm_ffi_library_bin`).
pub const FFI_BLOB_SYMBOL: &str = "__tvm_ffi__library_bin";
/// The symbol holding the blob in a classic library (TVM <= 0.20, `symbol::tvm_dev_mblob`).
pub const CLASSIC_BLOB_SYMBOL: &str = "__tvm_dev_mblob";
/// The key that marks the library module itself; it has no payload.
pub const LIB_KEY: &str = "_lib";
/// The classic entry that carries the import tree instead of a module.
pub const IMPORT_TREE_KEY: &str = "_import_tree";
/// Length of the `u64` size prefix at the start of the blob symbol.
pub const SIZE_PREFIX_LEN: usize = 8;

/// Which of TVM's three blob layouts a blob uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlobLayout {
    /// TVM 0.21+ / tvm-ffi: import tree first, then length-prefixed payloads.
    TvmFfi,
    /// TVM 0.7 - 0.20: entries with `_lib` and an `_import_tree` entry.
    ClassicImportTree,
    /// Before the import tree: the library is the root and imports every entry.
    ClassicLegacy,
}

impl BlobLayout {
    /// The library symbol a blob of this layout is stored in.
    pub fn symbol(self) -> &'static str {
        match self {
            BlobLayout::TvmFfi => FFI_BLOB_SYMBOL,
            BlobLayout::ClassicImportTree | BlobLayout::ClassicLegacy => CLASSIC_BLOB_SYMBOL,
        }
    }

    fn label(self) -> &'static str {
        match self {
            BlobLayout::TvmFfi => "library blob (tvm-ffi layout)",
            BlobLayout::ClassicImportTree => "library blob (classic layout)",
            BlobLayout::ClassicLegacy => "library blob (classic legacy layout)",
        }
    }
}

/// One module entry in a blob: its type key and (for non-`_lib`) its payload bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobModule<'a> {
    /// The module's type key (`relax.VMExecutable`, `examplejson`, ...) or [`LIB_KEY`].
    pub kind: String,
    /// What the module saved of itself; `None` exactly for `_lib`. Decoding borrows it from
    /// the blob (a model's weights are not copied to be handed to its loader).
    pub payload: Option<Cow<'a, [u8]>>,
}

impl BlobModule<'_> {
    /// The `_lib` placeholder: the library module the blob is embedded in.
    pub fn library() -> Self {
        BlobModule {
            kind: LIB_KEY.to_string(),
            payload: None,
        }
    }

    /// A serialized module of type `kind`.
    pub fn serialized(kind: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        BlobModule {
            kind: kind.into(),
            payload: Some(Cow::Owned(payload.into())),
        }
    }

    /// Whether this entry is the `_lib` placeholder.
    pub fn is_library(&self) -> bool {
        self.kind == LIB_KEY
    }
}

/// A decoded blob: modules in index order (0 = root) and for each module the indices it imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedBlob<'a> {
    /// The layout it was read from, and the one [`encode`] writes.
    pub layout: BlobLayout,
    /// The modules; index 0 is the root.
    pub modules: Vec<BlobModule<'a>>,
    /// `imports[i]` lists, in order, the modules that module `i` imports.
    pub imports: Vec<Vec<usize>>,
}

impl<'a> DecodedBlob<'a> {
    /// The legacy shape: the library module as root, importing each of `modules` in order.
    pub fn legacy(modules: Vec<BlobModule<'a>>) -> Self {
        let n = modules.len();
        let mut all = Vec::with_capacity(n + 1);
        all.push(BlobModule::library());
        all.extend(modules);
        let mut imports = vec![Vec::new(); n + 1];
        imports[0] = (1..=n).collect();
        DecodedBlob {
            layout: BlobLayout::ClassicLegacy,
            modules: all,
            imports,
        }
    }

    /// The root module (index 0).
    pub fn root(&self) -> Option<&BlobModule<'a>> {
        self.modules.first()
    }

    /// Indices of the `_lib` entries. TVM creates one library module per entry (its writers
    /// emit at most one, its readers accept several).
    pub fn library_indices(&self) -> Vec<usize> {
        (0..self.modules.len())
            .filter(|&i| self.modules[i].is_library())
            .collect()
    }

    /// The import lists as TVM's CSR pair `(indptr, child_indices)`.
    pub fn import_csr(&self) -> (Vec<u64>, Vec<u64>) {
        let mut indptr = Vec::with_capacity(self.imports.len() + 1);
        let mut children = Vec::new();
        indptr.push(0);
        for row in &self.imports {
            children.extend(row.iter().map(|&c| c as u64));
            indptr.push(children.len() as u64);
        }
        (indptr, children)
    }

    /// Checks what every loader relies on: at least one module, one import list per module,
    /// well-formed keys, a payload exactly for non-`_lib` modules, import indices in range and
    /// no import cycle.
    pub fn validate(&self) -> Result<()> {
        self.check_structure()
            .map_err(|e| context(e, "invalid module tree"))
    }

    fn check_structure(&self) -> Result<()> {
        if self.modules.is_empty() {
            crate::bail_value!("it has no modules; module 0 must be the root");
        }
        if self.imports.len() != self.modules.len() {
            crate::bail_value!(
                "it has {} import lists for {} modules",
                self.imports.len(),
                self.modules.len()
            );
        }
        for (i, m) in self.modules.iter().enumerate() {
            if m.kind.is_empty() {
                crate::bail_value!("module {i} has an empty type key");
            }
            if m.kind == IMPORT_TREE_KEY {
                crate::bail_value!("module {i} uses the reserved key `{IMPORT_TREE_KEY}`");
            }
            match (m.is_library(), &m.payload) {
                (true, Some(_)) => {
                    crate::bail_value!("module {i} is `{LIB_KEY}` but has a payload")
                }
                (false, None) => crate::bail_value!("module {i} (`{}`) has no payload", m.kind),
                _ => {}
            }
        }
        for (i, row) in self.imports.iter().enumerate() {
            if let Some(&c) = row.iter().find(|&&c| c >= self.modules.len()) {
                crate::bail_value!(
                    "module {i} imports module {c}, but there are only {} modules",
                    self.modules.len()
                );
            }
        }
        check_acyclic(&self.modules, &self.imports)
    }

    fn is_legacy_shape(&self) -> bool {
        let n = self.modules.len();
        n >= 1
            && self.modules[0].is_library()
            && self.imports.len() == n
            && self.imports[0].iter().copied().eq(1..n)
            && self.imports[1..].iter().all(Vec::is_empty)
    }
}

/// Bounds-checked little-endian cursor over a byte slice. Every read checks the bytes that
/// remain before using a length, so a corrupt length is an error, never an allocation.
/// Offsets in its errors count from the start of the slice it was made with.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Whether every byte has been consumed.
    pub fn is_at_end(&self) -> bool {
        self.pos == self.data.len()
    }

    /// The bytes not yet consumed, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    /// Consumes exactly `n` bytes.
    pub fn read_raw(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            crate::bail_value!(
                "truncated at byte {}: need {n} bytes, {} remain",
                self.pos,
                self.remaining()
            );
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.read_raw(n).map(|_| ())
    }

    /// Reads a little-endian `u32`.
    pub fn read_u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.read_raw(4)?);
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a little-endian `u64`.
    pub fn read_u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.read_raw(8)?);
        Ok(u64::from_le_bytes(b))
    }

    /// Reads a `u64` count of items of `item_size` bytes each and checks that that many could
    /// still follow, so callers may allocate by it.
    fn read_count(&mut self, item_size: usize, what: &str) -> Result<usize> {
        let at = self.pos;
        let count = self.read_u64()?;
        let rem = self.remaining();
        if count > (rem / item_size) as u64 {
            crate::bail_value!(
                "{what} {count} at byte {at} needs {} bytes, {rem} remain",
                u128::from(count) * item_size as u128
            );
        }
        // Bounded by `remaining()`, so it fits in usize.
        Ok(count as usize)
    }

    /// Reads a byte string: a `u64` length, then that many bytes.
    pub fn read_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.read_count(1, "length")?;
        self.read_raw(n)
    }

    /// Reads a string: a `u64` length, then that many bytes of UTF-8.
    pub fn read_string(&mut self) -> Result<&'a str> {
        let at = self.pos;
        let bytes = self.read_bytes()?;
        std::str::from_utf8(bytes).map_err(|e| {
            Error::value(format!(
                "the string at byte {at} is not valid UTF-8 (bad byte at string offset {})",
                e.valid_up_to()
            ))
        })
    }

    /// Reads a vector of `u64`: a `u64` count, then the items.
    pub fn read_u64_vec(&mut self) -> Result<Vec<u64>> {
        let n = self.read_count(8, "count")?;
        (0..n).map(|_| self.read_u64()).collect()
    }

    /// Reads a vector of strings: a `u64` count, then the strings.
    pub fn read_string_vec(&mut self) -> Result<Vec<&'a str>> {
        // Each string needs at least its 8-byte length.
        let n = self.read_count(8, "count")?;
        (0..n).map(|_| self.read_string()).collect()
    }

    /// Fails if any bytes remain.
    pub fn expect_end(&self) -> Result<()> {
        if !self.is_at_end() {
            crate::bail_value!("{} trailing bytes at byte {}", self.remaining(), self.pos);
        }
        Ok(())
    }
}

/// Little-endian writer producing the encodings [`Reader`] reads.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes written so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// Appends bytes as they are, with no length.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends a little-endian `u32`.
    pub fn write_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a little-endian `u64`.
    pub fn write_u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a byte string: `u64` length, then the bytes.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.write_u64(bytes.len() as u64);
        self.write_raw(bytes);
    }

    /// Appends a string: `u64` length, then its UTF-8 bytes.
    pub fn write_string(&mut self, s: &str) {
        self.write_bytes(s.as_bytes());
    }

    /// Appends a vector of `u64`: count, then the items.
    pub fn write_u64_vec(&mut self, items: &[u64]) {
        self.write_u64(items.len() as u64);
        for &v in items {
            self.write_u64(v);
        }
    }

    /// Appends a vector of strings: count, then the strings.
    pub fn write_string_vec<S: AsRef<str>>(&mut self, items: &[S]) {
        self.write_u64(items.len() as u64);
        for s in items {
            self.write_string(s.as_ref());
        }
    }

    /// The bytes written.
    pub fn into_inner(self) -> Vec<u8> {
        self.buf
    }

    /// The bytes written, preceded by the blob's `u64` size prefix.
    pub fn into_prefixed(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SIZE_PREFIX_LEN + self.buf.len());
        out.extend_from_slice(&(self.buf.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.buf);
        out
    }
}

/// Reads from a raw symbol address: the first 8 bytes give the length of what follows.
pub fn blob_len_from_prefix(prefix: [u8; 8]) -> u64 {
    u64::from_le_bytes(prefix)
}

/// The body length from the size prefix, checked to be addressable together with the prefix
/// (a slice may not exceed `isize::MAX` bytes), for callers about to build a slice over a symbol.
pub fn blob_body_len(prefix: [u8; 8]) -> Result<usize> {
    let n = blob_len_from_prefix(prefix);
    let max = isize::MAX as u64 - SIZE_PREFIX_LEN as u64;
    if n > max {
        crate::bail_value!("library blob: size prefix {n} is larger than any addressable blob");
    }
    Ok(n as usize)
}

/// Splits a whole blob (prefix included) into its body. Bytes past the declared length are
/// ignored: they belong to whatever follows the symbol.
pub fn split_size_prefix(blob: &[u8]) -> Result<&[u8]> {
    let mut r = Reader::new(blob);
    let n = r
        .read_u64()
        .map_err(|e| context(e, "library blob: size prefix"))?;
    if n > r.remaining() as u64 {
        crate::bail_value!(
            "library blob: size prefix says {n} bytes follow, but only {} do",
            r.remaining()
        );
    }
    r.read_raw(n as usize)
}

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

/// Prefixes an error's message with where it happened, keeping its kind.
fn context(err: Error, ctx: impl fmt::Display) -> Error {
    err.context(ctx)
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

/// Turns TVM's CSR import tree into per-module import lists, checking it fully first
/// (ProcessLibraryBin / ProcessModuleBlob index it unchecked).
fn imports_from_csr(indptr: &[u64], children: &[u64], modules: usize) -> Result<Vec<Vec<usize>>> {
    if indptr.len() != modules + 1 {
        crate::bail_value!(
            "indptr has {} entries, but {modules} modules need {}",
            indptr.len(),
            modules + 1
        );
    }
    if indptr[0] != 0 {
        crate::bail_value!("indptr[0] is {}, not 0", indptr[0]);
    }
    for i in 1..indptr.len() {
        if indptr[i] < indptr[i - 1] {
            crate::bail_value!(
                "indptr decreases: indptr[{i}] = {} after indptr[{}] = {}",
                indptr[i],
                i - 1,
                indptr[i - 1]
            );
        }
    }
    let last = indptr[modules];
    if last != children.len() as u64 {
        crate::bail_value!(
            "last indptr entry is {last}, but there are {} child indices",
            children.len()
        );
    }
    let mut imports = Vec::with_capacity(modules);
    for i in 0..modules {
        // In range: non-decreasing and ending at children.len().
        let (start, end) = (indptr[i] as usize, indptr[i + 1] as usize);
        let mut row = Vec::with_capacity(end - start);
        for (j, &c) in children[start..end].iter().enumerate() {
            if c >= modules as u64 {
                crate::bail_value!(
                    "child index {c} (child_indices[{}], an import of module {i}) is out of \
                     range for {modules} modules",
                    start + j
                );
            }
            row.push(c as usize);
        }
        imports.push(row);
    }
    Ok(imports)
}

/// Fails on an import cycle. TVM's readers would build it (a reference cycle that leaks, and a
/// lookup through imports that never ends); its writers order modules so a module's imports
/// always have larger indices, so no real blob has one. Import indices must be in range.
fn check_acyclic(modules: &[BlobModule], imports: &[Vec<usize>]) -> Result<()> {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let name = |i: usize| format!("module {i} (`{}`)", modules[i].kind);
    let mut state = vec![NEW; imports.len()];
    // Iterative DFS (a chain of modules may be long): (module, next import to visit).
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..imports.len() {
        if state[start] != NEW {
            continue;
        }
        state[start] = ON_PATH;
        path.push((start, 0));
        while let Some(top) = path.last_mut() {
            let (node, next) = *top;
            let Some(&child) = imports[node].get(next) else {
                state[node] = DONE;
                path.pop();
                continue;
            };
            top.1 += 1;
            match state[child] {
                NEW => {
                    state[child] = ON_PATH;
                    path.push((child, 0));
                }
                ON_PATH if child == node => {
                    crate::bail_value!("import cycle: {} imports itself", name(node));
                }
                ON_PATH => {
                    let from = path.iter().position(|&(m, _)| m == child).unwrap_or(0);
                    let cycle: Vec<String> = path[from..]
                        .iter()
                        .map(|&(m, _)| name(m))
                        .chain(std::iter::once(name(child)))
                        .collect();
                    crate::bail_value!("import cycle: {}", cycle.join(" -> "));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `__tvm_ffi__library_bin` symbol (size prefix included) of a Relax model exported by
    /// apache-tvm 0.27 (`tests/fixtures/blobs/gen_blobs.py`).
    const REAL_FFI_BLOB: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/blobs/relax_add.library_bin"
    ));

    const FFI: &str = "library blob (tvm-ffi layout)";
    const CLASSIC: &str = "library blob (classic layout)";

    /// A stand-in for a classic loader whose `SaveToBinary` writes one string (as ExampleJSON's
    /// does): it consumes a `u64` length and that many bytes.
    fn string_payload_len(_key: &str, rest: &[u8]) -> Result<usize> {
        let mut r = Reader::new(rest);
        r.read_bytes()?;
        Ok(r.position())
    }

    fn string_payload(text: &str) -> Vec<u8> {
        let mut w = Writer::new();
        w.write_string(text);
        w.into_inner()
    }

    /// Three levels and a shared module: 0 vm imports {1 _lib, 2 examplejson}; 1 _lib imports
    /// {3 cuda}; 2 examplejson imports {3 cuda, 4 metadata}.
    fn three_level_tree(layout: BlobLayout) -> DecodedBlob<'static> {
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
    fn msg<T: fmt::Debug>(r: Result<T>) -> String {
        let e = r.expect_err("expected an error");
        assert_eq!(e.kind, "ValueError", "unexpected kind for {e}");
        e.message.clone()
    }

    /// The body of an encoded blob, checking that its prefix counts exactly the rest.
    fn body(blob: &[u8]) -> &[u8] {
        let b = split_size_prefix(blob).unwrap();
        assert_eq!(b.len() + SIZE_PREFIX_LEN, blob.len());
        b
    }

    /// A tvm-ffi body built by hand: indptr, child indices, then keys and optional payloads.
    fn ffi_bytes(indptr: &[u64], children: &[u64], entries: &[(&str, Option<&[u8]>)]) -> Vec<u8> {
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
    fn classic_bytes(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = Writer::new();
        w.write_u64(entries.len() as u64);
        for (k, raw) in entries {
            w.write_string(k);
            w.write_raw(raw);
        }
        w.into_inner()
    }

    /// The bytes after an `_import_tree` key.
    fn tree_bytes(row_ptr: &[u64], children: &[u64]) -> Vec<u8> {
        let mut w = Writer::new();
        w.write_u64_vec(row_ptr);
        w.write_u64_vec(children);
        w.into_inner()
    }

    #[test]
    fn prefix_is_little_endian_length_of_what_follows() {
        assert_eq!(blob_len_from_prefix([1, 6, 0, 0, 0, 0, 0, 0]), 0x601);
        assert_eq!(blob_len_from_prefix([0, 0, 0, 0, 0, 0, 0, 0x80]), 1 << 63);
        assert_eq!(blob_body_len([1, 6, 0, 0, 0, 0, 0, 0]).unwrap(), 0x601);
        assert_eq!(
            msg(blob_body_len([0xff; 8])),
            "library blob: size prefix 18446744073709551615 is larger than any addressable blob"
        );
        // In TVM's own output the prefix counts the bytes after it.
        let mut head = [0u8; 8];
        head.copy_from_slice(&REAL_FFI_BLOB[..8]);
        assert_eq!(blob_len_from_prefix(head), 1537);
        assert_eq!(REAL_FFI_BLOB.len(), 1537 + SIZE_PREFIX_LEN);

        let data = [2, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9];
        assert_eq!(split_size_prefix(&data).unwrap(), &[7, 8]);
        assert_eq!(
            msg(split_size_prefix(&[3, 0, 0, 0, 0, 0, 0, 0, 7, 8])),
            "library blob: size prefix says 3 bytes follow, but only 2 do"
        );
        assert_eq!(
            msg(split_size_prefix(&[3, 0, 0])),
            "library blob: size prefix: truncated at byte 0: need 8 bytes, 3 remain"
        );
    }

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

    #[test]
    fn reader_writer() {
        let mut w = Writer::new();
        assert!(w.is_empty());
        w.write_u32(7);
        w.write_u64(u64::MAX);
        w.write_string("héllo");
        w.write_bytes(&[1, 2]);
        w.write_u64_vec(&[3, 4]);
        w.write_string_vec(&["a", "bc"]);
        w.write_raw(&[9]);
        assert_eq!(
            w.len(),
            4 + 8 + (8 + 6) + (8 + 2) + (8 + 16) + (8 + 9 + 10) + 1
        );
        let bytes = w.as_slice().to_vec();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_u32().unwrap(), 7);
        assert_eq!(r.read_u64().unwrap(), u64::MAX);
        assert_eq!(r.read_string().unwrap(), "héllo");
        assert_eq!(r.read_bytes().unwrap(), &[1, 2]);
        assert_eq!(r.read_u64_vec().unwrap(), vec![3, 4]);
        assert_eq!(r.read_string_vec().unwrap(), vec!["a", "bc"]);
        assert_eq!(r.position(), 87);
        assert_eq!(r.rest(), &[9]);
        assert_eq!(msg(r.expect_end()), "1 trailing bytes at byte 87");
        r.skip(1).unwrap();
        assert!(r.is_at_end());
        assert_eq!(r.remaining(), 0);
        r.expect_end().unwrap();
        assert_eq!(
            msg(r.read_raw(1)),
            "truncated at byte 88: need 1 bytes, 0 remain"
        );
        assert_eq!(split_size_prefix(&w.into_prefixed()).unwrap(), &bytes[..]);
        // A string vector count that the remaining bytes cannot hold.
        let mut data = vec![0u8; 16];
        data[0] = 5;
        assert_eq!(
            msg(Reader::new(&data).read_string_vec()),
            "count 5 at byte 0 needs 40 bytes, 8 remain"
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
