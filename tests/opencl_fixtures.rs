//! Libraries apache-tvm 0.27 compiled for OpenCL (tests/fixtures/opencl, generate.py) run on
//! tvmrt's OpenCL back end and give what the same IR gives on TVM's CPU runtime: elementwise
//! kernels with dynamic shapes (float32, int32, float64, float and int scalars, a 2-D launch),
//! a reduction through local memory, a matmul with shared memory and barriers, a kernel whose
//! host code allocates a device workspace, and two Relax models with weights, through the VM
//! both statefully (host inputs uploaded) and directly (device tensors). Also the classic graph
//! executor on OpenCL (gen_classic.py) against TVM v0.19.0's own OpenCL runtime.

#![cfg(feature = "opencl")]

mod opencl_support;

use opencl_support::*;
use serde_json::Value;
use tvmrt::module::Module;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

fn cases_of(kind: &str) -> Vec<Value> {
    let m = manifest();
    let libs = m["libraries"].as_object().unwrap().clone();
    m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| libs[c["library"].as_str().unwrap()]["kind"] == kind)
        .cloned()
        .collect()
}

fn tol(case: &Value) -> (f64, f64) {
    (
        case["rtol"].as_f64().unwrap(),
        case["atol"].as_f64().unwrap(),
    )
}

#[test]
fn kernels_give_tvm_cpu_results() {
    let _serial = serial();
    let cases = cases_of("kernels");
    assert!(cases.len() >= 11, "{} kernel cases", cases.len());
    let dev = opencl(0);
    let before = live_buffers();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let lib = load(case["library"].as_str().unwrap());
        let f = func(&lib, case["function"].as_str().unwrap());
        let outputs: Vec<&str> = case["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_str().unwrap())
            .collect();
        let outs: Vec<Tensor> = outputs.iter().map(|o| empty_like(o, dev)).collect();
        let args: Vec<Any> = case["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                if let Some(t) = a["tensor"].as_str() {
                    Any::from(upload(t, dev))
                } else if let Some(i) = a["output"].as_u64() {
                    Any::from(outs[i as usize].clone())
                } else if let Some(x) = a["float"].as_f64() {
                    Any::from(x)
                } else {
                    Any::from(a["int"].as_i64().unwrap())
                }
            })
            .collect();
        call(&f, &args).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let (rtol, atol) = tol(case);
        for (o, want) in outs.iter().zip(&outputs) {
            assert_eq!(o.device(), dev, "{name}: outputs stay on the device");
            assert_matches(name, o, want, rtol, atol);
        }
    }
    assert_eq!(live_buffers(), before, "every device tensor was freed");
}

#[test]
fn relax_models_run_on_opencl_with_host_or_device_inputs() {
    let _serial = serial();
    let cases = cases_of("relax");
    assert_eq!(cases.len(), 2);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let exec = load(case["library"].as_str().unwrap());
        let vm = opencl_vm(&exec, 0);
        let input = case["args"][0]["tensor"].as_str().unwrap();
        let want = case["outputs"][0].as_str().unwrap();
        let (rtol, atol) = tol(case);

        // Stateful: a host input is uploaded by set_input; the output stays on the device.
        let host = upload(input, cpu());
        let fname = case["function"].as_str().unwrap();
        call(
            &func(&vm, "set_input"),
            &[Any::from(fname), Any::from(host.clone())],
        )
        .unwrap();
        call(&func(&vm, "invoke_stateful"), &[Any::from(fname)]).unwrap();
        let out = call(&func(&vm, "get_output"), &[Any::from(fname)]).unwrap();
        let out = Tensor::from_any_view(&out.view(), "output").unwrap();
        assert_eq!(
            out.device(),
            opencl(0),
            "{name}: the output stays on the device"
        );
        assert_matches(name, &out, want, rtol, atol);

        // Direct: main takes a device tensor, as TVM's VM.
        let dev_in = upload(input, opencl(0));
        let out = call(&func(&vm, fname), &[Any::from(dev_in)]).unwrap();
        let out = Tensor::from_any_view(&out.view(), "output").unwrap();
        assert_matches(&format!("{name} (direct)"), &out, want, rtol, atol);
        // Run again: pooled storage is reused, weights uploaded once.
        let buffers = live_buffers();
        let again = call(&func(&vm, fname), &[Any::from(upload(input, opencl(0)))]).unwrap();
        let again = Tensor::from_any_view(&again.view(), "output").unwrap();
        assert_eq!(values(&again), values(&out));
        drop(again);
        assert!(live_buffers() <= buffers + 1, "no storage grows per call");

        // A host tensor given to main directly is refused by the model's own kernel check.
        let e = call(&func(&vm, fname), &[Any::from(host)]).unwrap_err();
        assert!(
            e.message.contains("device_type") && e.message.contains("expected"),
            "{name}: {e:?}"
        );
    }
}

#[test]
fn relax_vm_on_opencl_frees_its_device_memory() {
    let _serial = serial();
    let before = live_buffers();
    {
        let exec = load("mlp.so");
        let vm = opencl_vm(&exec, 0);
        let x = upload("data/mlp.main.in0.npy", opencl(0));
        let out = call(&func(&vm, "main"), &[Any::from(x)]).unwrap();
        assert!(live_buffers() > before);
        drop(out);
    }
    assert_eq!(
        live_buffers(),
        before,
        "weights, storage and outputs are all freed"
    );
}

