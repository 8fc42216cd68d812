//! Classic-ABI libraries (TVM <= 0.20 shape): C sources in tests/classic_libs compiled at test
//! time, with blobs written by tvmrt's own writer in each classic layout.

mod module_support;

use std::path::PathBuf;
use std::sync::Once;

use module_support::*;
use tvmrt::error::{Error, Result};
use tvmrt::function::{registry, Function};
use tvmrt::module::blob::{self, BlobLayout, BlobModule, DecodedBlob, Writer};
use tvmrt::module::{load_from_file, Module};
use tvmrt::value::{Any, AnyView};

/// Registers the test loaders once:
/// - `runtime.module.loadbinary_scaler`: reports the bytes it read through its second argument;
/// - `runtime.module.loadbinary_scaler_nosize`: does not; tvmrt falls back on save_to_bytes;
/// - `runtime.module.loadbinary_unsaveable`: does not report and cannot save (an error).
fn register_loaders() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let with_size = Function::from_fn(|args: &[AnyView<'_>]| {
            let bytes = args[0].as_byte_slice().unwrap();
            let (m, n) = parse_scaler("scaler", bytes)?;
            let slot = args[1].as_opaque_ptr().unwrap().cast::<i64>();
            // SAFETY: tvmrt passes a pointer to an int64 for the count.
            unsafe { *slot = n as i64 };
            Ok(Any::from(Module::new(m)))
        });
        registry::register("runtime.module.loadbinary_scaler", with_size, true).unwrap();
        let no_size = Function::from_fn(|args: &[AnyView<'_>]| {
            let (m, _) = parse_scaler("scaler_nosize", args[0].as_byte_slice().unwrap())?;
            Ok(Any::from(Module::new(m)))
        });
        registry::register("runtime.module.loadbinary_scaler_nosize", no_size, true).unwrap();
        let unsaveable = Function::from_fn(|_args: &[AnyView<'_>]| {
            let getter = Function::from_fn(|_| Ok(Any::none()));
            registry::get("tvmrt.ModuleCreate")
                .unwrap()
                .call_values(&[Any::from("unsaveable"), Any::from(getter)])
        });
        registry::register("runtime.module.loadbinary_unsaveable", unsaveable, true).unwrap();
        let liar = Function::from_fn(|args: &[AnyView<'_>]| {
            let (m, _) = parse_scaler("liar", args[0].as_byte_slice().unwrap())?;
            let slot = args[1].as_opaque_ptr().unwrap().cast::<i64>();
            // SAFETY: as above.
            unsafe { *slot = 1 << 40 };
            Ok(Any::from(Module::new(m)))
        });
        registry::register("runtime.module.loadbinary_liar", liar, true).unwrap();
    });
}

/// Compiles the classic kernels (plus a blob given as its full symbol bytes) into `<name>.so`.
fn build(name: &str, blob_symbol: Option<&[u8]>) -> PathBuf {
    register_loaders();
    let dir = scratch("classic");
    let mut sources = vec![classic_libs().join("classic_kernels.c")];
    if let Some(bytes) = blob_symbol {
        let c = dir.join(format!("{name}_blob.c"));
        write_blob_source(&c, blob::CLASSIC_BLOB_SYMBOL, bytes);
        sources.push(c);
    }
    let so = dir.join(format!("{name}.so"));
    compile_shared(&so, &sources, &[]);
    so
}

fn load(path: &std::path::Path) -> Result<Module> {
    load_from_file(path.to_str().unwrap(), "")
}

fn call_i64(m: &Module, name: &str, args: &[Any]) -> Result<i64> {
    let f = m
        .get_function(name, false)?
        .unwrap_or_else(|| panic!("`{name}` not found"));
    Ok(f.call_values(args)?.view().as_i64().unwrap())
}

fn scaler(text: &str) -> BlobModule<'static> {
    BlobModule::serialized("scaler", scaler_payload(text))
}

/// A classic import-tree blob: the library module, importing `module`.
fn lib_importing(module: BlobModule) -> Vec<u8> {
    let tree = DecodedBlob {
        layout: BlobLayout::ClassicImportTree,
        modules: vec![BlobModule::library(), module],
        imports: vec![vec![1], vec![]],
    };
    blob::encode_classic(&tree).unwrap()
}

