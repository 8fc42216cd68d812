//! Libraries built by Apache TVM 0.27 (tests/fixtures, see its README): every call case of the
//! manifest, run through tvmrt and compared bit for bit with what TVM's runtime computed.

mod module_support;

use std::path::Path;

use module_support::*;
use serde_json::Value;
use tvmrt::function::registry;
use tvmrt::module::{load_from_file, Module};
use tvmrt::value::Any;

fn manifest() -> Value {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn load(lib: &str) -> Module {
    let path = fixtures().join(lib);
    load_from_file(path.to_str().unwrap(), "").unwrap_or_else(|e| panic!("loading {lib}: {e}"))
}

fn dtype_of(spec: &Value) -> tvmrt::abi::DLDataType {
    let d = &spec["dlpack_dtype"];
    dl_dtype(
        d["code"].as_u64().unwrap() as u8,
        d["bits"].as_u64().unwrap() as u8,
        d["lanes"].as_u64().unwrap() as u16,
    )
}

fn shape_of(spec: &Value) -> Vec<i64> {
    spec["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// The README's `affine_mod` pattern, for float32 inputs.
fn pattern_f32(p: &Value, shape: &[i64]) -> Vec<u8> {
    let coef: Vec<i64> = p["coef"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_i64().unwrap())
        .collect();
    let (bias, modulus, offset) = (
        p["bias"].as_i64().unwrap(),
        p["modulus"].as_i64().unwrap(),
        p["offset"].as_i64().unwrap(),
    );
    let scale = p["scale"].as_f64().unwrap();
    let numel: i64 = shape.iter().product();
    let mut out = Vec::with_capacity(numel as usize);
    let mut idx = vec![0i64; shape.len()];
    for _ in 0..numel {
        let acc: i64 = bias + coef.iter().zip(&idx).map(|(c, i)| c * i).sum::<i64>();
        out.push(((acc.rem_euclid(modulus) + offset) as f64 * scale) as f32);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    f32_bytes(&out)
}

fn input_tensor(spec: &Value) -> HostTensor {
    let dtype = dtype_of(spec);
    let shape = shape_of(spec);
    let data = match spec["file"].as_str() {
        Some(f) => {
            let npy = read_npy(&fixtures().join(f));
            assert_eq!(npy.shape, shape, "{f}");
            npy.data
        }
        None => {
            assert_eq!(spec["dtype"], "float32", "patterns are float32 here");
            pattern_f32(&spec["pattern"], &shape)
        }
    };
    HostTensor::new(dtype, &shape, &data)
}

/// Runs one destination-passing case; returns a description of the first mismatch.
fn run_case(case: &Value, module: &Module) -> Result<(), String> {
    let id = case["id"].as_str().unwrap();
    let name = case["function"].as_str().unwrap();
    let query = case["query_imports"].as_bool().unwrap();
    let by_ptr = case["arg_passing"] == "dltensor_ptr";
    let mut registered = Vec::new();
    for g in case["register_globals"].as_array().unwrap() {
        let gname = g["name"].as_str().unwrap();
        let f = module
            .get_function(g["library_function"].as_str().unwrap(), true)
            .unwrap()
            .unwrap();
        registry::register(gname, f, true).unwrap();
        registered.push(gname.to_string());
    }
    let f = module
        .get_function(name, query)
        .map_err(|e| format!("{id}: get_function: {e}"))?
        .ok_or_else(|| format!("{id}: function `{name}` not found"))?;

    let mut tensors: Vec<HostTensor> = Vec::new();
    let mut args: Vec<Any> = Vec::new();
    let mut slots = Vec::new(); // (index into tensors) for each arg that is a tensor
    for spec in case["inputs"].as_array().unwrap() {
        match spec["kind"].as_str().unwrap() {
            "tensor" => {
                slots.push(Some(tensors.len()));
                tensors.push(input_tensor(spec));
            }
            "int" => {
                slots.push(None);
                args.push(Any::from(spec["value"].as_i64().unwrap()));
            }
            "none" => {
                slots.push(None);
                args.push(Any::none());
            }
            k => panic!("{id}: unknown input kind {k}"),
        }
    }
    let mut outputs = Vec::new();
    for spec in case["outputs"].as_array().unwrap() {
        outputs.push(tensors.len());
        slots.push(Some(tensors.len()));
        tensors.push(HostTensor::new(dtype_of(spec), &shape_of(spec), &[]));
    }
    // Assemble in order: plain values were pushed as they came; interleave tensors.
    let mut plain = args.into_iter();
    let mut call_args = Vec::new();
    for slot in &slots {
        match slot {
            Some(t) => {
                let t = &mut tensors[*t];
                call_args.push(if by_ptr { t.ptr_arg() } else { t.object_arg() });
            }
            None => call_args.push(plain.next().unwrap()),
        }
    }
    let result = f.call_values(&call_args);
    for g in &registered {
        registry::remove(g);
    }
    match (&case["expect_error"], result) {
        (Value::Null, Ok(ret)) => {
            if !ret.view().is_none() {
                return Err(format!("{id}: expected None, got {:?}", ret));
            }
            for (o, spec) in outputs.iter().zip(case["outputs"].as_array().unwrap()) {
                let npy = read_npy(&fixtures().join(spec["file"].as_str().unwrap()));
                let got = tensors[*o].bytes();
                if got != npy.data {
                    return Err(format!("{id}: output differs from TVM's"));
                }
            }
            Ok(())
        }
        (Value::Null, Err(e)) => Err(format!("{id}: unexpected error {e}")),
        (want, Ok(_)) => Err(format!("{id}: expected error {want}, got success")),
        (want, Err(e)) => {
            if e.kind != want["kind"].as_str().unwrap()
                || e.message != want["message"].as_str().unwrap()
            {
                return Err(format!(
                    "{id}: expected {}: {:?}\n got {}: {:?}",
                    want["kind"], want["message"], e.kind, e.message
                ));
            }
            Ok(())
        }
    }
}

fn run_library_cases(lib: &str) {
    let m = manifest();
    let module = load(lib);
    let mut count = 0;
    let mut failures = Vec::new();
    for case in m["cases"].as_array().unwrap() {
        if case["library"] != lib || case["convention"] != "destination_passing" {
            continue;
        }
        count += 1;
        if let Err(e) = run_case(case, &module) {
            failures.push(e);
        }
    }
    assert!(count > 0, "no cases for {lib}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn add_dyn_cases() {
    run_library_cases("add_dyn.so");
}

#[test]
fn dtypes_cases() {
    run_library_cases("dtypes.so");
}

#[test]
fn shape_check_cases_report_generated_errors() {
    run_library_cases("shape_check.so");
}

#[test]
fn workspace_cases() {
    run_library_cases("workspace.so");
}

#[test]
fn parallel_cases() {
    run_library_cases("parallel.so");
}

/// One test: the cases register and remove the global `inner`, which the lifetime checks use
/// too.
#[test]
fn two_funcs_cases_then_same_library_twice() {
    run_library_cases("two_funcs.so");
    same_library_twice_and_free_in_any_order();
}

#[test]
fn imports_merged_cases() {
    run_library_cases("imports_merged.so");
}

#[test]
fn library_module_basics() {
    let m = load("add_dyn.so");
    assert_eq!(m.kind(), "library");
    assert!(m.imports().is_empty());
    assert!(m.implements_function("add", false));
    // The tvm-ffi entry alias.
    assert!(m.get_function("main", false).unwrap().is_some());
    assert!(m.get_function("nope", true).unwrap().is_none());
    // Symbols of dependencies, data symbols and runtime helpers are not functions.
    for name in [
        "malloc",
        "_library_ctx",
        "__extendhfsf2",
        "__tvm_ffi_add",
        "",
    ] {
        assert!(
            m.get_function(name, false).unwrap().is_none(),
            "`{name}` must not be found"
        );
    }
    // `main` of add_dyn is `add`: run it.
    let a = HostTensor::new(dl_dtype(2, 32, 1), &[3], &f32_bytes(&[1.0, 2.0, 3.0]));
    let b = HostTensor::new(dl_dtype(2, 32, 1), &[3], &f32_bytes(&[10.0, 20.0, 30.0]));
    let c = HostTensor::new(dl_dtype(2, 32, 1), &[3], &[]);
    let main = m.get_function("main", false).unwrap().unwrap();
    let r = main.call_values(&[a.object_arg(), b.object_arg(), c.object_arg()]);
    r.unwrap();
    assert_eq!(c.f32s(), vec![11.0, 22.0, 33.0]);
}

fn add3(m: &Module) -> Vec<f32> {
    let a = HostTensor::new(dl_dtype(2, 32, 1), &[3], &f32_bytes(&[1.0, 2.0, 3.0]));
    let b = HostTensor::new(dl_dtype(2, 32, 1), &[3], &f32_bytes(&[0.5, 0.5, 0.5]));
    let c = HostTensor::new(dl_dtype(2, 32, 1), &[3], &[]);
    let f = m.get_function("add", false).unwrap().unwrap();
    f.call_values(&[a.object_arg(), b.object_arg(), c.object_arg()])
        .unwrap();
    c.f32s()
}

#[test]
fn function_outlives_its_module() {
    let m = load("add_dyn.so");
    let f = m.get_function("add", false).unwrap().unwrap();
    drop(m);
    let a = HostTensor::new(dl_dtype(2, 32, 1), &[2], &f32_bytes(&[1.0, 2.0]));
    let c = HostTensor::new(dl_dtype(2, 32, 1), &[2], &[]);
    f.call_values(&[a.object_arg(), a.object_arg(), c.object_arg()])
        .unwrap();
    assert_eq!(c.f32s(), vec![2.0, 4.0]);
}

fn same_library_twice_and_free_in_any_order() {
    // A private copy (another inode, so another mapping): the compiled code caches the handle
    // it looks up in a static, which must not leak into `two_funcs_cases`.
    let copy = scratch("twice").join("two_funcs_copy.so");
    std::fs::copy(fixtures().join("two_funcs.so"), &copy).unwrap();
    let copy = copy.to_str().unwrap();
    let first = load_from_file(copy, "").unwrap();
    let second = load_from_file(copy, "so").unwrap();
    assert_ne!(first.as_ptr(), second.as_ptr());
    // `outer` finds `inner` through the library context; register it from the first load.
    let inner = first.get_function("inner", false).unwrap().unwrap();
    registry::register("inner", inner.clone(), true).unwrap();
    let outer2 = second.get_function("outer", false).unwrap().unwrap();
    drop(first);
    let run = |f: &tvmrt::Function| {
        let a = HostTensor::new(dl_dtype(2, 32, 1), &[4], &f32_bytes(&[1.0, 2.0, 3.0, 4.0]));
        let b = HostTensor::new(dl_dtype(2, 32, 1), &[4], &[]);
        f.call_values(&[a.object_arg(), b.object_arg()]).unwrap();
        b.f32s()
    };
    assert_eq!(run(&outer2), vec![3.0, 5.0, 7.0, 9.0]);
    registry::remove("inner");
    // The cached lookup stays valid: the global may be gone, the library still runs.
    assert_eq!(run(&outer2), vec![3.0, 5.0, 7.0, 9.0]);
    drop(second);
    assert_eq!(run(&outer2), vec![3.0, 5.0, 7.0, 9.0]);
}

#[test]
fn load_from_four_threads() {
    let handles: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let lib = if i % 2 == 0 {
                        "add_dyn.so"
                    } else {
                        "dtypes.so"
                    };
                    let m = load(lib);
                    if i % 2 == 0 {
                        assert_eq!(add3(&m), vec![1.5, 2.5, 3.5]);
                    } else {
                        assert!(m.implements_function("add_int8", false));
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn relax_model_needs_the_vm_loader_then_restores_the_import_tree() {
    let path = fixtures().join("mlp.so");
    let path = path.to_str().unwrap();
    let loader = "ffi.Module.load_from_bytes.relax.VMExecutable";
    if registry::get(loader).is_none() {
        let e = load_from_file(path, "").unwrap_err();
        assert!(
            e.message.contains(
                "library was built with module kind `relax.VMExecutable` but no loader \
                 `ffi.Module.load_from_bytes.relax.VMExecutable` is registered"
            ),
            "{e}"
        );
        assert!(e.message.contains("mlp.so"), "{e}");
    }
    // A stand-in loader: check the payload it gets, return an empty module.
    let payload_size = manifest()["libraries"]["mlp.so"]["library_bin"]["modules"][0]
        ["payload_size"]
        .as_u64()
        .unwrap() as usize;
    let stub = tvmrt::Function::from_fn(move |args| {
        let bytes = args[0].as_byte_slice().unwrap();
        assert_eq!(bytes.len(), payload_size);
        let getter = tvmrt::Function::from_fn(|_| Ok(Any::none()));
        registry::get("tvmrt.ModuleCreate")
            .unwrap()
            .call_values(&[Any::from("relax.VMExecutable"), Any::from(getter)])
    });
    let previous = registry::get(loader);
    registry::register(loader, stub, true).unwrap();
    let root = load_from_file(path, "").unwrap();
    match previous {
        Some(p) => registry::register(loader, p, true).unwrap(),
        None => {
            registry::remove(loader);
        }
    }
    assert_eq!(root.kind(), "relax.VMExecutable");
    let imports = root.imports();
    assert_eq!(imports.len(), 1);
    assert_eq!(imports[0].kind(), "library");
    assert!(root.get_function("matmul", false).unwrap().is_none());
    let m = manifest();
    let mut n = 0;
    for case in m["cases"].as_array().unwrap() {
        if case["library"] == "mlp.so" && case["convention"] == "destination_passing" {
            run_case(case, &root).unwrap();
            n += 1;
        }
    }
    assert_eq!(n, 5);
}

#[test]
fn blob_of_real_library_matches_its_dump() {
    // The tvm-ffi blob read from the symbol is the one the generator dumped.
    let dumped = std::fs::read(fixtures().join("imports_merged.blob.bin")).unwrap();
    let body = tvmrt::module::blob::split_size_prefix(&dumped).unwrap();
    let decoded = tvmrt::module::blob::decode_ffi(body).unwrap();
    assert_eq!(decoded.modules.len(), 1);
    assert!(decoded.modules[0].is_library());
    let m = load("imports_merged.so");
    assert_eq!(m.kind(), "library");
    assert!(m.implements_function("double_it", false));
    assert!(m.implements_function("triple_it", false));
    let _ = Path::new("");
}
