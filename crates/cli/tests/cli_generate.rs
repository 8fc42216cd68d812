//! `tvmrt generate` on the TVM-built tiny Llama (tests/fixtures/llm) and on the libraries
//! MLC-LLM built (tests/fixtures/mlc, q0f32 and q4f16_1): the greedy tokens are the ones TVM's
//! runtime chose, timing goes to standard error, errors are one line.

mod cli_support;

use cli_support::{fixtures, tvmrt};

fn llm(name: &str) -> String {
    fixtures()
        .join("llm")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The prompt and greedy tokens of the `prefill_decode` scenario TVM ran.
fn tvm_greedy() -> (Vec<i64>, Vec<i64>) {
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(llm("trace.json")).unwrap()).unwrap();
    let steps = trace["scenarios"][0]["steps"].as_array().unwrap();
    let prompt = steps[2]["tokens"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap())
        .collect();
    let tokens = steps
        .iter()
        .filter(|s| s["op"] == "prefill" || s["op"] == "decode")
        .map(|s| {
            s["argmax"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .as_i64()
                .unwrap()
        })
        .collect();
    (prompt, tokens)
}

fn join(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

#[test]
fn generates_tvms_greedy_tokens() {
    let (prompt, want) = tvm_greedy();
    let (model, weights) = (llm("model.so"), llm("weights"));
    let n = want.len().to_string();
    let args = [
        "generate",
        &model,
        "--weights",
        &weights,
        "--prompt",
        &join(&prompt),
        "--max-tokens",
        &n,
    ];
    let o = tvmrt(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), join(&want));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("tokens/s"), "{err}");

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let o = tvmrt(&json_args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tokens: Vec<i64> = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap())
        .collect();
    assert_eq!(tokens, want);
    assert_eq!(v["decode_ns"].as_array().unwrap().len(), want.len() - 1);
    assert!(v["decode_tokens_per_second"].as_f64().unwrap() > 0.0);
}

#[test]
fn generates_tvms_greedy_tokens_with_mlc_llms_libraries() {
    for (model, expected) in [
        ("model", "expected.json"),
        ("model_q4f16_1", "expected_q4f16_1.json"),
    ] {
        let dir = fixtures().join("mlc").join(model);
        let text = std::fs::read_to_string(fixtures().join("mlc").join(expected)).unwrap();
        let cases: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ids = |v: &serde_json::Value| -> Vec<i64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_i64().unwrap())
                .collect()
        };
        // The prompts of one prefill chunk (128 tokens), which generate takes whole.
        let mut checked = 0;
        for case in cases["cases"].as_array().unwrap() {
            let prompt = ids(&case["prompt_ids"]);
            if prompt.len() > 128 {
                continue;
            }
            let want = ids(&case["greedy"]);
            let (lib, weights) = (dir.join("lib.so"), dir.to_string_lossy().into_owned());
            let o = tvmrt(&[
                "generate",
                &lib.to_string_lossy(),
                "--weights",
                &weights,
                "--prompt",
                &join(&prompt),
                "--max-tokens",
                &want.len().to_string(),
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(
                String::from_utf8_lossy(&o.stdout).trim(),
                join(&want),
                "{model}"
            );
            checked += 1;
        }
        assert!(checked >= 6, "{model}: {checked} prompts");
    }
}

#[test]
fn bad_input_is_one_line() {
    let (model, weights) = (llm("model.so"), llm("weights"));
    for (args, msg) in [
        (vec!["--prompt", "1,128"], "outside the vocabulary of 128"),
        (vec!["--prompt", "1,2", "--max-tokens", "0"], "at least 1"),
        (
            vec!["--prompt", "1,2,3", "--prefill-chunk", "2"],
            "more than --prefill-chunk",
        ),
        (vec!["--prompt", "1", "--page-size", "0"], "page_size"),
    ] {
        let mut all = vec!["generate", model.as_str(), "--weights", weights.as_str()];
        all.extend(args);
        let o = tvmrt(&all);
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        assert_eq!(o.status.code(), Some(1), "{all:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(msg), "{all:?}: {err}");
    }
    let o = tvmrt(&[
        "generate",
        &model,
        "--weights",
        "/nonexistent",
        "--prompt",
        "1",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("tensor-cache.json"));
}
