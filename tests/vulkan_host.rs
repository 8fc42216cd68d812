//! A library whose host code apache-tvm 0.27 compiled for target vulkan
//! (tests/fixtures/vulkan/add_scale.so, made by its generate.py), run on the Vulkan back end:
//! TVM's generated launcher checks the tensors against device type 7, calls
//! `__tvm_set_device`, looks the kernel up through the imports and launches it with its
//! scalars and extents; results against numpy's, recorded with the fixture.

#![cfg(feature = "vulkan")]

mod vulkan_support;

use serde_json::Value;
use tvmrt::dtype::dtypes;
use tvmrt::module::load_from_file;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;
use vulkan_support::*;

fn npy(rel: &str) -> Vec<f32> {
    let n = read_npy(&dir().join(rel));
    to_f32s(&n.data)
}

#[test]
fn tvm_host_code_launches_vulkan_kernels() {
    let _s = serial();
    let before = live_buffers();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("manifest.json")).unwrap())
            .unwrap();
    let lib = load_from_file(dir().join("add_scale.so").to_str().unwrap(), "").unwrap();
    let dm = lib
        .imports()
        .into_iter()
        .find(|m| m.kind() == "vulkan")
        .expect("a vulkan import");
    let info = tvmrt::device::describe_module(&dm).unwrap();
    assert_eq!(info.format, "vulkan");
    assert_eq!(info.kernels[0].name, "add_scale_kernel");
    let f = func(&lib, "add_scale");
    for case in manifest["cases"].as_array().unwrap() {
        if case["library"] != "add_scale.so" {
            continue;
        }
        let ins: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let v = npy(p.as_str().unwrap());
                let t = Tensor::empty(&[v.len() as i64], dtypes::FLOAT32, vulkan(0)).unwrap();
                t.copy_from_bytes(&f32s(&v)).unwrap();
                t
            })
            .collect();
        let want = npy(case["outputs"][0].as_str().unwrap());
        let out = Tensor::empty(&[want.len() as i64], dtypes::FLOAT32, vulkan(0)).unwrap();
        let alpha = case["scalars"][0].as_f64().unwrap();
        call(
            &f,
            &[
                Any::from(ins[0].clone()),
                Any::from(ins[1].clone()),
                Any::from(alpha),
                Any::from(out.clone()),
            ],
        )
        .unwrap();
        // Within a few float32 ulps, not bit for bit: a driver may fuse `alpha * A + B` into
        // one multiply-add (SPIR-V allows it without NoContraction; NVIDIA's does, lavapipe's
        // does not), which rounds once instead of twice.
        let got = to_f32s(&out.to_vec().unwrap());
        assert_eq!(got.len(), want.len(), "{}", case["name"]);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let limit = 4.0 * f32::EPSILON * w.abs().max(1.0);
            assert!(
                (g - w).abs() <= limit,
                "{} element {i}: {g} vs {w}",
                case["name"]
            );
        }
    }
    // The launcher's own checks: a CPU tensor, a wrong shape.
    let dev = |n: i64| Tensor::empty(&[n], dtypes::FLOAT32, vulkan(0)).unwrap();
    let host = Tensor::empty(&[4], dtypes::FLOAT32, cpu()).unwrap();
    let e = call(
        &f,
        &[
            Any::from(host),
            Any::from(dev(4)),
            Any::from(1.0),
            Any::from(dev(4)),
        ],
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("Mismatched A.device_type on argument #0")
            && e.message.contains("vulkan"),
        "{e:?}"
    );
    let e = call(
        &f,
        &[
            Any::from(dev(4)),
            Any::from(dev(5)),
            Any::from(1.0),
            Any::from(dev(4)),
        ],
    )
    .unwrap_err();
    assert!(
        e.message.contains("Mismatched B.shape[0] on argument #1"),
        "{e:?}"
    );
    drop((f, lib, dm));
    assert_eq!(live_buffers(), before);
    assert_no_validation_errors();
}

/// A VM of an executable, initialized as TVM 0.27 does for Vulkan device `id`:
/// `vm_initialization(7, id, 2, 1, 0, 2)` (the device, then the CPU host; pooled allocators).
fn vulkan_vm(exec: &tvmrt::module::Module, id: i64) -> tvmrt::module::Module {
    let vm = new_vm(exec);
    func(&vm, "vm_initialization")
        .call_values(&[7i64, id, 2, 1, 0, 2].map(Any::from))
        .unwrap();
    vm
}

