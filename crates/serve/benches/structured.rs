//! Structured output's cost in the engine (no HTTP), on the MLC fixture (or MODEL_DIR LIB):
//!
//!     cargo bench -p tvmrt-serve --bench structured -- [MODEL_DIR LIB]
//!
//! - one greedy stream at a time: a `json_schema` answer (forced tokens appended without a
//!   decode step each) against free text of the same number of tokens; a regex of 64 free
//!   characters (a mask every step, nothing forced) against 64 free tokens: time per output
//!   token, (last token - first token) / (tokens - 1) as the receiver sees them, median over
//!   the prompts, and the time to the whole answer;
//! - 16 constrained streams at once against 16 free ones: output tokens per second;
//! - the mask alone: the median time of one step's mask of the schema's grammar.
//!
//! `TVMRT_SERVE_DEVICE=cuda:0` with a CUDA library runs the model on a GPU (the mask is applied
//! to the host's copy of the logits).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio::sync::mpsc::unbounded_channel;
use tvmrt_serve::engine::{Engine, EngineConfig, Event, Request};
use tvmrt_serve::sampler::SamplingParams;
use tvmrt_serve::structured::{Constraint, Matcher};

const PROMPTS: usize = 16;

fn schema() -> Constraint {
    Constraint::JsonSchema {
        schema: json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "member": {"type": "boolean"},
            "pet": {"enum": ["cat", "dog", "none"]},
            "scores": {"type": "array", "items": {"type": "integer", "minimum": 0,
                       "maximum": 99}, "minItems": 2, "maxItems": 4}},
            "required": ["name", "age", "member", "pet", "scores"],
            "additionalProperties": false}),
        compact: true,
    }
}

fn prompt(k: usize) -> Vec<i32> {
    (0..24)
        .map(|i| 4 + ((k * 37 + i * 11) % 300) as i32)
        .collect()
}

/// Greedy parameters: `constraint`, else free text of exactly `max_tokens` (the stop token
/// masked by logit_bias).
fn params(constraint: Option<Constraint>, max_tokens: usize) -> SamplingParams {
    let free = constraint.is_none();
    SamplingParams {
        temperature: 0.0,
        max_tokens: Some(max_tokens),
        logit_bias: if free { vec![(2, -100.0)] } else { Vec::new() },
        constraint,
        ..Default::default()
    }
}

