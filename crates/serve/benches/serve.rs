//! `tvmrt serve` under load (run by benches/serve/run.sh): the engine and the HTTP front in
//! this process on 127.0.0.1, clients streaming greedy completions over plain HTTP at
//! concurrency 1, 4 and 16; and the model's bare decode step (the floor of the time per
//! output token).
//!
//!     cargo bench -p tvmrt-serve --bench serve -- [MODEL_DIR LIB PROMPTS_JSON_OUT]
//!     cargo bench -p tvmrt-serve --bench serve -- --profile   # per-kernel batch_decode
//!
//! `TVMRT_SERVE_DEVICE=cuda:0` with `lib_cuda.so` runs it on a GPU (benches/gpu/run.sh);
//! `--check` first compares greedy tokens with TVM's (expected.json), exiting 1 if any differ
//! (`--solo`: each prompt alone rather than all in one batch).
//!
//! Every request: a random prompt of 16 to 48 token ids (fixed seed), 64 new tokens (the stop
//! token is masked with logit_bias, so every answer has exactly 64). The prompts are written
//! to PROMPTS_JSON_OUT for TVM's sequential reference (benches/serve/tvm_reference.py).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tvmrt::object::ObjectRef;
use tvmrt_serve::config::ChatConfig;
use tvmrt_serve::engine::{Engine, EngineConfig};
use tvmrt_serve::http::App;
use tvmrt_serve::model::Model;
use tvmrt_serve::sampler::Rng;

const NEW_TOKENS: usize = 64;

/// Where the model runs: `TVMRT_SERVE_DEVICE` (`cpu`, `cuda:0`, ...; the library must be built
/// for it), the CPU by default.
fn device() -> tvmrt::abi::DLDevice {
    let text = std::env::var("TVMRT_SERVE_DEVICE").unwrap_or_else(|_| "cpu".into());
    tvmrt::device::parse_device(&text).unwrap()
}

