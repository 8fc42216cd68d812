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
//! - the mask alone: the median time of one step's mask of the schema's grammar; the grammar's
//!   work of 16 answers at once on the mask threads against one thread;
//! - a free request's whole answer beside a request whose grammar is slow, and a `json_schema`
//!   answer beside as many such requests as the grammar threads, against the same request
//!   alone.
//!
//! `TVMRT_SERVE_DEVICE=cuda:0` with a CUDA library runs the model on a GPU (the mask is applied
//! where the logits are, by the library's `apply_bitmask_inplace`). `KV_TOKENS=N` sizes the
//! engine's KV cache (default 8704): on the CPU a prefill chunk's attention scans the whole
//! cache (see [`kv_tokens`]).
//!
//! `--check` first checks the answers themselves (benches/gpu/run.sh, where no test runs), and
//! exits 1 if any is wrong: with the jump-forward on and off, each prompt's greedy `json_schema`
//! answer finishes with `stop` and validates against the schema, each regex answer matches, and
//! so do 16 constrained answers decoded together (one mask row each).

mod common;

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::mpsc::unbounded_channel;
use tvmrt_serve::engine::{Engine, EngineConfig, Event, Request};
use tvmrt_serve::sampler::SamplingParams;
use tvmrt_serve::structured::grammar::{compile_slots, Compiled};
use tvmrt_serve::structured::{Constraint, GrammarLimits, Matcher};

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

/// One request's (time per output token, time from the request to its last token, tokens),
/// microseconds.
fn timed(e: &Engine, k: usize, params: SamplingParams) -> [f64; 3] {
    let start = Instant::now();
    let t = stamps(e, prompt(k), params);
    let n = t.len();
    [
        (t[n - 1] - t[0]).as_secs_f64() * 1e6 / (n.max(2) - 1) as f64,
        (t[n - 1] - start).as_secs_f64() * 1e6,
        n as f64,
    ]
}

