//! Runs every Relax model of the fixtures (built by TVM 0.27, outputs recorded from TVM's own
//! VM) through tvmrt's VM, and checks the executable loader against TVM's own listing and
//! against truncated or corrupt bytes.

mod module_support;

use module_support::{fixtures, load_vm, new_vm, read_npy};
use serde_json::Value;
use tvmrt::abi::DLDataType;
use tvmrt::dtype::dtype;
use tvmrt::module::{load_from_file, Module};
use tvmrt::tensor::Tensor;
use tvmrt::value::{Any, AnyView};
use tvmrt::vm::Executable;

fn manifest() -> Value {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn dl_dtype(j: &Value) -> DLDataType {
    let d = &j["dlpack_dtype"];
    dtype(
        d["code"].as_u64().unwrap() as u8,
        d["bits"].as_u64().unwrap() as u8,
        d["lanes"].as_u64().unwrap() as u16,
    )
}

fn input_tensor(j: &Value) -> Tensor {
    let npy = read_npy(&fixtures().join(j["file"].as_str().unwrap()));
    let shape: Vec<i64> = j["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(npy.shape, shape);
    let t = Tensor::empty(&shape, dl_dtype(j), tvmrt::tensor::layout::cpu()).unwrap();
    t.copy_from_bytes(&npy.data).unwrap();
    t
}

/// The tensors of a result: a tensor, or a (nested) tuple of tensors, depth-first.
fn flatten(v: &AnyView<'_>, out: &mut Vec<Tensor>) {
    let obj = v.as_object().expect("an object result");
    if let Some(items) = tvmrt::vm::array::array_items(&obj) {
        for i in items {
            flatten(i, out);
        }
    } else {
        out.push(Tensor::from_object(obj).unwrap());
    }
}

fn to_f64(descr: &str, bytes: &[u8]) -> Vec<f64> {
    match descr {
        "<f4" => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        "<f8" => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        d => panic!("unexpected output dtype {d}"),
    }
}

fn check_close(id: &str, got: &Tensor, want: &Value, rtol: f64, atol: f64) {
    let npy = read_npy(&fixtures().join(want["file"].as_str().unwrap()));
    assert_eq!(got.shape(), &npy.shape[..], "{id}: shape");
    assert_eq!(got.dtype(), dl_dtype(want), "{id}: dtype");
    let g = to_f64(&npy.descr, &got.to_vec().unwrap());
    let w = to_f64(&npy.descr, &npy.data);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= atol + rtol * b.abs(),
            "{id}: element {i}: tvmrt {a}, TVM {b}"
        );
    }
}

fn relax_cases() -> Vec<Value> {
    manifest()["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["convention"] == "relax_vm")
        .cloned()
        .collect()
}

fn run_case(case: &Value, allocator: i64) -> tvmrt::Result<Vec<Tensor>> {
    let (_root, vm) = load_vm(case["library"].as_str().unwrap(), allocator);
    let f = vm
        .get_function(case["function"].as_str().unwrap(), false)
        .unwrap()
        .unwrap();
    let inputs: Vec<Any> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| Any::from(input_tensor(j)))
        .collect();
    let views: Vec<AnyView<'_>> = inputs.iter().map(Any::view).collect();
    let out = f.call(&views)?;
    let mut tensors = Vec::new();
    flatten(&out.view(), &mut tensors);
    Ok(tensors)
}

#[test]
fn every_relax_model_matches_tvm() {
    let cases = relax_cases();
    let libs: std::collections::BTreeSet<&str> = cases
        .iter()
        .map(|c| c["library"].as_str().unwrap())
        .collect();
    for lib in [
        "mlp.so",
        "cnn.so",
        "dyn_batch.so",
        "tuple_ret.so",
        "cond.so",
        "subfunc.so",
    ] {
        assert!(libs.contains(lib), "fixture {lib} has no relax_vm case");
    }
    let mut checked = 0;
    for case in &cases {
        let id = case["id"].as_str().unwrap();
        if !case["expect_error"].is_null() {
            continue;
        }
        for allocator in [2, 1] {
            let outs = run_case(case, allocator).unwrap_or_else(|e| panic!("{id}: {e}"));
            let want = case["outputs"].as_array().unwrap();
            assert_eq!(outs.len(), want.len(), "{id}: number of outputs");
            let rtol = case["tolerance"]["rtol"].as_f64().unwrap();
            let atol = case["tolerance"]["atol"].as_f64().unwrap();
            for (g, w) in outs.iter().zip(want) {
                check_close(id, g, w, rtol, atol);
            }
        }
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} cases ran");
}

