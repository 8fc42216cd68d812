//! Constrained decoding in the engine on the MLC fixture (random weights: free text is
//! garbage, so these check that the constraint holds): JSON schemas greedy and seeded, `n`
//! choices, constrained and free requests in one batch equal to their solo runs, preemption
//! with constrained sequences, forced tokens, logprobs under the mask, bad grammars refused.

use std::path::PathBuf;

use serde_json::{json, Value};
use tokio::sync::mpsc::unbounded_channel;
use tvmrt_serve::engine::{Engine, EngineConfig, Event, FinishReason, Refused, Request};
use tvmrt_serve::sampler::{SamplingParams, TokenLogprob};
use tvmrt_serve::structured::{Constraint, GrammarLimits};

/// An engine on the fixture; `jump_forward`: forced tokens appended at once (else decoded one
/// step each, the CPU's default).
fn start(max_total_sequence_length: i64, max_num_sequence: usize, jump_forward: bool) -> Engine {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mlc/model");
    let config = EngineConfig {
        max_num_sequence,
        max_total_sequence_length,
        prefill_chunk_size: 0,
        max_queue: 64,
        prefix_cache_max_num_recycling_seqs: 4,
        device: tvmrt::tensor::layout::cpu(),
    };
    let limits = GrammarLimits {
        jump_forward: Some(jump_forward),
        ..Default::default()
    };
    Engine::start_with(dir.join("lib.so"), dir, config, limits).unwrap()
}

/// One choice's answer.
#[derive(Clone, Debug, Default)]
struct Answer {
    tokens: Vec<i32>,
    text: String,
    finish: Option<FinishReason>,
    logprobs: Vec<Option<TokenLogprob>>,
}

/// Answers are equal in their tokens, text and finish reason.
impl PartialEq for Answer {
    fn eq(&self, o: &Answer) -> bool {
        (&self.tokens, &self.text, self.finish) == (&o.tokens, &o.text, o.finish)
    }
}

fn send(
    e: &Engine,
    prompt: &str,
    params: SamplingParams,
) -> tokio::sync::mpsc::UnboundedReceiver<Event> {
    let (tx, rx) = unbounded_channel();
    let prompt = e.codec.encode(prompt).unwrap();
    e.submit(Request {
        prompt,
        params,
        events: tx,
    })
    .unwrap();
    rx
}

fn answers(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>, n: usize) -> Vec<Answer> {
    let mut out = vec![Answer::default(); n];
    loop {
        match rx.blocking_recv().expect("the engine answers") {
            Event::Delta {
                choice,
                token,
                text,
                logprob,
            } => {
                let a = &mut out[choice];
                a.tokens.push(token);
                a.text.push_str(&text);
                a.logprobs.push(logprob);
            }
            Event::Finish { choice, reason } => out[choice].finish = Some(reason),
            Event::Prompt { .. } => {}
            Event::Done { .. } => return out,
            Event::Error(e) => panic!("{e}"),
        }
    }
}

fn params(constraint: Option<Constraint>, max_tokens: usize, seed: Option<u64>) -> SamplingParams {
    SamplingParams {
        temperature: if seed.is_some() { 0.9 } else { 0.0 },
        seed,
        max_tokens: Some(max_tokens),
        constraint,
        ..Default::default()
    }
}

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "ok": {"type": "boolean"},
        "kind": {"enum": ["cat", "dog"]},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,3}$"},
                 "minItems": 1, "maxItems": 2}},
        "required": ["name", "age", "ok", "kind", "tags"], "additionalProperties": false})
}

fn json_schema(schema: Value) -> Option<Constraint> {
    Some(Constraint::JsonSchema {
        schema,
        compact: true,
    })
}

