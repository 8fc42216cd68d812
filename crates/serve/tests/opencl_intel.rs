//! The engine on opencl:0 (`tvmrt serve --device opencl`) with the MLC-LLM fixture built for
//! OpenCL (tests/fixtures/mlc/model/lib_opencl.so), on Intel's CPU OpenCL runtime from PyPI
//! (`.ci/venv.sh intel_opencl`), driven through Debian's ICD loader by `OCL_ICD_VENDORS`.
//! Greedy tokens must equal those TVM's runtime gives with the CPU build
//! (tests/fixtures/mlc/expected.json), and an echoed prompt's logprobs (every position's logits,
//! `batch_verify`) TVM's within float rounding (expected_prompt_logprobs.json).
//!
//! Each prompt is served alone and fits one prefill chunk: a prefill over tokens already in the
//! cache (a second chunk, or a shared prefix) merges two attention states with TVM's
//! `tir_attention_merge_state` kernel, which races on a CPU OpenCL device (its D/4 threads along
//! x each read and rewrite the same lse value, which is right only where they run in lockstep, as
//! a GPU warp does). `merge_state_races_where_work_items_run_one_by_one` shows that, and that the
//! paged prefill kernel itself matches the CPU build.
//!
//! Run by `.ci/test.sh` after installing the venv (`test = false` in Cargo.toml keeps it out of a
//! plain `cargo test`). POCL, the default OpenCL driver of the other tests, zeros
//! `batch_prefill_ragged_kv`'s output (README).

use std::path::PathBuf;
use std::sync::Once;

use tokio::sync::mpsc::unbounded_channel;
use tvmrt::device::{api_of, parse_device, DeviceAttr};
use tvmrt::dtype::dtypes;
use tvmrt::tensor::Tensor;
use tvmrt::Any;
use tvmrt_serve::engine::{Engine, EngineConfig, Event, Request};
use tvmrt_serve::sampler::SamplingParams;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> PathBuf {
    root().join("tests/fixtures/mlc/model")
}

/// Points the ICD loader at Intel's runtime alone (before anything opens OpenCL in this
/// process) and checks that opencl:0 is Intel's.
fn intel_runtime() -> tvmrt::abi::DLDevice {
    static SET: Once = Once::new();
    SET.call_once(|| {
        let lib = root().join(".venv/intel_opencl/lib/libintelocl.so");
        assert!(
            lib.exists(),
            "{} is missing: run `.ci/venv.sh intel_opencl`",
            lib.display()
        );
        std::env::set_var("OCL_ICD_VENDORS", lib);
    });
    let dev = parse_device("opencl:0").unwrap();
    let version = api_of(dev)
        .unwrap()
        .get_attr(dev, DeviceAttr::DriverVersion)
        .unwrap();
    let version = version.view().as_str().unwrap_or("").to_string();
    // The pinned runtime's driver version (POCL reports its own, e.g. `3.1`).
    assert!(
        version.starts_with("2026."),
        "opencl:0's driver is `{version}`, not Intel's runtime 2026.x"
    );
    dev
}

fn ids(x: &serde_json::Value) -> Vec<i32> {
    x.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap() as i32)
        .collect()
}

