//! `tvmrt inspect`, `--version` and `TVMRT_LOG`, run as a user would: the built binary on the
//! TVM-built fixtures, checked against `tests/fixtures/manifest.json`.

mod cli_support;

use std::process::{Command, Output};

use cli_support::{fails, fixtures, ok, tvmrt};

fn fixture(name: &str) -> String {
    fixtures().join(name).to_string_lossy().into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn manifest() -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn text_report_of_a_kernel_library() {
    let out = ok(&["inspect", &fixture("add_dyn.so")]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].ends_with("add_dyn.so: ELF64 X86_64, 18816 bytes"),
        "{out}"
    );
    assert_eq!(lines[1], "ABI: tvm-ffi (TVM 0.21 and later)");
    assert_eq!(lines[2], "entry: main -> add");
    assert_eq!(lines[3], "compiled functions (1):");
    assert_eq!(
        lines[4],
        "  add  [tvm-ffi] add(A: Tensor([n], float32), B: Tensor([n], float32), C: \
         Tensor([n], float32))"
    );
    assert!(
        out.contains("blob: none (the library is its only module)\n"),
        "{out}"
    );
    assert!(
        out.contains("module tree (loaded):\n  library  (functions: add)\n"),
        "{out}"
    );
    assert!(
        out.contains("runtime imports: TVMFFIErrorSetRaisedFromCStrParts\n"),
        "{out}"
    );
    assert!(
        out.contains("context pointers set at load: none\n"),
        "{out}"
    );
    assert!(out.contains("needed libraries: none\n"), "{out}");
}

#[test]
fn text_report_of_a_relax_model() {
    let out = ok(&["inspect", &fixture("mlp.so")]);
    assert!(
        out.contains(
            "blob: __tvm_ffi__library_bin, 5963 bytes + 8-byte size prefix (tvm-ffi layout)\n  \
             [0] relax.VMExecutable: 5869 bytes, imports [1]\n  [1] _lib: the library itself\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "  relu     [tvm-ffi] relu(lv1: Tensor([1, 32], float32), compute: Tensor([1, 32], \
             float32))\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "module tree (loaded):\n  relax.VMExecutable  (implements: vm_load_executable"
        ),
        "{out}"
    );
    assert!(
        out.contains("  `- library  (functions: add, add1, matmul, matmul1, relu)\n"),
        "{out}"
    );
}

#[test]
fn json_report_agrees_with_the_manifest_for_every_fixture() {
    let m = manifest();
    let libs = m["libraries"].as_object().unwrap();
    assert!(libs.len() >= 8);
    for (file, lib) in libs {
        let out = ok(&["inspect", "--json", &fixture(file)]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["abi"], "tvm-ffi", "{file}");
        assert_eq!(v["file_size"], lib["size"], "{file}");
        let names: Vec<String> = v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, strings(&lib["functions"]), "{file}");
        for f in v["functions"].as_array().unwrap() {
            assert_eq!(f["abi"], "tvm-ffi");
            assert_eq!(
                f["symbol"],
                format!("__tvm_ffi_{}", f["name"].as_str().unwrap())
            );
            let sig = f["signature"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: {f}"));
            assert!(
                sig.starts_with(&format!("{}(", f["name"].as_str().unwrap())),
                "{sig}"
            );
        }
        // The weak `__tvm_ffi_main` is an alias of the only function.
        if lib["main_alias"] == true {
            assert_eq!(v["entry"], lib["functions"][0], "{file}");
        } else {
            assert!(v["entry"].is_null(), "{file}");
        }
        assert_eq!(
            strings(&v["runtime_imports"]),
            strings(&lib["undefined_runtime_symbols"]),
            "{file}"
        );
        assert_eq!(
            strings(&v["other_imports"]),
            strings(&lib["undefined_other_symbols"]),
            "{file}"
        );
        assert_eq!(
            strings(&v["context_symbols"]),
            strings(&lib["context_symbols"]),
            "{file}"
        );
        assert_eq!(strings(&v["needed"]), strings(&lib["dt_needed"]), "{file}");
        match &lib["library_bin"] {
            serde_json::Value::Null => assert!(v["blob"].is_null(), "{file}"),
            bin => {
                let blob = &v["blob"];
                assert_eq!(blob["symbol"], bin["symbol"], "{file}");
                assert_eq!(blob["symbol_size"], bin["symbol_size"], "{file}");
                assert_eq!(blob["declared_bytes"], bin["nbytes"], "{file}");
                assert_eq!(blob["layout"], "tvm-ffi");
                assert!(blob["error"].is_null());
                assert_eq!(blob["modules"][0]["kind"], bin["root_kind"], "{file}");
            }
        }
        // The module tree of the loaded library matches the manifest's.
        fn shape(t: &serde_json::Value) -> serde_json::Value {
            serde_json::json!({
                "kind": t["kind"],
                "imports": t["imports"].as_array().unwrap().iter().map(shape).collect::<Vec<_>>(),
            })
        }
        assert!(v["load_error"].is_null(), "{file}: {}", v["load_error"]);
        assert_eq!(
            shape(&v["module_tree"]),
            lib["loaded_module_tree"],
            "{file}"
        );
    }
}

