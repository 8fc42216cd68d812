//! tvm-ffi-ABI libraries written by hand (tests/classic_libs/ffi_kernels.c) with blobs in the
//! tvm-ffi layout written by tvmrt's writer: loaders `ffi.Module.load_from_bytes.<kind>`, the
//! library context and lookups through the `_lib` module's imports.

mod module_support;

use std::path::PathBuf;
use std::sync::Once;

use module_support::*;
use tvmrt::function::{registry, Function};
use tvmrt::module::blob::{self, BlobLayout, BlobModule, DecodedBlob};
use tvmrt::module::{load_from_file, Module};
use tvmrt::value::{Any, AnyView};

fn register_loaders() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // tvm-ffi loaders get exactly their payload.
        let exact = Function::from_fn(|args: &[AnyView<'_>]| {
            let bytes = args[0].as_byte_slice().unwrap();
            let (m, n) = parse_scaler("ffi_scaler", bytes)?;
            assert_eq!(n, bytes.len(), "the payload is exactly what was saved");
            Ok(Any::from(Module::new(m)))
        });
        registry::register("ffi.Module.load_from_bytes.ffi_scaler", exact, true).unwrap();
        // A classic-named loader serves tvm-ffi blobs too.
        let classic = Function::from_fn(|args: &[AnyView<'_>]| {
            let (m, _) = parse_scaler("old_scaler", args[0].as_byte_slice().unwrap())?;
            Ok(Any::from(Module::new(m)))
        });
        registry::register("runtime.module.loadbinary_old_scaler", classic, true).unwrap();
    });
}

fn build(name: &str, blob_bytes: Option<&[u8]>) -> PathBuf {
    register_loaders();
    let dir = scratch("ffi_abi");
    let mut sources = vec![classic_libs().join("ffi_kernels.c")];
    if let Some(bytes) = blob_bytes {
        let c = dir.join(format!("{name}_blob.c"));
        write_blob_source(&c, blob::FFI_BLOB_SYMBOL, bytes);
        sources.push(c);
    }
    let so = dir.join(format!("{name}.so"));
    compile_shared(&so, &sources, &[]);
    so
}

fn call(m: &Module, name: &str, x: i64) -> tvmrt::Result<i64> {
    let f = m.get_function(name, true)?.expect("function present");
    Ok(f.call_values(&[Any::from(x)])?.view().as_i64().unwrap())
}

#[test]
fn ffi_layout_tree_and_library_context() {
    // 0 = ffi_scaler (root) imports 1 = _lib, which imports 2 (helper) and 3.
    let tree = DecodedBlob {
        layout: BlobLayout::TvmFfi,
        modules: vec![
            BlobModule::serialized("ffi_scaler", scaler_payload("root_fn:2")),
            BlobModule::library(),
            BlobModule::serialized("ffi_scaler", scaler_payload("helper:6")),
            BlobModule::serialized("old_scaler", scaler_payload("other:5")),
        ],
        imports: vec![vec![1], vec![2, 3], vec![], vec![]],
    };
    let so = build("tree", Some(&blob::encode_ffi(&tree).unwrap()));
    let root = load_from_file(so.to_str().unwrap(), "").unwrap();
    assert_eq!(root.kind(), "ffi_scaler");
    let lib = root.imports()[0].clone();
    assert_eq!(lib.kind(), "library");
    let kinds: Vec<String> = lib.imports().iter().map(|m| m.kind().to_string()).collect();
    assert_eq!(kinds, ["ffi_scaler", "old_scaler"]);
    assert_eq!(call(&root, "root_fn", 4).unwrap(), 8);
    assert_eq!(call(&root, "other", 4).unwrap(), 20);
    assert_eq!(call(&root, "negate", 4).unwrap(), -4);
    // The kernel finds `helper` in the `_lib` module's imports through its context, with a
    // NULL `self`, and caches the handle.
    assert_eq!(call(&root, "call_helper", 7).unwrap(), 42);
    assert_eq!(call(&root, "call_helper", 2).unwrap(), 12);
    // Errors raised by the kernel.
    let e = root
        .get_function("negate", true)
        .unwrap()
        .unwrap()
        .call_values(&[Any::from("x")])
        .unwrap_err();
    assert_eq!(e.kind, "TypeError");
    assert_eq!(e.message, "negate expects one int");
    // A tvm-ffi library is not searched for classic symbols.
    assert!(lib
        .get_function("__tvm_ffi_negate", false)
        .unwrap()
        .is_none());
    drop(root);
    // `lib` alone keeps its imports, so the cached lookup keeps working.
    assert_eq!(call(&lib, "call_helper", 1).unwrap(), 6);
}

#[test]
fn ffi_library_without_blob() {
    let so = build("no_blob", None);
    let m = load_from_file(so.to_str().unwrap(), "").unwrap();
    assert_eq!(call(&m, "negate", -3).unwrap(), 3);
    // `negate` is the tvm-ffi `__tvm_ffi_negate`, never the plain C function of that name.
    // Without imports, the kernel's lookup falls back on the global registry, with TVM's text.
    let e = m
        .get_function("call_helper", false)
        .unwrap()
        .unwrap()
        .call_values(&[Any::from(1i64)])
        .unwrap_err();
    assert_eq!(e.kind, "RuntimeError");
    assert_eq!(
        e.message,
        "Cannot find function helper in the imported modules or global registry."
    );
}

#[test]
fn ffi_layout_errors() {
    let tree = DecodedBlob {
        layout: BlobLayout::TvmFfi,
        modules: vec![
            BlobModule::library(),
            BlobModule::serialized("not.registered", vec![1]),
        ],
        imports: vec![vec![1], vec![]],
    };
    let so = build("missing_loader", Some(&blob::encode_ffi(&tree).unwrap()));
    let e = load_from_file(so.to_str().unwrap(), "").unwrap_err();
    assert!(
        e.message.contains(
            "library was built with module kind `not.registered` but no loader \
             `ffi.Module.load_from_bytes.not.registered` is registered"
        ),
        "{e}"
    );
    // A corrupt tvm-ffi blob: indptr claims more modules than there are entries.
    let mut w = blob::Writer::new();
    w.write_u64_vec(&[0, 0, 0]);
    w.write_u64_vec(&[]);
    w.write_string("_lib");
    let so = build("short_ffi", Some(&w.into_prefixed()));
    let e = load_from_file(so.to_str().unwrap(), "").unwrap_err();
    assert!(e.message.contains("module 1 key"), "{e}");
    assert!(e.message.contains("truncated"), "{e}");
}