/// The schema's constraints checked by hand on a parsed answer.
fn check_person(text: &str) {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    let o = v.as_object().unwrap();
    assert_eq!(o.len(), 5, "{text}");
    assert!(o["name"].as_str().unwrap().chars().count() <= 8, "{text}");
    assert!((0..=120).contains(&o["age"].as_i64().unwrap()), "{text}");
    assert!(o["ok"].is_boolean(), "{text}");
    assert!(
        ["cat", "dog"].contains(&o["kind"].as_str().unwrap()),
        "{text}"
    );
    let tags = o["tags"].as_array().unwrap();
    assert!((1..=2).contains(&tags.len()), "{text}");
    for t in tags {
        let t = t.as_str().unwrap();
        assert!(
            (1..=3).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_lowercase()),
            "{text}"
        );
    }
    assert!(
        !outside_strings(text).contains(char::is_whitespace),
        "compact: {text}"
    );
}

/// The characters of a JSON text outside its strings.
fn outside_strings(text: &str) -> String {
    let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
    for ch in text.chars() {
        match (in_string, escaped, ch) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, false, _) => {}
            (false, _, '"') => in_string = true,
            (false, _, c) => out.push(c),
        }
    }
    out
}

#[test]
fn schema_answers_are_complete_valid_and_repeat() {
    let e = start(4096, 16, true);
    let prompts = ["Describe a pet.", "hello", "JSON please: "];
    let mut solo = Vec::new();
    for (k, p) in prompts.iter().enumerate() {
        let seed = (k > 0).then_some(k as u64 * 7);
        let a = answers(
            &mut send(&e, p, params(json_schema(schema()), 120, seed)),
            1,
        )
        .remove(0);
        assert_eq!(a.finish, Some(FinishReason::Stop), "{a:?}");
        check_person(&a.text);
        solo.push(a);
    }
    // n = 3 seeded choices: each its own valid answer.
    let mut p = params(json_schema(schema()), 120, Some(3));
    p.n = 3;
    for a in answers(&mut send(&e, prompts[0], p), 3) {
        assert_eq!(a.finish, Some(FinishReason::Stop));
        check_person(&a.text);
    }
    // Constrained and free requests in one batch, each equal to its solo run.
    let free: Vec<Answer> = prompts
        .iter()
        .map(|p| answers(&mut send(&e, p, params(None, 24, None)), 1).remove(0))
        .collect();
    let mut rxs = Vec::new();
    for (k, p) in prompts.iter().enumerate() {
        let seed = (k > 0).then_some(k as u64 * 7);
        rxs.push(send(&e, p, params(json_schema(schema()), 120, seed)));
        rxs.push(send(&e, p, params(None, 24, None)));
    }
    for (k, mut rx) in rxs.into_iter().enumerate() {
        let want = if k % 2 == 0 {
            &solo[k / 2]
        } else {
            &free[k / 2]
        };
        assert_eq!(&answers(&mut rx, 1)[0], want, "request {k}");
    }
}

#[test]
fn forced_tokens_skip_decode_steps_and_logprobs_see_the_mask() {
    let e = start(4096, 8, true);
    let mut p = params(json_schema(schema()), 120, None);
    p.logprobs = Some(3);
    let a = answers(&mut send(&e, "hello", p.clone()), 1).remove(0);
    check_person(&a.text);
    // Forced tokens (the property names) come with probability 1 under the mask; every
    // listed alternative is a token the grammar allowed (finite log-probability).
    let lps: Vec<&TokenLogprob> = a.logprobs.iter().map(|l| l.as_ref().unwrap()).collect();
    let forced = lps
        .iter()
        .filter(|l| l.logprob == 0.0 && l.top.len() == 1)
        .count();
    assert!(forced >= 5, "{forced} forced of {}", lps.len());
    for l in &lps {
        assert!(l.logprob.is_finite());
        assert!(
            l.top.iter().all(|t| t.1.is_finite() && t.1 > -1e30),
            "{l:?}"
        );
    }
    let steps = e.metrics.tpot.count_and_mean().0 + 1;
    assert!(
        steps < a.tokens.len() as u64,
        "{steps} sampled for {} tokens",
        a.tokens.len()
    );
    // Without the jump-forward every token is sampled (a forced one from a one-token mask),
    // and the answer is as valid.
    let slow = start(4096, 8, false);
    let b = answers(&mut send(&slow, "hello", p), 1).remove(0);
    check_person(&b.text);
    assert_eq!(b.finish, Some(FinishReason::Stop));
    let steps = slow.metrics.tpot.count_and_mean().0 + 1;
    assert_eq!(steps, b.tokens.len() as u64);
}

