//! The RNN state, the samplers and the legacy KV cache against what Apache TVM 0.27 returned
//! (tests/fixtures/llm/trace.json): the same states, tokens and values bit for bit, and bad
//! arguments refused with a message.

mod llm_support;

use llm_support::{dir, global, ints, shape, Expected, Fixture};
use serde_json::Value;
use tvmrt::function::Function;
use tvmrt::module::load_from_file;
use tvmrt::object::containers::array::new_array;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

fn array(items: Vec<Any>) -> Any {
    Any::from_object(new_array(items))
}

fn rnn_kernels() -> (Vec<Function>, Vec<Function>) {
    let lib = load_from_file(dir().join("rnn.so").to_str().unwrap(), "").unwrap();
    let f = |n: &str| lib.get_function(n, false).unwrap().unwrap();
    (
        vec![f("rnn_get_0"), f("rnn_get_1")],
        vec![f("rnn_set_0"), f("rnn_set_1")],
    )
}

#[test]
fn rnn_state_gives_tvms_states() {
    let fx = Fixture::get();
    let e = &fx.expected;
    let rnn = &fx.trace["rnn"];
    let (gets, sets) = rnn_kernels();
    let init: Vec<Any> = rnn["init"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Any::from(e.tensor(r)))
        .collect();
    let state = global("vm.builtin.rnn_state_create")
        .call_values(&[
            Any::from(rnn["layers"].as_i64().unwrap()),
            Any::from(rnn["reserved_num_seqs"].as_i64().unwrap()),
            Any::from(rnn["max_history"].as_i64().unwrap()),
            array(gets.iter().cloned().map(Any::from).collect()),
            array(sets.iter().cloned().map(Any::from).collect()),
            array(init),
        ])
        .unwrap();
    let key = tvmrt::object::type_registry::index_to_key(state.view().type_index()).unwrap();
    assert_eq!(key, "relax.vm.RNNStateImp");
    let call = |name: &str, args: &[Any]| {
        let mut all = vec![state.clone()];
        all.extend_from_slice(args);
        global(name).call_values(&all)
    };
    let n_states = rnn["states"].as_array().unwrap().len();
    let mut compared = 0;
    for (i, step) in rnn["steps"].as_array().unwrap().iter().enumerate() {
        let ctx = format!("rnn step {i} ({})", step["op"]);
        let id = |k: &str| Any::from(step[k].as_i64().unwrap());
        match step["op"].as_str().unwrap() {
            "add" => {
                call("vm.builtin.kv_state_add_sequence", &[id("seq")]).unwrap();
            }
            "remove" => {
                call("vm.builtin.kv_state_remove_sequence", &[id("seq")]).unwrap();
            }
            "fork" => {
                call(
                    "vm.builtin.kv_state_fork_sequence",
                    &[id("parent"), id("child"), Any::from(-1i64)],
                )
                .unwrap();
            }
            "popn" => {
                call("vm.builtin.kv_state_popn", &[id("seq"), id("n")]).unwrap();
            }
            "step" => {
                call(
                    "vm.builtin.kv_state_begin_forward",
                    &[shape(&ints(&step["seqs"])), shape(&ints(&step["lengths"]))],
                )
                .unwrap();
                let (gets, sets) = (
                    step["get"].as_array().unwrap(),
                    step["set"].as_array().unwrap(),
                );
                for layer in 0..2usize {
                    for sid in 0..n_states {
                        let k = layer * n_states + sid;
                        let out = Expected::empty_like(&gets[k]);
                        call(
                            "vm.builtin.rnn_state_get",
                            &[
                                Any::from(layer as i64),
                                Any::from(sid as i64),
                                Any::from(out.clone()),
                            ],
                        )
                        .unwrap();
                        e.assert_same(&out, &gets[k], &ctx);
                        call(
                            "vm.builtin.rnn_state_set",
                            &[
                                Any::from(layer as i64),
                                Any::from(sid as i64),
                                Any::from(e.tensor(&sets[k])),
                            ],
                        )
                        .unwrap();
                        compared += 1;
                    }
                }
                call("vm.builtin.kv_state_end_forward", &[]).unwrap();
            }
            "debug_get" => {
                for (sid, r) in step["values"].as_array().unwrap().iter().enumerate() {
                    let t = call(
                        "vm.builtin.rnn_state_debug_get",
                        &[id("layer"), Any::from(sid as i64), id("seq")],
                    )
                    .unwrap();
                    let t = Tensor::from_any_view(&t.view(), "state").unwrap();
                    e.assert_same(&t, r, &ctx);
                    compared += 1;
                }
            }
            other => panic!("{ctx}: unknown op {other}"),
        }
    }
    assert!(compared >= 30, "{compared} states compared");

    // Bad input: nothing changes, and the state goes on.
    let err = |name: &str, args: &[Any]| call(name, args).unwrap_err().message.clone();
    assert!(err("vm.builtin.kv_state_add_sequence", &[Any::from(0i64)]).contains("already"));
    assert!(err(
        "vm.builtin.kv_state_popn",
        &[Any::from(0i64), Any::from(5i64)]
    )
    .contains("available history"));
    assert!(
        err("vm.builtin.kv_state_remove_sequence", &[Any::from(42i64)]).contains("cannot be found")
    );
    assert!(err(
        "vm.builtin.kv_state_begin_forward",
        &[shape(&[0]), shape(&[2]), shape(&[-1, -1])]
    )
    .contains("only supports chains"));
    assert!(err(
        "vm.builtin.rnn_state_debug_get",
        &[Any::from(2i64), Any::from(0i64), Any::from(0i64)]
    )
    .contains("no state 0 of layer 2"));
    call("vm.builtin.kv_state_add_sequence", &[Any::from(1i64)]).unwrap();
    let e2 = call("vm.builtin.kv_state_add_sequence", &[Any::from(4i64)]).unwrap_err();
    assert!(e2.message.contains("slot is full"), "{e2}");
}

