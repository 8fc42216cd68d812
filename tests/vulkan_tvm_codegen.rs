//! Libraries built by TVM's OWN SPIR-V code generator (tests/fixtures/vulkan/tvm_codegen:
//! apache-tvm 0.26.0 with its src/backend/vulkan/codegen built as a plug-in, exported by
//! `export_library` as a USE_VULKAN=ON build exports them), run on the Vulkan back end with the
//! validation layer on: elementwise with a scalar over dynamic sizes, a kernel whose 19
//! scalars TVM put in a uniform buffer (also 40 launches of it before one sync), a 2-D grid, a
//! reduction across threads through shared memory, float64/int32, and the Relax MLP and CNN.
//! Expected outputs: TVM's CPU runtime on the same computations built for llvm (recorded by the
//! fixture's generate.py). Where TVM put each kernel's scalars (the shader flag) is checked
//! too. On a driver without float64/int64 (SwiftShader) the kernels that need them must be
//! refused by name.

#![cfg(feature = "vulkan")]

mod vulkan_support;

use serde_json::Value;
use tvmrt::abi::DLDataType;
use tvmrt::dtype::dtypes;
use tvmrt::module::{load_from_file, Module};
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;
use vulkan_support::*;

fn fixtures() -> std::path::PathBuf {
    dir().join("tvm_codegen")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn dtype_of(descr: &str) -> DLDataType {
    match descr {
        "<f4" => dtypes::FLOAT32,
        "<f8" => F64,
        "<i4" => I32,
        "<i8" => I64,
        other => panic!("npy dtype {other}"),
    }
}

/// A device tensor holding the `.npy` file `rel` (zeros of its shape when `zero`) and the file.
fn device_tensor(rel: &str, zero: bool) -> (Tensor, Npy) {
    let n = read_npy(&fixtures().join(rel));
    let t = Tensor::empty(&n.shape, dtype_of(&n.descr), vulkan(0)).unwrap();
    if zero {
        t.copy_from_bytes(&vec![0u8; n.data.len()]).unwrap();
    } else {
        t.copy_from_bytes(&n.data).unwrap();
    }
    (t, n)
}

/// Compares `got` (bytes of a tensor) with the recorded `want`: integers exactly, floats within
/// a few ulps (a driver may contract `a * b + c` into one rounding; TVM's CPU build may not).
fn assert_close(case: &str, want: &Npy, got: &[u8]) {
    assert_eq!(got.len(), want.data.len(), "{case}: size");
    match want.descr.as_str() {
        "<f4" => {
            let (g, w) = (to_f32s(got), to_f32s(&want.data));
            for (i, (g, w)) in g.iter().zip(&w).enumerate() {
                let limit = 1e-5 * w.abs().max(1.0);
                assert!(
                    (g - w).abs() <= limit,
                    "{case} element {i}: {g} vs TVM's {w}"
                );
            }
        }
        "<f8" => {
            for (i, (g, w)) in got
                .chunks_exact(8)
                .zip(want.data.chunks_exact(8))
                .enumerate()
            {
                let g = f64::from_le_bytes(g.try_into().unwrap());
                let w = f64::from_le_bytes(w.try_into().unwrap());
                let limit = 1e-12 * w.abs().max(1.0);
                assert!(
                    (g - w).abs() <= limit,
                    "{case} element {i}: {g} vs TVM's {w}"
                );
            }
        }
        _ => assert_eq!(got, &want.data[..], "{case}"),
    }
}

/// The `vulkan` modules imported by `m` and its imports.
fn vulkan_modules(m: &Module, out: &mut Vec<Module>) {
    if m.kind() == "vulkan" {
        out.push(m.clone());
    }
    for i in m.imports() {
        vulkan_modules(&i, out);
    }
}

/// The shader flag of each kernel of `vk`, read from the payload it saves (the shader map comes
/// last: a kernel's name there is followed by the shader's byte length and its flag).
fn shader_flags(vk: &Module) -> Vec<(String, u32)> {
    let bytes = vk.save_to_bytes().unwrap();
    let info = tvmrt::device::describe_module(vk).unwrap();
    info.kernels
        .into_iter()
        .map(|k| {
            let mut key = (k.name.len() as u64).to_le_bytes().to_vec();
            key.extend(k.name.as_bytes());
            let at = bytes
                .windows(key.len())
                .rposition(|w| w == &key[..])
                .unwrap()
                + key.len()
                + 8;
            let flag = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            (k.name, flag)
        })
        .collect()
}

/// Whether vulkan:0 runs float64 and int64 shaders (lavapipe does, SwiftShader does not).
fn has_f64_i64() -> bool {
    let ctx = tvmrt::device::vulkan::context::context().unwrap();
    let f = &ctx.devices[0].features;
    f.shader_float64 != 0 && f.shader_int64 != 0
}

/// Runs every case of `library` in the manifest: its arguments built from the recorded inputs
/// (outputs zeroed), the host function called (through the Relax VM for models), every output
/// compared with TVM's CPU result.
fn run_library(library: &str, ubo: bool) {
    let _s = serial();
    let before = live_buffers();
    let lib = load_from_file(fixtures().join(library).to_str().unwrap(), "").unwrap();
    let mut vk = Vec::new();
    vulkan_modules(&lib, &mut vk);
    assert_eq!(vk.len(), 1, "{library}: one vulkan import");
    let info = tvmrt::device::describe_module(&vk[0]).unwrap();
    assert_eq!(info.format, "vulkan");
    // Where TVM put the scalars: a uniform buffer (flag bit 0) only past 128 bytes of them.
    for (k, flag) in shader_flags(&vk[0]) {
        assert_eq!(flag, ubo as u32, "{library}: `{k}`'s shader flag");
    }
    let manifest = manifest();
    let cases: Vec<&Value> = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["library"] == library)
        .collect();
    assert!(!cases.is_empty(), "{library}: no cases");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let relax = case["relax"].as_bool().unwrap_or(false);
        let mut args = Vec::new();
        let mut outs = Vec::new();
        for a in case["args"].as_array().unwrap() {
            if let Some(rel) = a["in"].as_str() {
                args.push(Any::from(device_tensor(rel, false).0));
            } else if let Some(rel) = a["out"].as_str() {
                let (t, want) = device_tensor(rel, true);
                if !relax {
                    args.push(Any::from(t.clone()));
                }
                outs.push((t, want));
            } else {
                let v = &a["scalar"];
                args.push(match a["dtype"].as_str().unwrap() {
                    "float32" | "float64" => Any::from(v.as_f64().unwrap()),
                    _ => Any::from(v.as_i64().unwrap()),
                });
            }
        }
        if relax {
            // As TVM 0.26 initializes a VM for Vulkan device 0: the device, then the CPU
            // host, pooled allocators.
            let vm = new_vm(&lib);
            func(&vm, "vm_initialization")
                .call_values(&[7i64, 0, 2, 1, 0, 2].map(Any::from))
                .unwrap();
            let y = call(&func(&vm, "main"), &args);
            if !has_f64_i64() {
                // Their kernels index with int64 (TVM's codegen needs supports_int64 for
                // them): on a driver without shaderInt64 (SwiftShader), refused by name.
                let e = y.unwrap_err();
                assert!(
                    e.message
                        .contains("Int64 (shaderInt64), which the device does not support"),
                    "{e:?}"
                );
                continue;
            }
            let y = y.unwrap();
            let y = Tensor::from_any_view(&y.view(), "output").unwrap();
            assert_eq!(
                y.device(),
                vulkan(0),
                "{name}: the output stays on the device"
            );
            assert_eq!(y.shape(), &outs[0].1.shape[..], "{name}");
            assert_close(name, &outs[0].1, &y.to_vec().unwrap());
        } else {
            let launched = call(&func(&lib, case["function"].as_str().unwrap()), &args);
            if library == "int_f64.so" && !has_f64_i64() {
                // A driver without float64 (SwiftShader): refused by name, before the driver.
                let e = launched.unwrap_err();
                assert!(
                    e.message.contains("which the device does not support"),
                    "{e:?}"
                );
                continue;
            }
            launched.unwrap();
            for (t, want) in &outs {
                assert_close(name, want, &t.to_vec().unwrap());
            }
        }
    }
    drop((lib, vk));
    assert_eq!(
        live_buffers(),
        before,
        "{library}: device memory left behind"
    );
    assert_no_validation_errors();
}