/// The arrival time of each token of one request.
fn stamps(e: &Engine, prompt: Vec<i32>, params: SamplingParams) -> Vec<Instant> {
    let (tx, mut rx) = unbounded_channel();
    e.submit(Request {
        prompt,
        params,
        events: tx,
    })
    .unwrap();
    let mut times = Vec::new();
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Delta { .. } => times.push(Instant::now()),
            Event::Done { .. } => break,
            Event::Error(e) => panic!("{e}"),
            _ => {}
        }
    }
    times
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Over the prompts, one at a time: (median time per output token, median time from the
/// request to its last token, median tokens), in microseconds.
fn one_by_one(e: &Engine, make: &dyn Fn(usize) -> SamplingParams) -> (f64, f64, f64) {
    let (mut tpot, mut whole, mut count) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..PROMPTS {
        let start = Instant::now();
        let t = stamps(e, prompt(k), make(k));
        let n = t.len();
        tpot.push((t[n - 1] - t[0]).as_secs_f64() * 1e6 / (n.max(2) - 1) as f64);
        whole.push((t[n - 1] - start).as_secs_f64() * 1e6);
        count.push(n as f64);
    }
    (median(tpot), median(whole), median(count))
}

/// 16 requests at once: output tokens per second.
fn together(e: &Arc<Engine>, make: &(dyn Fn(usize) -> SamplingParams + Sync)) -> f64 {
    let start = Instant::now();
    let tokens: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16)
            .map(|k| s.spawn(move || stamps(e, prompt(k), make(k)).len()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    tokens as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mlc/model");
    let dir = args.first().map(PathBuf::from).unwrap_or(root.clone());
    let lib = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or(root.join("lib.so"));
    let device = std::env::var("TVMRT_SERVE_DEVICE").unwrap_or_else(|_| "cpu".into());
    bare_forwards(&dir, &lib, &device);
    let e = Arc::new(start(&dir, &lib, &device));
    // Warm up, and the schema answers' lengths: each free run gets as many tokens.
    let lengths: Vec<usize> = (0..PROMPTS)
        .map(|k| stamps(&e, prompt(k), params(Some(schema()), 200)).len())
        .collect();
    println!("device: {device}; {PROMPTS} prompts of 24 tokens, greedy, one at a time");
    let (c_tpot, c_whole, c_n) = one_by_one(&e, &|_| params(Some(schema()), 200));
    let (f_tpot, f_whole, _) = one_by_one(&e, &|k| params(None, lengths[k]));
    println!(
        "json_schema: {c_n:.0} tokens, time per output token {c_tpot:.1} us, whole answer \
         {c_whole:.0} us | free, same tokens: {f_tpot:.1} us, {f_whole:.0} us | ratio \
         {:.2}x per token, {:.2}x whole answer",
        c_tpot / f_tpot,
        c_whole / f_whole
    );
    let rx = Constraint::Regex("[a-z0-9 ,.]{64}".into());
    let (r_tpot, r_whole, r_n) = one_by_one(&e, &|_| params(Some(rx.clone()), 200));
    let (f_tpot, f_whole, _) = one_by_one(&e, &|_| params(None, r_n as usize));
    println!(
        "regex, a mask every step: {r_n:.0} tokens, {r_tpot:.1} us per token, whole {r_whole:.0} \
         us | free: {f_tpot:.1} us, {f_whole:.0} us | ratio {:.2}x per token",
        r_tpot / f_tpot
    );
    let c16 = together(&e, &|_| params(Some(schema()), 200));
    let f16 = together(&e, &|k| params(None, lengths[k]));
    println!(
        "16 streams at once: json_schema {c16:.0} tokens/s, free {f16:.0} tokens/s ({:.2}x)",
        c16 / f16
    );
    let grammars = e.grammars().unwrap();
    let compiled = grammars.compile(&schema()).unwrap();
    let mut m = Matcher::new(&compiled);
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        std::hint::black_box(m.clone().allowed().unwrap());
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    // The grammar's whole work over one answer: a mask per sampled token, the sampled token
    // committed, the forced tokens computed.
    let (tx, mut rx2) = unbounded_channel();
    e.submit(Request {
        prompt: prompt(0),
        params: params(Some(schema()), 200),
        events: tx,
    })
    .unwrap();
    let mut answer = Vec::new();
    while let Some(Event::Delta { token, .. }) = rx2.blocking_recv() {
        answer.push(token);
    }
    let t = Instant::now();
    let mut replay = Matcher::new(&compiled);
    let mut at = 0;
    let mut masks = 0;
    while at < answer.len() {
        std::hint::black_box(replay.allowed().unwrap());
        masks += 1;
        replay.commit(answer[at]).unwrap();
        at += 1 + replay.forced().len();
    }
    println!(
        "the grammar's work over one answer of {} tokens ({masks} sampled): {:.0} us",
        answer.len(),
        t.elapsed().as_secs_f64() * 1e6
    );
    m.commit(e.codec.encode("{").unwrap()[0]).unwrap();
    println!(
        "one mask of the schema's grammar ({} token ids): median {:.1} us",
        grammars.vocab_size(),
        median(times)
    );
}

/// The model's bare forwards: a `batch_decode` of one token and a `batch_prefill` of `k`
/// tokens appended to a sequence of 40, median microseconds.
fn bare_forwards(dir: &Path, lib: &Path, device: &str) {
    use tvmrt_serve::model::{read_f32, Model};
    let model = Model::load(lib, dir, tvmrt::device::parse_device(device).unwrap()).unwrap();
    let cache = model.create_cache(4, 2048, 128, 16).unwrap();
    let mut line = String::from("bare forwards, median:");
    for k in [0usize, 1, 2, 4, 8] {
        let mut times = Vec::new();
        for r in 0..40 {
            model.add_sequence(&cache, r).unwrap();
            model
                .prefill(&cache, &[r], &[&prompt(1)[..]], false)
                .unwrap();
            let t = Instant::now();
            let logits = if k == 0 {
                model.decode(&cache, &[r], &[7]).unwrap()
            } else {
                model
                    .prefill(&cache, &[r], &[&prompt(2)[..k]], false)
                    .unwrap()
            };
            std::hint::black_box(read_f32(&logits).unwrap());
            times.push(t.elapsed().as_secs_f64() * 1e6);
            model.remove_sequence(&cache, r).unwrap();
        }
        let what = if k == 0 {
            "decode".to_string()
        } else {
            format!("prefill of {k}")
        };
        line += &format!(" {what} {:.1} us;", median(times));
    }
    println!("{line}");
}

fn start(dir: &Path, lib: &Path, device: &str) -> Engine {
    let config = EngineConfig {
        max_num_sequence: 16,
        max_total_sequence_length: 8704,
        prefill_chunk_size: 128,
        max_queue: 256,
        prefix_cache_max_num_recycling_seqs: 0,
        device: tvmrt::device::parse_device(device).unwrap(),
    };
    Engine::start(lib.to_path_buf(), dir.to_path_buf(), config).unwrap()
}
