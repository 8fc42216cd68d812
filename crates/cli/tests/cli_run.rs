//! `tvmrt run` and `tvmrt bench` on the TVM-built fixtures, run as a user would. Outputs are
//! compared with what TVM's own runtime computed (`tests/fixtures/data`), and every error must be
//! one line naming the input, output or option at fault.

mod cli_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cli_support::{fails, fixtures, npy_f32, ok, tvmrt};

fn lib(name: &str) -> String {
    fixtures().join(name).to_string_lossy().into_owned()
}

fn data(name: &str) -> String {
    fixtures()
        .join("data")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// A fresh empty directory for one test.
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tvmrt-cli-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// (shape, dtype descriptor, raw data bytes) of a .npy file.
fn npy_parts(path: &Path) -> (Vec<u64>, String, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut rest: &[u8] = &bytes;
    let h = npyz::NpyHeader::from_reader(&mut rest).unwrap();
    (h.shape().to_vec(), h.dtype().descr(), rest.to_vec())
}

#[test]
fn run_saves_outputs_equal_to_tvms() {
    let cases = [
        ("add_dyn.so", "add", "add_dyn.add.n1000", 2, "float32:1000"),
        (
            "dtypes.so",
            "add_float16",
            "dtypes.add_float16.n17",
            2,
            "float16:17",
        ),
        ("dtypes.so", "add_int8", "dtypes.add_int8.n17", 2, "int8:17"),
        (
            "dtypes.so",
            "add_uint8",
            "dtypes.add_uint8.n17",
            2,
            "uint8:17",
        ),
        (
            "dtypes.so",
            "add_int64",
            "dtypes.add_int64.n17",
            2,
            "int64:17",
        ),
        (
            "dtypes.so",
            "add_float64",
            "dtypes.add_float64.n17",
            2,
            "float64:17",
        ),
        ("dtypes.so", "or_bool", "dtypes.or_bool.n17", 2, "bool:17"),
        (
            "shape_check.so",
            "add",
            "shape_check.add.4x4",
            2,
            "float32:4x4",
        ),
        (
            "workspace.so",
            "scale_reverse_dyn",
            "workspace.scale_reverse_dyn.3000",
            1,
            "float32:3000",
        ),
        (
            "two_funcs.so",
            "outer_direct",
            "two_funcs.outer_direct.n16",
            1,
            "float32:16",
        ),
        (
            "imports_merged.so",
            "triple_it",
            "imports_merged.triple_it.n8",
            1,
            "float32:8",
        ),
    ];
    for (library, func, case, n_in, out_spec) in cases {
        let dir = scratch(case);
        let lib_path = lib(library);
        let inputs: Vec<String> = (0..n_in)
            .map(|i| data(&format!("{case}.in{i}.npy")))
            .collect();
        let mut args = vec!["run", lib_path.as_str(), func];
        for i in &inputs {
            args.extend(["--input", i.as_str()]);
        }
        let dir_s = dir.to_string_lossy().into_owned();
        args.extend(["--output-shape", out_spec, "--save", dir_s.as_str()]);
        let out = ok(&args);
        assert!(
            out.starts_with(&format!("wrote {}", dir.join("output0.npy").display())),
            "{out}"
        );
        let got = npy_parts(&dir.join("output0.npy"));
        let want = npy_parts(&fixtures().join("data").join(format!("{case}.out0.npy")));
        assert_eq!(got, want, "{case}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn run_summarizes_without_save() {
    let out = ok(&[
        "run",
        &lib("add_dyn.so"),
        "add",
        "-i",
        &data("add_dyn.add.n1.in0.npy"),
        "-i",
        &data("add_dyn.add.n1.in1.npy"),
        "-o",
        "float32:1",
    ]);
    let want = npy_f32(&fixtures().join("data/add_dyn.add.n1.out0.npy"))[0];
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].ends_with("add_dyn.so `add` (packed function): 2 input(s), 1 output(s)"),
        "{out}"
    );
    assert!(lines[1].starts_with("output0: float32[1]  min "), "{out}");
    // min = max = mean = the one value, printed with 6 significant digits.
    let shown: f32 = lines[1]
        .split("min ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (shown - want).abs() <= want.abs() * 1e-5,
        "{shown} vs {want}"
    );
}

#[test]
fn run_parallel_kernel_with_threads() {
    let dir = scratch("parallel");
    let dir_s = dir.to_string_lossy().into_owned();
    ok(&[
        "run",
        &lib("workspace.so"),
        "rows_reverse_parallel",
        "-i",
        &data("workspace.rows_reverse_parallel.8x1024.in0.npy"),
        "-o",
        "float32:8x1024",
        "--threads",
        "2",
        "--save",
        &dir_s,
    ]);
    assert_eq!(
        npy_parts(&dir.join("output0.npy")),
        npy_parts(&fixtures().join("data/workspace.rows_reverse_parallel.8x1024.out0.npy"))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_relax_model_through_the_vm() {
    let dir = scratch("mlp");
    let dir_s = dir.to_string_lossy().into_owned();
    let out = ok(&[
        "run",
        &lib("mlp.so"),
        "main",
        "-i",
        &data("mlp.main.in0.npy"),
        "--save",
        &dir_s,
    ]);
    assert!(out.contains("output0.npy (float32[1, 8])"), "{out}");
    let got = npy_f32(&dir.join("output0.npy"));
    let want = npy_f32(&fixtures().join("data/mlp.main.out0.npy"));
    assert_eq!(got.len(), 8);
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
            "{got:?} vs {want:?}"
        );
    }
    // A kernel of the model, found through the executable's imports.
    let out = ok(&[
        "run",
        &lib("mlp.so"),
        "relu",
        "-i",
        &data("mlp.kernel.relu.in0.npy"),
        "-o",
        "float32:1x32",
        "--save",
        &dir_s,
    ]);
    assert!(out.contains("(float32[1, 32])"), "{out}");
    assert_eq!(
        npy_parts(&dir.join("output0.npy")),
        npy_parts(&fixtures().join("data/mlp.kernel.relu.out0.npy"))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_inputs_are_named() {
    let add = lib("add_dyn.so");
    // Count: the missing output is suggested.
    let e = fails(&[
        "run",
        &add,
        "add",
        "-i",
        &data("add_dyn.add.n1000.in0.npy"),
        "-i",
        &data("add_dyn.add.n1000.in1.npy"),
    ]);
    assert!(
        e.starts_with(
            "tvmrt: TypeError: wrong number of arguments: `add` takes 3 tensors (A: \
             Tensor([n], float32), B: Tensor([n], float32), C: Tensor([n], float32)), but 2 \
             inputs and 0 outputs were given"
        ),
        "{e}"
    );
    assert!(e.ends_with("pass --output-shape float32:1000"), "{e}");
    // Shape: names the second input and where n came from.
    let (a, b) = (
        data("add_dyn.add.err_length_mismatch.in0.npy"),
        data("add_dyn.add.err_length_mismatch.in1.npy"),
    );
    let e = fails(&["run", &add, "add", "-i", &a, "-i", &b, "-o", "float32:4"]);
    assert_eq!(
        e,
        format!(
            "tvmrt: ValueError: input 2 (`{b}`): shape [5], but `add` expects B: Tensor([n], \
             float32) with n = 4 (from input 1 (`{a}`))"
        )
    );
    // Dtype.
    let (a, b) = (
        data("dtypes.add_int32.err_dtype_int64.in0.npy"),
        data("dtypes.add_int32.err_dtype_int64.in1.npy"),
    );
    let e = fails(&[
        "run",
        &lib("dtypes.so"),
        "add_int32",
        "-i",
        &a,
        "-i",
        &b,
        "-o",
        "int32:4",
    ]);
    assert_eq!(
        e,
        format!(
            "tvmrt: TypeError: input 1 (`{a}`): dtype int64, but `add_int32` expects A: \
             Tensor([n], int32)"
        )
    );
    // Output shape.
    let e = fails(&[
        "run",
        &lib("shape_check.so"),
        "add",
        "-i",
        &data("shape_check.add.4x4.in0.npy"),
        "-i",
        &data("shape_check.add.4x4.in1.npy"),
        "-o",
        "float32:4x5",
    ]);
    assert_eq!(
        e,
        "tvmrt: ValueError: output 1 (--output-shape float32:4x5): shape [4, 5], but `add` \
         expects C: Tensor([4, 4], float32) (dimension 1 must be 4)"
    );
    // Too many inputs.
    let x = data("add_dyn.add.n1.in0.npy");
    let e = fails(&[
        "run",
        &add,
        "add",
        "-i",
        &x,
        "-i",
        &x,
        "-i",
        &x,
        "-o",
        "float32:1",
    ]);
    assert!(e.contains("but 3 inputs and 1 outputs were given"), "{e}");
}

#[test]
fn relax_errors_name_the_input() {
    let bad = data("mlp.kernel.relu.in0.npy"); // [1, 32] where main takes [1, 16]
    let e = fails(&["run", &lib("mlp.so"), "main", "-i", &bad]);
    assert!(
        e.starts_with(&format!("tvmrt: RuntimeError: input 1 (`{bad}`): ")),
        "{e}"
    );
    let x = data("mlp.main.in0.npy");
    let e = fails(&["run", &lib("mlp.so"), "main", "-i", &x, "-i", &x]);
    assert!(e.contains("wrong number of arguments"), "{e}");
    let e = fails(&["run", &lib("mlp.so"), "main", "-i", &x, "-o", "float32:1x8"]);
    assert!(
        e.contains("`main` is a Relax function: it returns its outputs"),
        "{e}"
    );
}

#[test]
fn other_errors_are_one_line() {
    let add = lib("add_dyn.so");
    let e = fails(&["run", &add, "sub"]);
    assert!(
        e.ends_with("add_dyn.so` has no function `sub` (its compiled functions: add)"),
        "{e}"
    );
    let e = fails(&["run", "/nonexistent/lib.so", "add"]);
    assert!(e.contains("/nonexistent/lib.so"), "{e}");
    let manifest = fixtures()
        .join("manifest.json")
        .to_string_lossy()
        .into_owned();
    let e = fails(&["run", &add, "add", "-i", &manifest]);
    assert!(e.contains("input 1: `"), "{e}");
    assert!(
        e.contains("manifest.json` is not a usable .npy file"),
        "{e}"
    );
    let e = fails(&["run", &add, "add", "-i", "/nonexistent/a.npy"]);
    assert!(e.contains("cannot read `/nonexistent/a.npy`"), "{e}");
    let e = fails(&["run", &add, "add", "--threads", "0"]);
    assert!(e.ends_with("--threads must be at least 1"), "{e}");
    // A compiled function that fails at run time: `outer` calls the global "inner".
    let e = fails(&[
        "run",
        &lib("two_funcs.so"),
        "outer",
        "-i",
        &data("two_funcs.outer.err_no_global.in0.npy"),
        "-o",
        "float32:16",
    ]);
    assert_eq!(
        e,
        "tvmrt: RuntimeError: calling `outer`: Cannot find function inner in the imported \
         modules or global registry."
    );
    // A malformed --output-shape is a usage error (exit code 2).
    let o = tvmrt(&["run", &add, "add", "-o", "float32"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`float32` is not DTYPE:D0xD1..."));
}

fn bench_json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).unwrap()
}

#[test]
fn bench_reports_latency() {
    let add = lib("add_dyn.so");
    let (a, b) = (
        data("add_dyn.add.n1000.in0.npy"),
        data("add_dyn.add.n1000.in1.npy"),
    );
    let v = bench_json(&[
        "bench",
        &add,
        "add",
        "-i",
        &a,
        "-i",
        &b,
        "-o",
        "float32:1000",
        "--repeat",
        "25",
        "--warmup",
        "2",
        "--json",
    ]);
    assert_eq!(v["runs"], 25);
    assert_eq!(v["warmup"], 2);
    assert_eq!(v["function"], "add");
    let ns = |k: &str| v[k].as_u64().unwrap();
    assert!(ns("min_ns") > 0);
    assert!(ns("min_ns") <= ns("median_ns") && ns("median_ns") <= ns("p90_ns"));
    assert!(ns("p90_ns") <= ns("max_ns"));

    let out = ok(&[
        "bench",
        &lib("mlp.so"),
        "main",
        "-i",
        &data("mlp.main.in0.npy"),
        "--repeat",
        "10",
        "--threads",
        "1",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].ends_with(
            "mlp.so `main` (Relax VM function) on cpu:0: 10 runs after 5 warm-up, 1 thread(s)"
        ),
        "{out}"
    );
    assert!(lines[1].starts_with("  median "), "{out}");
    assert!(lines[2].starts_with("  p90    "), "{out}");
    assert!(lines[3].starts_with("  min    "), "{out}");

    let e = fails(&["bench", &add, "add", "--repeat", "0"]);
    assert!(e.ends_with("--repeat must be at least 1"), "{e}");
    // The first call checks the inputs like `run` does.
    let e = fails(&["bench", &add, "add", "-i", &a, "-i", &b]);
    assert!(e.contains("wrong number of arguments"), "{e}");
}

#[test]
fn bench_profile_prints_a_table_per_kernel() {
    let out = ok(&[
        "bench",
        &lib("cnn.so"),
        "main",
        "-i",
        &data("cnn.main.in0.npy"),
        "--repeat",
        "20",
        "--profile",
    ]);
    let at = out.find("per kernel, 20 profiled run(s)").expect(&out);
    let table: Vec<&str> = out[at..].lines().collect();
    assert!(
        table[1].contains("kernel") && table[1].contains("calls"),
        "{out}"
    );
    assert!(
        table[1].contains("total") && table[1].contains("mean"),
        "{out}"
    );
    assert!(table[1].contains("share"), "{out}");
    let row = |name: &str| {
        table
            .iter()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row {name}: {out}"))
            .to_string()
    };
    // conv2d is called once per run: 20 calls.
    let conv: Vec<String> = row("conv2d")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(conv[1], "20", "{out}");
    assert!(conv.last().unwrap().ends_with('%'), "{out}");
    assert!(row("whole run").contains("100.0%"), "{out}");
    row("(outside kernels)");

    // JSON: the same per kernel, and shares that add up to at most the whole.
    let graph = fixtures().join("graph/int_model.so");
    let x = int32_npy("xp.npy", &[1, 2, 3, -4, 5]);
    let v = bench_json(&[
        "bench",
        graph.to_str().unwrap(),
        "default",
        "-i",
        &x,
        "--repeat",
        "5",
        "--profile",
        "--json",
    ]);
    let p = &v["profile"];
    assert_eq!(p["runs"], 5);
    let kernels = p["kernels"].as_array().unwrap();
    let names: Vec<&str> = kernels
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "tvmgen_default_fused_multiply_add_int",
            "tvmgen_default_fused_clip_cast"
        ]
    );
    let share: f64 = kernels.iter().map(|k| k["share"].as_f64().unwrap()).sum();
    assert!(share > 0.0 && share <= 100.0, "{share}");
    for k in kernels {
        assert_eq!(k["calls"], 5);
        assert!(k["mean_ns"].as_u64().unwrap() * 5 <= k["total_ns"].as_u64().unwrap() + 5);
    }
    assert!(p["whole_ns"].as_u64().unwrap() >= kernels[0]["total_ns"].as_u64().unwrap());
    // A kernel library: one row, the kernel itself.
    let v = bench_json(&[
        "bench",
        &lib("add_dyn.so"),
        "add",
        "-i",
        &data("add_dyn.add.n1000.in0.npy"),
        "-i",
        &data("add_dyn.add.n1000.in1.npy"),
        "-o",
        "float32:1000",
        "--repeat",
        "3",
        "--profile",
        "--json",
    ]);
    assert_eq!(v["profile"]["kernels"][0]["name"], "add");
    assert_eq!(v["profile"]["kernels"][0]["calls"], 3);
}

#[test]
fn scalar_inputs_and_results() {
    // A TVM kernel given an int where it takes a tensor: its own check, naming the input.
    let e = fails(&[
        "run",
        &lib("shape_check.so"),
        "add",
        "-i",
        "int:1",
        "-i",
        &data("shape_check.add.4x4.in1.npy"),
        "-o",
        "float32:4x4",
    ]);
    assert!(
        e.starts_with(
            "tvmrt: TypeError: input 1 (`int:1`): Mismatched type on argument #0 when calling: \
             `add(A: Tensor([4, 4], float32)"
        ),
        "{e}"
    );
    assert!(e.ends_with("expected Tensor"), "{e}");
    let e = fails(&["run", &lib("add_dyn.so"), "add", "-i", "int:x"]);
    assert!(e.ends_with("input 1: `int:x`: `x` is not an int64"), "{e}");

    // A classic-ABI library (TVM <= 0.20 layout) whose functions take and return scalars.
    let dir = scratch("classic");
    let so = dir.join("classic.so");
    let src = cli_support::repo_root().join("tests/classic_libs/classic_kernels.c");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .expect("a C compiler (cc)");
    assert!(status.success());
    let so = so.to_string_lossy().into_owned();
    let out = ok(&["run", &so, "add_one", "-i", "int:41"]);
    assert!(
        out.ends_with("`add_one` (packed function): 1 input(s), 1 output(s)\noutput0: 42 (int)\n"),
        "{out}"
    );
    let out = ok(&["run", &so, "greet", "-i", "str:x"]);
    assert!(
        out.contains("output0: \"hello from a classic library\" (ffi.String)"),
        "{out}"
    );
    let e = fails(&["run", &so, "fail"]);
    assert!(e.starts_with("tvmrt: ValueError: calling `fail`: "), "{e}");
    let out = ok(&["inspect", &so]);
    assert!(
        out.contains("ABI: classic (TVM 0.7 to 0.20)\nentry: main -> add_one\n"),
        "{out}"
    );
    assert!(
        out.contains("  add_one        [classic] (signature not recorded)\n"),
        "{out}"
    );
    assert!(
        out.contains("context pointers set at load: __TVMAPISetLastError, "),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Writes a float32 .npy file.
fn write_f32(path: &Path, shape: &[u64], values: &[f32]) {
    use npyz::WriterBuilder;
    let mut w = npyz::WriteOptions::<f32>::new()
        .default_dtype()
        .shape(shape)
        .writer(std::fs::File::create(path).unwrap())
        .begin_nd()
        .unwrap();
    w.extend(values.iter().copied()).unwrap();
    w.finish().unwrap();
}

#[test]
fn byoc_library_packed_by_tvmrt() {
    // The BYOC example: an ExampleJSON subgraph in the blob plus the same subgraph as C
    // (`gcc_1`), both computing (a + b - c) * d on 10x10 float32.
    let dir = scratch("byoc");
    let root = cli_support::repo_root().join("examples/byoc");
    let so = dir.join("byoc.so").to_string_lossy().into_owned();
    let c_source = root.join("gcc_1_plain.c").to_string_lossy().into_owned();
    let module = format!(
        "examplejson={}",
        root.join("subgraph_0.examplejson").display()
    );
    ok(&[
        "pack",
        "-o",
        &so,
        "--c-source",
        &c_source,
        "--module",
        &module,
    ]);

    let out = ok(&["inspect", &so]);
    assert!(
        out.contains("  `- examplejson  (implements: subgraph_0)\n"),
        "{out}"
    );
    assert!(out.contains("  gcc_1  [classic]"), "{out}");

    let n = 100;
    let vals: Vec<Vec<f32>> = (0..4)
        .map(|k| (0..n).map(|i| (i as f32) * 0.25 + k as f32).collect())
        .collect();
    let mut args = Vec::new();
    for (k, v) in vals.iter().enumerate() {
        let p = dir.join(format!("in{k}.npy"));
        write_f32(&p, &[10, 10], v);
        args.push(p.to_string_lossy().into_owned());
    }
    let want: Vec<f32> = (0..n)
        .map(|i| (vals[0][i] + vals[1][i] - vals[2][i]) * vals[3][i])
        .collect();
    let dir_s = dir.to_string_lossy().into_owned();
    for func in ["subgraph_0", "gcc_1"] {
        let mut a = vec!["run", so.as_str(), func];
        for p in &args {
            a.extend(["-i", p.as_str()]);
        }
        a.extend(["-o", "float32:10x10", "--save", dir_s.as_str()]);
        ok(&a);
        assert_eq!(npy_f32(&dir.join("output0.npy")), want, "{func}");
    }
    let e = fails(&[
        "run",
        &so,
        "subgraph_0",
        "-i",
        &args[0],
        "-o",
        "float32:10x10",
    ]);
    assert!(e.contains("subgraph 'subgraph_0' takes 5 arguments"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn relax_tuple_results_are_saved_in_order() {
    let dir = scratch("tuple");
    let dir_s = dir.to_string_lossy().into_owned();
    let out = ok(&[
        "run",
        &lib("tuple_ret.so"),
        "main",
        "-i",
        &data("tuple_ret.main.in0.npy"),
        "-i",
        &data("tuple_ret.main.in1.npy"),
        "--save",
        &dir_s,
    ]);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.contains("output2.npy (float32[3, 2])"), "{out}");
    for i in 0..3 {
        let got = npy_f32(&dir.join(format!("output{i}.npy")));
        let want = npy_f32(&fixtures().join(format!("data/tuple_ret.main.out{i}.npy")));
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
                "output{i}: {got:?} vs {want:?}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Writes a 1-d int32 `.npy` file (format 1.0) and returns its path.
fn int32_npy(name: &str, values: &[i32]) -> String {
    let dir = std::env::temp_dir().join(format!("tvmrt_cli_graph_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut header = format!(
        "{{'descr': '<i4', 'fortran_order': False, 'shape': ({},), }}",
        values.len()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for v in values {
        bytes.extend(v.to_le_bytes());
    }
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn graph_executor_models_run_with_inputs_by_name() {
    let model = fixtures()
        .join("graph/int_model.so")
        .to_string_lossy()
        .into_owned();
    let x = int32_npy("x.npy", &[1, 2, 3, -4, 5]);
    // Outputs recorded on TVM 0.19's runtime (tests/fixtures/graph/int_model.expected.json).
    for input in [format!("x={x}"), x.clone()] {
        let out = ok(&["run", &model, "default", "-i", &input]);
        assert!(
            out.contains("(graph executor model): 1 input(s), 2 output(s)"),
            "{out}"
        );
        assert!(out.contains("[6, -11, 303, 3, -247]"), "{out}");
        assert!(out.contains("[6, -11, 127, 3, -128]"), "{out}");
    }
    let e = fails(&["run", &model, "default", "-i", &format!("y={x}")]);
    assert!(
        e.contains("the model has no input `y` (inputs: x, w)"),
        "{e}"
    );
    let e = fails(&["run", &model, "default", "-i", &x, "-i", &x]);
    assert!(
        e.contains("every input of the model is already given"),
        "{e}"
    );
    let e = fails(&["run", &model, "default", "-i", &x, "-o", "int32:5"]);
    assert!(
        e.contains("is a graph executor model: it returns its outputs"),
        "{e}"
    );
    let short = int32_npy("short.npy", &[1, 2]);
    let e = fails(&["run", &model, "default", "-i", &short]);
    assert!(
        e.contains("input `x`") && e.contains("holds 2 elements"),
        "{e}"
    );
    let info = ok(&["inspect", &model]);
    assert!(info.contains("inputs: x: int32[5]"), "{info}");
    assert!(info.contains("parameters (saved): w: int32[5]"), "{info}");
}