#[test]
fn input_mismatches_fail_with_tvms_message_naming_the_parameter() {
    let mut checked = 0;
    for case in relax_cases() {
        let id = case["id"].as_str().unwrap();
        let want = &case["expect_error"];
        if want.is_null() {
            continue;
        }
        let e = match run_case(&case, 2) {
            Ok(_) => panic!("{id}: the call succeeded"),
            Err(e) => e,
        };
        assert_eq!(e.kind, want["kind"].as_str().unwrap(), "{id}: {e}");
        assert_eq!(e.message, want["message"].as_str().unwrap(), "{id}");
        assert!(e.message.contains("param="), "{id}: {e}");
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} error cases");
}

#[test]
fn executable_listing_matches_tvm() {
    for lib in ["mlp", "cnn", "dyn_batch", "tuple_ret", "cond", "subfunc"] {
        let path = fixtures().join(format!("{lib}.so"));
        let root = load_from_file(path.to_str().unwrap(), "").unwrap();
        let call = |name: &str| -> String {
            let f = root.get_function(name, false).unwrap().unwrap();
            f.call(&[]).unwrap().view().as_str().unwrap().to_string()
        };
        let text = format!("{}\n{}", call("stats"), call("as_text"));
        let want = std::fs::read_to_string(fixtures().join(format!("{lib}.vm.txt"))).unwrap();
        assert_eq!(text, want, "{lib}");
        let has = root.get_function("has_function", false).unwrap().unwrap();
        let yes = has.call(&[AnyView::from(&Any::from("main"))]).unwrap();
        assert_eq!(yes.view().as_bool(), Some(true));
        let no = has.call(&[AnyView::from(&Any::from("nope"))]).unwrap();
        assert_eq!(no.view().as_bool(), Some(false));
    }
}

/// The executable payload of a model's blob (offsets recorded in the manifest).
fn payload(lib: &str) -> Vec<u8> {
    let m = manifest();
    let info = &m["libraries"][lib]["library_bin"];
    let blob = std::fs::read(fixtures().join(info["file"].as_str().unwrap())).unwrap();
    let module = &info["modules"][0];
    assert_eq!(module["kind"], "relax.VMExecutable");
    let off = module["payload_offset"].as_u64().unwrap() as usize;
    let size = module["payload_size"].as_u64().unwrap() as usize;
    blob[off..off + size].to_vec()
}

#[test]
fn executable_decodes_and_saves_its_exact_bytes() {
    let bytes = payload("mlp.so");
    let exec = Executable::from_bytes(&bytes).unwrap();
    assert!(exec.has_memory_scopes);
    assert_eq!(exec.funcs.len(), 11);
    let (_, main) = exec.func("main").unwrap();
    assert_eq!(main.param_names, vec!["x".to_string()]);
    assert_eq!(main.num_args, 1);
    assert_eq!(exec.constants.len(), 12);
    let m = tvmrt::vm::load_executable(&bytes).unwrap();
    assert_eq!(m.save_to_bytes().unwrap(), bytes);
}

#[test]
fn truncated_executables_are_errors() {
    for lib in ["mlp.so", "cond.so"] {
        let bytes = payload(lib);
        for n in 0..bytes.len() {
            let e = match Executable::from_bytes(&bytes[..n]) {
                Ok(_) => panic!("{lib}: {n} of {} bytes loaded", bytes.len()),
                Err(e) => e,
            };
            assert!(
                e.message.contains("relax.VMExecutable"),
                "{lib} at {n}: {e}"
            );
        }
    }
}

#[test]
fn corrupt_executables_never_crash() {
    let bytes = payload("mlp.so");
    // Deterministic xorshift: flip one byte at a time, and overwrite 8-byte words with
    // extreme values (lengths, counts, indexes).
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for _ in 0..3000 {
        let mut b = bytes.clone();
        let at = (next() % b.len() as u64) as usize;
        b[at] ^= (next() % 255 + 1) as u8;
        let _ = Executable::from_bytes(&b);
    }
    for at in (0..bytes.len().saturating_sub(8)).step_by(3) {
        for v in [u64::MAX, 1 << 62, 0x7fff_ffff, 1 << 54] {
            let mut b = bytes.clone();
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            let _ = Executable::from_bytes(&b);
        }
    }
}

