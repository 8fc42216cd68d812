//! The tiny LLM of tests/fixtures/llm built for CUDA (tests/fixtures/cuda/llm_model*.so, made
//! by tests/fixtures/cuda/gen_llm.py) served on cuda:0 through the test double of the driver
//! (tests/cuda_double/fake_cuda.c), the way MLC-LLM's driver serves a model: weights from the
//! tensor cache on the device, the model's create_tir_paged_kv_cache, and per step embed,
//! vm.builtin.reshape, kv_state_begin_forward, prefill or decode, kv_state_end_forward. The
//! double does not compute these kernels, so what is checked is that every call is accepted
//! with the cache, weights, activations and logits on cuda:0 (the paged KV cache's attention
//! entries once required host tensors), and that everything is freed afterwards.
//! benches/cuda/llm.py checks the values on a real GPU.

mod cuda_support;
mod llm_support;

use cuda_support::*;
use llm_support::{global, shape};
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

#[test]
fn tiny_llm_runs_on_cuda() {
    let _s = serial();
    std::env::set_var("FAKE_CUDA_DEVICES", "1");
    use_venv_nvrtc();
    let fake = fake_driver();
    let weights = llm_support::dir().join("weights");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(weights.join("tensor-cache.json")).unwrap())
            .unwrap();
    let names: Vec<Any> = meta["records"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["records"].as_array().unwrap().iter())
        .map(|r| Any::from(r["name"].as_str().unwrap()))
        .collect();
    let before = (fake.live_allocations(false), fake.live_modules());
    for file in ["llm_model_ptx.so", "llm_model.so"] {
        {
            let exec = load(file);
            let vm = cuda_vm(&exec, 0);
            call(
                &global("vm.builtin.tensor_cache.load"),
                &[
                    Any::from(weights.to_str().unwrap()),
                    Any::from(2i64),
                    Any::from(0i64),
                ],
            )
            .unwrap();
            let params = call(
                &global("vm.builtin.param_array_from_cache_by_name_unpacked"),
                &names,
            )
            .unwrap();
            call(&global("vm.builtin.tensor_cache.clear"), &[]).unwrap();
            let cache = call(
                &func(&vm, "create_tir_paged_kv_cache"),
                &[
                    shape(&[1]),
                    shape(&[64]),
                    shape(&[64]),
                    shape(&[16]),
                    shape(&[0]),
                ],
            )
            .unwrap();
            call(
                &global("vm.builtin.kv_state_add_sequence"),
                &[cache.clone(), Any::from(0i64)],
            )
            .unwrap();
            for (step, tokens) in [vec![5i32, 9, 17, 3], vec![7]].into_iter().enumerate() {
                let n = tokens.len() as i64;
                let host = Tensor::empty(&[n], tvmrt::dtype::dtypes::INT32, cpu_dev()).unwrap();
                let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
                host.copy_from_bytes(&bytes).unwrap();
                let ids = host.copy_to(cuda(0), None).unwrap();
                let emb = call(&func(&vm, "embed"), &[Any::from(ids), params.clone()]).unwrap();
                let dims = if step == 0 { [1, n, 64] } else { [n, 1, 64] };
                let emb = call(&global("vm.builtin.reshape"), &[emb, shape(&dims)]).unwrap();
                call(
                    &global("vm.builtin.kv_state_begin_forward"),
                    &[
                        cache.clone(),
                        shape(&[0]),
                        shape(&[if step == 0 { n } else { 1 }]),
                    ],
                )
                .unwrap();
                let f = if step == 0 { "prefill" } else { "decode" };
                let out = call(&func(&vm, f), &[emb, cache.clone(), params.clone()])
                    .unwrap_or_else(|e| panic!("{file} {f}: {e}"));
                call(
                    &global("vm.builtin.kv_state_end_forward"),
                    std::slice::from_ref(&cache),
                )
                .unwrap();
                let logits = call(&global("ffi.ArrayGetItem"), &[out, Any::from(0i64)]).unwrap();
                let logits = Tensor::from_any_view(&logits.view(), "logits").unwrap();
                assert_eq!(logits.device(), cuda(0), "{file} {f}");
                assert_eq!(logits.shape(), [1, if step == 0 { n } else { 1 }, 128]);
            }
        }
        assert_eq!(
            (fake.live_allocations(false), fake.live_modules()),
            before,
            "{file}: cache, weights and activations freed"
        );
    }
}

fn cpu_dev() -> tvmrt::abi::DLDevice {
    tvmrt::tensor::layout::cpu()
}