/// Over the prompts, one request at a time, each constrained request right before its free
/// counterpart (so that the machine's load changes hit both alike): the medians of both
/// sides' [`timed`] figures and of the pairs' ratios (per token, whole answer).
fn pairs(
    e: &Engine,
    constrained: &dyn Fn(usize) -> SamplingParams,
    free: &dyn Fn(usize, usize) -> SamplingParams,
) -> ([f64; 3], [f64; 3], [f64; 2]) {
    let (mut c, mut f, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..PROMPTS {
        let a = timed(e, k, constrained(k));
        let b = timed(e, k, free(k, a[2] as usize));
        r.push([a[0] / b[0], a[1] / b[1]]);
        c.push(a);
        f.push(b);
    }
    let med = |v: &[[f64; 3]], i: usize| median(v.iter().map(|x| x[i]).collect());
    let ratio = |i: usize| median(r.iter().map(|x: &[f64; 2]| x[i]).collect());
    (
        [med(&c, 0), med(&c, 1), med(&c, 2)],
        [med(&f, 0), med(&f, 1), med(&f, 2)],
        [ratio(0), ratio(1)],
    )
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
    let (_, dir, lib) = common::model_args();
    let device = std::env::var("TVMRT_SERVE_DEVICE").unwrap_or_else(|_| "cpu".into());
    if std::env::args().any(|a| a == "--check") && !check_answers(&dir, &lib, &device) {
        std::process::exit(1);
    }
    bare_forwards(&dir, &lib, &device);
    for jump_forward in [true, false] {
        let e = Arc::new(start(&dir, &lib, &device, jump_forward));
        println!(
            "jump-forward {}, KV cache of {} tokens:",
            if jump_forward { "on" } else { "off" },
            kv_tokens()
        );
        compare(&e, &device);
        beside_slow(&e, "a free answer of 64 tokens", &|| params(None, 64), 1);
        beside_slow(
            &e,
            "a json_schema answer",
            &|| params(Some(schema()), 200),
            compile_slots(),
        );
    }
    let e = start(&dir, &lib, &device, true);
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
    masks_at_once(&compiled, &answer);
    println!(
        "one mask of the schema's grammar ({} token ids): median {:.1} us",
        grammars.vocab_size(),
        median(times)
    );
}

/// The grammar's work over `answer` (a mask at each position, then its token committed) for
/// 16 sequences of one grammar at once, on the mask threads against one thread: whether the
/// masks of one grammar's sequences are computed side by side (each thread's matchers warmed by
/// a first pass, as the engine's are by earlier requests).
fn masks_at_once(compiled: &Compiled, answer: &[i32]) {
    let work = |ms: &mut [Matcher]| {
        for m in ms {
            for &t in answer {
                std::hint::black_box(m.allowed().unwrap());
                m.commit(t).unwrap();
            }
        }
    };
    let threads = compile_slots();
    let timed = |threads: usize| {
        let mut took = Duration::ZERO;
        for _ in 0..2 {
            let mut ms: Vec<Matcher> = (0..16).map(|_| Matcher::new(compiled)).collect();
            let t = Instant::now();
            std::thread::scope(|s| {
                for chunk in ms.chunks_mut(16usize.div_ceil(threads)) {
                    s.spawn(|| work(chunk));
                }
            });
            took = t.elapsed();
        }
        took.as_secs_f64() * 1e6
    };
    let (one, all) = (timed(1), timed(threads));
    println!(
        "the grammar's work of 16 answers of {} tokens at once: {threads} threads {all:.0} us, \
         one thread {one:.0} us ({:.2}x)",
        answer.len(),
        one / all
    );
}

/// The model's bare forwards: a `batch_decode` of one token and a `batch_prefill` of `k`
/// tokens appended to a sequence of 24, median microseconds, in a cache of the engine's
/// capacity ([`kv_tokens`]) and in one of 2048 tokens.
fn bare_forwards(dir: &Path, lib: &Path, device: &str) {
    use tvmrt_serve::model::{read_f32, Model};
    let model = Model::load(lib, dir, tvmrt::device::parse_device(device).unwrap()).unwrap();
    for capacity in [kv_tokens(), 2048] {
        let cache = model.create_cache(17, capacity, 128, 16).unwrap();
        let mut line = format!("bare forwards, median, cache of {capacity} tokens:");
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
}

/// The constrained requests against free ones on engine `e`.
fn compare(e: &Arc<Engine>, device: &str) {
    // Warm up.
    for k in 0..4 {
        stamps(e, prompt(k), params(Some(schema()), 200));
        stamps(e, prompt(k), params(None, 64));
    }
    println!("device: {device}; {PROMPTS} prompts of 24 tokens, greedy, one at a time");
    let (c, f, r) = pairs(e, &|_| params(Some(schema()), 200), &|_, n| params(None, n));
    println!(
        "json_schema: {:.0} tokens, time per output token {:.1} us, whole answer {:.0} us | \
         free, same tokens: {:.1} us, {:.0} us | ratio (median of pairs) {:.2}x per token, \
         {:.2}x whole answer",
        c[2], c[0], c[1], f[0], f[1], r[0], r[1]
    );
    let rx = Constraint::Regex("[a-z0-9 ,.]{64}".into());
    let (c, f, r) = pairs(e, &|_| params(Some(rx.clone()), 200), &|_, n| {
        params(None, n)
    });
    println!(
        "regex, a mask every step: {:.0} tokens, {:.1} us per token, whole {:.0} us | free: \
         {:.1} us, {:.0} us | ratio {:.2}x per token, {:.2}x whole answer",
        c[2], c[0], c[1], f[0], f[1], r[0], r[1]
    );
    // 16 at once, three rounds of each alternated; each side's free requests as long as the
    // constrained answers.
    let lengths: Vec<usize> = (0..16)
        .map(|k| stamps(e, prompt(k), params(Some(schema()), 200)).len())
        .collect();
    let (mut c16, mut f16) = (Vec::new(), Vec::new());
    let late = || e.metrics.grammar_masks_late.load(Relaxed);
    let late_before = late();
    for _ in 0..3 {
        c16.push(together(e, &|_| params(Some(schema()), 200)));
        f16.push(together(e, &|k| params(None, lengths[k])));
    }
    let ratios: Vec<f64> = c16.iter().zip(&f16).map(|(a, b)| a / b).collect();
    println!(
        "16 streams at once (3 rounds each): json_schema {:.0} tokens/s, free {:.0} tokens/s \
         (median ratio {:.2}x); steps sat out for a late mask: {}",
        median(c16),
        median(f16),
        median(ratios),
        late() - late_before
    );
}

/// A request's whole answer (from its submission to its last token) alone and beside
/// `slow_count` requests whose grammar is slow (a Lark sequence of 6000 literals: each mask
/// 15-30 ms, the forced run 0.2 s, in release), sent 20 ms before it: the grammar's work runs
/// beside the forwards and its sequences sit steps out, so they delay themselves, not the
/// batch; and their jobs leave a thread to other grammars, so they do not delay other masks.
fn beside_slow(
    e: &Arc<Engine>,
    what: &str,
    answer: &dyn Fn() -> SamplingParams,
    slow_count: usize,
) {
    let literals: Vec<String> = (0..6000).map(|i| format!("\"x{i}\"")).collect();
    let grammar = format!("start: {}\n", literals.join(" "));
    let slow = || params(Some(Constraint::Lark(grammar.clone())), 64);
    stamps(e, prompt(0), slow()); // compiled once
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for k in 0..4 {
        alone.push(timed(e, k, answer())[1]);
        std::thread::scope(|s| {
            let slow_ones: Vec<_> = (0..slow_count)
                .map(|j| s.spawn(move || stamps(e, prompt(k + 8 + j), slow())))
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(20));
            beside.push(timed(e, k, answer())[1]);
            slow_ones.into_iter().for_each(|h| drop(h.join().unwrap()));
        });
    }
    let (alone, beside) = (median(alone) / 1e3, median(beside) / 1e3);
    println!(
        "{what} beside {slow_count} slow grammars' (Lark sequence of 6000 literals): \
         {beside:.2} ms, alone {alone:.2} ms ({:.2}x)",
        beside / alone
    );
}

/// The engine's KV cache capacity in tokens: `KV_TOKENS`, else 8704 (16 streams' worth). The
/// CPU library's `batch_prefill_paged_kv_cpu` (TVM's `_attention_prefill_cpu`) scans the whole
/// capacity for every query row, so a prefill chunk appended to a sequence costs more the
/// larger the cache; [`bare_forwards`] shows it.
fn kv_tokens() -> i64 {
    std::env::var("KV_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8704)
}

fn start(dir: &Path, lib: &Path, device: &str, jump_forward: bool) -> Engine {
    let config = EngineConfig {
        max_num_sequence: 16,
        max_total_sequence_length: kv_tokens(),
        prefill_chunk_size: 128,
        max_queue: 256,
        prefix_cache_max_num_recycling_seqs: 0,
        device: tvmrt::device::parse_device(device).unwrap(),
    };
    let limits = GrammarLimits {
        jump_forward: Some(jump_forward),
        ..Default::default()
    };
    Engine::start_with(lib.to_path_buf(), dir.to_path_buf(), config, limits).unwrap()
}

/// One request's tokens, text and finish reason (`None`: it failed, the message printed).
fn answer(e: &Engine, k: usize, params: SamplingParams) -> Option<(Vec<i32>, String, String)> {
    let (tx, mut rx) = unbounded_channel();
    e.submit(Request {
        prompt: prompt(k),
        params,
        events: tx,
    })
    .ok()?;
    let (mut tokens, mut text, mut reason) = (Vec::new(), String::new(), String::new());
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Delta { token, text: t, .. } => {
                tokens.push(token);
                text += &t;
            }
            Event::Finish { reason: r, .. } => reason = r.as_str().to_string(),
            Event::Done { .. } => return Some((tokens, text, reason)),
            Event::Error(f) => {
                println!("  prompt {k}: the request failed: {f}");
                return None;
            }
            _ => {}
        }
    }
    None
}

