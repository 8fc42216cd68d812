//! Fuzz target: a library blob through the whole loader path.
//!
//! Input: one selector byte, then the bytes of the blob symbol (its 8-byte size prefix
//! included). Bit 0 of the selector picks the symbol: 0 `__tvm_ffi__library_bin` (TVM 0.21+),
//! 1 `__tvm_dev_mblob` (TVM <= 0.20, both classic layouts). The bytes are served by an
//! in-memory symbol source to `create_library_module`, which is what loading a shared library
//! does after `dlopen`: size checks against the symbol, the decoder, the module loaders found in
//! the registry (`ffi.Module.load_from_bytes.<kind>` / `runtime.module.loadbinary_<kind>`:
//! ExampleJSON, and any other kind registered when the fuzzer runs) and the import tree.
//!
//! Besides "no crash", it checks two properties: whatever decodes re-encodes to bytes that
//! decode to the same tree, and a loaded tree can be walked and its functions looked up.
#![no_main]

use std::ffi::c_void;
use std::ptr::NonNull;

use libfuzzer_sys::fuzz_target;
use tvmrt::module::blob::{self, BlobLayout, CLASSIC_BLOB_SYMBOL, FFI_BLOB_SYMBOL};
use tvmrt::module::library::{create_library_module, SymbolInfo, SymbolKind, SymbolSource};
use tvmrt::module::Module;

/// The fuzzed blob, served as the library's only symbol.
struct BlobSource {
    symbol: &'static str,
    bytes: Box<[u8]>,
}

// The bytes are never written (only context variables are, and this source has none).
impl SymbolSource for BlobSource {
    fn lookup(&self, name: &str) -> Option<SymbolInfo> {
        if name != self.symbol {
            return None;
        }
        Some(SymbolInfo {
            addr: NonNull::new(self.bytes.as_ptr().cast_mut().cast::<c_void>())?,
            kind: SymbolKind::Data,
            // Always known: with an unknown size the loader trusts the prefix, as TVM does.
            size: Some(self.bytes.len()),
        })
    }

    fn describe(&self) -> String {
        format!("fuzz input ({})", self.symbol)
    }
}

/// Classic payload lengths for the decoder-only check: a payload is a dmlc string (`u64`
/// length + bytes), as ExampleJSON saves itself.
fn dmlc_len(_key: &str, rest: &[u8]) -> tvmrt::Result<usize> {
    let mut r = blob::Reader::new(rest);
    r.read_bytes()?;
    Ok(r.position())
}

fn check_roundtrip(body: &[u8], ffi: bool) {
    let decoded = if ffi {
        blob::decode_ffi(body)
    } else {
        blob::decode_classic(body, &dmlc_len)
    };
    let Ok(decoded) = decoded else { return };
    decoded
        .validate()
        .expect("a decoded blob is a valid module tree");
    let Ok(encoded) = blob::encode(&decoded) else {
        return;
    };
    let again_body = blob::split_size_prefix(&encoded).expect("encoder writes its own prefix");
    let again = match decoded.layout {
        BlobLayout::TvmFfi => blob::decode_ffi(again_body),
        _ => blob::decode_classic(again_body, &dmlc_len),
    }
    .expect("what the encoder wrote decodes");
    assert_eq!(again, decoded, "decode(encode(x)) != x");
}

fn walk(m: &Module, depth: usize) {
    if depth > 64 {
        return;
    }
    let _ = m.kind();
    for name in [
        "main",
        "__tvm_ffi_main",
        "subgraph_0",
        "add",
        "vm_load_executable",
    ] {
        let _ = m.get_function(name, true);
    }
    let _ = m.save_to_bytes();
    for child in m.imports() {
        walk(&child, depth + 1);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, symbol_bytes)) = data.split_first() else {
        return;
    };
    let ffi = selector & 1 == 0;
    if let Ok(body) = blob::split_size_prefix(symbol_bytes) {
        check_roundtrip(body, ffi);
    }
    let source = BlobSource {
        symbol: if ffi {
            FFI_BLOB_SYMBOL
        } else {
            CLASSIC_BLOB_SYMBOL
        },
        bytes: symbol_bytes.to_vec().into_boxed_slice(),
    };
    match create_library_module(Box::new(source)) {
        Ok(root) => walk(&root, 0),
        Err(e) => assert!(!e.message.is_empty(), "an error without a message"),
    }
});