#[test]
fn bad_magic_and_version_are_clear_errors() {
    let mut bytes = payload("mlp.so");
    let mut bad = bytes.clone();
    bad[0] ^= 0xff;
    let e = Executable::from_bytes(&bad).err().unwrap();
    assert!(e.message.contains("bad magic"), "{e}");
    // The version string "0.14" follows the magic and its length.
    assert_eq!(&bytes[16..20], b"0.14");
    bytes[19] = b'9';
    let e = Executable::from_bytes(&bytes).err().unwrap();
    assert!(
        e.message
            .contains("unsupported relax.VMExecutable format version \"0.19\""),
        "{e}"
    );
    // Through the registered loader too, as the library loader calls it.
    let f =
        tvmrt::function::registry::get("ffi.Module.load_from_bytes.relax.VMExecutable").unwrap();
    let e = f.call(&[AnyView::from(&Any::bytes(&bytes))]).unwrap_err();
    assert!(e.message.contains("format version"), "{e}");
}

fn call_vm(vm: &Module, name: &str, args: &[Any]) -> tvmrt::Result<Any> {
    let f = vm.get_function(name, false)?.unwrap();
    f.call_values(args)
}

#[test]
fn stateful_interface_and_introspection() {
    let case = relax_cases()
        .into_iter()
        .find(|c| c["id"] == "tuple_ret.main")
        .unwrap();
    let (_root, vm) = load_vm("tuple_ret.so", 2);
    let arity = call_vm(&vm, "get_function_arity", &[Any::from("main")]).unwrap();
    assert_eq!(arity.view().as_i64(), Some(2));
    for (i, want) in ["x", "y"].iter().enumerate() {
        let n = call_vm(
            &vm,
            "get_function_param_name",
            &[Any::from("main"), Any::from(i as i64)],
        )
        .unwrap();
        assert_eq!(n.view().as_str(), Some(*want));
    }
    let e = call_vm(
        &vm,
        "get_function_param_name",
        &[Any::from("main"), Any::from(2i64)],
    )
    .unwrap_err();
    assert_eq!(e.message, "Invalid index for main (2 out of 2)");
    let e = call_vm(&vm, "get_function_arity", &[Any::from("nope")]).unwrap_err();
    assert_eq!(e.message, "Unknown function: nope");

    let e = call_vm(&vm, "invoke_stateful", &[Any::from("main")]).unwrap_err();
    assert!(e.message.contains("No inputs set"), "{e}");
    let mut args = vec![Any::from("main")];
    args.extend(
        case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| Any::from(input_tensor(j))),
    );
    let e = call_vm(&vm, "set_input", &args[..2]).unwrap_err();
    assert!(e.message.contains("number of provided parameters"), "{e}");
    call_vm(&vm, "set_input", &args).unwrap();
    let e = call_vm(&vm, "get_output", &[Any::from("main"), Any::from(0i64)]).unwrap_err();
    assert!(e.message.contains("use `invoke_stateful`"), "{e}");
    call_vm(&vm, "invoke_stateful", &[Any::from("main")]).unwrap();
    let n = call_vm(&vm, "get_output_arity", &[Any::from("main")]).unwrap();
    assert_eq!(n.view().as_i64(), Some(3));
    let e = call_vm(&vm, "get_output", &[Any::from("main")]).unwrap_err();
    assert!(e.message.contains("cannot return a tuple"), "{e}");
    let outs = case["outputs"].as_array().unwrap();
    for (i, want) in outs.iter().enumerate() {
        let t = call_vm(&vm, "get_output", &[Any::from("main"), Any::from(i as i64)]).unwrap();
        let t = Tensor::from_any_view(&t.view(), "output").unwrap();
        check_close("tuple_ret.stateful", &t, want, 1e-5, 1e-6);
        let n = call_vm(
            &vm,
            "get_output_arity",
            &[Any::from("main"), Any::from(i as i64)],
        )
        .unwrap();
        assert_eq!(n.view().as_i64(), Some(-1));
    }
    let e = call_vm(&vm, "get_output", &[Any::from("main"), Any::from(3i64)]).unwrap_err();
    assert_eq!(e.message, "Invalid index (3 >= 3).");
    let e = call_vm(
        &vm,
        "get_output",
        &[Any::from("main"), Any::from(0i64), Any::from(0i64)],
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        "Attempted to index into an object that is not an Array."
    );
}