/// Whether `text` is an object [`schema`] accepts: every field of its type and range, no other.
fn validates(text: &str) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let o = v.as_object().ok_or("not an object")?;
    let int_in = |key: &str, hi: i64| {
        o.get(key)
            .and_then(|x| x.as_i64())
            .filter(|x| (0..=hi).contains(x))
            .ok_or(format!("`{key}` is not an integer in 0..={hi}"))
    };
    let name = o
        .get("name")
        .and_then(|x| x.as_str())
        .ok_or("no string `name`")?;
    if name.chars().count() > 12 {
        return Err(format!("`name` {name:?} is over 12 characters"));
    }
    int_in("age", 120)?;
    o.get("member")
        .and_then(|x| x.as_bool())
        .ok_or("no boolean `member`")?;
    match o.get("pet").and_then(|x| x.as_str()) {
        Some("cat" | "dog" | "none") => {}
        other => return Err(format!("`pet` {other:?} is not in the enum")),
    }
    let scores = o
        .get("scores")
        .and_then(|x| x.as_array())
        .ok_or("no array `scores`")?;
    let ok = |x: &serde_json::Value| x.as_i64().is_some_and(|x| (0..=99).contains(&x));
    if !(2..=4).contains(&scores.len()) || !scores.iter().all(ok) {
        return Err(format!(
            "`scores` {scores:?} is not 2 to 4 integers in 0..=99"
        ));
    }
    if o.len() != 5 {
        return Err(format!("{} fields, not 5", o.len()));
    }
    Ok(())
}

