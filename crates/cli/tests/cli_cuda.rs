//! The `tvmrt` tool on the CUDA fixtures, with the test-double driver in place of libcuda.so.1
//! (it runs the fixtures' elementwise kernels on the host): `run` and `bench` with
//! `--device cuda[:N]`, `inspect` listing the cuda module's format, architectures and kernels
//! without a driver, and one-line errors for a missing driver, a missing device and a library
//! run on the wrong device.

#![cfg(feature = "cuda")]

mod cli_support;
#[path = "../../../tests/cuda_support/mod.rs"]
mod cuda_support;

use std::path::Path;
use std::process::{Command, Output};

use cli_support::npy_f32;

fn f(rel: &str) -> String {
    cli_support::fixtures()
        .join("cuda")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// The tool with the test double as its driver (and NVRTC from the pinned venv).
fn tvmrt(args: &[&str], driver: Option<&str>) -> Output {
    let fake = cuda_support::build_fake_driver();
    let nvrtc = cuda_support::use_venv_nvrtc();
    Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(args)
        .env_remove("TVMRT_LOG")
        .env(
            "TVMRT_CUDA_LIBRARY",
            driver.map_or(fake.to_string_lossy().into_owned(), str::to_string),
        )
        .env("TVMRT_NVRTC_LIBRARY", nvrtc)
        .env("FAKE_CUDA_DEVICES", "1")
        .output()
        .expect("spawn tvmrt")
}

fn ok(args: &[&str]) -> String {
    cli_support::succeeded(tvmrt(args, None), args)
}

fn fails(args: &[&str], driver: Option<&str>) -> String {
    cli_support::failed(tvmrt(args, driver), args)
}

#[test]
fn run_kernels_and_a_relax_model_on_cuda() {
    let dir = cli_support::out_dir("cli_cuda", "run");
    let d = dir.to_str().unwrap();
    for lib in ["elementwise_ptx.so", "elementwise.so"] {
        let text = ok(&[
            "run",
            &f(lib),
            "add",
            "-i",
            &f("data/add.n1000.in0.npy"),
            "-i",
            &f("data/add.n1000.in1.npy"),
            "-o",
            "float32:1000",
            "--device",
            "cuda",
            "--save",
            d,
        ]);
        assert!(text.contains("output0.npy (float32[1000])"), "{text}");
        assert_eq!(
            npy_f32(&dir.join("output0.npy")),
            npy_f32(Path::new(&f("data/add.n1000.out0.npy"))),
            "{lib}"
        );
    }
    let text = ok(&[
        "run",
        &f("mlp_ptx.so"),
        "main",
        "-i",
        &f("data/mlp.main.in0.npy"),
        "--device",
        "cuda:0",
        "--save",
        d,
    ]);
    assert!(text.contains("output0.npy (float32[1, 8])"), "{text}");
}

#[test]
fn bench_on_cuda() {
    let text = ok(&[
        "bench",
        &f("elementwise_cubin.so"),
        "add",
        "-i",
        &f("data/add.n1000.in0.npy"),
        "-i",
        &f("data/add.n1000.in1.npy"),
        "-o",
        "float32:1000",
        "--device",
        "cuda",
        "--repeat",
        "5",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["device"], "cuda:0");
    assert_eq!(v["runs"], 5);
}

#[test]
fn inspect_shows_formats_and_architectures_without_a_driver() {
    let o = tvmrt(
        &["inspect", &f("elementwise_fatbin.so")],
        Some("/nonexistent/libcuda.so.1"),
    );
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "cuda  (device module, code format `fatbin (cubin for sm_75, cubin for sm_80, PTX \
             for compute_80)`, 3 kernels)"
        ),
        "{text}"
    );
    assert!(
        text.contains("kernel axpk_kernel(handle, handle, float32, int32, int32)  launch: blockIdx.x, threadIdx.x"),
        "{text}"
    );
    let json = ok(&["inspect", &f("matmul_dyn.so"), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let dev = &v["module_tree"]["imports"][0]["device_module"];
    assert!(dev["format"]
        .as_str()
        .unwrap()
        .starts_with("cuda (CUDA C source"));
    assert_eq!(
        dev["kernels"][0]["launch_params"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        "tirx.use_dyn_shared_memory"
    );
}

#[test]
fn errors_name_the_driver_the_device_and_the_option() {
    let add = |dev: &str| {
        vec![
            "run".to_string(),
            f("elementwise_ptx.so"),
            "add".into(),
            "-i".into(),
            f("data/add.n1.in0.npy"),
            "-i".into(),
            f("data/add.n1.in1.npy"),
            "-o".into(),
            "float32:1".into(),
            "--device".into(),
            dev.into(),
        ]
    };
    let args = add("cuda:3");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = fails(&args, None);
    assert!(
        e.contains("cuda:3 does not exist: the driver sees 1 CUDA device"),
        "{e}"
    );
    let args = add("cuda");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = fails(&args, Some("/nonexistent/libcuda.so.1"));
    assert!(e.contains("CUDA is not available"), "{e}");
    let args = add("cpu");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = fails(&args, None);
    assert!(e.contains("run with --device cuda"), "{e}");
}
