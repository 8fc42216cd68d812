//! A tiny Llama-style model with a paged KV cache, compiled and run by Apache TVM 0.27
//! (tests/fixtures/llm, made by its generate.py), replayed on tvmrt: every scenario of
//! trace.json (prefill, decode, batches, chunked prefill, forks, popn, remove and re-add,
//! sliding windows, token trees, checkpoints, both tensor-cache encodings) gives TVM's logits
//! bit for bit, the same greedy tokens, K/V, positions and page counts; bad input is refused
//! and the other sequences then decode exactly as TVM's did.

mod llm_support;

use llm_support::{global, ints, obj, shape, Expected, Fixture};
use serde_json::Value;
use tvmrt::llm::generate::{CacheOptions, LanguageModel};
use tvmrt::object::ObjectRef;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

struct Replay<'a> {
    fx: &'a Fixture,
    scenario: String,
    model: Option<&'a LanguageModel>,
    cache: Option<ObjectRef>,
    checkpoint: Option<(String, Vec<Tensor>)>,
    forwards: usize,
}

fn tokens(v: &Value) -> Vec<i32> {
    ints(v).into_iter().map(|t| t as i32).collect()
}

impl Replay<'_> {
    fn cache(&self) -> Any {
        Any::from_object(self.cache.clone().expect("a cache"))
    }

    fn model(&self) -> &LanguageModel {
        self.model.expect("a model")
    }

    fn call(&self, name: &str, args: &[Any]) -> tvmrt::Result<Any> {
        let mut all = vec![self.cache()];
        all.extend_from_slice(args);
        global(name).call_values(&all)
    }

    fn step(&mut self, i: usize, step: &Value) {
        let ctx = format!("{} step {i} ({})", self.scenario, step["op"]);
        let op = step["op"].as_str().unwrap();
        let id = |k: &str| Any::from(step[k].as_i64().unwrap());
        match op {
            "create" => {
                let a = ints(&step["args"]);
                let weights = step["weights"].as_str().unwrap_or("weights");
                self.model = Some(self.fx.model(weights));
                let opts = CacheOptions {
                    max_batch_size: a[0],
                    max_total_seq_len: a[1],
                    prefill_chunk_size: a[2],
                    page_size: a[3],
                    support_sliding_window: a[4],
                };
                self.cache = Some(self.model().create_cache(&opts).expect(&ctx));
            }
            "add" => {
                self.call("vm.builtin.kv_state_add_sequence", &[id("seq")])
                    .expect(&ctx);
            }
            "remove" => {
                self.call("vm.builtin.kv_state_remove_sequence", &[id("seq")])
                    .expect(&ctx);
            }
            "fork" => {
                self.call(
                    "vm.builtin.kv_state_fork_sequence",
                    &[id("parent"), id("child"), id("pos")],
                )
                .expect(&ctx);
            }
            "popn" => {
                self.call("vm.builtin.kv_state_popn", &[id("seq"), id("n")])
                    .expect(&ctx);
            }
            "sliding_window" => {
                self.call(
                    "vm.builtin.attention_kv_cache_enable_sliding_window_for_seq",
                    &[id("seq"), id("window"), id("sink")],
                )
                .expect(&ctx);
            }
            "prefill" | "decode" => self.forward(step, &ctx),
            "commit" => {
                self.call(
                    "vm.builtin.attention_kv_cache_commit_accepted_token_tree_nodes",
                    &[shape(&ints(&step["seqs"])), shape(&ints(&step["leaves"]))],
                )
                .expect(&ctx);
            }
            "debug_get_kv" => {
                let (k_ref, v_ref) = (&step["k"], &step["v"]);
                let k = Expected::empty_like(k_ref);
                let v = Expected::empty_like(v_ref);
                self.call(
                    "vm.builtin.attention_kv_cache_debug_get_kv",
                    &[
                        id("seq"),
                        id("start"),
                        id("end"),
                        Any::from(k.clone()),
                        Any::from(v.clone()),
                    ],
                )
                .expect(&ctx);
                self.fx.expected.assert_same(&k, k_ref, &ctx);
                self.fx.expected.assert_same(&v, v_ref, &ctx);
            }
            "stats" => {
                let n = |name: &str| self.call(name, &[]).expect(&ctx).view().as_i64().unwrap();
                assert_eq!(
                    n("vm.builtin.attention_kv_cache_get_num_available_pages"),
                    step["available_pages"].as_i64().unwrap(),
                    "{ctx}: free pages"
                );
                assert_eq!(
                    n("vm.builtin.attention_kv_cache_get_total_sequence_length"),
                    step["total_length"].as_i64().unwrap(),
                    "{ctx}: total length"
                );
                let empty = self
                    .call("vm.builtin.attention_kv_cache_empty", &[])
                    .unwrap()
                    .view()
                    .as_bool()
                    .unwrap();
                assert_eq!(empty, step["empty"].as_bool().unwrap(), "{ctx}: empty");
                for (s, want) in ints(&step["seqs"]).iter().zip(ints(&step["lengths"])) {
                    let got = self
                        .call(
                            "vm.builtin.attention_kv_cache_get_sequence_length",
                            &[Any::from(*s)],
                        )
                        .unwrap()
                        .view()
                        .as_i64()
                        .unwrap();
                    assert_eq!(got, want, "{ctx}: length of sequence {s}");
                }
            }
            "checkpoint_export" => {
                let meta = self
                    .call(
                        "vm.builtin.attention_kv_cache_get_checkpoint_metadata",
                        &[id("seq")],
                    )
                    .expect(&ctx);
                let meta = meta.view().as_str().unwrap().to_string();
                assert_eq!(meta, step["metadata"].as_str().unwrap(), "{ctx}: metadata");
                let hash = self
                    .call("vm.builtin.attention_kv_cache_get_layout_hash", &[])
                    .expect(&ctx);
                assert_eq!(
                    hash.view().as_str().unwrap(),
                    step["layout_hash"].as_str().unwrap(),
                    "{ctx}: layout hash"
                );
                let mut groups = Vec::new();
                for (g, r) in step["groups"].as_array().unwrap().iter().enumerate() {
                    let t = Expected::empty_like(r);
                    self.call(
                        "vm.builtin.attention_kv_cache_export_page_group",
                        &[id("seq"), Any::from(g as i64), Any::from(t.clone())],
                    )
                    .expect(&ctx);
                    self.fx
                        .expected
                        .assert_same(&t, r, &format!("{ctx} group {g}"));
                    groups.push(t);
                }
                self.checkpoint = Some((meta, groups));
            }
            "checkpoint_import" => {
                let (meta, groups) = self.checkpoint.clone().expect("an exported checkpoint");
                self.call(
                    "vm.builtin.attention_kv_cache_prepare_import",
                    &[id("seq"), Any::from(meta.as_str())],
                )
                .expect(&ctx);
                for (g, t) in groups.iter().enumerate() {
                    self.call(
                        "vm.builtin.attention_kv_cache_import_page_group",
                        &[id("seq"), Any::from(g as i64), Any::from(t.clone())],
                    )
                    .expect(&ctx);
                }
                self.call("vm.builtin.attention_kv_cache_finish_import", &[id("seq")])
                    .expect(&ctx);
            }
            "attention_parts" => {
                let n = step["n"].as_i64().unwrap();
                self.call(
                    "vm.builtin.kv_state_begin_forward",
                    &[shape(&[step["seq"].as_i64().unwrap()]), shape(&[n])],
                )
                .expect(&ctx);
                let e = &self.fx.expected;
                let (q, k, v) = (
                    e.tensor(&step["q"]),
                    e.tensor(&step["k"]),
                    e.tensor(&step["v"]),
                );
                let sm = Any::from(0.25f64);
                let o = Expected::empty_like(&step["self_o"]);
                let lse = Expected::empty_like(&step["self_lse"]);
                self.call(
                    "vm.builtin.attention_kv_cache_self_attention",
                    &[
                        id("layer"),
                        sm.clone(),
                        Any::from(q.clone()),
                        Any::from(k),
                        Any::from(v),
                        Any::from(o.clone()),
                        Any::from(lse.clone()),
                    ],
                )
                .expect(&ctx);
                e.assert_same(&o, &step["self_o"], &format!("{ctx}: self attention"));
                e.assert_same(
                    &lse,
                    &step["self_lse"],
                    &format!("{ctx}: self attention lse"),
                );
                let o = Expected::empty_like(&step["cross_o"]);
                let lse = Expected::empty_like(&step["cross_lse"]);
                self.call(
                    "vm.builtin.attention_kv_cache_cross_attention",
                    &[
                        id("layer"),
                        sm,
                        Any::from(q),
                        Any::from(o.clone()),
                        Any::from(lse.clone()),
                    ],
                )
                .expect(&ctx);
                e.assert_same(&o, &step["cross_o"], &format!("{ctx}: cross attention"));
                e.assert_same(
                    &lse,
                    &step["cross_lse"],
                    &format!("{ctx}: cross attention lse"),
                );
                self.call("vm.builtin.kv_state_end_forward", &[])
                    .expect(&ctx);
                self.call("vm.builtin.kv_state_popn", &[id("seq"), Any::from(n)])
                    .expect(&ctx);
            }
            "bad" => self.bad(step, &ctx),
            other => panic!("{ctx}: unknown op {other}"),
        }
    }

    fn forward(&mut self, step: &Value, ctx: &str) {
        let seqs = ints(&step["seqs"]);
        let decode = step["op"] == "decode";
        let (flat, lengths): (Vec<i32>, Vec<i64>) = if decode {
            (tokens(&step["tokens"]), vec![1; seqs.len()])
        } else {
            let per: Vec<Vec<i32>> = step["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(tokens)
                .collect();
            let lengths = per.iter().map(|t| t.len() as i64).collect();
            (per.concat(), lengths)
        };
        let tree = step.get("tree").map(ints);
        let model = self.model();
        let cache = self.cache.clone().unwrap();
        model
            .begin_forward(&cache, &seqs, &lengths, tree.as_deref())
            .expect(ctx);
        if let Some(r) = step.get("positions") {
            let pos = self
                .call("vm.builtin.attention_kv_cache_get_query_positions", &[])
                .expect(ctx);
            let pos = Tensor::from_any_view(&pos.view(), "positions").unwrap();
            self.fx
                .expected
                .assert_same(&pos, r, &format!("{ctx}: query positions"));
        }
        let logits = model.run(&cache, &flat, decode).expect(ctx);
        model.end_forward(&cache).expect(ctx);
        self.fx
            .expected
            .assert_same(&logits, &step["logits"], &format!("{ctx}: logits"));
        let argmax: Vec<i64> = llm_support::argmax_rows(&logits)
            .into_iter()
            .map(|t| t as i64)
            .collect();
        assert_eq!(argmax, ints(&step["argmax"]), "{ctx}: greedy tokens");
        self.forwards += 1;
    }

    /// A call tvmrt must refuse, leaving the cache as it was.
    fn bad(&mut self, step: &Value, ctx: &str) {
        let expect = step["expect"].as_str().unwrap();
        let id = |k: &str| Any::from(step[k].as_i64().unwrap());
        let r = match step["call"].as_str().unwrap() {
            "add" => self.call("vm.builtin.kv_state_add_sequence", &[id("seq")]),
            "remove" => self.call("vm.builtin.kv_state_remove_sequence", &[id("seq")]),
            "popn" => self.call("vm.builtin.kv_state_popn", &[id("seq"), id("n")]),
            "fork" => self.call(
                "vm.builtin.kv_state_fork_sequence",
                &[id("parent"), id("child"), id("pos")],
            ),
            "begin_forward" => {
                let mut args = vec![shape(&ints(&step["seqs"])), shape(&ints(&step["lengths"]))];
                if let Some(t) = step.get("tree") {
                    args.push(shape(&ints(t)));
                }
                self.call("vm.builtin.kv_state_begin_forward", &args)
            }
            "attention_without_forward" => self
                .model()
                .run(self.cache.as_ref().unwrap(), &[1, 2], true)
                .map(|_| Any::none()),
            other => panic!("{ctx}: unknown bad call {other}"),
        };
        let e = match r {
            Ok(_) => panic!("{ctx}: expected an error containing {expect:?}"),
            Err(e) => e,
        };
        assert!(
            e.message.contains(expect),
            "{ctx}: expected an error containing {expect:?}, got {e}"
        );
    }
}