/// `device()` as its driver names it (`runtime.GetDeviceAttr`'s device name): which GPU, or
/// which OpenCL device (NVIDIA's driver or POCL's CPU device).
fn device_label() -> String {
    let dev = device();
    let name = tvmrt::device::api_of(dev)
        .and_then(|api| api.get_attr(dev, tvmrt::device::DeviceAttr::DeviceName))
        .ok()
        .and_then(|v| v.view().as_str().map(str::to_owned))
        .unwrap_or_default();
    match name.as_str() {
        "" => tvmrt::device::device_name(dev),
        _ => format!("{} ({name})", tvmrt::device::device_name(dev)),
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn prompts(count: usize) -> Vec<Vec<i32>> {
    let mut rng = Rng::new(2026);
    (0..count)
        .map(|_| {
            let len = 16 + (rng.uniform() * 33.0) as usize;
            (0..len)
                .map(|_| 4 + (rng.uniform() * 316.0) as i32)
                .collect()
        })
        .collect()
}

/// A cache holding `batch` sequences, each prefilled with one of the benchmark's prompts, and
/// the sequence ids and next tokens of a decode step over all of them.
fn prefilled(model: &Model, batch: usize) -> (ObjectRef, Vec<i64>, Vec<i32>) {
    let cache = model.create_cache(16, 8704, 128, 16).unwrap();
    let seqs: Vec<i64> = (0..batch as i64).collect();
    for (s, p) in seqs.iter().zip(prompts(batch)) {
        model.add_sequence(&cache, *s).unwrap();
        model.prefill(&cache, &[*s], &[&p], false).unwrap();
    }
    (cache, seqs, vec![7i32; batch])
}

/// The benchmark's engine on `device()`: 16 sequences, `recycling` finished ones kept for
/// prefix sharing.
fn start_engine(dir: &Path, lib: &Path, recycling: usize) -> Engine {
    Engine::start(
        lib.to_path_buf(),
        dir.to_path_buf(),
        EngineConfig {
            max_num_sequence: 16,
            max_total_sequence_length: 8704,
            prefill_chunk_size: 128,
            max_queue: 256,
            prefix_cache_max_num_recycling_seqs: recycling,
            device: device(),
        },
    )
    .unwrap()
}

/// The median time of one `batch_decode` step of `batch` sequences.
fn bare_decode(dir: &Path, lib: &Path, batch: usize) -> Duration {
    let model = Model::load(lib, dir, device()).unwrap();
    let (cache, seqs, tokens) = prefilled(&model, batch);
    let mut times = Vec::new();
    for _ in 0..NEW_TOKENS {
        let t = Instant::now();
        let logits = model.decode(&cache, &seqs, &tokens).unwrap();
        let _ = tvmrt_serve::model::read_f32(&logits).unwrap();
        times.push(t.elapsed().as_secs_f64());
    }
    Duration::from_secs_f64(percentile(&mut times, 0.5))
}

/// tvmrt's profiler on one `batch_decode` step of `batch` sequences (after a few warm-up
/// steps): where the step's time goes, kernel by kernel.
fn profile_decode(dir: &Path, lib: &Path, batch: usize) -> String {
    let model = Model::load_profiling(lib, dir, device()).unwrap();
    let (cache, seqs, tokens) = prefilled(&model, batch);
    for _ in 0..8 {
        model.decode(&cache, &seqs, &tokens).unwrap();
    }
    model.profile_decode(&cache, &seqs, &tokens).unwrap()
}

/// The median cost of the engine's per-token work besides the forward: the model's logit-bias
/// kernel on one row, argmax, and the incremental detokenization of one token.
fn per_token_costs(dir: &Path, lib: &Path) {
    let model = Model::load(lib, dir, device()).unwrap();
    let codec = tvmrt_serve::text::TextCodec::load(dir).unwrap();
    let row: Vec<f32> = (0..model.vocab_size).map(|i| (i % 7) as f32).collect();
    let median = |f: &mut dyn FnMut()| {
        let mut t: Vec<f64> = (0..200)
            .map(|_| {
                let s = Instant::now();
                f();
                s.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        percentile(&mut t, 0.5)
    };
    let bias = median(&mut || {
        let mut rows = vec![row.clone()];
        model
            .process_logits(&mut rows, &[(0, 2, -100.0)], &[], &[[0.0, 0.0, 1.0]])
            .unwrap();
    });
    // As a decode step's logits take it: in place on the device, then read back (the read
    // alone is part of the bare step).
    let on_device =
        tvmrt_serve::model::tensor_f32_on(&row, &[1, 1, model.vocab_size], device()).unwrap();
    let read = median(&mut || {
        std::hint::black_box(tvmrt_serve::model::read_f32(&on_device).unwrap());
    });
    let in_place = median(&mut || {
        model
            .process_logits_in_place(&on_device, &[(0, 2, -1.0)], &[], &[[0.0, 0.0, 1.0]])
            .unwrap();
        std::hint::black_box(tvmrt_serve::model::read_f32(&on_device).unwrap());
    }) - read;
    let argmax = median(&mut || {
        std::hint::black_box(tvmrt_serve::sampler::argmax(&row));
    });
    let tokens: Vec<i32> = prompts(1)[0].clone();
    let detok = median(&mut || {
        let mut d = tvmrt_serve::text::Detokenized::default();
        for k in 1..=tokens.len() {
            d.push(&codec, &tokens[..k], &[], false);
            d.take_delta(&[], false);
        }
    }) / tokens.len() as f64;
    println!(
        "per token, median: logit bias kernel {bias:.2} us on host rows, {in_place:.2} us in \
         place on a decode's logits (beyond their read back, {read:.2} us), argmax \
         {argmax:.2} us, detokenization {detok:.2} us"
    );
}

/// The engine driven through its Rust API, one request at a time (16 of them): the median over
/// the requests of (last token - first token) / (tokens - 1) as the receiver sees them, as TPOT
/// is defined over HTTP. (The median of single gaps is not robust: a receiver woken late reads
/// the tokens queued meanwhile back to back, and one such run of near-zero gaps took the median
/// to 0.9 us.)
fn engine_tpot(dir: &Path, lib: &Path) -> f64 {
    use tvmrt_serve::engine::{Event, Request};
    use tvmrt_serve::sampler::SamplingParams;
    let engine = start_engine(dir, lib, 0);
    let mut per_request = Vec::new();
    for p in prompts(16) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let params = SamplingParams {
            temperature: 0.0,
            max_tokens: Some(NEW_TOKENS),
            logit_bias: vec![(2, -100.0)],
            ..Default::default()
        };
        engine
            .submit(Request {
                prompt: p,
                params,
                events: tx,
            })
            .unwrap();
        let mut times = Vec::new();
        while let Some(e) = rx.blocking_recv() {
            match e {
                Event::Delta { .. } => times.push(Instant::now()),
                Event::Done { .. } | Event::Error(_) => break,
                _ => {}
            }
        }
        if let [first, .., last] = times[..] {
            per_request.push((last - first).as_secs_f64() / (times.len() - 1) as f64);
        }
    }
    percentile(&mut per_request, 0.5)
}

/// Greedy tokens of expected.json's prompts (expected_q4f16_1.json's for model_q4f16_1/; TVM's
/// runtime driving the CPU build) through the engine on `device()`, all at once in one batch
/// (or `solo`, one after another: a float16 model's tokens depend on where a prompt's prefill
/// is cut), compared token for token up to TVM's first stop token; prints a PASS or FAIL line
/// per prompt and returns whether all passed. On a GPU the logits differ from the CPU's by
/// rounding, so a late token may differ where two logits are within that rounding: the line
/// says where the first difference is.
fn check_greedy(dir: &Path, lib: &Path, solo: bool) -> bool {
    use tvmrt_serve::engine::{Event, Request};
    use tvmrt_serve::sampler::SamplingParams;
    // model/ -> expected.json, model_q4f16_1/ -> expected_q4f16_1.json
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    let suffix = name.strip_prefix("model").unwrap_or("");
    let text = std::fs::read_to_string(dir.join(format!("../expected{suffix}.json"))).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ids = |x: &serde_json::Value| -> Vec<i32> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_i64().unwrap() as i32)
            .collect()
    };
    let engine = start_engine(dir, lib, 0);
    let collect = |mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>| {
        let mut got = Vec::new();
        while let Some(e) = rx.blocking_recv() {
            match e {
                Event::Delta { token: t, .. } => got.push(t),
                Event::Done { .. } => break,
                Event::Error(e) => panic!("{e}"),
                _ => {}
            }
        }
        got
    };
    let mut runs = Vec::new();
    for case in v["cases"].as_array().unwrap() {
        let want: Vec<i32> = ids(&case["greedy"])
            .into_iter()
            .take_while(|&t| t != 2)
            .collect();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let params = SamplingParams {
            temperature: 0.0,
            max_tokens: Some(want.len().max(1)),
            ..Default::default()
        };
        let prompt = ids(&case["prompt_ids"]);
        engine
            .submit(Request {
                prompt,
                params,
                events: tx,
            })
            .unwrap();
        // Alone, a prompt is cut into prefill chunks where TVM's reference cut it.
        let answer = if solo { Ok(collect(rx)) } else { Err(rx) };
        runs.push((want, answer));
    }
    let mut all = true;
    for (i, (want, answer)) in runs.into_iter().enumerate() {
        let got = answer.unwrap_or_else(collect);
        let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        let ok = got == want;
        all &= ok;
        println!(
            "{} greedy tokens of case {i} on {}: {same} of {} equal to TVM's",
            if ok { "PASS" } else { "FAIL" },
            tvmrt::device::device_name(device()),
            want.len()
        );
    }
    all
}

/// One streamed completion: (time to first token, time per output token after the first,
/// tokens), as vLLM's benchmark defines them.
fn stream_one(addr: SocketAddr, prompt: &[i32]) -> (f64, f64, usize) {
    let body = serde_json::json!({"prompt": prompt, "max_tokens": NEW_TOKENS, "temperature": 0,
                                  "stream": true, "logit_bias": {"2": -100}})
    .to_string();
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    write!(
        s,
        "POST /v1/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut stamps = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if line.starts_with("data: {") && line.contains("\"finish_reason\":null") {
            stamps.push(start.elapsed().as_secs_f64());
        }
        if line.starts_with("data: [DONE]") {
            break;
        }
    }
    let n = stamps.len();
    let tpot = (stamps[n - 1] - stamps[0]) / (n.max(2) - 1) as f64;
    (stamps[0], tpot, n)
}

fn main() {
    let (args, dir, lib) = common::model_args();
    let levels = [1usize, 4, 16];
    let per_level = |c: usize| (c * 4).max(16);
    if let Some(out) = args.get(2) {
        let all: Vec<Vec<i32>> = prompts(per_level(16));
        std::fs::write(
            out,
            serde_json::json!({"new_tokens": NEW_TOKENS, "prompts": all}).to_string(),
        )
        .unwrap();
    }

    println!("device: {}", device_label());
    let solo = std::env::args().any(|a| a == "--solo");
    if std::env::args().any(|a| a == "--check") && !check_greedy(&dir, &lib, solo) {
        std::process::exit(1);
    }
    if std::env::args().any(|a| a == "--profile") {
        for batch in [1, 16] {
            println!(
                "batch_decode, batch {batch}:\n{}",
                profile_decode(&dir, &lib, batch)
            );
        }
        per_token_costs(&dir, &lib);
        return;
    }
    let step1 = bare_decode(&dir, &lib, 1);
    let step16 = bare_decode(&dir, &lib, 16);
    println!(
        "bare decode step (batch_decode + logits read back), median: batch 1 {:.1} us, \
         batch 16 {:.1} us",
        step1.as_secs_f64() * 1e6,
        step16.as_secs_f64() * 1e6
    );

    let chat = ChatConfig::load(&dir).unwrap();
    let engine_alone = engine_tpot(&dir, &lib);
    println!(
        "engine alone (no HTTP), concurrency 1: time per output token median {:.1} us ({:.2}x \
         the bare step)",
        engine_alone * 1e6,
        engine_alone / step1.as_secs_f64()
    );
    let engine = start_engine(&dir, &lib, 16);
    let metrics = engine.metrics.clone();
    let app = Arc::new(App::new(engine, chat, "model".into(), None));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(tvmrt_serve::http::serve(
        app,
        listener,
        std::future::pending::<()>(),
    ));
    // Warm up.
    stream_one(addr, &prompts(1)[0]);

    let (mut tps1, mut tps16) = (0.0, 0.0);
    println!(
        "concurrency | requests | output tokens/s | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms)"
    );
    for &c in &levels {
        let all = prompts(per_level(c));
        let chunks: Vec<Vec<Vec<i32>>> = (0..c)
            .map(|k| all.iter().skip(k).step_by(c).cloned().collect())
            .collect();
        let start = Instant::now();
        let (before_n, before_mean) = metrics.tpot.count_and_mean();
        let results: Vec<(f64, f64, usize)> = std::thread::scope(|s| {
            let hs: Vec<_> = chunks
                .iter()
                .map(|mine| {
                    s.spawn(move || mine.iter().map(|p| stream_one(addr, p)).collect::<Vec<_>>())
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let wall = start.elapsed().as_secs_f64();
        let tokens: usize = results.iter().map(|r| r.2).sum();
        assert_eq!(
            tokens,
            all.len() * NEW_TOKENS,
            "every answer has {NEW_TOKENS} tokens"
        );
        let mut ttft: Vec<f64> = results.iter().map(|r| r.0 * 1e3).collect();
        let mut tpot: Vec<f64> = results.iter().map(|r| r.1 * 1e3).collect();
        // The engine's own mean time between a sequence's tokens (its /metrics histogram),
        // over this level's requests.
        let (after_n, after_mean) = metrics.tpot.count_and_mean();
        let engine_tpot = (after_mean.as_secs_f64() * after_n as f64
            - before_mean.as_secs_f64() * before_n as f64)
            / (after_n - before_n).max(1) as f64;
        let tps = tokens as f64 / wall;
        if c == 1 {
            tps1 = tps;
        }
        tps16 = tps;
        println!(
            "{c:>11} | {:>8} | {tps:>15.0} | {:>7.2} / {:<9.2} | {:>7.3} / {:<7.3} | {:.3}",
            all.len(),
            percentile(&mut ttft, 0.5),
            percentile(&mut ttft, 0.99),
            percentile(&mut tpot, 0.5),
            percentile(&mut tpot, 0.99),
            engine_tpot * 1e3,
        );
        if c == 1 {
            println!(
                "            (concurrency 1: TPOT p50 {:.2}x, engine mean TPOT {:.2}x the bare \
                 batch-1 decode step)",
                percentile(&mut tpot, 0.5) / (step1.as_secs_f64() * 1e3),
                engine_tpot / step1.as_secs_f64()
            );
        }
    }
    println!("(tokens/s at 16 over 1: {:.2}x)", tps16 / tps1);
}