#[test]
fn greedy_tokens_on_intel_opencl_are_tvms() {
    let dev = intel_runtime();
    let dir = model_dir();
    let text = std::fs::read_to_string(dir.join("../expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let engine = Engine::start(
        dir.join("lib_opencl.so"),
        dir.clone(),
        EngineConfig {
            max_num_sequence: 4,
            max_total_sequence_length: 1024,
            prefill_chunk_size: 128,
            max_queue: 8,
            prefix_cache_max_num_recycling_seqs: 0,
            device: dev,
        },
    )
    .unwrap();
    // TVM's prompt logprobs (CPU build), by prompt: completion prompts are echoed with them.
    let text = std::fs::read_to_string(dir.join("../expected_prompt_logprobs.json")).unwrap();
    let refs: serde_json::Value = serde_json::from_str(&text).unwrap();
    let prompt_ref = |prompt: &[i32]| {
        refs["cases"].as_array().unwrap().iter().find_map(|c| {
            (ids(&c["prompt_ids"]) == prompt).then(|| {
                let lps = c["prompt_logprobs"].as_array().unwrap();
                lps.iter()
                    .map(|e| e["logprob"].as_f64().unwrap())
                    .collect::<Vec<_>>()
            })
        })
    };
    let mut served = 0;
    let mut echoed = 0;
    for (i, case) in v["cases"].as_array().unwrap().iter().enumerate() {
        let prompt = ids(&case["prompt_ids"]);
        if prompt.len() > 128 {
            continue; // two prefill chunks: the merge kernel's race (above)
        }
        let want: Vec<i32> = ids(&case["greedy"])
            .into_iter()
            .take_while(|&t| t != 2)
            .collect();
        let want_prompt = prompt_ref(&prompt);
        let (tx, mut rx) = unbounded_channel();
        engine
            .submit(Request {
                prompt,
                params: SamplingParams {
                    temperature: 0.0,
                    max_tokens: Some(want.len()),
                    // Every position's logits through `batch_verify` on the device.
                    echo: want_prompt.is_some(),
                    logprobs: want_prompt.as_ref().map(|_| 0),
                    ..Default::default()
                },
                events: tx,
            })
            .unwrap();
        let mut got = Vec::new();
        loop {
            match rx.blocking_recv().expect("the engine answers") {
                Event::Prompt { logprobs, .. } => {
                    let want = want_prompt.as_ref().expect("echo asked");
                    assert_eq!(logprobs.len(), want.len(), "case {i}");
                    for (j, (g, w)) in logprobs.iter().zip(want).enumerate() {
                        let d = (f64::from(g.logprob) - w).abs();
                        assert!(d < 1e-3, "case {i}, prompt token {}: {g:?} vs {w}", j + 1);
                    }
                    echoed += 1;
                }
                Event::Delta { token: t, .. } => got.push(t),
                Event::Done { .. } => break,
                Event::Error(e) => panic!("case {i}: {e}"),
                _ => {}
            }
        }
        assert_eq!(
            got, want,
            "case {i}: greedy tokens on opencl:0 differ from TVM's"
        );
        served += 1;
    }
    assert_eq!(served, 7, "every prompt of one chunk was served");
    assert_eq!(echoed, 5, "every completion prompt of one chunk was echoed");
}

fn tensor_f32(v: &[f32], shape: &[i64], dev: tvmrt::abi::DLDevice) -> Tensor {
    let t = Tensor::empty(shape, dtypes::FLOAT32, dev).unwrap();
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    t.copy_from_bytes(&b).unwrap();
    t
}

fn tensor_i32(v: &[i32], dev: tvmrt::abi::DLDevice) -> Tensor {
    let t = Tensor::empty(&[v.len() as i64], dtypes::INT32, dev).unwrap();
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    t.copy_from_bytes(&b).unwrap();
    t
}

fn read(t: &Tensor) -> Vec<f32> {
    tvmrt_serve::model::read_f32(t).unwrap()
}

/// Values in [-0.5, 0.5) from a fixed linear congruential sequence.
fn values(n: usize, seed: &mut u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (*seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn merge_state_races_where_work_items_run_one_by_one() {
    let dev = intel_runtime();
    let cpu = parse_device("cpu").unwrap();
    let dir = model_dir();
    let load = |f: &str| tvmrt::module::load_from_file(dir.join(f).to_str().unwrap(), "").unwrap();
    let (cpu_lib, ocl_lib) = (load("lib.so"), load("lib_opencl.so"));

    // The paged prefill kernel (queries over 32 cached tokens in two pages) matches the CPU
    // build's, output and lse.
    let mut seed = 1;
    let pages = values(8 * 1024, &mut seed);
    let q = values(16 * 64, &mut seed);
    let mut results = Vec::new();
    for (lib, name, d) in [
        (&cpu_lib, "batch_prefill_paged_kv_cpu", cpu),
        (&ocl_lib, "batch_prefill_paged_kv", dev),
    ] {
        let f = lib.get_function(name, true).unwrap().unwrap();
        let out = Tensor::empty(&[16, 4, 16], dtypes::FLOAT32, d).unwrap();
        let lse = Tensor::empty(&[16, 4], dtypes::FLOAT32, d).unwrap();
        let positions: Vec<i32> = (32..48).collect();
        f.call_values(&[
            Any::from(tensor_f32(&q, &[16, 4, 16], d)),
            Any::from(tensor_i32(&[0, 16], d)),
            Any::from(tensor_f32(&pages, &[8, 2, 2, 16, 16], d)),
            Any::from(tensor_i32(&[0, 2], d)),
            Any::from(tensor_i32(&[5, 2], d)),
            Any::from(tensor_i32(&[16], d)),
            Any::from(tensor_i32(&[0], d)),
            Any::from(tensor_i32(&positions, d)),
            Any::from(out.clone()),
            Any::from(lse.clone()),
            Any::from(0i64),
            Any::from(0i64),
            Any::from(1.0f64),
            Any::from(10000.0f64),
            Any::from(0.25f64),
        ])
        .unwrap();
        results.push((read(&out), read(&lse)));
    }
    assert!(max_diff(&results[0].0, &results[1].0) < 1e-5);
    assert!(max_diff(&results[0].1, &results[1].1) < 1e-5);

    // tir_attention_merge_state(V, S, V_other, S_other) on one row: lse in base 2, merged in
    // place. Each of the 4 work-items along x (16 / 4 values of V each) merges S again, so the
    // first quarter of V is right and S is merged 4 times over.
    let (v, s) = (values(64, &mut seed), values(4, &mut seed));
    let (vo, so) = (values(64, &mut seed), values(4, &mut seed));
    let f = ocl_lib
        .get_function("tir_attention_merge_state", true)
        .unwrap()
        .unwrap();
    let (vt, st) = (
        tensor_f32(&v, &[1, 4, 16], dev),
        tensor_f32(&s, &[1, 4], dev),
    );
    f.call_values(&[
        Any::from(vt.clone()),
        Any::from(st.clone()),
        Any::from(tensor_f32(&vo, &[1, 4, 16], dev)),
        Any::from(tensor_f32(&so, &[1, 4], dev)),
    ])
    .unwrap();
    let (got_v, got_s) = (read(&vt), read(&st));
    let merge = |a: f32, b: f32| {
        let m = a.max(b);
        m + ((a - m).exp2() + (b - m).exp2()).log2()
    };
    for h in 0..4 {
        let once = merge(s[h], so[h]);
        let (w, wo) = ((s[h] - once).exp2(), (so[h] - once).exp2());
        for k in 0..4 {
            let want = v[h * 16 + k] * w + vo[h * 16 + k] * wo;
            assert!(
                (got_v[h * 16 + k] - want).abs() < 1e-5,
                "head {h}: first quarter of V"
            );
        }
        let mut raced = s[h];
        for _ in 0..4 {
            raced = merge(raced, so[h]);
        }
        assert!(
            (got_s[h] - raced).abs() < 1e-4 && (got_s[h] - once).abs() > 1e-2,
            "head {h}: lse {} (merged once {once}, four times {raced})",
            got_s[h]
        );
    }
}

/// The model's logit kernels on opencl:0, their arguments staged into device buffers the
/// model keeps, on rows from the host and in place on a device tensor: a logit bias and the
/// penalties give OpenAI's definitions (`sampler::process_logits`), and
/// `softmax_with_temperature` the softmax of logits over temperature; a second, smaller batch
/// reuses the buffers.
#[test]
fn logit_kernels_on_intel_opencl_follow_the_definitions() {
    use std::collections::HashMap;
    use tvmrt_serve::model::Model;
    use tvmrt_serve::sampler::process_logits;
    let dev = intel_runtime();
    let dir = model_dir();
    let model = Model::load(&dir.join("lib_opencl.so"), &dir, dev).unwrap();
    let vocab = model.vocab_size as usize;
    let row = |r: usize| -> Vec<f32> {
        (0..vocab)
            .map(|i| ((i * 7 + r * 13) % 29) as f32 * 0.25 - 3.0)
            .collect()
    };
    let params = [
        (vec![(5, 1.5), (319, -2.0)], 0.5, 0.25),
        (vec![], 0.0, 0.0),
        (vec![(0, 100.0)], -0.75, 1.0),
    ]
    .map(
        |(logit_bias, presence_penalty, frequency_penalty)| SamplingParams {
            logit_bias,
            presence_penalty,
            frequency_penalty,
            ..Default::default()
        },
    );
    let counts = [
        HashMap::from([(5, 2u32), (17, 1)]),
        HashMap::new(),
        HashMap::from([(0, 3u32), (300, 4)]),
    ];
    for batch in [3usize, 1] {
        let (mut bias, mut seen, mut penalties) = (Vec::new(), Vec::new(), Vec::new());
        for (k, (p, c)) in params.iter().zip(&counts).take(batch).enumerate() {
            bias.extend(p.logit_bias.iter().map(|&(t, b)| (k as i32, t, b)));
            seen.extend(c.iter().map(|(&t, &n)| (k as i32, t, n as i32)));
            penalties.push([p.presence_penalty, p.frequency_penalty, 1.0]);
        }
        let mut got: Vec<Vec<f32>> = (0..batch).map(row).collect();
        model
            .process_logits(&mut got, &bias, &seen, &penalties)
            .unwrap();
        // The same kernels on logits where a decode leaves them ([n, 1, vocab] on the device).
        let flat: Vec<f32> = (0..batch).flat_map(row).collect();
        let t = tensor_f32(&flat, &[batch as i64, 1, vocab as i64], dev);
        model
            .process_logits_in_place(&t, &bias, &seen, &penalties)
            .unwrap();
        let in_place = tvmrt_serve::model::read_f32(&t).unwrap();
        assert_eq!(in_place, got.concat(), "in place as through the host");
        for (k, g) in got.iter().enumerate() {
            let mut want = row(k);
            process_logits(&mut want, &params[k], &counts[k]);
            for (i, (a, b)) in g.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() < 1e-5,
                    "batch {batch}, row {k}, token {i}: {a} vs {b}"
                );
            }
        }
        let temps = [1.0f32, 0.5, 2.0];
        let probs = model.softmax(&got, &temps[..batch]).unwrap();
        for (k, (p, g)) in probs.iter().zip(&got).enumerate() {
            let max = g.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f64> = g
                .iter()
                .map(|v| f64::from((v - max) / temps[k]).exp())
                .collect();
            let total: f64 = e.iter().sum();
            for (i, (a, b)) in p.iter().zip(&e).enumerate() {
                let want = b / total;
                assert!(
                    (f64::from(*a) - want).abs() < 1e-6,
                    "batch {batch}, row {k}, token {i}: {a} vs {want}"
                );
            }
        }
    }
}
