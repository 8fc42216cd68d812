//! The `tvmrt` tool on the Vulkan fixture (tests/fixtures/vulkan/add_scale.so: host code TVM
//! 0.27 compiled for target vulkan, importing a `vulkan` module of SPIR-V shaders):
//! `run` with `--device vulkan[:N]` (a kernel, and the Relax MLP and CNN of mlp.so and cnn.so), `inspect` listing
//! the Vulkan kernels, and one-line errors for a wrong device; and a library whose `vulkan`
//! module TVM's own SPIR-V code generator wrote (tests/fixtures/vulkan/tvm_codegen/row_sum.so).

#![cfg(feature = "vulkan")]

mod cli_support;

use std::path::Path;

use cli_support::{fails, fixtures, npy_f32, ok, out_dir};

fn f(rel: &str) -> String {
    fixtures()
        .join("vulkan")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn run_a_kernel_on_vulkan() {
    let dir = out_dir("cli_vulkan", "run");
    let d = dir.to_str().unwrap();
    let text = ok(&[
        "run",
        &f("add_scale.so"),
        "add_scale",
        "-i",
        &f("data/add_scale.n100.in0.npy"),
        "-i",
        &f("data/add_scale.n100.in1.npy"),
        "-i",
        "float:0.75",
        "-o",
        "float32:100",
        "--device",
        "vulkan:0",
        "--save",
        d,
    ]);
    assert!(text.contains("output0.npy (float32[100])"), "{text}");
    let got = npy_f32(&dir.join("output0.npy"));
    let want = npy_f32(Path::new(&f("data/add_scale.n100.out0.npy")));
    assert_eq!(got, want);
    let text = ok(&[
        "run",
        &f("mlp.so"),
        "main",
        "-i",
        &f("data/mlp.main.in0.npy"),
        "--device",
        "vulkan",
        "--save",
        d,
    ]);
    assert!(text.contains("output0.npy (float32[1, 8])"), "{text}");
    let got = npy_f32(&dir.join("output0.npy"));
    let want = npy_f32(Path::new(&f("data/mlp.main.out0.npy")));
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{g} vs {w}");
    }
    // The Relax CNN (conv2d, relu, max_pool2d, dense) against TVM's CPU build of the same IR.
    let text = ok(&[
        "run",
        &f("cnn.so"),
        "main",
        "-i",
        &f("data/cnn.main.in0.npy"),
        "--device",
        "vulkan:0",
        "--save",
        d,
    ]);
    assert!(text.contains("output0.npy (float32[1, 10])"), "{text}");
    let got = npy_f32(&dir.join("output0.npy"));
    let want = npy_f32(Path::new(&f("data/cnn.main.out0.npy")));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{g} vs {w}");
    }
    // On the CPU, TVM's host code refuses the tensors and the tool says which device to use.
    let e = fails(&[
        "run",
        &f("add_scale.so"),
        "add_scale",
        "-i",
        &f("data/add_scale.n100.in0.npy"),
        "-i",
        &f("data/add_scale.n100.in1.npy"),
        "-i",
        "float:0.75",
        "-o",
        "float32:100",
    ]);
    assert!(e.contains("--device vulkan"), "{e}");
    let e = fails(&[
        "run",
        &f("add_scale.so"),
        "add_scale",
        "-i",
        &f("data/add_scale.n100.in0.npy"),
        "--device",
        "vulkan:5",
    ]);
    assert!(e.contains("Vulkan device 5 does not exist"), "{e}");
}

#[test]
fn inspect_lists_vulkan_kernels() {
    let text = ok(&["inspect", &f("add_scale.so")]);
    assert!(text.contains("vulkan"), "{text}");
    assert!(text.contains("add_scale_kernel"), "{text}");
}

/// A library whose `vulkan` module TVM's own SPIR-V code generator wrote
/// (tests/fixtures/vulkan/tvm_codegen): a row sum reduced across threads, run by the tool and
/// compared with TVM's CPU result; `inspect` lists its kernel.
#[test]
fn run_tvms_own_spirv() {
    let dir = out_dir("cli_vulkan", "tvm_codegen");
    let d = dir.to_str().unwrap();
    let text = ok(&[
        "run",
        &f("tvm_codegen/row_sum.so"),
        "row_sum",
        "-i",
        &f("tvm_codegen/data/row_sum.m7.arg0.npy"),
        "-o",
        "float32:7",
        "--device",
        "vulkan:0",
        "--save",
        d,
    ]);
    assert!(text.contains("output0.npy (float32[7])"), "{text}");
    let got = npy_f32(&dir.join("output0.npy"));
    let want = npy_f32(Path::new(&f("tvm_codegen/data/row_sum.m7.arg1.npy")));
    assert_eq!(got.len(), 7);
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{g} vs {w}");
    }
    let text = ok(&["inspect", &f("tvm_codegen/row_sum.so")]);
    assert!(text.contains("row_sum_kernel"), "{text}");
}