/// The `--check` run (see the top of this file): prints a line per failure and a verdict.
fn check_answers(dir: &Path, lib: &Path, device: &str) -> bool {
    use tvmrt_serve::model::Model;
    let model = Model::load(lib, dir, tvmrt::device::parse_device(device).unwrap()).unwrap();
    let kernel = model.has_bitmask_kernel();
    drop(model);
    let mut failures = 0;
    let mut fail = |what: String| {
        println!("  FAIL {what}");
        failures += 1;
    };
    let schema_ok = |k: usize,
                     got: Option<(Vec<i32>, String, String)>,
                     fail: &mut dyn FnMut(String)| match got {
        Some((_, text, reason)) => {
            if reason != "stop" {
                fail(format!("prompt {k}: finished with {reason}: {text:?}"));
            } else if let Err(why) = validates(&text) {
                fail(format!("prompt {k}: {why}: {text:?}"));
            }
        }
        None => fail(format!("prompt {k}: no answer")),
    };
    let mut checked = 0;
    for jump_forward in [true, false] {
        let e = Arc::new(start(dir, lib, device, jump_forward));
        for k in 0..PROMPTS {
            schema_ok(k, answer(&e, k, params(Some(schema()), 200)), &mut fail);
            let rx = Constraint::Regex("[a-z0-9 ,.]{64}".into());
            match answer(&e, k, params(Some(rx), 200)) {
                Some((_, text, reason)) => {
                    let fits = |c: char| matches!(c, 'a'..='z' | '0'..='9' | ' ' | ',' | '.');
                    if reason != "stop" || text.chars().count() != 64 || !text.chars().all(fits) {
                        fail(format!("prompt {k}: regex answer {text:?} ({reason})"));
                    }
                }
                None => fail(format!("prompt {k}: no regex answer")),
            }
            checked += 2;
        }
        let together: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..16)
                .map(|k| {
                    let e = &e;
                    s.spawn(move || answer(e, k, params(Some(schema()), 200)))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (k, got) in together.into_iter().enumerate() {
            schema_ok(k, got, &mut fail);
            checked += 1;
        }
    }
    println!(
        "check on {device}: {checked} constrained answers, {failures} wrong; the mask applied by \
         {}",
        if kernel {
            "the library's apply_bitmask_inplace where the logits are"
        } else {
            "the host (the library has no apply_bitmask_inplace)"
        }
    );
    failures == 0
}