#[test]
fn plain_library_functions() {
    let so = build("plain", None);
    let m = load(&so).unwrap();
    assert_eq!(m.kind(), "library");
    assert!(m.imports().is_empty());
    assert_eq!(call_i64(&m, "add_one", &[Any::from(41i64)]).unwrap(), 42);
    // `__tvm_main__` names the entry.
    assert_eq!(call_i64(&m, "__tvm_main__", &[Any::from(1i64)]).unwrap(), 2);
    // A string result is copied into an owned string.
    let greet = m.get_function("greet", false).unwrap().unwrap();
    assert_eq!(
        greet.call(&[]).unwrap().view().as_str(),
        Some("hello from a classic library")
    );
    // Errors set through the context pointer `__TVMAPISetLastError` come back with their kind.
    let e = m
        .get_function("fail", false)
        .unwrap()
        .unwrap()
        .call(&[])
        .unwrap_err();
    assert_eq!(e.kind, "ValueError");
    assert_eq!(e.message, "classic kernel failed on purpose");
    let e = call_i64(&m, "add_one", &[Any::from("x")]).unwrap_err();
    assert_eq!(e.kind, "TypeError");
    assert!(
        e.message.contains("add_one expects one int argument"),
        "{e}"
    );
    // Workspace through the context pointers.
    assert_eq!(
        call_i64(&m, "workspace_sum", &[Any::from(100i64)]).unwrap(),
        4950
    );
    // Tensors: as a tensor object (classic NDArray handle) and as a bare DLTensor*.
    let mut t = HostTensor::new(dl_dtype(2, 32, 1), &[3], &f32_bytes(&[1.0, 2.0, 3.0]));
    let scale2 = m.get_function("scale2", false).unwrap().unwrap();
    assert!(scale2
        .call_values(&[t.object_arg()])
        .unwrap()
        .view()
        .is_none());
    assert_eq!(t.f32s(), vec![2.0, 4.0, 6.0]);
    scale2.call_values(&[t.ptr_arg()]).unwrap();
    assert_eq!(t.f32s(), vec![4.0, 8.0, 12.0]);
    // Not functions of this library: data, dependencies' symbols, runtime variables.
    for name in [
        "ordinary_data_value",
        "malloc",
        "__tvm_module_ctx",
        "__TVMFuncCall",
        "no_such_function",
    ] {
        assert!(
            m.get_function(name, true).unwrap().is_none(),
            "`{name}` must not be found"
        );
    }
    // Environment lookup without imports: the global registry only, with TVM's message.
    let e = call_i64(
        &m,
        "call_named",
        &[Any::from("classic_test.absent"), Any::from(1i64)],
    )
    .unwrap_err();
    assert_eq!(e.kind, "RuntimeError");
    assert_eq!(
        e.message,
        "Cannot find function classic_test.absent in the imported modules or global registry."
    );
    registry::register(
        "classic_test.triple",
        Function::from_fn(|a| Ok(Any::from(a[0].expect_i64("x")? * 3))),
        true,
    )
    .unwrap();
    assert_eq!(
        call_i64(
            &m,
            "call_named",
            &[Any::from("classic_test.triple"), Any::from(5i64)]
        )
        .unwrap(),
        15
    );
    // The library's own functions are not found through the environment (as in TVM).
    let e = call_i64(&m, "call_named", &[Any::from("add_one"), Any::from(5i64)]).unwrap_err();
    assert!(e.message.contains("Cannot find function add_one"), "{e}");
}

#[test]
fn import_tree_layout_restores_the_tree() {
    // 0 = _lib imports 1; 1 imports 2.
    let tree = DecodedBlob {
        layout: BlobLayout::ClassicImportTree,
        modules: vec![
            BlobModule::library(),
            scaler("helper:10"),
            scaler("other:3"),
        ],
        imports: vec![vec![1], vec![2], vec![]],
    };
    let so = build("tree", Some(&blob::encode_classic(&tree).unwrap()));
    let root = load(&so).unwrap();
    assert_eq!(root.kind(), "library");
    let level1 = root.imports();
    assert_eq!(level1.len(), 1);
    assert_eq!(level1[0].kind(), "scaler");
    assert_eq!(level1[0].imports().len(), 1);
    assert!(root.get_function("other", false).unwrap().is_none());
    assert_eq!(
        root.get_function("other", true)
            .unwrap()
            .unwrap()
            .call_values(&[Any::from(2i64)])
            .unwrap()
            .view()
            .as_i64(),
        Some(6)
    );
    // Compiled code finds `helper` (module 1) and `other` (module 2) through the context.
    assert_eq!(
        call_i64(&root, "call_helper", &[Any::from(4i64)]).unwrap(),
        40
    );
    assert_eq!(
        call_i64(&root, "call_named", &[Any::from("other"), Any::from(5i64)]).unwrap(),
        15
    );
    // Save and restore the serialized modules' payloads.
    assert_eq!(
        level1[0].save_to_bytes().unwrap(),
        scaler_payload("helper:10")
    );
}