#[test]
fn initialized_vm_runs_and_says_which_step_failed() {
    let path = fixtures().join("mlp.so");
    let root = load_from_file(path.to_str().unwrap(), "").unwrap();
    let vm = tvmrt::vm::initialized_vm(&root, tvmrt::tensor::layout::cpu()).unwrap();
    let x = Tensor::empty(&[1, 16], dtype(2, 32, 1), tvmrt::tensor::layout::cpu()).unwrap();
    x.copy_from_bytes(&[0u8; 64]).unwrap();
    let y = call_vm(&vm, "main", &[Any::from(x)]).unwrap();
    let y = Tensor::from_any_view(&y.view(), "y").unwrap();
    assert_eq!(y.shape(), &[1, 8]);

    let rocm = tvmrt::device::parse_device("rocm:0").unwrap();
    let e = tvmrt::vm::initialized_vm(&root, rocm).unwrap_err();
    assert!(
        e.message
            .starts_with("initializing the Relax VM: vm_initialization: device rocm:0"),
        "{e}"
    );
    let kernels = fixtures().join("add_dyn.so");
    let lib = load_from_file(kernels.to_str().unwrap(), "").unwrap();
    let e = tvmrt::vm::initialized_vm(&lib, tvmrt::tensor::layout::cpu()).unwrap_err();
    assert_eq!(e.message, "the module is not a Relax VM executable");
}

#[test]
fn vm_needs_initialization_and_checks_arity() {
    let path = fixtures().join("mlp.so");
    let root = load_from_file(path.to_str().unwrap(), "").unwrap();
    let vm = new_vm(&root);
    let e = call_vm(&vm, "main", &[]).unwrap_err();
    assert!(e.message.contains("vm_initialization"), "{e}");
    let e = call_vm(
        &vm,
        "vm_initialization",
        &[1i64.into(), 0i64.into(), 7i64.into()],
    )
    .unwrap_err();
    assert!(e.message.contains("allocator type 7"), "{e}");
    let e = call_vm(
        &vm,
        "vm_initialization",
        &[10i64.into(), 0i64.into(), 2i64.into()],
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("vm_initialization: device rocm:0 has no back end"),
        "{e}"
    );
    call_vm(
        &vm,
        "vm_initialization",
        &[1i64.into(), 0i64.into(), 2i64.into()],
    )
    .unwrap();
    let e = call_vm(&vm, "main", &[]).unwrap_err();
    assert_eq!(
        e.message,
        "Invoking function main expects 1 arguments (x), but 0 arguments were provided."
    );
    let e = call_vm(&vm, "main", &[Any::from(3i64)]).unwrap_err();
    assert!(e.message.contains("expect a Tensor but get int"), "{e}");
    assert!(vm.get_function("nope", false).unwrap().is_none());
    // A packed-function entry of the table is not a VM function.
    assert!(vm.get_function("matmul", false).is_err());
}

#[test]
fn pooled_allocator_reuses_storage_across_calls() {
    let case = relax_cases()
        .into_iter()
        .find(|c| c["id"] == "mlp.main")
        .unwrap();
    let (_root, vm) = load_vm("mlp.so", 2);
    let x = Any::from(input_tensor(&case["inputs"][0]));
    let main = vm.get_function("main", false).unwrap().unwrap();
    let first = main.call(&[x.view()]).unwrap();
    drop(first);
    let state = vm
        .downcast::<tvmrt::vm::VmModule>()
        .unwrap()
        .state()
        .unwrap();
    let blocks = state.allocator(0).unwrap().pooled_blocks();
    for _ in 0..5 {
        let y = main.call(&[x.view()]).unwrap();
        let y = Tensor::from_any_view(&y.view(), "y").unwrap();
        check_close("mlp.repeat", &y, &case["outputs"][0], 1e-5, 1e-6);
        // Every storage, the output's too once dropped, went back to the pool and was
        // handed out again: the pool does not grow.
        assert_eq!(state.allocator(0).unwrap().pooled_blocks(), blocks);
    }
    // MLP main needs two 4096-byte blocks at its peak (TVM's planner reuses the first for
    // the output).
    assert_eq!(blocks, 2);
    // While an output is held, the next call takes another block.
    let held = main.call(&[x.view()]).unwrap();
    let again = main.call(&[x.view()]).unwrap();
    let a = Tensor::from_any_view(&held.view(), "y").unwrap();
    let b = Tensor::from_any_view(&again.view(), "y").unwrap();
    assert_ne!(a.data_ptr(), b.data_ptr());
    assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap());
}

