//! The graph executor on classic TVM model libraries (`tests/fixtures/graph/`, made by
//! `gen.py`): outputs equal to what TVM v0.19.0's runtime produced (`*.expected.json`, written by
//! `record.py`), every executor and factory function, and bad input.

use std::path::PathBuf;

use serde_json::Value;
use tvmrt::abi::DLDevice;
use tvmrt::graph::params::{load_params, save_params, Params};
use tvmrt::module::{load_from_file, Module};
use tvmrt::object::containers::map::map_entries;
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;
use tvmrt::{Error, Function};

const MODELS: [&str; 7] = [
    "mlp",
    "two_outputs",
    "shared_storage",
    "int_model",
    "f64_model",
    "bool_model",
    "parallel_conv",
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/graph")
}

fn factory(model: &str) -> Module {
    let path = dir().join(format!("{model}.so"));
    load_from_file(path.to_str().unwrap(), "").unwrap()
}

fn func(m: &Module, name: &str) -> Function {
    m.get_function(name, false)
        .unwrap()
        .unwrap_or_else(|| panic!("no function {name}"))
}

fn create(factory: &Module) -> Module {
    let exec = func(factory, "default")
        .call_values(&[Any::from(cpu())])
        .unwrap();
    Module::from_view(&exec.view(), "executor").unwrap()
}

fn inputs(model: &str) -> Params {
    load_params(&std::fs::read(dir().join(format!("{model}.inputs.bin"))).unwrap()).unwrap()
}

