//! The tensor cache globals on the weights of tests/fixtures/llm (written by TVM's
//! `tvmjs.dump_tensor_cache`, raw float32 and float32-to-bfloat16): the two encodings decode to
//! the same weights (bfloat16: the upper half of each float32, rounded), aligned raw records
//! are used in place, and get/update/remove/clear and the param array and module functions
//! behave as TVM's. Its own test binary: it clears the process-wide cache.

mod llm_support;

use llm_support::{dir, f32s, global};
use tvmrt::module::Module;
use tvmrt::object::containers::array::{array_items, new_array};
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

fn tensors(v: &Any) -> Vec<Tensor> {
    let obj = v.view().as_object().unwrap();
    array_items(&obj)
        .unwrap()
        .iter()
        .map(|x| Tensor::from_any_view(x, "param").unwrap())
        .collect()
}

fn names(weights: &str) -> Vec<String> {
    tvmrt::llm::generate::tensor_cache_names(&dir().join(weights))
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

fn load(weights: &str) -> Vec<Tensor> {
    let path = dir().join(weights);
    global("vm.builtin.tensor_cache.load")
        .call_values(&[
            Any::from(path.to_str().unwrap()),
            Any::from(1i64),
            Any::from(0i64),
        ])
        .unwrap();
    let n: Vec<Any> = names(weights)
        .iter()
        .map(|n| Any::from(n.as_str()))
        .collect();
    let arr = global("vm.builtin.param_array_from_cache_by_name")
        .call_values(&[Any::from_object(new_array(n))])
        .unwrap();
    tensors(&arr)
}

#[test]
fn both_encodings_and_the_cache_globals() {
    let raw = load("weights");
    assert!(raw.len() >= 10);
    assert!(
        raw.iter().all(|t| t.is_read_only()),
        "raw aligned records are mapped"
    );
    let bf16 = load("weights-bf16");
    assert_eq!(raw.len(), bf16.len());
    for (r, b) in raw.iter().zip(&bf16) {
        assert_eq!(r.shape(), b.shape());
        for (x, y) in f32s(r).iter().zip(f32s(b)) {
            assert_eq!(y.to_bits() & 0xffff, 0, "bfloat16 keeps the upper half");
            assert!((x - y).abs() <= x.abs() / 128.0, "{x} vs {y}");
        }
    }

    let call = |name: &str, args: &[Any]| global(&format!("vm.builtin.{name}")).call_values(args);
    let t = |v: f32| {
        let t = Tensor::empty(
            &[1],
            tvmrt::dtype::dtypes::FLOAT32,
            tvmrt::tensor::layout::cpu(),
        )
        .unwrap();
        t.copy_from_bytes(&v.to_le_bytes()).unwrap();
        Any::from(t)
    };
    call("tensor_cache.update", &[Any::from("tct_0"), t(1.0)]).unwrap();
    call("tensor_cache.update", &[Any::from("tct_1"), t(2.0)]).unwrap();
    let e = call("tensor_cache.update", &[Any::from("tct_1"), t(3.0)]).unwrap_err();
    assert!(e.message.contains("already exists"), "{e}");
    call(
        "tensor_cache.update",
        &[Any::from("tct_1"), t(3.0), Any::from(true)],
    )
    .unwrap();
    let all = call(
        "param_array_from_cache",
        &[Any::from("tct"), Any::from(-1i64)],
    )
    .unwrap();
    let v: Vec<f32> = tensors(&all).iter().flat_map(f32s).collect();
    assert_eq!(v, vec![1.0, 3.0]);
    let e = call(
        "param_array_from_cache",
        &[Any::from("tct"), Any::from(3i64)],
    )
    .unwrap_err();
    assert!(e.message.contains("Cannot find tct_2 in cache"), "{e}");
    let unpacked = call(
        "param_array_from_cache_by_name_unpacked",
        &[Any::from("tct_1"), Any::from("tct_0")],
    )
    .unwrap();
    assert_eq!(
        tensors(&unpacked).iter().flat_map(f32s).collect::<Vec<_>>(),
        vec![3.0, 1.0]
    );
    let e = call(
        "param_array_from_cache_by_name_unpacked",
        &[Any::from(1i64)],
    )
    .unwrap_err();
    assert!(e.message.contains("Expect string as input"), "{e}");
    let e = call(
        "param_array_from_cache_by_name",
        &[Any::from_object(new_array(vec![Any::from("nope")]))],
    )
    .unwrap_err();
    assert!(
        e.message.contains("Cannot find parameter in cache: nope"),
        "{e}"
    );
    let module = call(
        "param_module_from_cache",
        &[Any::from("tct"), Any::from(2i64)],
    )
    .unwrap();
    let module = Module::from_view(&module.view(), "module").unwrap();
    assert_eq!(module.kind(), "param_module");
    let get = module.get_function("get_params", false).unwrap().unwrap();
    assert_eq!(tensors(&get.call(&[]).unwrap()).len(), 2);
    let by_name = call(
        "param_module_from_cache_by_name",
        &[Any::from_object(new_array(vec![Any::from("tct_0")]))],
    )
    .unwrap();
    assert!(Module::from_view(&by_name.view(), "module").is_ok());

    assert!(!call("tensor_cache.get", &[Any::from("tct_0")])
        .unwrap()
        .view()
        .is_none());
    call("tensor_cache.remove", &[Any::from("tct_0")]).unwrap();
    assert!(call("tensor_cache.get", &[Any::from("tct_0")])
        .unwrap()
        .view()
        .is_none());
    call("tensor_cache.clear", &[]).unwrap();
    let first = names("weights").remove(0);
    assert!(call("tensor_cache.get", &[Any::from(first.as_str())])
        .unwrap()
        .view()
        .is_none());
    // The tensors handed out live on after the cache lets them go.
    assert!(!f32s(&raw[0]).is_empty());
}
