//! The classic graph executor on Vulkan (device type 7): a graph whose operators apache-tvm
//! 0.27 built for target vulkan (tests/fixtures/vulkan/graph_ops.so, host launchers importing
//! a `vulkan` module; generate.py) runs with outputs equal to the CPU build of the same
//! operators (graph_ops_cpu.so) on the same graph, and to numpy's; bad input is refused with a
//! clear error and leaves no device memory behind.

#![cfg(feature = "vulkan")]

mod vulkan_support;

use tvmrt::abi::DLDevice;
use tvmrt::dtype::dtypes;
use tvmrt::module::{load_from_file, Module};
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;
use vulkan_support::*;

fn npy(name: &str) -> Vec<f32> {
    to_f32s(&read_npy(&dir().join("data").join(format!("graph.{name}.npy"))).data)
}

fn host(v: &[f32]) -> Tensor {
    let t = Tensor::empty(&[v.len() as i64], dtypes::FLOAT32, cpu()).unwrap();
    t.copy_from_bytes(&f32s(v)).unwrap();
    t
}

/// A graph executor over graph.json with the operators of `lib`, on `dev`.
fn executor(lib: &str, dev: DLDevice) -> tvmrt::Result<Module> {
    let json = std::fs::read_to_string(dir().join("graph.json")).unwrap();
    let lib = load_from_file(dir().join(lib).to_str().unwrap(), "").unwrap();
    let create = tvmrt::function::registry::get_required("tvm.graph_executor.create").unwrap();
    let m = call(
        &create,
        &[
            Any::from(json.as_str()),
            Any::from(lib),
            Any::from(dev.device_type.0 as i64),
            Any::from(dev.device_id as i64),
        ],
    )?;
    Module::from_view(&m.view(), "executor")
}

fn run(exec: &Module, args: &[(&str, &[Any])]) -> tvmrt::Result<Any> {
    let mut last = Any::none();
    for (name, a) in args {
        last = call(&func(exec, name), a)?;
    }
    Ok(last)
}

/// Sets x and w (host tensors, copied in), runs, and returns output 0 read back to the host.
fn infer(exec: &Module, x: &[f32], w: &[f32]) -> tvmrt::Result<(DLDevice, Vec<f32>)> {
    let out = run(
        exec,
        &[
            ("set_input", &[Any::from("x"), Any::from(host(x))]),
            ("set_input", &[Any::from("w"), Any::from(host(w))]),
            ("run", &[]),
            ("get_output", &[Any::from(0i64)]),
        ],
    )?;
    let out = Tensor::from_any_view(&out.view(), "output")?;
    Ok((out.device(), to_f32s(&out.to_vec()?)))
}

#[test]
fn the_graph_on_vulkan_equals_its_cpu_build() {
    let _s = serial();
    let before = live_buffers();
    {
        let (x, w, want) = (npy("x"), npy("w"), npy("out0"));
        let gpu = executor("graph_ops.so", vulkan(0)).unwrap();
        let cpu_exec = executor("graph_ops_cpu.so", cpu()).unwrap();
        let (dev, got) = infer(&gpu, &x, &w).unwrap();
        assert_eq!(dev, vulkan(0), "get_output returns the device entry");
        let (_, reference) = infer(&cpu_exec, &x, &w).unwrap();
        assert_eq!(got, reference, "vulkan and the CPU build differ");
        assert_eq!(got, want, "numpy's output");
        assert!(
            live_buffers() > before,
            "the storage pool lives on the device"
        );
        // Again with other inputs: the executor reuses its pool and kernels.
        let x2: Vec<f32> = x.iter().map(|v| v * -0.5 + 1.0).collect();
        let (_, got2) = infer(&gpu, &x2, &w).unwrap();
        let (_, ref2) = infer(&cpu_exec, &x2, &w).unwrap();
        assert_eq!(got2, ref2);
        assert_ne!(got2, got);
        // get_output into a host tensor copies from the device.
        let out = host(&[0.0; 256]);
        run(
            &gpu,
            &[("get_output", &[Any::from(0i64), Any::from(out.clone())])],
        )
        .unwrap();
        assert_eq!(to_f32s(&out.to_vec().unwrap()), ref2);
    }
    assert_eq!(
        live_buffers(),
        before,
        "the executors' device memory is freed"
    );
    assert_no_validation_errors();
}

fn err_text(r: tvmrt::Result<impl Sized>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_input_to_the_vulkan_graph_is_refused() {
    let _s = serial();
    let before = live_buffers();
    {
        let gpu = executor("graph_ops.so", vulkan(0)).unwrap();
        // A wrong shape.
        let e = err_text(run(
            &gpu,
            &[("set_input", &[Any::from("x"), Any::from(host(&[1.0; 100]))])],
        ));
        assert!(
            e.contains("set_input `x`") && e.contains("holds 100"),
            "{e}"
        );
        // A host tensor as a zero-copy input: it must be on the graph's device.
        let e = err_text(run(
            &gpu,
            &[(
                "set_input_zero_copy",
                &[Any::from("x"), Any::from(host(&[1.0; 256]))],
            )],
        ));
        assert!(e.contains("is on cpu:0") && e.contains("vulkan:0"), "{e}");
        // The executor still runs.
        let (_, got) = infer(&gpu, &[1.0; 256], &[2.0; 256]).unwrap();
        assert_eq!(got, vec![3.0; 256]);
        // The vulkan operators on the CPU: TVM's host code checks the device type.
        let wrong = executor("graph_ops.so", cpu()).unwrap();
        let e = err_text(infer(&wrong, &[1.0; 256], &[2.0; 256]));
        assert!(e.contains("node 2 (`fused_add_relu`)"), "{e}");
        assert!(e.to_lowercase().contains("device"), "{e}");
        // The CPU operators on Vulkan tensors: refused the same way, no crash.
        let wrong = executor("graph_ops_cpu.so", vulkan(0)).unwrap();
        let e = err_text(infer(&wrong, &[1.0; 256], &[2.0; 256]));
        assert!(e.contains("node 2 (`fused_add_relu`)"), "{e}");
        // A device that does not exist.
        let e = err_text(executor("graph_ops.so", vulkan(9)));
        assert!(e.contains("Vulkan device 9 does not exist"), "{e}");
    }
    assert_eq!(live_buffers(), before, "no device memory is left behind");
    assert_no_validation_errors();
}