fn expected(model: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(format!("{model}.expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A tensor as the recorded JSON shows it: dtype, shape, values.
fn as_json(t: &Tensor) -> Value {
    let bytes = t.to_vec().unwrap();
    let dtype = tvmrt::dtype::dtype_to_string(t.dtype()).unwrap();
    let values: Vec<Value> = match dtype.as_str() {
        "float32" => bytes
            .chunks(4)
            .map(|c| Value::from(f32::from_le_bytes(c.try_into().unwrap()) as f64))
            .collect(),
        "float64" => bytes
            .chunks(8)
            .map(|c| Value::from(f64::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        "int32" => bytes
            .chunks(4)
            .map(|c| Value::from(i32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        "int8" => bytes.iter().map(|&b| Value::from(b as i8)).collect(),
        // Inside tvmrt (and through the tvm-ffi door) a bool is kDLBool, one byte each; TVM
        // 0.19 recorded it as uint1 ("bool" too).
        "bool" => {
            assert_eq!(t.dtype(), tvmrt::dtype::dtypes::BOOL);
            bytes.iter().map(|&b| Value::from(b != 0)).collect()
        }
        other => panic!("unexpected dtype {other}"),
    };
    serde_json::json!({"dtype": dtype, "shape": t.shape(), "values": values})
}

fn set_inputs(exec: &Module, params: &Params) {
    let set = func(exec, "set_input");
    for (name, t) in params {
        set.call_values(&[Any::from(name.as_str()), Any::from(t.clone())])
            .unwrap();
    }
}

fn outputs(exec: &Module) -> Value {
    func(exec, "run").call_values(&[]).unwrap();
    let n = func(exec, "get_num_outputs").call_values(&[]).unwrap();
    let get = func(exec, "get_output");
    let list = (0..n.view().as_i64().unwrap())
        .map(|i| {
            let t = get.call_values(&[Any::from(i)]).unwrap();
            as_json(&Tensor::from_any_view(&t.view(), "output").unwrap())
        })
        .collect();
    Value::Array(list)
}

fn err_of<T>(r: tvmrt::Result<T>) -> Error {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

#[test]
fn every_model_gives_tvm_0_19s_outputs() {
    for model in MODELS {
        let exec = create(&factory(model));
        set_inputs(&exec, &inputs(model));
        let want = expected(model);
        assert_eq!(outputs(&exec), want["outputs"], "{model}");
        if let Some(after) = want.get("after_load_params") {
            let blob = std::fs::read(dir().join(format!("{model}.override.params"))).unwrap();
            func(&exec, "load_params")
                .call_values(&[Any::bytes(&blob)])
                .unwrap();
            assert_eq!(&outputs(&exec), after, "{model} after load_params");
        }
    }
}

#[test]
fn executor_functions_follow_tvm() {
    let f = factory("mlp");
    assert_eq!(f.kind(), "GraphExecutorFactory");
    let exec = create(&f);
    assert_eq!(exec.kind(), "GraphExecutor");
    let call = |name: &str, args: &[Any]| func(&exec, name).call_values(args).unwrap();
    assert_eq!(call("get_num_inputs", &[]).view().as_i64(), Some(5));
    assert_eq!(call("get_num_outputs", &[]).view().as_i64(), Some(1));
    assert_eq!(
        call("get_input_index", &[Any::from("w2")]).view().as_i64(),
        Some(3)
    );
    assert_eq!(
        call("get_input_index", &[Any::from("nope")])
            .view()
            .as_i64(),
        Some(-1)
    );
    // The factory set the saved parameters: get_input returns them.
    let saved = func(&f, "get_graph_params").call_values(&[]).unwrap();
    let saved = map_entries(&saved.view().as_object().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(saved.len(), 4);
    for e in &saved {
        let name = e.key.view().as_str().unwrap().to_string();
        let got = call("get_input", &[Any::from(name.as_str())]);
        let got = Tensor::from_any_view(&got.view(), "input").unwrap();
        let want = Tensor::from_any_view(&e.value.view(), "param").unwrap();
        assert_eq!(got.to_vec().unwrap(), want.to_vec().unwrap(), "{name}");
    }
    // An unknown name is ignored by set_input (as in TVM) and gives None from get_input.
    let x = inputs("mlp").remove(0).1;
    call("set_input", &[Any::from("nope"), Any::from(x.clone())]);
    assert!(call("get_input", &[Any::from("nope")]).view().is_none());
    // By index, then get_output into a tensor of ours.
    call("set_input", &[Any::from(0i64), Any::from(x.clone())]);
    call("run", &[]);
    let out = Tensor::empty(&[1, 3], tvmrt::dtype::dtypes::FLOAT32, cpu()).unwrap();
    call("get_output", &[Any::from(0i64), Any::from(out.clone())]);
    assert_eq!(as_json(&out), expected("mlp")["outputs"][0]);
    // get_input_info: every input (the factory's parameters were set, not loaded).
    let info = call("get_input_info", &[]);
    let info = map_entries(&info.view().as_object().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(info[0].key.view().as_str(), Some("shape"));
    let shapes = map_entries(&info[0].value.view().as_object().unwrap())
        .unwrap()
        .unwrap();
    let names: Vec<String> = shapes
        .iter()
        .map(|e| e.key.view().as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["x", "w1", "b1", "w2", "b2"]);
    let dtypes = map_entries(&info[1].value.view().as_object().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(dtypes[0].value.view().as_str(), Some("float32"));
    // After load_params, its names are parameters and leave get_input_info.
    let blob = save_params(&vec![("w1".to_string(), x_like(&[8, 4], 0.0))]).unwrap();
    call("load_params", &[Any::bytes(&blob)]);
    let info = call("get_input_info", &[]);
    let info = map_entries(&info.view().as_object().unwrap())
        .unwrap()
        .unwrap();
    let shapes = map_entries(&info[0].value.view().as_object().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(shapes.len(), 4);
    // The graph JSON comes back as saved.
    let json = func(&f, "get_graph_json").call_values(&[]).unwrap();
    let on_disk = std::fs::read_to_string(dir().join("mlp.json")).unwrap();
    assert_eq!(json.view().as_str().unwrap(), on_disk.trim_end());
}

fn x_like(shape: &[i64], v: f32) -> Tensor {
    let t = Tensor::empty(shape, tvmrt::dtype::dtypes::FLOAT32, cpu()).unwrap();
    let n: i64 = shape.iter().product();
    let bytes: Vec<u8> = (0..n).flat_map(|_| v.to_le_bytes()).collect();
    t.copy_from_bytes(&bytes).unwrap();
    t
}

#[test]
fn remove_params_leaves_zero_weights() {
    let f = factory("mlp");
    let bare = func(&f, "remove_params").call_values(&[]).unwrap();
    let bare = Module::from_view(&bare.view(), "bare").unwrap();
    let params = func(&bare, "get_graph_params").call_values(&[]).unwrap();
    let entries = map_entries(&params.view().as_object().unwrap())
        .unwrap()
        .unwrap();
    assert!(entries.is_empty());
    let exec = create(&bare);
    set_inputs(&exec, &inputs("mlp"));
    // All weights and biases zero: relu(0) = 0, then 0.
    assert_eq!(
        outputs(&exec)[0]["values"],
        serde_json::json!([0.0, 0.0, 0.0])
    );
    // The same parameters loaded back give TVM's outputs again.
    let saved = func(&f, "get_graph_params").call_values(&[]).unwrap();
    let saved = map_entries(&saved.view().as_object().unwrap())
        .unwrap()
        .unwrap();
    let params: Params = saved
        .iter()
        .map(|e| {
            (
                e.key.view().as_str().unwrap().to_string(),
                Tensor::from_any_view(&e.value.view(), "p").unwrap(),
            )
        })
        .collect();
    func(&exec, "load_params")
        .call_values(&[Any::bytes(&save_params(&params).unwrap())])
        .unwrap();
    assert_eq!(outputs(&exec), expected("mlp")["outputs"]);
}

#[test]
fn zero_copy_and_shared_params() {
    let f = factory("mlp");
    let a = create(&f);
    let b = create(&f);
    let x = inputs("mlp").remove(0).1;
    // Zero copy: the executor reads our tensor's memory; writing it changes the next run.
    func(&a, "set_input_zero_copy")
        .call_values(&[Any::from("x"), Any::from(x.clone())])
        .unwrap();
    assert_eq!(outputs(&a), expected("mlp")["outputs"]);
    let got = func(&a, "get_input")
        .call_values(&[Any::from("x")])
        .unwrap();
    let got = Tensor::from_any_view(&got.view(), "x").unwrap();
    assert_eq!(got.data_ptr(), x.data_ptr());
    x.copy_from_bytes(&[0u8; 16]).unwrap();
    let zero_in = outputs(&a);
    assert_ne!(zero_in, expected("mlp")["outputs"]);
    // A misaligned or wrongly shaped tensor is refused.
    let wrong = x_like(&[4, 1], 0.0);
    let e =
        err_of(func(&a, "set_input_zero_copy").call_values(&[Any::from("x"), Any::from(wrong)]));
    assert!(e.message.contains("shape differs"), "{}", e.message);
    // share_params: b's weights become a's tensors.
    let blob = std::fs::read(dir().join("mlp.override.params")).unwrap();
    func(&b, "share_params")
        .call_values(&[Any::from(a.clone()), Any::bytes(&blob)])
        .unwrap();
    let ta = func(&a, "get_input")
        .call_values(&[Any::from("b2")])
        .unwrap();
    let tb = func(&b, "get_input")
        .call_values(&[Any::from("b2")])
        .unwrap();
    let (ta, tb) = (
        Tensor::from_any_view(&ta.view(), "a").unwrap(),
        Tensor::from_any_view(&tb.view(), "b").unwrap(),
    );
    assert_eq!(ta.data_ptr(), tb.data_ptr());
    let e =
        err_of(func(&b, "share_params").call_values(&[Any::from(f.clone()), Any::bytes(&blob)]));
    assert!(
        e.message.contains("expected a GraphExecutor module"),
        "{}",
        e.message
    );
}

#[test]
fn graph_executor_create_with_a_library() {
    let f = factory("two_outputs");
    let lib = f.imports().remove(0);
    let json = func(&f, "get_graph_json").call_values(&[]).unwrap();
    let create = tvmrt::function::registry::get_required("tvm.graph_executor.create").unwrap();
    let exec = create
        .call_values(&[
            json.clone(),
            Any::from(lib.clone()),
            Any::from(1i64),
            Any::from(0i64),
        ])
        .unwrap();
    let exec = Module::from_view(&exec.view(), "exec").unwrap();
    set_inputs(&exec, &inputs("two_outputs"));
    assert_eq!(outputs(&exec), expected("two_outputs")["outputs"]);
    // A device type without a back end is refused by name.
    let e = err_of(create.call_values(&[json, Any::from(lib), Any::from(10i64), Any::from(0i64)]));
    assert!(
        e.message.contains("device rocm:0 has no back end"),
        "{}",
        e.message
    );
}

/// An edit of the mlp graph's JSON.
type GraphEdit = Box<dyn Fn(&mut Value)>;

/// `tvm.graph_executor.create` on an edited copy of the mlp graph.
fn create_err(edit: impl Fn(&mut Value)) -> Error {
    let f = factory("mlp");
    let lib = f.imports().remove(0);
    let mut graph: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("mlp.json")).unwrap()).unwrap();
    edit(&mut graph);
    let create = tvmrt::function::registry::get_required("tvm.graph_executor.create").unwrap();
    err_of(create.call_values(&[
        Any::from(graph.to_string()),
        Any::from(lib),
        Any::from(1i64),
        Any::from(0i64),
    ]))
}

#[test]
fn bad_graphs_are_refused_naming_the_field() {
    let cases: Vec<(GraphEdit, &str)> =
        vec![
        (
            Box::new(|g| {
                g.as_object_mut().unwrap().remove("arg_nodes");
            }),
            "missing `arg_nodes`",
        ),
        (
            Box::new(|g| {
                g["nodes"][5]["attrs"].as_object_mut().unwrap().remove("func_name");
            }),
            "nodes[5] (`tvmgen_default_fused_nn_dense_add_nn_relu`): `attrs` has no `func_name`",
        ),
        (Box::new(|g| g["extra"] = Value::from(1)), "unknown key `extra`"),
        (
            Box::new(|g| g["nodes"][6]["inputs"][0][0] = Value::from(99)),
            "nodes[6].inputs[0] points to node 99 past the end (7 nodes)",
        ),
        (
            Box::new(|g| g["attrs"]["storage_id"][1][2] = Value::from(1000)),
            "`attrs.storage_id` 1000 is out of range",
        ),
        (
            Box::new(|g| g["attrs"]["storage_id"][1][2] = Value::from(-1)),
            "`attrs.storage_id[1][2]` must be a non-negative integer",
        ),
        (
            Box::new(|g| g["heads"][0][1] = Value::from(3)),
            "heads[0] uses output 3 of node 6",
        ),
        (
            Box::new(|g| g["nodes"][5]["attrs"]["func_name"] = Value::from("not_there")),
            "calls `not_there`, which the library does not define",
        ),
        (
            Box::new(|g| g["attrs"]["dltype"][1][0] = Value::from("float31")),
            "`attrs.dltype[1][0]`",
        ),
        (Box::new(|g| *g = Value::from(3)), "the top level must be an object"),
    ];
    for (edit, want) in cases {
        let e = create_err(edit);
        assert!(e.message.contains(want), "want `{want}` in `{}`", e.message);
    }
}

#[test]
fn shapes_that_disagree_with_the_kernel_fail_at_run() {
    // The graph says x is (1, 5); the kernel was compiled for (1, 4).
    let f = factory("mlp");
    let lib = f.imports().remove(0);
    let mut graph: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("mlp.json")).unwrap()).unwrap();
    graph["attrs"]["shape"][1][0] = serde_json::json!([1, 5]);
    let create = tvmrt::function::registry::get_required("tvm.graph_executor.create").unwrap();
    let exec = create
        .call_values(&[
            Any::from(graph.to_string()),
            Any::from(lib),
            Any::from(1i64),
            Any::from(0i64),
        ])
        .unwrap();
    let exec = Module::from_view(&exec.view(), "exec").unwrap();
    let e = err_of(func(&exec, "run").call_values(&[]));
    assert!(
        e.message
            .contains("node 5 (`tvmgen_default_fused_nn_dense_add_nn_relu`)")
            && e.message.contains("shape mismatch"),
        "{}",
        e.message
    );
}

#[test]
fn bad_calls_and_params_are_errors() {
    let exec = create(&factory("mlp"));
    let call = |name: &str, args: &[Any]| func(&exec, name).call_values(args);
    let e = err_of(call("get_output", &[Any::from(5i64)]));
    assert!(
        e.message
            .contains("output index 5 is out of range (1 outputs)"),
        "{}",
        e.message
    );
    let e = err_of(call("get_input", &[Any::from(9i64)]));
    assert!(
        e.message.contains("input index 9 is out of range"),
        "{}",
        e.message
    );
    let ints = Tensor::empty(&[1, 4], tvmrt::dtype::dtypes::INT32, cpu()).unwrap();
    let e = err_of(call("set_input", &[Any::from("x"), Any::from(ints)]));
    assert!(
        e.message
            .contains("dtype int32 differs from the graph's float32"),
        "{}",
        e.message
    );
    let e = err_of(call(
        "set_input",
        &[Any::from("x"), Any::from(x_like(&[1, 5], 1.0))],
    ));
    assert!(e.message.contains("holds 5 elements"), "{}", e.message);
    let e = err_of(call("set_input", &[Any::from("x")]));
    assert!(e.message.contains("missing argument 1"), "{}", e.message);
    let e = err_of(call("set_input", &[Any::from("x"), Any::from(3i64)]));
    assert_eq!(e.kind, "TypeError");
    let blob = std::fs::read(dir().join("mlp.override.params")).unwrap();
    let mut bad_magic = blob.clone();
    bad_magic[0] ^= 1;
    let e = err_of(call("load_params", &[Any::bytes(&bad_magic)]));
    assert!(e.message.contains("bad magic"), "{}", e.message);
    for cut in [0, 7, 16, 30, blob.len() - 1] {
        let e = err_of(call("load_params", &[Any::bytes(&blob[..cut])]));
        assert!(
            e.message.starts_with("invalid parameters blob"),
            "{cut}: {}",
            e.message
        );
    }
    let e = err_of(call("get_output", &[Any::from("nope")]));
    assert!(
        e.message.contains("Invalid output node: nope"),
        "{}",
        e.message
    );
}

#[test]
fn truncated_factory_payloads_are_refused() {
    let f = factory("int_model");
    let saved = f.save_to_bytes().unwrap();
    let load =
        tvmrt::function::registry::get_required("ffi.Module.load_from_bytes.GraphExecutorFactory")
            .unwrap();
    let m = load.call_values(&[Any::bytes(&saved)]).unwrap();
    let m = Module::from_view(&m.view(), "factory").unwrap();
    assert_eq!(m.save_to_bytes().unwrap(), saved);
    for cut in 0..saved.len() {
        let e = err_of(load.call_values(&[Any::bytes(&saved[..cut])]));
        assert!(!e.message.is_empty());
    }
    let mut extra = saved.clone();
    extra.push(0);
    let e = err_of(load.call_values(&[Any::bytes(&extra)]));
    assert!(e.message.contains("trailing"), "{}", e.message);
}

#[test]
fn one_executor_from_four_threads() {
    let exec = create(&factory("int_model"));
    set_inputs(&exec, &inputs("int_model"));
    let want = expected("int_model")["outputs"].clone();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    assert_eq!(outputs(&exec), want);
                }
            });
        }
    });
}

#[test]
fn devices_without_a_back_end_are_refused() {
    let f = factory("mlp");
    let gpu = DLDevice {
        device_type: tvmrt::abi::DLDeviceType(10),
        device_id: 0,
    };
    let e = err_of(func(&f, "default").call_values(&[Any::from(gpu)]));
    assert!(
        e.message
            .contains("graph executor device: device rocm:0 has no back end"),
        "{}",
        e.message
    );
    let e = err_of(func(&f, "default").call_values(&[]));
    assert!(e.message.contains("no device"), "{}", e.message);
}

/// The debug executor of `model` (the factory's `debug_create`), with the recorded inputs set.
fn debug_exec(model: &str) -> Module {
    let f = factory(model);
    let exec = func(&f, "debug_create")
        .call_values(&[Any::from("default"), Any::from(cpu())])
        .unwrap();
    let exec = Module::from_view(&exec.view(), "debug executor").unwrap();
    set_inputs(&exec, &inputs(model));
    exec
}

fn ints(v: &[i64]) -> Vec<Any> {
    v.iter().map(|&i| Any::from(i)).collect()
}

#[test]
fn debug_executor_times_and_reads_every_node() {
    let model = "parallel_conv";
    let exec = debug_exec(model);
    let want = expected(model);
    let graph: Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join(format!("{model}.json"))).unwrap(),
    )
    .unwrap();
    let nodes = graph["nodes"].as_array().unwrap();
    // Every node's output, as TVM 0.19's debug_get_output gave them; by name too.
    let get = func(&exec, "debug_get_output");
    for (i, node) in nodes.iter().enumerate() {
        let t = get.call_values(&[Any::from(i as i64)]).unwrap();
        let t = Tensor::from_any_view(&t.view(), "output").unwrap();
        assert_eq!(as_json(&t), want["debug"]["node_outputs"][i], "node {i}");
        let name = node["name"].as_str().unwrap();
        let by_name = get.call_values(&[Any::from(name)]).unwrap();
        let by_name = Tensor::from_any_view(&by_name.view(), "output").unwrap();
        assert_eq!(
            as_json(&by_name),
            want["debug"]["node_outputs"][i],
            "node `{name}`"
        );
    }
    // Into a tensor of ours.
    let out = Tensor::empty(&[1, 10], tvmrt::dtype::dtypes::FLOAT32, cpu()).unwrap();
    get.call_values(&[Any::from("dense"), Any::from(out.clone())])
        .unwrap();
    assert_eq!(as_json(&out), want["outputs"][0]);

    // run_individual: an int64 node count, then `repeat` doubles per node; zero for inputs.
    let bytes = func(&exec, "run_individual")
        .call_values(&ints(&[2, 3, 0, 100, 0, 1]))
        .unwrap();
    let b = bytes.view().as_byte_slice().unwrap().to_vec();
    assert_eq!(
        i64::from_ne_bytes(b[..8].try_into().unwrap()),
        nodes.len() as i64
    );
    assert_eq!(b.len(), 8 + nodes.len() * 3 * 8);
    let times: Vec<f64> = b[8..]
        .chunks(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        for t in &times[i * 3..i * 3 + 3] {
            if node["op"] == "null" {
                assert_eq!(*t, 0.0, "input node {i}");
            } else {
                assert!(*t > 0.0 && *t < 1.0, "node {i}: {t} s");
            }
        }
    }
    let timed: Vec<usize> = (0..nodes.len()).filter(|&i| times[i * 3] > 0.0).collect();
    let want_timed: Vec<usize> = want["debug"]["timed_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(timed, want_timed, "the nodes TVM 0.19 times");
    let one = func(&exec, "run_individual_node")
        .call_values(&ints(&[6, 1, 4, 0, 100, 0, 1]))
        .unwrap();
    assert_eq!(one.view().as_byte_slice().unwrap().len(), 4 * 8);
    let e =
        err_of(func(&exec, "run_individual_node").call_values(&ints(&[99, 1, 1, 0, 100, 0, 1])));
    assert_eq!(e.kind, "IndexError");
    let e = err_of(func(&exec, "run_individual").call_values(&ints(&[1, 0, 0, 100, 0, 1])));
    assert!(e.message.contains("repeat must be > 0"), "{e}");

    // execute_node, then get_node_output of that node (only).
    func(&exec, "execute_node")
        .call_values(&[Any::from(6i64)])
        .unwrap();
    let t = func(&exec, "get_node_output")
        .call_values(&ints(&[6, 0]))
        .unwrap();
    let t = Tensor::from_any_view(&t.view(), "output").unwrap();
    assert_eq!(as_json(&t), want["debug"]["node_outputs"][6]);
    let e = err_of(func(&exec, "get_node_output").call_values(&ints(&[5, 0])));
    assert!(e.message.contains("not the last node executed"), "{e}");
    let e = err_of(func(&exec, "get_node_output").call_values(&ints(&[6, 1])));
    assert_eq!(e.kind, "IndexError");

    // profile: one row per call, as TVM 0.19 reports them (names, argument shapes, hashes).
    let report = func(&exec, "profile_rpc").call_values(&[]).unwrap();
    let report: Value = serde_json::from_str(report.view().as_str().unwrap()).unwrap();
    let calls: Vec<Value> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            serde_json::json!([
                c["Name"]["string"],
                c["Argument Shapes"]["string"],
                c["Hash"]["string"],
                c["Count"]["count"]
            ])
        })
        .collect();
    assert_eq!(Value::Array(calls), want["debug"]["profile_calls"]);
    for c in report["calls"].as_array().unwrap() {
        assert!(c["Duration (us)"]["microseconds"].as_f64().unwrap() > 0.0);
        assert!(c["Percent"]["percent"].as_f64().unwrap() > 0.0);
    }
    let obj = func(&exec, "profile").call_values(&[]).unwrap();
    let table = tvmrt::function::registry::get("runtime.profiling.AsTable")
        .unwrap()
        .call_values(&[obj, Any::from(true), Any::from(true), Any::from(true)])
        .unwrap();
    let table = table.view().as_str().unwrap().to_string();
    assert!(table.starts_with("Name"), "{table}");
    assert!(
        table.contains("tvmgen_default_fused_nn_conv2d_divide_max"),
        "{table}"
    );
    assert!(table.contains("Executor: Graph"), "{table}");
}