#[test]
fn a_relax_mlp_runs_on_vulkan() {
    let _s = serial();
    let before = live_buffers();
    let exec = load_from_file(dir().join("mlp.so").to_str().unwrap(), "").unwrap();
    let vm = vulkan_vm(&exec, 0);
    let x = npy("data/mlp.main.in0.npy");
    let want = npy("data/mlp.main.out0.npy");
    let tx = Tensor::empty(&[1, 16], dtypes::FLOAT32, vulkan(0)).unwrap();
    tx.copy_from_bytes(&f32s(&x)).unwrap();
    for _ in 0..3 {
        let y = func(&vm, "main")
            .call_values(&[Any::from(tx.clone())])
            .unwrap();
        let y = Tensor::from_any_view(&y.view(), "output").unwrap();
        assert_eq!(y.device(), vulkan(0), "outputs stay on the device");
        assert_eq!(y.shape(), &[1, 8][..]);
        let got = to_f32s(&y.to_vec().unwrap());
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5 + 1e-5 * w.abs(), "{g} vs TVM's {w}");
        }
    }
    // A device that does not exist is refused when the VM is set up.
    let e = func(&new_vm(&exec), "vm_initialization")
        .call_values(&[7i64, 3, 2, 1, 0, 2].map(Any::from))
        .unwrap_err();
    assert!(
        e.message.contains("Vulkan device 3 does not exist"),
        "{e:?}"
    );
    drop((vm, exec, tx));
    assert_eq!(live_buffers(), before);
    assert_no_validation_errors();
}

#[test]
fn a_relax_cnn_runs_on_vulkan() {
    let _s = serial();
    let before = live_buffers();
    let exec = load_from_file(dir().join("cnn.so").to_str().unwrap(), "").unwrap();
    fn vulkan_kernels(m: &tvmrt::module::Module, out: &mut Vec<String>) {
        if m.kind() == "vulkan" {
            let info = tvmrt::device::describe_module(m).unwrap();
            out.extend(info.kernels.into_iter().map(|k| k.name));
        }
        for i in m.imports() {
            vulkan_kernels(&i, out);
        }
    }
    let mut kernels = Vec::new();
    vulkan_kernels(&exec, &mut kernels);
    for k in [
        "fused_conv2d_add_relu_kernel",
        "max_pool2d_kernel",
        "fused_matmul_add1_kernel",
    ] {
        assert!(kernels.iter().any(|n| n == k), "{k} in {kernels:?}");
    }
    let vm = vulkan_vm(&exec, 0);
    let x = npy("data/cnn.main.in0.npy");
    // TVM's CPU runtime on the same IRModule built for llvm.
    let want = npy("data/cnn.main.out0.npy");
    let tx = Tensor::empty(&[1, 3, 8, 8], dtypes::FLOAT32, vulkan(0)).unwrap();
    tx.copy_from_bytes(&f32s(&x)).unwrap();
    for _ in 0..2 {
        let y = func(&vm, "main")
            .call_values(&[Any::from(tx.clone())])
            .unwrap();
        let y = Tensor::from_any_view(&y.view(), "output").unwrap();
        assert_eq!(y.device(), vulkan(0));
        assert_eq!(y.shape(), &[1, 10][..]);
        let got = to_f32s(&y.to_vec().unwrap());
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5 + 1e-5 * w.abs(), "{g} vs TVM's {w}");
        }
    }
    // Bad input: a host tensor, a wrong shape (TVM's own checks in the host code).
    let host = Tensor::empty(&[1, 3, 8, 8], dtypes::FLOAT32, cpu()).unwrap();
    let e = func(&vm, "main")
        .call_values(&[Any::from(host)])
        .unwrap_err();
    assert!(
        e.message.contains("Mismatched x.device_type") && e.message.contains("expected vulkan"),
        "{e:?}"
    );
    let bad = Tensor::empty(&[1, 3, 8, 9], dtypes::FLOAT32, vulkan(0)).unwrap();
    let e = func(&vm, "main")
        .call_values(&[Any::from(bad)])
        .unwrap_err();
    assert!(e.message.contains("(9 vs. 8)"), "{e:?}");
    drop((vm, exec, tx));
    assert_eq!(live_buffers(), before);
    assert_no_validation_errors();
}