#[test]
fn no_load_reads_the_file_only() {
    let out = ok(&["inspect", "--json", "--no-load", &fixture("mlp.so")]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["module_tree"].is_null());
    assert!(v["load_error"].is_null());
    assert_eq!(v["blob"]["modules"][1]["kind"], "_lib");
    let text = ok(&["inspect", "--no-load", &fixture("add_dyn.so")]);
    assert!(!text.contains("module tree"), "{text}");
}

#[test]
fn inspect_errors_are_one_line() {
    let e = fails(&["inspect", &fixture("manifest.json")]);
    assert!(e.starts_with("tvmrt: ValueError: "), "{e}");
    assert!(
        e.ends_with("manifest.json: not a shared library (unrecognized file format)"),
        "{e}"
    );
    let e = fails(&["inspect", "/nonexistent/lib.so"]);
    assert!(e.contains("cannot read `/nonexistent/lib.so`"), "{e}");
}

#[test]
fn version_names_the_abis() {
    let out = ok(&["--version"]);
    assert!(
        out.starts_with(&format!("tvmrt {}\n", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    assert!(out.contains("tvm-ffi C ABI 0.1."), "{out}");
    assert!(
        out.contains("classic TVM C runtime and backend API (libraries built by TVM 0.7 to 0.20)"),
        "{out}"
    );
    assert!(out.contains("DLPack 1."), "{out}");
    let short = ok(&["-V"]);
    assert_eq!(
        short.trim(),
        format!(
            "tvmrt {} (ABIs: tvm-ffi 0.1, classic TVM 0.7-0.20)",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn tvmrt_log_debug_shows_decisions() {
    let o = Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(["inspect", &fixture("add_dyn.so")])
        .env("TVMRT_LOG", "debug")
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = stderr(&o);
    assert!(
        err.lines().any(|l| l.starts_with("[tvmrt DEBUG tvmrt")),
        "{err}"
    );
    // Off by default.
    assert!(stderr(&tvmrt(&["inspect", &fixture("add_dyn.so")])).is_empty());
    // An unknown level is reported, not fatal.
    let o = Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(["inspect", &fixture("add_dyn.so")])
        .env("TVMRT_LOG", "loud")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        stderr(&o).contains("ignoring TVMRT_LOG=\"loud\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_bare_file_name_means_the_current_directory() {
    // `dlopen("add_dyn.so")` would search the library path instead.
    let o = Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(["inspect", "add_dyn.so"])
        .current_dir(fixtures())
        .env_remove("TVMRT_LOG")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("add_dyn.so: ELF64"), "{out}");
    assert!(
        out.contains("module tree (loaded):\n  library  (functions: add)\n"),
        "{out}"
    );
}

#[test]
fn relax_models_list_their_vm_functions_and_what_they_call() {
    let text = ok(&["inspect", &fixture("subfunc.so")]);
    assert!(text.contains("VM function main(x, y)"), "{text}");
    assert!(text.contains("VM function scale(z, k)"), "{text}");
    assert!(text.contains("calls VM functions: scale"), "{text}");
    assert!(text.contains("calls kernels: multiply"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["inspect", "--json", &fixture("mlp.so")])).unwrap();
    let root = &json["module_tree"];
    let funcs = root["vm_functions"].as_array().expect("vm_functions");
    let main = funcs.iter().find(|f| f["name"] == "main").expect("main");
    assert_eq!(strings(&main["params"]), vec!["x"]);
    let mut kernels = strings(&main["kernels"]);
    kernels.sort();
    assert_eq!(kernels, vec!["add", "add1", "matmul", "matmul1", "relu"]);
    assert!(strings(&main["builtins"]).contains(&"vm.builtin.check_tensor_info".to_string()));
    // x[1,16] -> 32 -> 8, float32: weights [16,32], [32], [32,8], [8]; TVM plans two [1,32]
    // blocks and the [1,8] output.
    assert_eq!(main["planned_storage_bytes"], (2 * 32 + 8) * 4);
    assert_eq!(main["dynamic_storage_calls"], 0);
    let constants = &root["constants"];
    assert_eq!(constants["tensors"], 4);
    assert_eq!(constants["bytes"], (16 * 32 + 32 + 32 * 8 + 8) * 4);
    let text = ok(&["inspect", &fixture("mlp.so")]);
    assert!(
        text.contains(
            "constants: 4 tensors, 3232 bytes (0 tensors, 0 bytes, used in place in the library; \
             the rest copied)"
        ),
        "{text}"
    );
    assert!(
        text.contains("allocates storage: 288 bytes planned"),
        "{text}"
    );
}