#[test]
fn dltensor_pointer_inputs_are_accepted() {
    let case = relax_cases()
        .into_iter()
        .find(|c| c["id"] == "cnn.main")
        .unwrap();
    let (_root, vm) = load_vm("cnn.so", 2);
    let x = input_tensor(&case["inputs"][0]);
    let main = vm.get_function("main", false).unwrap().unwrap();
    // A bare DLTensor* (type index 7), as a C caller passes it.
    let y = main
        .call(&[AnyView::from(&Any::dltensor_ptr(x.dltensor()))])
        .unwrap();
    let y = Tensor::from_any_view(&y.view(), "y").unwrap();
    check_close("cnn.dltensor_ptr", &y, &case["outputs"][0], 1e-5, 1e-6);
}

#[test]
fn builtins_are_global_functions() {
    let get = |n: &str| tvmrt::function::registry::get(n).unwrap();
    let shape = get("vm.builtin.make_shape")
        .call_values(&[
            Any::none(),
            2i64.into(),
            0i64.into(),
            3i64.into(),
            0i64.into(),
            4i64.into(),
        ])
        .unwrap();
    let obj = shape.view().as_object().unwrap();
    assert_eq!(tvmrt::object::shape::shape_dims(&obj).unwrap(), &[3, 4]);
    let t = get("vm.builtin.make_tuple")
        .call_values(&[1i64.into(), shape.clone()])
        .unwrap();
    let item = get("vm.builtin.tuple_getitem")
        .call_values(&[t.clone(), 0i64.into()])
        .unwrap();
    assert_eq!(item.view().as_i64(), Some(1));
    let e = get("vm.builtin.check_tuple_info")
        .call_values(&[t, 3i64.into(), Any::from("ctx")])
        .unwrap_err();
    assert!(e.message.contains("expect a Tuple with 3 elements"), "{e}");
    let e = get("vm.builtin.match_shape")
        .call_values(&[
            shape,
            Any::none(),
            2i64.into(),
            0i64.into(),
            3i64.into(),
            0i64.into(),
            5i64.into(),
            Any::from("here"),
        ])
        .unwrap_err();
    assert!(
        e.message
            .contains("here match_cast error,  shape[1] mismatch"),
        "{e}"
    );
    // The context-pointer builtins refuse pointers that are not live VMs.
    let e = get("vm.builtin.alloc_shape_heap")
        .call_values(&[Any::opaque_ptr(8 as *mut _), 4i64.into()])
        .unwrap_err();
    assert!(e.message.contains("not a live tvmrt VirtualMachine"), "{e}");
    let cond = Tensor::empty(
        &[],
        tvmrt::dtype::dtypes::BOOL,
        tvmrt::tensor::layout::cpu(),
    )
    .unwrap();
    let r = get("vm.builtin.read_if_cond")
        .call_values(&[cond.clone().into()])
        .unwrap();
    assert_eq!(r.view().as_bool(), Some(false));
    cond.copy_from_bytes(&[1]).unwrap();
    let r = get("vm.builtin.read_if_cond")
        .call_values(&[cond.into()])
        .unwrap();
    assert_eq!(r.view().as_bool(), Some(true));
}