#[test]
fn regex_choice_lark_and_json_object_hold() {
    let e = start(4096, 8, false);
    let run =
        |c: Constraint, seed| answers(&mut send(&e, "x", params(Some(c), 40, seed)), 1).remove(0);
    // A stop string ends a constrained answer as any other.
    for seed in 0..4 {
        let mut p = params(Some(Constraint::Regex("[ab]{16}".into())), 40, Some(seed));
        p.stop = vec!["b".into()];
        let a = answers(&mut send(&e, "x", p), 1).remove(0);
        assert_eq!(a.finish, Some(FinishReason::Stop));
        assert!(
            a.text.len() <= 16 && a.text.bytes().all(|c| c == b'a'),
            "{a:?}"
        );
    }
    for seed in [None, Some(1), Some(2)] {
        let a = run(Constraint::Regex("[0-9]{3}-[a-c]{2}".into()), seed);
        assert_eq!(a.finish, Some(FinishReason::Stop));
        let b = a.text.as_bytes();
        assert!(
            b.len() == 6 && b[3] == b'-' && b[..3].iter().all(u8::is_ascii_digit),
            "{a:?}"
        );
        let a = run(
            Constraint::Choice(vec!["red".into(), "green".into(), "blue".into()]),
            seed,
        );
        assert!(["red", "green", "blue"].contains(&a.text.as_str()), "{a:?}");
        assert_eq!(a.finish, Some(FinishReason::Stop));
        let a = run(
            Constraint::Lark("start: \"<\" NUM (\",\" NUM)? \">\"\nNUM: /[0-9]/\n".into()),
            seed,
        );
        assert!(
            a.text.starts_with('<') && a.text.ends_with('>') && a.text.len() <= 5,
            "{a:?}"
        );
    }
    // Any JSON object: what finished parses as one (max_tokens may cut a long one).
    let mut stopped = 0;
    for seed in 0..6 {
        let a = run(Constraint::JsonObject, Some(seed));
        if a.finish == Some(FinishReason::Stop) {
            stopped += 1;
            assert!(
                serde_json::from_str::<Value>(&a.text).unwrap().is_object(),
                "{a:?}"
            );
        } else {
            assert!(a.text.starts_with('{'), "{a:?}");
        }
    }
    assert!(stopped > 0);
}

#[test]
fn preempted_constrained_sequences_resume_where_they_were() {
    // A cache of 8 pages (128 tokens) for 4 requests of up to 100 tokens each: preemptions.
    let small = start(128, 4, true);
    let big = start(4096, 4, true);
    let prompts = ["a", "bb", "ccc", "dddd"];
    let solo: Vec<Answer> = prompts
        .iter()
        .map(|p| {
            answers(
                &mut send(&big, p, params(json_schema(schema()), 60, Some(5))),
                1,
            )
            .remove(0)
        })
        .collect();
    let rxs: Vec<_> = prompts
        .iter()
        .map(|p| send(&small, p, params(json_schema(schema()), 60, Some(5))))
        .collect();
    for (k, mut rx) in rxs.into_iter().enumerate() {
        assert_eq!(answers(&mut rx, 1)[0], solo[k], "request {k}");
    }
    let preempted = small
        .metrics
        .preemptions
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(preempted > 0);
}