fn sample_result(v: &Any) -> i64 {
    v.view().as_i64().unwrap()
}

#[test]
fn samplers_give_tvms_tokens_and_values() {
    let fx = Fixture::get();
    let e = &fx.expected;
    let mut counts = std::collections::HashMap::new();
    for (i, c) in fx.trace["sampling"].as_array().unwrap().iter().enumerate() {
        let f = c["fn"].as_str().unwrap();
        let ctx = format!("sampling case {i} ({f})");
        *counts.entry(f).or_insert(0) += 1;
        let name = format!("vm.builtin.{f}");
        match f {
            "sample_top_p_from_logits" => {
                let r = global(&name).call_values(&[
                    Any::from(e.tensor(&c["logits"])),
                    Any::from(f64_of(&c["temperature"])),
                    Any::from(f64_of(&c["top_p"])),
                    Any::from(f64_of(&c["uniform"])),
                ]);
                match c["result"].as_i64() {
                    Some(want) => assert_eq!(sample_result(&r.unwrap()), want, "{ctx}"),
                    None => assert!(r.is_err(), "{ctx}: TVM failed here"),
                }
            }
            "sample_top_p_from_prob" => {
                let r = global(&name)
                    .call_values(&[
                        Any::from(e.tensor(&c["prob"])),
                        Any::from(f64_of(&c["top_p"])),
                        Any::from(f64_of(&c["uniform"])),
                    ])
                    .unwrap();
                assert_eq!(sample_result(&r), c["result"].as_i64().unwrap(), "{ctx}");
            }
            "apply_softmax_with_temperature" => {
                let t = e.tensor(&c["logits"]);
                global(&name)
                    .call_values(&[Any::from(t.clone()), Any::from(f64_of(&c["temperature"]))])
                    .unwrap();
                e.assert_same(&t, &c["result"], &ctx);
            }
            "multinomial_from_uniform" => {
                let r = global(&name)
                    .call_values(&[
                        Any::from(e.tensor(&c["prob"])),
                        Any::from(e.tensor(&c["uniform_samples"])),
                    ])
                    .unwrap();
                let t = Tensor::from_any_view(&r.view(), "result").unwrap();
                e.assert_same(&t, &c["result"], &ctx);
            }
            "apply_repetition_penalty" => {
                let t = e.tensor(&c["logits"]);
                global(&name)
                    .call_values(&[
                        Any::from(t.clone()),
                        Any::from(e.tensor(&c["token_ids"])),
                        Any::from(f64_of(&c["penalty"])),
                    ])
                    .unwrap();
                e.assert_same(&t, &c["result"], &ctx);
            }
            "apply_presence_and_frequency_penalty" => {
                let t = e.tensor(&c["logits"]);
                global(&name)
                    .call_values(&[
                        Any::from(t.clone()),
                        Any::from(e.tensor(&c["token_ids"])),
                        Any::from(e.tensor(&c["token_freqs"])),
                        Any::from(f64_of(&c["presence"])),
                        Any::from(f64_of(&c["frequency"])),
                    ])
                    .unwrap();
                e.assert_same(&t, &c["result"], &ctx);
            }
            other => panic!("{ctx}: unknown function {other}"),
        }
    }
    assert!(counts["sample_top_p_from_logits"] >= 100, "{counts:?}");
    assert!(counts["sample_top_p_from_prob"] >= 100, "{counts:?}");
}

fn f32_tensor(shape: &[i64], v: &[f32]) -> Tensor {
    let t = Tensor::empty(
        shape,
        tvmrt::dtype::dtypes::FLOAT32,
        tvmrt::tensor::layout::cpu(),
    )
    .unwrap();
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    t.copy_from_bytes(&b).unwrap();
    t
}

fn i32_tensor(v: &[i32]) -> Tensor {
    tvmrt::llm::transfer::tensor_from_i32(v, tvmrt::tensor::layout::cpu()).unwrap()
}

