//! `tvmrt::pack` and `tvmrt pack`: the guide's generated C++ (through tvmrt's drop-in
//! `packed_func.h`), TVM's plain-C form and ExampleJSON modules packed into one library, loaded
//! back by tvmrt in both blob layouts, and (when Python TVM is installed) by TVM itself.

mod examplejson_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use examplejson_common::{check_guide_library, examples, guide_case, run_guide, Host, GUIDE_TEXT};
use tvmrt::contrib::examplejson::ExampleJsonModule;
use tvmrt::module::blob::BlobLayout;
use tvmrt::module::{load_from_file, Module};
use tvmrt::pack::{pack, PackModule, PackOptions};
use tvmrt::value::Any;

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tvmrt-pack-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn guide_sources() -> Vec<PathBuf> {
    vec![
        examples().join("gcc_0_guide.cc"),
        examples().join("gcc_1_plain.c"),
    ]
}

fn graph_module() -> Module {
    let path = examples().join("subgraph_0.examplejson");
    load_from_file(path.to_str().unwrap(), "examplejson").unwrap()
}

fn load(path: &Path) -> Module {
    load_from_file(path.to_str().unwrap(), "").unwrap()
}

#[test]
fn guide_code_plain_c_and_examplejson_in_one_library_both_layouts() {
    for (layout, tag) in [
        (BlobLayout::TvmFfi, "ffi"),
        (BlobLayout::ClassicImportTree, "classic"),
    ] {
        let dir = scratch(tag);
        let mut opts = PackOptions::new(dir.join("byoc.so"));
        opts.sources = guide_sources();
        opts.modules = vec![PackModule::Module(graph_module())];
        opts.layout = layout;
        let report = pack(&opts).unwrap();
        let tree = report.tree.as_ref().unwrap();
        let kinds: Vec<&str> = tree.modules.iter().map(|m| m.kind.as_str()).collect();
        assert_eq!(kinds, ["_lib", "examplejson"]);
        assert_eq!(tree.imports, vec![vec![1], vec![]]);
        assert!(report.blob_bytes > GUIDE_TEXT.len());

        let root = load(&report.output);
        assert_eq!(root.imports().len(), 1);
        let sub = &root.imports()[0];
        assert_eq!(sub.kind(), "examplejson");
        assert_eq!(
            sub.downcast::<ExampleJsonModule>().unwrap().text(),
            GUIDE_TEXT
        );
        check_guide_library(&root);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn generated_function_errors_reach_the_caller() {
    // Both entries of the macro: the tvm-ffi twin (ffi layout) and the classic one alone.
    for (tag, layout, cflags) in [
        ("err-ffi", BlobLayout::TvmFfi, vec![]),
        (
            "err-classic",
            BlobLayout::ClassicImportTree,
            vec!["-DTVMRT_CLASSIC_EXPORT_ONLY".to_string()],
        ),
    ] {
        let dir = scratch(tag);
        let mut opts = PackOptions::new(dir.join("g.so"));
        opts.sources = vec![examples().join("gcc_0_guide.cc")];
        opts.modules = vec![PackModule::Module(graph_module())];
        opts.layout = layout;
        opts.cflags = cflags;
        pack(&opts).unwrap();
        let root = load(&dir.join("g.so"));
        let f = root.get_function("gcc_0", false).unwrap().unwrap();
        let (mut ins, _) = guide_case(1);
        let few: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
        let e = f.call_values(&few).unwrap_err();
        assert_eq!(e.kind, "TypeError", "{tag}: {e}");
        assert_eq!(e.message, "gcc_0: expected 5 argument(s), got 4", "{tag}");
        let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
        args.push(Any::from(2.5f64));
        let e = f.call_values(&args).unwrap_err();
        assert_eq!(
            e.message,
            "gcc_0: argument 4 must be DLTensor* (type code 7 or 13), got float (type code 2)",
            "{tag}"
        );
        // The wrapper returns its int (0), as TVM's macro does.
        let mut out = Host::<f32>::zeros(&[10, 10]);
        let mut args: Vec<Any> = ins.iter_mut().map(Host::arg).collect();
        args.push(out.arg());
        let ret = f.call_values(&args).unwrap();
        assert_eq!(ret.view().as_i64(), Some(0), "{tag}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn several_modules_with_their_own_imports() {
    let a = ExampleJsonModule::new("relu_a\ninput 0 4\nrelu 1 inputs: 0 shape: 4\n")
        .unwrap()
        .into_module();
    let b = ExampleJsonModule::new(
        "neg_b\ninput 0 4\nsub 1 inputs: 0 0 shape: 4\nsub 2 inputs: 1 0 shape: 4\n",
    )
    .unwrap()
    .into_module();
    let c = ExampleJsonModule::new(GUIDE_TEXT).unwrap().into_module();
    a.import(&b).unwrap();
    let dir = scratch("several");
    let mut opts = PackOptions::new(dir.join("m.so"));
    // `b` is reachable twice (given, and imported by `a`): written once.
    opts.modules = vec![
        PackModule::Module(a),
        PackModule::Module(c),
        PackModule::Module(b),
    ];
    let report = pack(&opts).unwrap();
    let tree = report.tree.unwrap();
    assert_eq!(tree.modules.len(), 4);
    assert_eq!(tree.imports, vec![vec![1, 3, 2], vec![2], vec![], vec![]]);

    let root = load(&dir.join("m.so"));
    assert_eq!(root.imports().len(), 3);
    assert_eq!(root.imports()[0].imports().len(), 1);
    let f = root.get_function("neg_b", true).unwrap().unwrap();
    let mut x = Host::<f32>::new(&[4], vec![1.0, -2.0, 3.0, 0.5]);
    let mut y = Host::<f32>::zeros(&[4]);
    f.call_values(&[x.arg(), y.arg()]).unwrap();
    assert_eq!(y.values(), &[-1.0, 2.0, -3.0, -0.5]);
    let f = root.get_function("relu_a", true).unwrap().unwrap();
    f.call_values(&[x.arg(), y.arg()]).unwrap();
    assert_eq!(y.values(), &[1.0, 0.0, 3.0, 0.5]);
    let (got, want) = run_guide(&root.get_function("subgraph_0", true).unwrap().unwrap(), 3);
    assert_eq!(got, want);
}

#[test]
fn pack_errors_are_clear() {
    let dir = scratch("errors");
    let e = pack(&PackOptions::new(dir.join("x.so"))).unwrap_err();
    assert!(e.message.contains("nothing to pack"), "{e}");

    let mut opts = PackOptions::new(dir.join("x.so"));
    opts.sources = vec![dir.join("missing.c")];
    let e = pack(&opts).unwrap_err();
    assert!(e.message.contains("missing.c` does not exist"), "{e}");

    let f = dir.join("kernel.f90");
    std::fs::write(&f, "").unwrap();
    opts.sources = vec![f];
    let e = pack(&opts).unwrap_err();
    assert!(e.message.contains("cannot tell the language"), "{e}");

    let bad = dir.join("bad.c");
    std::fs::write(&bad, "int f(void) { return undefined_name; }\n").unwrap();
    opts.sources = vec![bad];
    let e = pack(&opts).unwrap_err();
    assert!(e.message.contains("compiling"), "{e}");
    assert!(e.message.contains("undefined_name"), "{e}");

    // A kind with no loader packs (its bytes are given) but the library does not load.
    let mut opts = PackOptions::new(dir.join("unknown.so"));
    opts.modules = vec![PackModule::Saved {
        kind: "mystery".into(),
        bytes: b"payload".to_vec(),
    }];
    pack(&opts).unwrap();
    let e = load_from_file(dir.join("unknown.so").to_str().unwrap(), "").unwrap_err();
    assert!(
        e.message
            .contains("no loader `ffi.Module.load_from_bytes.mystery`"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A module kind tvmrt does not know, restored by a loader registered at run time.
struct Scaler {
    factor: f32,
}

impl tvmrt::module::ModuleKind for Scaler {
    fn kind(&self) -> &str {
        "test.scaler"
    }
    fn get_function(&self, this: &Module, name: &str) -> tvmrt::Result<Option<tvmrt::Function>> {
        if name != "scale" {
            return Ok(None);
        }
        let (keep, factor) = (this.clone(), self.factor);
        Ok(Some(tvmrt::Function::from_fn(move |_| {
            let _ = &keep;
            Ok(Any::from(f64::from(factor)))
        })))
    }
    fn save_to_bytes(&self) -> tvmrt::Result<Vec<u8>> {
        Ok(self.factor.to_le_bytes().to_vec())
    }
}

#[test]
fn objects_and_a_kind_registered_at_run_time() {
    let dir = scratch("objects");
    // An object compiled outside, linked as it is.
    let obj = dir.join("plain.o");
    let include = tvmrt::pack::include_dir().unwrap();
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-c", "-fPIC", "-O2", "-I"])
        .arg(&include)
        .arg(examples().join("gcc_1_plain.c"))
        .arg("-o")
        .arg(&obj)
        .status()
        .unwrap();
    assert!(st.success());
    tvmrt::function::registry::register(
        "ffi.Module.load_from_bytes.test.scaler",
        tvmrt::Function::from_fn(|args| {
            let b = args[0].as_byte_slice().unwrap();
            let factor = f32::from_le_bytes(b.try_into().map_err(|_| {
                tvmrt::Error::value(format!("scaler payload is {} bytes", b.len()))
            })?);
            Ok(Any::from(Module::new(Scaler { factor })))
        }),
        true,
    )
    .unwrap();
    let mut opts = PackOptions::new(dir.join("o.so"));
    opts.objects = vec![obj];
    opts.modules = vec![
        PackModule::Module(Module::new(Scaler { factor: 2.5 })),
        PackModule::Module(graph_module()),
    ];
    let report = pack(&opts).unwrap();
    let kinds: Vec<String> = report
        .tree
        .unwrap()
        .modules
        .into_iter()
        .map(|m| m.kind)
        .collect();
    assert_eq!(kinds, ["_lib", "test.scaler", "examplejson"]);
    let root = load(&dir.join("o.so"));
    let scale = root.get_function("scale", true).unwrap().unwrap();
    assert_eq!(scale.call(&[]).unwrap().view().as_f64(), Some(2.5));
    let (got, want) = run_guide(&root.get_function("gcc_1", false).unwrap().unwrap(), 5);
    assert_eq!(got, want);
    let (got, want) = run_guide(&root.get_function("subgraph_0", true).unwrap().unwrap(), 6);
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// TVM itself (apache-tvm / tvm-ffi from PyPI) loads a packed library of generated C and runs
/// its function; skipped when Python TVM is not installed.
#[test]
fn real_tvm_loads_a_packed_c_library() {
    let probe = Command::new("python3")
        .args(["-c", "import tvm_ffi, numpy"])
        .output();
    if !matches!(probe, Ok(ref o) if o.status.success()) {
        eprintln!("skipped: python3 with tvm_ffi and numpy is not available");
        return;
    }
    let dir = scratch("tvm");
    let mut opts = PackOptions::new(dir.join("conly.so"));
    opts.sources = guide_sources();
    pack(&opts).unwrap();
    let script = r#"
import sys, numpy as np, tvm_ffi
m = tvm_ffi.load_module(sys.argv[1])
f = m["gcc_0"]
rng = np.random.default_rng(0)
a, b, c, d = (rng.standard_normal((10, 10)).astype("float32") for _ in range(4))
out = np.zeros((10, 10), "float32")
f(*(tvm_ffi.from_dlpack(x) for x in (a, b, c, d, out)))
assert np.array_equal(out, (a + b - c) * d), "wrong values"
try:
    f(tvm_ffi.from_dlpack(a))
    raise SystemExit("no error raised")
except TypeError as e:
    print("error:", e)
print("ok")
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.join("conly.so"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("error: gcc_0: expected 5 argument(s), got 1"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("ok"), "{stdout}");

    // With an ExampleJSON module inside, TVM reads the blob and asks for the loader by name.
    let mut opts = PackOptions::new(dir.join("withjson.so"));
    opts.sources = guide_sources();
    opts.modules = vec![PackModule::Module(graph_module())];
    pack(&opts).unwrap();
    let o = Command::new("python3")
        .arg("-c")
        .arg("import sys, tvm_ffi\ntry:\n    tvm_ffi.load_module(sys.argv[1])\nexcept Exception as e:\n    print(e)")
        .arg(dir.join("withjson.so"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("ffi.Module.load_from_bytes.examplejson"),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A kernel compiled by TVM 0.27 (LLVM object, tvm-ffi ABI) packed next to the guide's C++ and an
/// ExampleJSON module, as `export_library` would for a BYOC model; skipped without Python TVM.
#[test]
fn tvm_compiled_kernel_packed_with_byoc_code() {
    let dir = scratch("tvmobj");
    let obj = dir.join("double_it.o");
    let script = r#"
import sys, tvm
from tvm import te
A = te.placeholder((10, 10), name="A")
B = te.compute((10, 10), lambda i, j: A[i, j] * 2.0, name="B")
f = te.create_prim_func([A, B]).with_attr("global_symbol", "double_it")
tvm.compile(f, target="llvm").mod.write_to_file(sys.argv[1])
"#;
    let made = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&obj)
        .output();
    if !matches!(made, Ok(ref o) if o.status.success()) {
        eprintln!("skipped: python3 with apache-tvm is not available");
        return;
    }
    // The kernel imports TVMFFIErrorSetRaisedFromCStrParts from the global scope: test
    // executables export tvmrt's symbols (-rdynamic, build.rs).
    let mut opts = PackOptions::new(dir.join("mixed.so"));
    opts.objects = vec![obj];
    opts.sources = vec![examples().join("gcc_0_guide.cc")];
    opts.modules = vec![PackModule::Module(graph_module())];
    pack(&opts).unwrap();
    let root = load(&dir.join("mixed.so"));
    let f = root.get_function("double_it", false).unwrap().unwrap();
    let mut x = Host::<f32>::new(&[10, 10], examplejson_common::floats(100, 3));
    let mut y = Host::<f32>::zeros(&[10, 10]);
    f.call_values(&[x.arg(), y.arg()]).unwrap();
    let want: Vec<f32> = x.values().iter().map(|v| v * 2.0).collect();
    assert_eq!(y.values(), &want[..]);
    let (got, want) = run_guide(&root.get_function("gcc_0", false).unwrap().unwrap(), 8);
    assert_eq!(got, want);
    let (got, want) = run_guide(&root.get_function("subgraph_0", true).unwrap().unwrap(), 9);
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();
}