#[test]
fn debug_executor_from_json_and_only_when_asked() {
    let model = "bool_model";
    let lib = factory(model).imports()[0].clone();
    let json = std::fs::read_to_string(dir().join(format!("{model}.json"))).unwrap();
    let create = tvmrt::function::registry::get("tvm.graph_executor_debug.create").unwrap();
    let exec = create
        .call_values(&[
            Any::from(json.as_str()),
            Any::from(lib),
            Any::from(1i64),
            Any::from(0i64),
        ])
        .unwrap();
    let exec = Module::from_view(&exec.view(), "debug executor").unwrap();
    assert_eq!(exec.kind(), "GraphExecutor");
    set_inputs(&exec, &inputs(model));
    let got = func(&exec, "debug_get_output")
        .call_values(&[Any::from("greater")])
        .unwrap();
    let got = Tensor::from_any_view(&got.view(), "output").unwrap();
    assert_eq!(got.dtype(), tvmrt::dtype::dtypes::BOOL);
    assert_eq!(as_json(&got), expected(model)["debug"]["node_outputs"][4]);
    let e = err_of(func(&exec, "debug_get_output").call_values(&[Any::from("nope")]));
    assert!(e.message.contains("cannot find nope"), "{e}");
    // A plain executor has none of the debug functions.
    let plain = create_exec(model);
    assert!(plain
        .get_function("run_individual", false)
        .unwrap()
        .is_none());
    let e = err_of(
        func(&factory(model), "debug_create").call_values(&[Any::from("other"), Any::from(cpu())]),
    );
    assert!(e.message.contains("not `other`"), "{e}");
}

fn create_exec(model: &str) -> Module {
    create(&factory(model))
}