fn graph_expected() -> Value {
    let text = std::fs::read_to_string(fixture("graph_cl.expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Runs graph_cl.so's executor on `dev` with its input; returns the outputs.
fn run_graph(factory: &Module, dev: tvmrt::abi::DLDevice) -> (Module, Vec<Tensor>) {
    let exec = call(&func(factory, "default"), &[Any::from(dev)]).unwrap();
    let exec = Module::from_view(&exec.view(), "executor").unwrap();
    let blob = std::fs::read(fixture("graph_cl.inputs.bin")).unwrap();
    let inputs = tvmrt::graph::params::load_params(&blob).unwrap();
    for (name, t) in &inputs {
        call(
            &func(&exec, "set_input"),
            &[Any::from(name.as_str()), Any::from(t.clone())],
        )
        .unwrap();
    }
    call(&func(&exec, "run"), &[]).unwrap();
    let n = call(&func(&exec, "get_num_outputs"), &[]).unwrap();
    let outs = (0..n.view().as_i64().unwrap())
        .map(|i| {
            let o = call(&func(&exec, "get_output"), &[Any::from(i)]).unwrap();
            Tensor::from_any_view(&o.view(), "output").unwrap()
        })
        .collect();
    (exec, outs)
}

#[test]
fn classic_graph_model_on_opencl_gives_tvm_0_19_results() {
    let _serial = serial();
    let factory = load("graph_cl.so");
    let want = graph_expected();
    let (exec, outs) = run_graph(&factory, opencl(0));
    assert_eq!(outs.len(), 2);
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(
            o.device(),
            opencl(0),
            "get_output returns the device tensor"
        );
        let w: Vec<f64> = want["outputs"][i]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(
            values(o),
            w,
            "output {i}, as TVM 0.19's OpenCL runtime gave it"
        );
    }
    // get_output into a host tensor copies back.
    let host = Tensor::empty(outs[1].shape(), outs[1].dtype(), cpu()).unwrap();
    call(
        &func(&exec, "get_output"),
        &[Any::from(1i64), Any::from(host.clone())],
    )
    .unwrap();
    assert_eq!(values(&host), values(&outs[1]));
    // A zero-copy input must already be on the graph's device.
    let host = Tensor::empty(&[1, 70], tvmrt::dtype::dtypes::FLOAT32, cpu()).unwrap();
    let e = call(
        &func(&exec, "set_input_zero_copy"),
        &[Any::from("x"), Any::from(host)],
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("the tensor is on cpu:0, the graph runs on opencl:0"),
        "{e:?}"
    );
    let on_device = Tensor::empty(&[1, 70], tvmrt::dtype::dtypes::FLOAT32, opencl(0)).unwrap();
    on_device.copy_from(&outs[0]).unwrap();
    call(
        &func(&exec, "set_input_zero_copy"),
        &[Any::from("x"), Any::from(on_device)],
    )
    .unwrap();
    call(&func(&exec, "run"), &[]).unwrap();
    // The graph places its entries on OpenCL: an executor on the CPU is refused.
    let e = call(&func(&factory, "default"), &[Any::from(cpu())]).unwrap_err();
    assert!(
        e.message
            .contains("places an entry on device type 4 (opencl) and runs on cpu:0"),
        "{e:?}"
    );
}

#[test]
fn profiler_times_opencl_kernels_after_synchronizing() {
    let _serial = serial();
    let case = cases_of("relax")
        .into_iter()
        .find(|c| c["name"].as_str().unwrap().contains("mlp"))
        .expect("the OpenCL MLP case");
    let exec = load(case["library"].as_str().unwrap());
    let vm = call(&func(&exec, "vm_profiler_load_executable"), &[]).unwrap();
    let vm = Module::from_view(&vm.view(), "vm").unwrap();
    let init = [4i64, 0, 2, 1, 0, 2].map(Any::from);
    call(&func(&vm, "vm_initialization"), &init).unwrap();
    let fname = case["function"].as_str().unwrap();
    let x = upload(case["args"][0]["tensor"].as_str().unwrap(), opencl(0));
    let report = call(&func(&vm, "profile"), &[Any::from(fname), Any::from(x)]).unwrap();
    let report: Value = serde_json::from_str(report.view().as_str().unwrap()).unwrap();
    let calls = report["calls"].as_array().unwrap();
    let kernels: Vec<&Value> = calls
        .iter()
        .filter(|c| c["Device"]["string"] == "opencl0")
        .collect();
    assert!(!kernels.is_empty(), "no call timed on opencl0: {calls:?}");
    for k in &kernels {
        assert!(
            k["Duration (us)"]["microseconds"].as_f64().unwrap() > 0.0,
            "{k}"
        );
    }
    assert!(
        report["device_metrics"]["opencl0"]["Duration (us)"]["microseconds"]
            .as_f64()
            .is_some_and(|t| t > 0.0)
    );
}