#[test]
fn saved_closures_bind_their_arguments() {
    let case = relax_cases()
        .into_iter()
        .find(|c| c["id"] == "subfunc.main")
        .unwrap();
    let (_root, vm) = load_vm("subfunc.so", 2);
    let x = Any::from(input_tensor(&case["inputs"][0]));
    let y = Any::from(input_tensor(&case["inputs"][1]));
    // main with both arguments bound, returning its result.
    call_vm(
        &vm,
        "save_function",
        &[
            Any::from("main"),
            Any::from("main_saved"),
            Any::from(true),
            x.clone(),
            y.clone(),
        ],
    )
    .unwrap();
    let out = call_vm(&vm, "main_saved", &[]).unwrap();
    let t = Tensor::from_any_view(&out.view(), "out").unwrap();
    check_close("subfunc.saved", &t, &case["outputs"][0], 1e-5, 1e-6);
    // Only the last argument bound: the call supplies the first.
    call_vm(
        &vm,
        "save_function",
        &[Any::from("main"), Any::from("main_y"), Any::from(true), y],
    )
    .unwrap();
    let out = call_vm(&vm, "main_y", std::slice::from_ref(&x)).unwrap();
    let t = Tensor::from_any_view(&out.view(), "out").unwrap();
    check_close("subfunc.partial", &t, &case["outputs"][0], 1e-5, 1e-6);
    // include_return = false: the call runs and returns None.
    call_vm(
        &vm,
        "save_function",
        &[
            Any::from("main"),
            Any::from("main_void"),
            Any::from(false),
            x,
        ],
    )
    .unwrap();
    let out = call_vm(
        &vm,
        "main_void",
        &[Any::from(input_tensor(&case["inputs"][1]))],
    )
    .unwrap();
    assert!(out.view().is_none());
}

#[test]
fn one_vm_serves_several_threads() {
    let case = relax_cases()
        .into_iter()
        .find(|c| c["id"] == "cnn.main")
        .unwrap();
    let (_root, vm) = load_vm("cnn.so", 2);
    let main = vm.get_function("main", false).unwrap().unwrap();
    let x = input_tensor(&case["inputs"][0]);
    let want = &case["outputs"][0];
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let xa = Any::from(x.clone());
                for _ in 0..40 {
                    let y = main.call(&[xa.view()]).unwrap();
                    let y = Tensor::from_any_view(&y.view(), "y").unwrap();
                    check_close("cnn.threads", &y, want, 1e-5, 1e-6);
                }
            });
        }
    });
}