#[test]
fn scenarios_give_tvms_logits_bit_for_bit() {
    let fx = Fixture::get();
    let mut forwards = 0;
    let names: Vec<&str> = fx.trace["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    for scenario in fx.trace["scenarios"].as_array().unwrap() {
        let mut r = Replay {
            fx,
            scenario: scenario["name"].as_str().unwrap().to_string(),
            model: None,
            cache: None,
            checkpoint: None,
            forwards: 0,
        };
        for (i, step) in scenario["steps"].as_array().unwrap().iter().enumerate() {
            r.step(i, step);
        }
        forwards += r.forwards;
    }
    let recorded = fx.trace["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["steps"].as_array().unwrap())
        .filter(|s| s["op"] == "prefill" || s["op"] == "decode")
        .count();
    assert_eq!(forwards, recorded);
    assert!(forwards > 100, "{forwards} forwards compared");
    for want in [
        "prefill_decode",
        "batch_two",
        "chunked_prefill",
        "fork",
        "wide_fork",
        "popn",
        "remove_readd",
        "sliding_window",
        "token_tree",
        "checkpoint",
        "bf16_weights",
        "bad_input",
    ] {
        assert!(names.contains(&want), "scenario {want} is missing");
    }
}

#[test]
fn greedy_generation_gives_tvms_tokens() {
    let fx = Fixture::get();
    let scenario = &fx.trace["scenarios"][0];
    assert_eq!(scenario["name"], "prefill_decode");
    let steps = scenario["steps"].as_array().unwrap();
    let prompt = tokens(&steps[2]["tokens"][0]);
    let want: Vec<i32> = steps
        .iter()
        .filter(|s| s["op"] == "prefill" || s["op"] == "decode")
        .map(|s| *ints(&s["argmax"]).last().unwrap() as i32)
        .collect();
    let model = fx.model("weights");
    let cache = model.create_cache(&CacheOptions::default()).unwrap();
    let g = model
        .generate_greedy(&cache, 7, &prompt, want.len(), None)
        .unwrap();
    assert_eq!(g.tokens, want);
    assert_eq!(g.decode_steps.len(), want.len() - 1);
    // Out-of-vocabulary prompts are refused before the model's embedding reads them.
    let e = model
        .generate_greedy(&cache, 8, &[1, 128], 2, None)
        .unwrap_err();
    assert!(e.message.contains("outside the vocabulary"), "{e}");
}

#[test]
fn the_cache_is_a_relax_vm_paged_attention_kv_cache() {
    let fx = Fixture::get();
    let cache = fx
        .model("weights")
        .create_cache(&CacheOptions::default())
        .unwrap();
    let key = tvmrt::object::type_registry::index_to_key(cache.type_index()).unwrap();
    assert_eq!(key, "relax.vm.PagedAttentionKVCache");
    // The KV-state functions refuse other objects.
    let e = global("vm.builtin.kv_state_add_sequence")
        .call_values(&[shape(&[1]), Any::from(0i64)])
        .unwrap_err();
    assert!(e.message.contains("relax.vm.KVState"), "{e}");
    let _ = obj(&cache);
}