#[test]
fn bad_grammars_are_refused_and_cancelled_ones_free_their_pages() {
    let e = start(4096, 8, false);
    for c in [
        Constraint::JsonSchema {
            schema: json!({"type": "integer", "minimum": 5, "maximum": 1}),
            compact: true,
        },
        Constraint::JsonSchema {
            schema: json!({"type": "strnig"}),
            compact: true,
        },
        Constraint::Regex("(".into()),
        Constraint::Lark("start: missing".into()),
    ] {
        let (tx, _rx) = unbounded_channel();
        let r = e.submit(Request {
            prompt: vec![1, 2],
            params: params(Some(c.clone()), 8, None),
            events: tx,
        });
        assert!(matches!(r, Err(Refused::BadConstraint(_))), "{c:?}: {r:?}");
    }
    // A constrained request walked away from mid-answer frees its pages.
    let mut rx = send(
        &e,
        "a",
        params(Some(Constraint::Regex("[a-z]{300}".into())), 300, None),
    );
    assert!(matches!(rx.blocking_recv(), Some(Event::Delta { .. })));
    drop(rx);
    let a = answers(
        &mut send(&e, "b", params(json_schema(schema()), 120, None)),
        1,
    )
    .remove(0);
    check_person(&a.text);
    let in_use = || {
        e.metrics
            .kv_pages_in_use
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let pooled = e
        .metrics
        .prefix_cache_sequences
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        pooled <= 4 && in_use() <= pooled * 8,
        "{} pages in use",
        in_use()
    );
}

#[test]
fn the_librarys_bitmask_kernel_masks_the_rows_named() {
    use tvmrt_serve::model::{read_f32, tensor_f32_on, Model};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mlc/model");
    let model = Model::load(&dir.join("lib.so"), &dir, tvmrt::tensor::layout::cpu()).unwrap();
    assert!(model.has_bitmask_kernel());
    let values: Vec<f32> = (0..640).map(|i| (i % 320) as f32 / 100.0).collect();
    let logits = tensor_f32_on(&values, &[2, 1, 320], tvmrt::tensor::layout::cpu()).unwrap();
    // Row 1 allows tokens 0-31 and 300; row 0 is not named and stays as it is.
    let mut mask = vec![0u32; 10];
    mask[0] = u32::MAX;
    mask[300 / 32] = 1 << (300 % 32);
    model
        .apply_bitmask_in_place(&logits, &[1], &[mask])
        .unwrap();
    let out = read_f32(&logits).unwrap();
    assert_eq!(out[..320], values[..320]);
    for t in 0..320 {
        let v = out[320 + t];
        if t < 32 || t == 300 {
            assert_eq!(v, values[320 + t], "token {t}");
        } else {
            assert!(v <= -1e30, "token {t}: {v}");
        }
    }
}

/// A Lark sequence of `n` distinct literals `x0 x1 ...`: one long rule whose every mask is
/// slow (15-30 ms in release at 6000 against a fixture forward of 0.15 ms) and whose forced
/// run is the whole rest of it (28k tokens at 6000, 0.2 s in release).
fn slow_grammar(n: usize) -> Constraint {
    let literals: Vec<String> = (0..n).map(|i| format!("\"x{i}\"")).collect();
    Constraint::Lark(format!("start: {}\n", literals.join(" ")))
}

/// How many tokens a slow-grammar request streams while a free request beside it makes its 16
/// (counted from the engine's own event order, not clocks), the slow answer's text and the
/// free answer.
fn slow_beside_free(e: &Engine) -> (usize, String, Answer) {
    let mut free = params(None, 16, None);
    free.logit_bias = vec![(2, -100.0)];
    let mut slow_rx = send(e, "slow", params(Some(slow_grammar(6000)), 40, None));
    // The slow one has begun (its grammar compiled at submit; its first forced run or mask
    // is being computed) when the free one joins it.
    let mut free_rx = send(e, "free", free);
    let beside = answers(&mut free_rx, 1).remove(0);
    // The slow one's deltas sent by now (the engine sends each as it makes it), then the rest.
    let mut text = vec![String::new()];
    let [(during, done)] = sent_since(std::slice::from_mut(&mut slow_rx), &mut text)[..] else {
        unreachable!()
    };
    let mut text = text.remove(0);
    if !done {
        text.push_str(&answers(&mut slow_rx, 1).remove(0).text);
    }
    (during, text, beside)
}

