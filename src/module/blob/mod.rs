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
//!
//! The parts: `tree` (the decoded module tree and its checks), `bytes` (the bounds-checked
//! reader and writer, and the size prefix), `decode` and `encode` (the three layouts).

use std::fmt;

use crate::error::Error;

mod bytes;
mod decode;
mod encode;
#[cfg(test)]
mod test_support;
mod tree;

pub use bytes::{blob_body_len, blob_len_from_prefix, split_size_prefix, Reader, Writer};
pub use decode::{decode_classic, decode_ffi};
pub use encode::{encode, encode_classic, encode_classic_legacy, encode_ffi};
pub use tree::{BlobModule, DecodedBlob};

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

/// Prefixes an error's message with where it happened, keeping its kind.
fn context(err: Error, ctx: impl fmt::Display) -> Error {
    err.context(ctx)
}