/// Serializes a one-function executable: `main` with `num_args` arguments, `regs` registers
/// and the given instruction words (offsets computed from `instr_lens`).
fn tiny_executable(num_args: i64, regs: i64, instrs: &[&[i64]]) -> Vec<u8> {
    let mut b = Vec::new();
    let u64le = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
    let string = |b: &mut Vec<u8>, s: &str| {
        b.extend_from_slice(&(s.len() as u64).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
    };
    u64le(&mut b, tvmrt::vm::exec::MAGIC_V2);
    string(&mut b, "0.14");
    u64le(&mut b, 1); // one function
    b.extend_from_slice(&1i32.to_le_bytes()); // kVMFunc
    string(&mut b, "main");
    for v in [0, instrs.len() as i64, num_args, regs] {
        u64le(&mut b, v as u64);
    }
    u64le(&mut b, num_args as u64);
    for i in 0..num_args {
        string(&mut b, &format!("p{i}"));
    }
    u64le(&mut b, 0); // memory scopes
    u64le(&mut b, 0); // constants
    u64le(&mut b, instrs.len() as u64);
    let mut off = 0u64;
    for i in instrs {
        u64le(&mut b, off);
        off += i.len() as u64;
    }
    u64le(&mut b, off);
    for i in instrs {
        for &w in i.iter() {
            u64le(&mut b, w as u64);
        }
    }
    b
}

#[test]
fn hand_built_executables_run_or_are_refused() {
    // main(p0): ret %0
    let ok = tiny_executable(1, 1, &[&[2, 0]]);
    let m = tvmrt::vm::load_executable(&ok).unwrap();
    let vm = new_vm(&m);
    call_vm(
        &vm,
        "vm_initialization",
        &[1i64.into(), 0i64.into(), 1i64.into()],
    )
    .unwrap();
    let out = call_vm(&vm, "main", &[Any::from(42i64)]).unwrap();
    assert_eq!(out.view().as_i64(), Some(42));
    // A null DLTensor* is an error, not a crash, in the builtins that read tensors.
    let f = tvmrt::function::registry::get("vm.builtin.check_tensor_info").unwrap();
    let e = f
        .call_values(&[
            Any::dltensor_ptr(std::ptr::null_mut()),
            Any::from(1i64),
            Any::none(),
            Any::from("ctx"),
        ])
        .unwrap_err();
    assert!(e.message.contains("null DLTensor*"), "{e}");

    let refused = |instrs: &[&[i64]], regs: i64, needle: &str| {
        let e = Executable::from_bytes(&tiny_executable(1, regs, instrs))
            .err()
            .unwrap_or_else(|| panic!("{instrs:?} loaded"));
        assert!(e.message.contains(needle), "{instrs:?}: {e}");
    };
    // A jump to itself (or backwards) could spin forever.
    refused(&[&[3, 0], &[2, 0]], 1, "Goto offset 0");
    refused(&[&[2, 0], &[3, -1]], 1, "Goto offset -1");
    // Jumps out of the function, registers past the frame, unknown opcodes and functions.
    refused(&[&[3, 5], &[2, 0]], 1, "outside the function");
    refused(&[&[2, 3]], 1, "uses register 3");
    refused(&[&[4, 0, 1], &[2, 0]], 1, "If false offset 1");
    refused(&[&[9, 0]], 1, "unknown opcode 9");
    refused(&[&[1, 0, 7, 0], &[2, 0]], 1, "calls function index 7");
    // A call reading constant 0 of an empty pool: kind 2 in the top byte.
    refused(&[&[1, 0, 0, 1, 2 << 56], &[2, 0]], 1, "reads constant 0");
}

/// A module whose `get_params()` returns one tensor (for `set_input_with_param_module`).
struct Params(Tensor);

impl tvmrt::module::ModuleKind for Params {
    fn kind(&self) -> &str {
        "test.params"
    }
    fn get_function(
        &self,
        this: &Module,
        name: &str,
    ) -> tvmrt::Result<Option<tvmrt::function::Function>> {
        if name != "get_params" {
            return Ok(None);
        }
        let keep = this.clone();
        let t = self.0.clone();
        Ok(Some(tvmrt::function::Function::from_fn(move |_| {
            let _ = &keep;
            Ok(Any::from(t.clone()))
        })))
    }
}

#[test]
fn set_input_with_param_module_takes_the_last_input_from_get_params() {
    let case = relax_cases()
        .into_iter()
        .find(|c| c["id"] == "dyn_batch.main.n5")
        .unwrap();
    let (_root, vm) = load_vm("dyn_batch.so", 2);
    let ins: Vec<Tensor> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(input_tensor)
        .collect();
    let params = Module::new(Params(ins[2].clone()));
    call_vm(
        &vm,
        "set_input_with_param_module",
        &[
            Any::from("main"),
            Any::from(ins[0].clone()),
            Any::from(ins[1].clone()),
            Any::from(params),
        ],
    )
    .unwrap();
    call_vm(&vm, "invoke_stateful", &[Any::from("main")]).unwrap();
    let out = call_vm(&vm, "get_output", &[Any::from("main")]).unwrap();
    let t = Tensor::from_any_view(&out.view(), "out").unwrap();
    check_close("dyn_batch.params", &t, &case["outputs"][0], 1e-5, 1e-6);
}

/// Loaded from a library, an executable keeps its bytes where the library maps them (no
/// copy), copies its constants once (TVM 0.27 places constant data 2 bytes past a 4-byte
/// boundary, never aligned enough to be used in place) and reports the storage its functions
/// plan; its bytes survive the pages dropped after the copy, so saving gives them back whole.
#[test]
fn executables_from_libraries_keep_their_bytes_in_place_and_report_memory() {
    let path = fixtures().join("cnn.so");
    let root = load_from_file(path.to_str().unwrap(), "").unwrap();
    let exec = root
        .downcast::<tvmrt::vm::ExecutableModule>()
        .unwrap()
        .executable();
    assert!(exec.bytes_in_place());
    let lib = std::fs::read(&path).unwrap();
    let at = lib
        .windows(exec.bytes().len())
        .position(|w| w == exec.bytes())
        .expect("the executable's bytes are in the library file");
    assert!(at > 0);

    // conv2d weight [4,3,3,3] and bias [1,4,1,1], dense weight [64,10] and bias [10]: float32.
    let totals = exec.constant_totals();
    assert_eq!(totals.tensors, 4);
    assert_eq!(totals.bytes, (4 * 3 * 3 * 3 + 4 + 64 * 10 + 10) * 4);
    assert_eq!((totals.in_place, totals.in_place_bytes), (0, 0));

    // TVM's static plan: two [1,4,8,8] float32 blocks shared by conv2d, add, relu and
    // max_pool2d, and two [1,10] blocks for matmul and the output; no size known only at run
    // time.
    let (_, main) = exec.func("main").unwrap();
    assert_eq!(
        exec.planned_storage(main),
        (2 * 4 * 8 * 8 * 4 + 2 * 10 * 4, 0)
    );

    // Saved after the constant pages were dropped, then loaded again: the same model.
    let saved = root.save_to_bytes().unwrap();
    let again = Executable::from_bytes(&saved).unwrap();
    assert_eq!(again.bytes(), exec.bytes());
    assert!(!again.bytes_in_place());
    assert_eq!(again.constant_totals().bytes, totals.bytes);
}

#[test]
#[cfg(feature = "profiling")]
fn profiler_vm_reports_every_kernel_call() {
    let path = fixtures().join("cnn.so");
    let root = load_from_file(path.to_str().unwrap(), "").unwrap();
    // A plain VM has no `profile`; the one of vm_profiler_load_executable does.
    assert!(new_vm(&root)
        .get_function("profile", false)
        .unwrap()
        .is_none());
    let vm = root
        .get_function("vm_profiler_load_executable", false)
        .unwrap()
        .unwrap()
        .call(&[])
        .unwrap();
    let vm = Module::from_view(&vm.view(), "vm").unwrap();
    call_vm(
        &vm,
        "vm_initialization",
        &[Any::from(1i64), Any::from(0i64), Any::from(2i64)],
    )
    .unwrap();
    let npy = read_npy(&fixtures().join("data/cnn.main.in0.npy"));
    let x = Tensor::empty(&npy.shape, dtype(2, 32, 1), tvmrt::tensor::layout::cpu()).unwrap();
    x.copy_from_bytes(&npy.data).unwrap();
    let report = call_vm(&vm, "profile", &[Any::from("main"), Any::from(x.clone())]).unwrap();
    let report: Value = serde_json::from_str(report.view().as_str().unwrap()).unwrap();
    let calls = report["calls"].as_array().unwrap();
    let names: Vec<&str> = calls
        .iter()
        .map(|c| c["Name"]["string"].as_str().unwrap())
        .collect();
    // The kernels of cnn.vm.txt, in call order, and the builtins that take tensors.
    for k in [
        "conv2d",
        "add",
        "relu",
        "max_pool2d",
        "matmul",
        "vm.builtin.reshape",
    ] {
        assert!(names.contains(&k), "{k} missing from {names:?}");
    }
    let pos = |k: &str| names.iter().position(|n| *n == k).unwrap();
    assert!(pos("conv2d") < pos("relu") && pos("relu") < pos("matmul"));
    let conv = &calls[pos("conv2d")];
    assert_eq!(
        conv["Argument Shapes"]["string"],
        "float32[1, 3, 8, 8], float32[4, 3, 3, 3], float32[1, 4, 8, 8]"
    );
    assert_eq!(conv["Device"]["string"], "cpu0");
    let total = report["device_metrics"]["cpu0"]["Duration (us)"]["microseconds"]
        .as_f64()
        .unwrap();
    let sum: f64 = calls
        .iter()
        .map(|c| c["Duration (us)"]["microseconds"].as_f64().unwrap())
        .sum();
    assert!(
        sum > 0.0 && sum <= total,
        "calls {sum} us, total {total} us"
    );
    assert_eq!(report["configuration"]["Executor"]["string"], "VM");
    // With inputs from set_input, only the name; repeating them is an error.
    call_vm(&vm, "set_input", &[Any::from("main"), Any::from(x.clone())]).unwrap();
    call_vm(&vm, "profile", &[Any::from("main")]).unwrap();
    let e = call_vm(&vm, "profile", &[Any::from("main"), Any::from(x)]).unwrap_err();
    assert!(e.message.contains("already set by set_input"), "{e}");
    let e = call_vm(&vm, "profile", &[Any::from("nope")]).unwrap_err();
    assert!(e.message.contains("Unknown function: nope"), "{e}");
}