#[test]
fn legacy_layout_makes_the_library_the_root() {
    let legacy = DecodedBlob::legacy(vec![BlobModule::serialized(
        "scaler_nosize",
        scaler_payload("helper:7"),
    )]);
    let bytes = blob::encode_classic_legacy(&legacy).unwrap();
    let so = build("legacy", Some(&bytes));
    let root = load(&so).unwrap();
    assert_eq!(root.kind(), "library");
    let imports = root.imports();
    assert_eq!(imports.len(), 1);
    assert_eq!(imports[0].kind(), "scaler_nosize");
    // The loader did not report its size: tvmrt used the module's own save_to_bytes length.
    assert_eq!(
        call_i64(&root, "call_helper", &[Any::from(3i64)]).unwrap(),
        21
    );
}

#[test]
fn custom_root_imports_the_library() {
    let tree = DecodedBlob {
        layout: BlobLayout::ClassicImportTree,
        modules: vec![scaler("root_fn:2"), BlobModule::library()],
        imports: vec![vec![1], vec![]],
    };
    let so = build("custom_root", Some(&blob::encode_classic(&tree).unwrap()));
    let root = load(&so).unwrap();
    assert_eq!(root.kind(), "scaler");
    assert!(root.get_function("add_one", false).unwrap().is_none());
    let add_one = root.get_function("add_one", true).unwrap().unwrap();
    assert_eq!(
        add_one
            .call_values(&[Any::from(1i64)])
            .unwrap()
            .view()
            .as_i64(),
        Some(2)
    );
    // The classic context is the root, so the library's functions are in its imports.
    let lib = root.imports()[0].clone();
    assert_eq!(
        call_i64(&lib, "call_named", &[Any::from("add_one"), Any::from(9i64)]).unwrap(),
        10
    );
    drop(root);
    drop(lib);
    // The function keeps its module (and the library) alive.
    assert_eq!(
        add_one
            .call_values(&[Any::from(6i64)])
            .unwrap()
            .view()
            .as_i64(),
        Some(7)
    );
}