#[test]
fn samplers_refuse_bad_arguments() {
    let err = |name: &str, args: &[Any]| {
        global(&format!("vm.builtin.{name}"))
            .call_values(args)
            .unwrap_err()
            .message
            .clone()
    };
    let logits = f32_tensor(&[1, 4], &[0.1, 0.2, f32::NAN, 0.3]);
    assert!(err(
        "sample_top_p_from_logits",
        &[
            Any::from(logits),
            Any::from(1.0),
            Any::from(0.9),
            Any::from(0.5)
        ]
    )
    .contains("NaN"));
    let two_rows = f32_tensor(&[2, 2], &[0.1, 0.2, 0.3, 0.4]);
    assert!(err(
        "sample_top_p_from_logits",
        &[
            Any::from(two_rows),
            Any::from(1.0),
            Any::from(0.9),
            Any::from(0.5)
        ]
    )
    .contains("leading dimensions"));
    let ints = i32_tensor(&[1, 2, 3]);
    assert!(err(
        "sample_top_p_from_prob",
        &[Any::from(ints.clone()), Any::from(0.9), Any::from(0.5)]
    )
    .contains("float32"));
    let nan = f32_tensor(&[1, 3], &[f32::NAN; 3]);
    assert!(err(
        "sample_top_p_from_prob",
        &[Any::from(nan), Any::from(0.9), Any::from(0.5)]
    )
    .contains("all NaNs"));
    let l = f32_tensor(&[1, 3], &[1.0, 2.0, 3.0]);
    assert!(err(
        "apply_repetition_penalty",
        &[
            Any::from(l.clone()),
            Any::from(i32_tensor(&[0, 3])),
            Any::from(1.2)
        ]
    )
    .contains("token id 3 is outside"));
    assert_eq!(
        l.to_vec().unwrap(),
        f32_tensor(&[1, 3], &[1.0, 2.0, 3.0]).to_vec().unwrap(),
        "a refused call changes nothing"
    );
    assert!(err(
        "apply_presence_and_frequency_penalty",
        &[
            Any::from(l.clone()),
            Any::from(i32_tensor(&[0, 1])),
            Any::from(i32_tensor(&[1])),
            Any::from(0.5),
            Any::from(0.5)
        ]
    )
    .contains("fewer values"));
    assert!(err(
        "multinomial_from_uniform",
        &[
            Any::from(f32_tensor(&[2, 2], &[0.5; 4])),
            Any::from(f32_tensor(&[1], &[0.5]))
        ]
    )
    .contains("1 values for a batch of 2"));
    assert!(err(
        "apply_softmax_with_temperature",
        &[Any::from(ints), Any::from(1.0)]
    )
    .contains("float32"));
    assert!(err("sample_top_p_from_prob", &[Any::from(1i64)]).contains("expects 3 arguments"));
}

#[test]
fn legacy_kv_cache_gives_tvms_views() {
    let fx = Fixture::get();
    let e = &fx.expected;
    let steps = fx.trace["legacy_cache"].as_array().unwrap();
    let c0 = &steps[0];
    let cache = global("vm.builtin.attention_kv_cache_create")
        .call_values(&[
            Any::from(e.tensor(&c0["init"])),
            shape(&ints(&c0["reserve"])),
            Any::from(c0["fill"].as_i64().unwrap()),
        ])
        .unwrap();
    let g = |name: &str, args: &[Any]| {
        let mut all = vec![cache.clone()];
        all.extend_from_slice(args);
        global(&format!("vm.builtin.attention_kv_cache_{name}")).call_values(&all)
    };
    for (i, s) in steps.iter().enumerate().skip(1) {
        let ctx = format!("legacy cache step {i} ({})", s["op"]);
        let value = || Any::from(e.tensor(&s["value"]));
        let n = |k: &str| Any::from(s[k].as_i64().unwrap());
        match s["op"].as_str().unwrap() {
            "append" => g("append", &[value()]).unwrap(),
            "update" => g("update", &[value()]).unwrap(),
            "window_override" => g("window_override", &[value(), n("max")]).unwrap(),
            "window_override_with_sinks" => g(
                "window_override_with_sinks",
                &[value(), n("max"), n("sinks")],
            )
            .unwrap(),
            "clear" => global("vm.builtin.attention_kv_cache_array_clear")
                .call_values(&[array(vec![cache.clone()])])
                .unwrap(),
            "popn" => global("vm.builtin.attention_kv_cache_array_popn")
                .call_values(&[array(vec![cache.clone()]), n("n")])
                .unwrap(),
            other => panic!("{ctx}: unknown op {other}"),
        };
        let v = g("view", &[]).unwrap();
        let v = Tensor::from_any_view(&v.view(), "view").unwrap();
        e.assert_same(&v, &s["view"], &ctx);
    }
    // Bad input.
    let wrong = f32_tensor(&[1, 2], &[0.0, 1.0]);
    assert!(g("append", &[Any::from(wrong)])
        .unwrap_err()
        .message
        .contains("mismatch"));
    assert!(global("vm.builtin.attention_kv_cache_array_popn")
        .call_values(&[array(vec![cache.clone()]), Any::from(100i64)])
        .unwrap_err()
        .message
        .contains("fill_count"));
}