/// A grammar whose every mask, or whose forced run, is slow sits its steps out while that is
/// computed beside the forward, instead of holding the batch: a free request beside it makes
/// its 16 tokens while the slow one makes few (before: one slow token for each free one, each
/// step waiting for the slow mask; or none, the whole forced run made first). Both answers are
/// what they are alone.
#[test]
fn a_slow_grammar_slows_only_its_own_sequence() {
    for jump_forward in [false, true] {
        let e = start(4096, 8, jump_forward);
        let mut free = params(None, 16, None);
        free.logit_bias = vec![(2, -100.0)];
        let free_alone = answers(&mut send(&e, "free", free), 1).remove(0);
        assert_eq!(free_alone.tokens.len(), 16);
        let slow_alone = answers(
            &mut send(&e, "slow", params(Some(slow_grammar(6000)), 40, None)),
            1,
        )
        .remove(0);
        let all: String = (0..6000).map(|i| format!("x{i}")).collect();
        assert!(
            slow_alone.text.len() > 20 && all.starts_with(&slow_alone.text),
            "{slow_alone:?}"
        );
        let late = e
            .metrics
            .grammar_masks_late
            .load(std::sync::atomic::Ordering::Relaxed);
        let (during, slow_text, beside) = slow_beside_free(&e);
        assert_eq!(beside, free_alone, "jump_forward {jump_forward}");
        assert_eq!(slow_text, slow_alone.text, "jump_forward {jump_forward}");
        assert!(
            during <= 8,
            "jump_forward {jump_forward}: {during} slow tokens while the free request made 16"
        );
        let late_now = e
            .metrics
            .grammar_masks_late
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(late_now > late, "jump_forward {jump_forward}");
    }
}

/// The deltas each of `streams` has sent since last asked (their text appended to `texts`),
/// and whether it is done.
fn sent_since(
    streams: &mut [tokio::sync::mpsc::UnboundedReceiver<Event>],
    texts: &mut [String],
) -> Vec<(usize, bool)> {
    let mut out = Vec::new();
    for (rx, text) in streams.iter_mut().zip(texts) {
        let (mut sent, mut done) = (0, false);
        while let Ok(ev) = rx.try_recv() {
            match ev {
                Event::Delta { text: t, .. } => {
                    sent += 1;
                    text.push_str(&t);
                }
                Event::Done { .. } => done = true,
                Event::Error(e) => panic!("{e}"),
                _ => {}
            }
        }
        out.push((sent, done));
    }
    out
}

/// Grammars slow at every step, as many as the grammar threads, do not hold back another
/// grammar's masks: one thread is kept from them, so a constrained request beside them makes
/// its tokens while they make few (before: each of its masks queued behind theirs, about one
/// slow token for each of its own). Every answer is what it is alone.
#[test]
fn slow_grammars_leave_a_thread_to_the_others() {
    let slow_count = tvmrt_serve::structured::grammar::compile_slots();
    let e = start(4096, slow_count + 2, false);
    let quick = || params(Some(Constraint::Regex("[a-z]{16}".into())), 16, None);
    let slow_params = || params(Some(slow_grammar(6000)), 24, None);
    let quick_alone = answers(&mut send(&e, "quick", quick()), 1).remove(0);
    let slow_alone = answers(&mut send(&e, "slow", slow_params()), 1).remove(0);
    let mut slow: Vec<_> = (0..slow_count)
        .map(|_| send(&e, "slow", slow_params()))
        .collect();
    let mut texts = vec![String::new(); slow_count];
    // Every slow one past its first token (its grammar's job found slow by then).
    let mut firsts = vec![0; slow_count];
    while firsts.contains(&0) {
        std::thread::sleep(std::time::Duration::from_millis(1));
        for (n, (sent, _)) in sent_since(&mut slow, &mut texts).into_iter().enumerate() {
            firsts[n] += sent;
        }
    }
    let beside = answers(&mut send(&e, "quick", quick()), 1).remove(0);
    let now = sent_since(&mut slow, &mut texts);
    let during: usize = now.iter().map(|(sent, _)| sent).sum();
    assert!(
        now.iter().all(|(_, done)| !done),
        "a slow one ended first: the test proves nothing"
    );
    for (rx, text) in slow.iter_mut().zip(&mut texts) {
        text.push_str(&answers(rx, 1).remove(0).text);
        assert_eq!(*text, slow_alone.text);
    }
    assert_eq!(beside, quick_alone);
    assert!(
        during <= 3,
        "{during} slow tokens while the constrained request made {}",
        beside.tokens.len()
    );
}