#[test]
fn same_classic_library_twice_and_from_threads() {
    let so = build("shared", Some(&lib_importing(scaler("helper:5"))));
    let a = load(&so).unwrap();
    let b = load(&so).unwrap();
    assert_eq!(call_i64(&a, "call_helper", &[Any::from(1i64)]).unwrap(), 5);
    let fb = b.get_function("call_helper", false).unwrap().unwrap();
    drop(a);
    drop(b);
    // The library stays loaded through `fb`, and its cached `helper` stays valid.
    assert_eq!(
        fb.call_values(&[Any::from(2i64)]).unwrap().view().as_i64(),
        Some(10)
    );
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let so = so.clone();
            std::thread::spawn(move || {
                for j in 0..10 {
                    let m = load(&so).unwrap();
                    assert_eq!(
                        call_i64(&m, "call_helper", &[Any::from(i * 10 + j)]).unwrap(),
                        (i * 10 + j) * 5
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    drop(fb);
    // Fully closed and reopened: still works.
    let again = load(&so).unwrap();
    assert_eq!(
        call_i64(&again, "call_helper", &[Any::from(3i64)]).unwrap(),
        15
    );
}

fn load_err(name: &str, symbol_bytes: &[u8]) -> Error {
    let so = build(name, Some(symbol_bytes));
    load(&so).unwrap_err()
}

#[test]
fn blob_errors() {
    // Unknown module kind.
    let e = load_err(
        "unknown_kind",
        &lib_importing(BlobModule::serialized("no_such_kind", vec![1, 2, 3])),
    );
    assert!(
        e.message.contains(
            "library was built with module kind `no_such_kind` but no loader \
             `runtime.module.loadbinary_no_such_kind` is registered"
        ),
        "{e}"
    );
    assert!(e.message.contains("unknown_kind.so"), "{e}");

    // Bad import index (written by hand: the writer refuses it).
    let mut w = Writer::new();
    w.write_u64(2);
    w.write_string("_lib");
    w.write_string("_import_tree");
    w.write_u64_vec(&[0, 1]);
    w.write_u64_vec(&[7]);
    let e = load_err("bad_index", &w.into_prefixed());
    assert!(e.message.contains("child index 7"), "{e}");
    assert!(e.message.contains("out of range"), "{e}");

    // Import cycle.
    let mut w = Writer::new();
    w.write_u64(3);
    w.write_string("_lib");
    w.write_string("scaler");
    w.write_raw(&scaler_payload("helper:1"));
    w.write_string("_import_tree");
    w.write_u64_vec(&[0, 1, 2]);
    w.write_u64_vec(&[1, 0]);
    let e = load_err("cycle", &w.into_prefixed());
    assert!(e.message.contains("import cycle"), "{e}");

    // The size prefix claims more than the symbol holds.
    let mut truncated = 1000u64.to_le_bytes().to_vec();
    truncated.extend_from_slice(&[0u8; 12]);
    let e = load_err("truncated", &truncated);
    assert!(e.message.contains("truncated library blob"), "{e}");
    assert!(e.message.contains("says 1000 bytes"), "{e}");

    // A symbol too short for the prefix.
    let e = load_err("tiny", &[1, 2, 3]);
    assert!(
        e.message.contains("too short for its 8-byte size prefix"),
        "{e}"
    );

    // A loader that neither reports its size nor can save.
    let e = load_err(
        "unsaveable",
        &lib_importing(BlobModule::serialized("unsaveable", vec![9; 4])),
    );
    assert!(
        e.message.contains("did not report how many bytes it read"),
        "{e}"
    );

    // A loader that claims more bytes than remain.
    let e = load_err(
        "liar",
        &lib_importing(BlobModule::serialized("liar", scaler_payload("f:1"))),
    );
    assert!(e.message.contains("claims 1099511627776 bytes"), "{e}");

    // A loader's own error names the loader.
    let e = load_err("loader_error", &lib_importing(scaler("no-colon")));
    assert!(
        e.message
            .contains("loader `runtime.module.loadbinary_scaler`"),
        "{e}"
    );
    assert!(e.message.contains("bad scaler payload"), "{e}");
}

#[test]
fn file_errors() {
    let e = load_from_file("/nonexistent/x.so", "").unwrap_err();
    assert!(
        e.message
            .contains("cannot load library `/nonexistent/x.so`"),
        "{e}"
    );
    // In dlopen's own words, as TVM reports it (gotvm's TestErrorTest looks for them).
    assert!(
        e.message.contains(
            "/nonexistent/x.so: cannot open shared object file: No such file or directory"
        ),
        "{e}"
    );
    assert!(!e.message.contains("os error"), "{e}");
    // A bare name is searched as dlopen searches (not in the current directory), and a miss
    // says so in the same words.
    let e = load_from_file("tvmrt_no_such_library.so", "").unwrap_err();
    assert!(
        e.message.contains(
            "tvmrt_no_such_library.so: cannot open shared object file: No such file or directory"
        ),
        "{e}"
    );
    // Not a shared library at all.
    let dir = scratch("file_errors");
    let junk = dir.join("junk.so");
    std::fs::write(&junk, b"this is not an ELF file").unwrap();
    let e = load_from_file(junk.to_str().unwrap(), "").unwrap_err();
    assert!(e.message.contains("cannot load library"), "{e}");
    // A directory.
    let e = load_from_file(dir.to_str().unwrap(), "so").unwrap_err();
    assert!(e.message.contains("not a regular file"), "{e}");
    // An unknown format.
    let e = load_from_file(junk.to_str().unwrap(), "weird").unwrap_err();
    assert!(e.message.contains("runtime.module.loadfile_weird"), "{e}");
    // A shared library that TVM did not build still loads, as a library with no blob.
    let plain_c = dir.join("not_tvm.c");
    std::fs::write(&plain_c, "int not_tvm_value(void) { return 7; }\n").unwrap();
    let so = dir.join("not_tvm.so");
    compile_shared(&so, &[plain_c], &[]);
    let m = load(&so).unwrap();
    assert_eq!(m.kind(), "library");
    assert!(m.get_function("printf", false).unwrap().is_none());
}

#[test]
fn loadfile_dispatch_uses_the_registry() {
    registry::register(
        "runtime.module.loadfile_scalertext",
        Function::from_fn(|args| {
            let path = args[0].expect_str("path")?;
            assert_eq!(args[1].expect_str("format")?, "scalertext");
            let text = std::fs::read_to_string(path).map_err(|e| Error::value(e.to_string()))?;
            let (m, _) = parse_scaler("scaler", &scaler_payload(text.trim()))?;
            Ok(Any::from(Module::new(m)))
        }),
        true,
    )
    .unwrap();
    let dir = scratch("loadfile");
    let p = dir.join("model.scalertext");
    std::fs::write(&p, "times4:4\n").unwrap();
    let m = load_from_file(p.to_str().unwrap(), "").unwrap();
    assert_eq!(m.kind(), "scaler");
    assert_eq!(call_i64(&m, "times4", &[Any::from(3i64)]).unwrap(), 12);
    // The global with TVM's name does the same.
    let via_global = registry::get("ffi.ModuleLoadFromFile")
        .unwrap()
        .call_values(&[Any::from(p.to_str().unwrap())])
        .unwrap();
    let m2 = Module::from_view(&via_global.view(), "m").unwrap();
    assert_eq!(m2.kind(), "scaler");
}

/// Calls `f` through the classic C API; `Err` holds `TVMGetLastError`'s text.
fn classic_call_err(
    f: &Function,
    values: &mut [tvmrt::abi::TVMValue],
    codes: &mut [i32],
) -> String {
    match classic_call(f, values, codes) {
        Ok((_, code)) => panic!("the call succeeded (result code {code})"),
        Err(e) => e,
    }
}

/// Calls `f` through the classic C API; `Err` holds `TVMGetLastError`'s text.
fn classic_call(
    f: &Function,
    values: &mut [tvmrt::abi::TVMValue],
    codes: &mut [i32],
) -> std::result::Result<(tvmrt::abi::TVMValue, i32), String> {
    use tvmrt::capi::classic_func::TVMFuncCall;
    let mut ret = tvmrt::abi::TVMValue::default();
    let mut ret_code = -1;
    // SAFETY: the arrays hold `values.len()` entries alive for the call; `f` is a live function.
    let rc = unsafe {
        TVMFuncCall(
            f.object().as_ptr(),
            values.as_mut_ptr(),
            codes.as_mut_ptr(),
            values.len() as i32,
            &mut ret,
            &mut ret_code,
        )
    };
    if rc == 0 {
        Ok((ret, ret_code))
    } else {
        assert_eq!(rc, -1);
        // SAFETY: a NUL-terminated string valid until the next call on this thread.
        let text =
            unsafe { std::ffi::CStr::from_ptr(tvmrt::capi::classic_error::TVMGetLastError()) };
        Err(text.to_string_lossy().into_owned())
    }
}

#[test]
fn classic_calls_reach_classic_kernels_with_their_arrays() {
    use tvmrt::abi::{type_code as tc, TVMValue};
    let so = build("classic_call", None);
    let m = load(&so).unwrap();
    let get = |name: &str| m.get_function(name, false).unwrap().unwrap();
    let (add_one, scale2, greet, fail) = (get("add_one"), get("scale2"), get("greet"), get("fail"));

    let (v, code) =
        classic_call(&add_one, &mut [TVMValue { v_int64: 41 }], &mut [tc::INT]).unwrap();
    assert_eq!(code, tc::INT);
    // SAFETY: an int result.
    assert_eq!(unsafe { v.v_int64 }, 42);

    // A tensor as a classic NDArray handle (the DLTensor inside the object), then as a bare
    // DLTensor*: the kernel doubles it in place and returns nothing.
    let mut t = HostTensor::new(dl_dtype(2, 32, 1), &[3], &f32_bytes(&[1.0, 2.0, 3.0]));
    let (_, code) = classic_call(
        &scale2,
        &mut [TVMValue::handle(t.dl_ptr().cast())],
        &mut [tc::NDARRAY_HANDLE],
    )
    .unwrap();
    assert_eq!(code, tc::NULLPTR);
    assert_eq!(t.f32s(), vec![2.0, 4.0, 6.0]);
    let bare = t.ptr_arg();
    // SAFETY: a DLTensor* value.
    let bare_ptr = unsafe { bare.raw().payload.v_ptr };
    classic_call(
        &scale2,
        &mut [TVMValue::handle(bare_ptr)],
        &mut [tc::DL_TENSOR_HANDLE],
    )
    .unwrap();
    assert_eq!(t.f32s(), vec![4.0, 8.0, 12.0]);

    // A string result stays readable until the next call on this thread.
    let (v, code) = classic_call(&greet, &mut [], &mut []).unwrap();
    assert_eq!(code, tc::STR);
    // SAFETY: a string result, valid until the next call.
    let text = unsafe { std::ffi::CStr::from_ptr(v.v_str) };
    assert_eq!(text.to_str().unwrap(), "hello from a classic library");

    // Errors: raised by the kernel, a type the kernel refuses, an unknown code (refused
    // before the kernel runs), more arguments than the fast path carries.
    let e = classic_call_err(&fail, &mut [], &mut []);
    assert!(e.contains("classic kernel failed on purpose"), "{e}");
    let s = c"x";
    let e = classic_call_err(&add_one, &mut [TVMValue::c_str(s.as_ptr())], &mut [tc::STR]);
    assert!(e.contains("add_one expects one int argument"), "{e}");
    let e = classic_call_err(&add_one, &mut [TVMValue { v_int64: 1 }], &mut [99]);
    assert!(e.contains("99"), "{e}");
    let e = classic_call_err(
        &add_one,
        &mut [TVMValue { v_int64: 1 }; 9],
        &mut [tc::INT; 9],
    );
    assert!(e.contains("add_one expects one int argument"), "{e}");
    // And the general path still reaches the kernel with good arguments after all that.
    let (v, _) = classic_call(&add_one, &mut [TVMValue { v_int64: -1 }], &mut [tc::INT]).unwrap();
    // SAFETY: an int result.
    assert_eq!(unsafe { v.v_int64 }, 0);
}

/// Set in the child processes of `a_bare_file_name_is_found_on_the_library_path`: loading from
/// the library path, and from the current directory.
const SEARCH_CHILD_ENV: &str = "TVMRT_TEST_BARE_NAME_LIBRARY";
const CWD_CHILD_ENV: &str = "TVMRT_TEST_BARE_NAME_IN_CWD";

#[test]
fn a_bare_file_name_is_found_on_the_library_path() {
    // The dynamic linker reads LD_LIBRARY_PATH at process start: the loading half runs in a
    // child process (this test binary again, this test only) started with it.
    if let Ok(name) = std::env::var(SEARCH_CHILD_ENV) {
        register_loaders();
        // tvm-ffi's `Module::load_from_file("libtvm_ffi_testing.so")` hands the name to dlopen.
        let m = load_from_file(&name, "").unwrap();
        assert_eq!(call_i64(&m, "add_one", &[Any::from(1i64)]).unwrap(), 2);
        // The same file by its path: the one mapping, shared.
        let dir = std::env::var("LD_LIBRARY_PATH").unwrap();
        let dir = dir.split(':').next().unwrap();
        let by_path = load_from_file(&format!("{dir}/{name}"), "").unwrap();
        assert_eq!(
            call_i64(&by_path, "add_one", &[Any::from(2i64)]).unwrap(),
            3
        );
        drop(m);
        assert_eq!(
            call_i64(&by_path, "add_one", &[Any::from(3i64)]).unwrap(),
            4
        );
        return;
    }
    if let Ok(name) = std::env::var(CWD_CHILD_ENV) {
        // Not on the search path, but in the current directory: loaded from there.
        register_loaders();
        let m = load_from_file(&name, "").unwrap();
        assert_eq!(call_i64(&m, "add_one", &[Any::from(5i64)]).unwrap(), 6);
        return;
    }
    let so = build("searched_by_name", None);
    let dir = so.parent().unwrap();
    let name = so.file_name().unwrap().to_str().unwrap();
    // Not on the search path here: not found, although the file exists.
    let e = load_from_file(name, "").unwrap_err();
    assert!(e.message.contains("cannot open shared object file"), "{e}");
    let child = |var: &str, library_path: Option<&std::path::Path>| {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "a_bare_file_name_is_found_on_the_library_path",
            "--test-threads=1",
        ])
        .env(var, name);
        match library_path {
            Some(p) => cmd.env("LD_LIBRARY_PATH", p),
            None => cmd.current_dir(dir),
        };
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child ({var}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    child(SEARCH_CHILD_ENV, Some(dir));
    child(CWD_CHILD_ENV, None);
}