#[test]
fn elementwise_with_a_scalar_over_dynamic_sizes() {
    run_library("add_scale.so", false);
}

#[test]
fn nineteen_scalars_through_tvms_uniform_buffer() {
    run_library("many_scalars.so", true);
    // 40 launches with different scalars recorded before one sync: each must read its own.
    let _s = serial();
    let before = live_buffers();
    let lib = load_from_file(fixtures().join("many_scalars.so").to_str().unwrap(), "").unwrap();
    let f = func(&lib, "many_scalars");
    let (a, n) = device_tensor("data/many_scalars.n300.arg0.npy", false);
    let host_a = to_f32s(&n.data);
    let outs: Vec<Tensor> = (0..40)
        .map(|k| {
            let out = Tensor::empty(&[300], dtypes::FLOAT32, vulkan(0)).unwrap();
            let mut args = vec![Any::from(a.clone())];
            args.extend((0..18).map(|j| Any::from(if j == 0 { k as f64 } else { j as f64 })));
            args.push(Any::from(out.clone()));
            call(&f, &args).unwrap();
            out
        })
        .collect();
    for (k, out) in outs.iter().enumerate() {
        let got = to_f32s(&out.to_vec().unwrap());
        for (i, (g, x)) in got.iter().zip(&host_a).enumerate() {
            let w = (1..18).fold(x * k as f32, |acc, j| acc + j as f32);
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "launch {k} element {i}: {g} vs {w}"
            );
        }
    }
    drop((outs, a, f, lib));
    assert_eq!(live_buffers(), before);
    assert_no_validation_errors();
}

#[test]
fn a_2d_grid() {
    run_library("grid2d.so", false);
}

#[test]
fn a_reduction_through_shared_memory_and_barriers() {
    run_library("row_sum.so", false);
}

#[test]
fn float64_and_int32_buffers_and_scalars() {
    run_library("int_f64.so", false);
}

#[test]
fn the_relax_mlp() {
    run_library("mlp.so", false);
}

#[test]
fn the_relax_cnn() {
    run_library("cnn.so", false);
}
