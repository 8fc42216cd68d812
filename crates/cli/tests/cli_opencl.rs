//! The `tvmrt` tool on the OpenCL fixtures: `run` and `bench` with `--device opencl[:N]`
//! (inputs uploaded, outputs copied back and saved), `inspect` listing device modules and their
//! kernels, and one-line errors for a wrong device.

#![cfg(feature = "opencl")]

mod cli_support;

use std::path::Path;

use cli_support::{fails, fixtures, npy_f32, ok, out_dir, tvmrt};

fn f(rel: &str) -> String {
    fixtures()
        .join("opencl")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// A command line the argument parser refuses (exit code 2); its first line.
fn refused(args: &[&str]) -> String {
    let o = tvmrt(args);
    assert_eq!(o.status.code(), Some(2), "tvmrt {args:?}");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    err.lines().next().unwrap_or_default().to_string()
}

fn close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{g} vs {w}");
    }
}

#[test]
fn run_a_kernel_and_a_relax_model_on_opencl() {
    let dir = out_dir("cli_opencl", "run");
    let d = dir.to_str().unwrap();
    let text = ok(&[
        "run",
        &f("elementwise.so"),
        "add",
        "-i",
        &f("data/add.n33.in0.npy"),
        "-i",
        &f("data/add.n33.in1.npy"),
        "-o",
        "float32:33",
        "--device",
        "opencl",
        "--save",
        d,
    ]);
    assert!(text.contains("output0.npy (float32[33])"), "{text}");
    close(
        &npy_f32(&dir.join("output0.npy")),
        &npy_f32(Path::new(&f("data/add.n33.out0.npy"))),
        1e-6,
    );
    let text = ok(&[
        "run",
        &f("mlp.so"),
        "main",
        "-i",
        &f("data/mlp.main.in0.npy"),
        "--device",
        "opencl:0",
        "--save",
        d,
    ]);
    assert!(text.contains("output0.npy (float32[1, 8])"), "{text}");
    close(
        &npy_f32(&dir.join("output0.npy")),
        &npy_f32(Path::new(&f("data/mlp.main.out0.npy"))),
        1e-5,
    );
    // The classic graph model: created on OpenCL, its input uploaded by set_input; output 0
    // as TVM 0.19's OpenCL runtime computed it. (The tool keeps only the executor, not the
    // factory: the kernels' lookups must still reach the opencl module.)
    let blob = std::fs::read(f("graph_cl.inputs.bin")).unwrap();
    let params = tvmrt::graph::params::load_params(&blob).unwrap();
    let x = params[0].1.to_vec().unwrap();
    let x_path = dir.join("x.npy");
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 70), }";
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&((header.len() + pad + 1) as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend(std::iter::repeat_n(b' ', pad));
    npy.push(b'\n');
    npy.extend_from_slice(&x);
    std::fs::write(&x_path, npy).unwrap();
    let text = ok(&[
        "run",
        &f("graph_cl.so"),
        "default",
        "--device",
        "opencl",
        "-i",
        &format!("x={}", x_path.display()),
        "--save",
        d,
    ]);
    assert!(text.contains("output1.npy (float32[1, 70])"), "{text}");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f("graph_cl.expected.json")).unwrap())
            .unwrap();
    let want: Vec<f32> = expected["outputs"][0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(npy_f32(&dir.join("output0.npy")), want);
}

#[test]
fn bench_on_opencl_waits_for_the_device() {
    let text = ok(&[
        "bench",
        &f("mlp.so"),
        "main",
        "-i",
        &f("data/mlp.main.in0.npy"),
        "--device",
        "opencl",
        "--repeat",
        "5",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["device"], "opencl:0");
    assert_eq!(v["runs"], 5);
    assert!(v["median_ns"].as_u64().unwrap() > 0);
}

#[test]
fn inspect_lists_device_modules_and_kernels() {
    let text = ok(&["inspect", &f("matmul.so")]);
    assert!(
        text.contains("opencl  (device module, code format `cl`, 1 kernel)"),
        "{text}"
    );
    assert!(
        text.contains(
            "kernel matmul_kernel(handle, handle, handle)  launch: blockIdx.y, blockIdx.x, \
             threadIdx.y, threadIdx.x"
        ),
        "{text}"
    );
    let json = ok(&["inspect", &f("graph_cl.so"), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let lib = &v["module_tree"]["imports"][0];
    let dev = &lib["imports"][0]["device_module"];
    assert_eq!(dev["format"], "cl");
    assert_eq!(dev["kernels"][1]["name"], "scale_kernel");
    assert_eq!(
        dev["kernels"][1]["arg_types"],
        serde_json::json!(["handle", "handle", "float32", "int32"])
    );
    // Inspecting needs no OpenCL at all.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(["inspect", &f("mlp.so")])
        .env("TVMRT_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("kernel fused_matmul_add_relu_kernel"));
}

#[test]
fn wrong_devices_are_one_line_errors() {
    let e = fails(&[
        "run",
        &f("mlp.so"),
        "main",
        "-i",
        &f("data/mlp.main.in0.npy"),
        "--device",
        "opencl:5",
    ]);
    assert!(e.contains("OpenCL device 5 does not exist"), "{e}");
    let e = refused(&["run", &f("mlp.so"), "main", "--device", "rocm"]);
    assert!(e.contains("device rocm:0 has no back end in tvmrt"), "{e}");
    let e = refused(&["run", &f("mlp.so"), "main", "--device", "gpu"]);
    assert!(e.contains("unknown device `gpu`"), "{e}");
    // An OpenCL library run on the CPU: the kernel's own check, and the option to use.
    let e = fails(&[
        "run",
        &f("mlp.so"),
        "main",
        "-i",
        &f("data/mlp.main.in0.npy"),
    ]);
    assert!(
        e.contains("expected opencl (the library was built for opencl: run with --device opencl)"),
        "{e}"
    );
    // No OpenCL driver: said so, in one line.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args([
            "run",
            &f("mlp.so"),
            "main",
            "-i",
            &f("data/mlp.main.in0.npy"),
            "--device",
            "opencl",
        ])
        .env("OCL_ICD_VENDORS", "/nonexistent-vendors")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("no OpenCL platform found"), "{err}");
}
