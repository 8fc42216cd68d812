//! The model's side of constrained decoding: its token table (built once per model from
//! `tokenizer.json`), the grammars compiled against it (once each: a bounded cache keyed by
//! the grammar's JSON text, compiled within the operator's limits) and the per-sequence
//! [`Matcher`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use llguidance::api::{ParserLimits, TopLevelGrammar};
use llguidance::toktrie::{
    InferenceCapabilities, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv,
};
use llguidance::ParserFactory;
use parking_lot::{Condvar, Mutex};
use tvmrt::{Error, Result};

use super::lexers::{Lexers, ShardUse};
use super::Constraint;
use crate::text::TextCodec;

/// What the operator bounds (`tvmrt serve --max-grammar-size ...`): a grammar past them is
/// refused (HTTP 400), a step past them fails its request; neither stalls the engine.
#[derive(Clone, Debug)]
pub struct GrammarLimits {
    /// Most symbols in a compiled grammar (llguidance's `max_grammar_size`).
    pub max_grammar_size: usize,
    /// Most lexer work to build a grammar's lexer (llguidance's `initial_lexer_fuel`, about
    /// 50k a millisecond): the compile-time bound.
    pub max_compile_fuel: u64,
    /// Most lexer work for one step's mask (`step_lexer_fuel`, about 14k a millisecond).
    pub max_step_fuel: u64,
    /// Longest constraint, in bytes of its grammar's JSON (`--max-grammar-bytes`): what bounds
    /// the depth of llguidance's recursion when it compiles (see [`COMPILE_STACK`]).
    pub max_grammar_bytes: usize,
    /// Compiled grammars kept for reuse.
    pub cache_size: usize,
    /// Whether tokens a grammar forces are appended at once and fed to the next forward as a
    /// prefill chunk (SGLang's jump-forward) rather than decoded one step each. `None`: on a
    /// GPU, where a short prefill chunk costs about one decode step, and not on the CPU, where
    /// MLC's CPU libraries attend a chunk to the cached tokens with TVM's
    /// `batch_prefill_paged_kv_cpu`, which scans the cache's whole capacity for every query
    /// row: with a cache of a few thousand tokens a forced token costs more in a chunk than
    /// decoded (BENCHMARKS.md, issue 49).
    pub jump_forward: Option<bool>,
}

impl Default for GrammarLimits {
    fn default() -> Self {
        let d = ParserLimits::default();
        GrammarLimits {
            max_grammar_size: d.max_grammar_size,
            max_compile_fuel: d.initial_lexer_fuel,
            max_step_fuel: d.step_lexer_fuel,
            max_grammar_bytes: 128 << 10,
            cache_size: 64,
            jump_forward: None,
        }
    }
}

/// The stack of a thread that compiles a grammar. llguidance compiles by recursion over the
/// grammar's structure: a frame or more for each of a JSON schema's properties in turn, and
/// for each link of a chain of `$ref`s or of Lark rules (a few KiB a link). On a thread's
/// usual 2 MiB, a request of 20 KB (a chain of 600 `$ref`s) overflowed it and aborted the
/// server. The address space is reserved, and pages are committed only as the recursion
/// reaches them; with constraints bounded by [`GrammarLimits::max_grammar_bytes`], the deepest
/// shapes found stay well inside it (tests/serve/test_structured.py sends them at the limit).
const COMPILE_STACK: usize = if cfg!(target_pointer_width = "64") {
    512 << 20
} else {
    128 << 20
};

/// Compiles running now, and the signal that one ended.
static COMPILING: Mutex<usize> = Mutex::new(0);
static COMPILE_ENDED: Condvar = Condvar::new();

/// How many compiles run at once: the machine's cores, 2 to 8. The others wait their turn,
/// which bounds the threads (and, on 32-bit targets, the address space) compiles take, and
/// the cores a flood of costly constraints can take from the engine.
pub fn compile_slots() -> usize {
    static SLOTS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SLOTS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8)
    })
}

/// One of the [`compile_slots`], held until dropped.
struct CompileSlot;

impl CompileSlot {
    /// Waits for a free slot.
    fn take() -> CompileSlot {
        let mut running = COMPILING.lock();
        while *running >= compile_slots() {
            COMPILE_ENDED.wait(&mut running);
        }
        *running += 1;
        CompileSlot
    }
}

impl Drop for CompileSlot {
    fn drop(&mut self) {
        *COMPILING.lock() -= 1;
        COMPILE_ENDED.notify_one();
    }
}

/// Runs `f`, which calls into llguidance's compilers, on a thread of its own with a stack of
/// [`COMPILE_STACK`], once one of the [`compile_slots`] is free, and waits for it; a panic
/// there is an error. Callers block: they run off the async workers.
pub fn on_compile_stack<T: Send>(
    f: impl FnOnce() -> std::result::Result<T, String> + Send,
) -> std::result::Result<T, String> {
    let _slot = CompileSlot::take();
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("grammar-compile".into())
            .stack_size(COMPILE_STACK)
            .spawn_scoped(s, f)
            .map_err(|e| format!("cannot start a thread to compile the grammar: {e}"))?
            .join()
            .unwrap_or_else(|_| Err("the grammar engine failed on this constraint".into()))
    })
}

/// Refuses a constraint of `len` bytes past `max` (`--max-grammar-bytes`).
pub fn check_length(len: usize, max: usize) -> std::result::Result<(), String> {
    if len > max {
        return Err(format!(
            "it is {len} bytes as a grammar, over the server's limit of {max} \
             (--max-grammar-bytes)"
        ));
    }
    Ok(())
}

/// The model's tokenizer as llguidance sees it: the token trie, and the real tokenizer for
/// the canonical tokens of forced text.
struct ModelTokens {
    trie: TokTrie,
    codec: Arc<TextCodec>,
}

impl TokenizerEnv for ModelTokens {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.tokenize_with_greedy_fallback(s, |text| {
            self.codec
                .encode(text)
                .map(|ids| ids.into_iter().map(|t| t as TokenId).collect())
                .unwrap_or_else(|_| self.trie.greedy_tokenize(text.as_bytes()))
        })
    }
}

/// A compiled grammar, ready for matchers (cheap to clone: the compiled parts are shared).
#[derive(Clone)]
pub struct Compiled {
    /// Its parsers at the start, as many lexers as the mask threads can use at once.
    lexers: Arc<Lexers>,
    /// How long the mask at the grammar's start took, once a sequence has computed it: the
    /// same for every sequence, so the next ones know beforehand whether it is slow.
    opening_cost: Arc<OnceLock<Duration>>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compiled")
    }
}

/// Compiled grammars by their JSON text, each with when it was last used; the clock.
type Cache = (HashMap<String, (Compiled, u64)>, u64);

/// The compiled grammars of one model.
pub struct Grammars {
    factory: ParserFactory,
    max_bytes: usize,
    cache_size: usize,
    /// Key: the grammar's JSON text; value: the compiled grammar and when it was last used.
    cache: Mutex<Cache>,
}

impl Grammars {
    /// The token table of the tokenizer in `model_dir` (`tokenizer.json`), sized to the
    /// model's `vocab_size` logits, with `stop_ids` as the tokens that end a complete answer.
    pub fn load(
        model_dir: &Path,
        codec: Arc<TextCodec>,
        vocab_size: usize,
        stop_ids: &[i32],
        limits: &GrammarLimits,
    ) -> Result<Grammars> {
        let path = model_dir.join("tokenizer.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
        let mut words = llguidance::token_bytes_from_tokenizer_json(&json)
            .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
        // Ids the logits have and the tokenizer not (padding) are empty: never allowed.
        words.resize(vocab_size, Vec::new());
        let stops: Vec<TokenId> = stop_ids
            .iter()
            .filter(|&&t| (t as usize) < vocab_size)
            .map(|&t| t as TokenId)
            .collect();
        let eos = stops.first().copied().unwrap_or(vocab_size as TokenId - 1);
        let mut trie = TokTrie::from(&TokRxInfo::new(vocab_size as u32, eos), &words);
        if !stops.is_empty() {
            trie = trie.with_eos_tokens(&stops);
        }
        let env: TokEnv = Arc::new(ModelTokens { trie, codec });
        let caps = InferenceCapabilities {
            ff_tokens: true,
            ..Default::default()
        };
        let mut factory = ParserFactory::new(
            &env,
            caps,
            &llguidance::earley::SlicedBiasComputer::general_slices(),
        )
        .map_err(|e| Error::value(format!("the grammar engine: {e}")))?;
        factory.quiet();
        let l = factory.limits_mut();
        l.max_grammar_size = limits.max_grammar_size;
        l.initial_lexer_fuel = limits.max_compile_fuel;
        l.step_lexer_fuel = limits.max_step_fuel;
        // Errors without the parser's state and the grammar appended (llguidance's debugging).
        l.verbose_errors = false;
        Ok(Grammars {
            factory,
            max_bytes: limits.max_grammar_bytes,
            cache_size: limits.cache_size.max(1),
            cache: Mutex::new((HashMap::new(), 0)),
        })
    }

    /// The compiled grammar of `c`, from the cache or compiled now; the error is llguidance's
    /// reason (an invalid or unsupported schema, a grammar past the limits).
    pub fn compile(&self, c: &Constraint) -> std::result::Result<Compiled, String> {
        let grammar = c.to_grammar();
        let key = serde_json::to_string(&grammar).map_err(|e| e.to_string())?;
        {
            let mut guard = self.cache.lock();
            let (map, tick) = &mut *guard;
            *tick += 1;
            if let Some(entry) = map.get_mut(&key) {
                entry.1 = *tick;
                return Ok(entry.0.clone());
            }
        }
        check_length(key.len(), self.max_bytes)?;
        // Compiled outside the lock: another request's compile does not wait for this one.
        let compiled = on_compile_stack(|| self.build(grammar))?;
        let mut guard = self.cache.lock();
        let (map, tick) = &mut *guard;
        if map.len() >= self.cache_size {
            if let Some(oldest) = map.iter().min_by_key(|e| e.1 .1).map(|e| e.0.clone()) {
                map.remove(&oldest);
            }
        }
        map.insert(key, (compiled.clone(), *tick));
        Ok(compiled)
    }

    /// Compiles `grammar` and computes its first mask: llguidance builds parts of the lexer
    /// and parser lazily, at the first mask, so a grammar that cannot give one (a lexer past
    /// its limits, a rule that only refers to itself, an alternative too wide for a parser
    /// row) is refused now, not failed mid-answer.
    fn build(&self, grammar: TopLevelGrammar) -> std::result::Result<Compiled, String> {
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| reason(&e.to_string()))?;
        let mut first = llguidance::Matcher::new(Ok(parser.clone()));
        if let Err(e) = first.compute_mask() {
            let why = step_reason(&first.get_error().unwrap_or_else(|| e.to_string()));
            return Err(format!("{why} (at the answer's first token)"));
        }
        Ok(Compiled {
            lexers: Arc::new(Lexers::new(parser, compile_slots())),
            opening_cost: Arc::default(),
        })
    }

    /// The longest constraint compiled, in bytes of its grammar's JSON.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Grammars in the cache.
    pub fn cached(&self) -> usize {
        self.cache.lock().0.len()
    }

    /// The number of token ids (the width of the masks).
    pub fn vocab_size(&self) -> usize {
        self.factory.tok_env().tok_trie().vocab_size()
    }
}

/// One sequence's position in its grammar.
#[derive(Clone)]
pub struct Matcher {
    inner: llguidance::Matcher,
    /// The grammar's opening mask's cost, shared by its matchers.
    opening_cost: Arc<OnceLock<Duration>>,
    /// The hold on the lexer shard `inner` uses.
    _shard: ShardUse,
}

impl Matcher {
    /// A matcher at the start of `grammar`, which can be stopped from another thread
    /// ([`Matcher::stopper`]); its lexer one that no other sequence's mask holds, where the
    /// grammar has one to spare ([`Lexers`]).
    pub fn new(grammar: &Compiled) -> Matcher {
        let (parser, shard) = grammar.lexers.take();
        Matcher {
            inner: llguidance::Matcher::new(Ok(parser)).into_cancellable(),
            opening_cost: grammar.opening_cost.clone(),
            _shard: shard,
        }
    }

    /// What stops this matcher's work for good, from any thread, even mid-step (its steps then
    /// fail): for a sequence that is gone while its next step is computed. A clone of the
    /// matcher has its own.
    pub fn stopper(&self) -> Option<llguidance::CancellationHandle> {
        self.inner.cancellation_handle()
    }

    /// How long the mask at the grammar's start took, where a matcher of the same grammar
    /// has said so ([`Matcher::set_opening_cost`]).
    pub fn opening_cost(&self) -> Option<Duration> {
        self.opening_cost.get().copied()
    }

    /// Records how long the mask at the grammar's start took (the first record stays).
    pub fn set_opening_cost(&self, took: Duration) {
        let _ = self.opening_cost.set(took);
    }

    /// The tokens allowed next, as a bitmask (bit `t % 32` of word `t / 32`); a complete
    /// answer allows the model's stop tokens.
    pub fn allowed(&mut self) -> std::result::Result<Vec<u32>, String> {
        let mask = self.inner.compute_mask().map_err(|e| self.error(e))?;
        Ok(mask.as_slice().to_vec())
    }

    /// Sets every token `allowed` does not allow to -inf in `row` (one row of logits).
    pub fn mask_logits(&mut self, row: &mut [f32]) -> std::result::Result<(), String> {
        let mask = self.allowed()?;
        apply_bitmask(row, &mask);
        Ok(())
    }

    /// Advances past `token` (one the mask allowed, or a forced one).
    pub fn commit(&mut self, token: i32) -> std::result::Result<(), String> {
        self.inner
            .consume_token(token as TokenId)
            .map_err(|e| self.error(e))
    }

    /// Tokens the grammar forces next (a single continuation, such as a schema's next
    /// property name), already committed; empty when the model has a choice.
    pub fn forced(&mut self) -> Vec<i32> {
        if self.inner.is_stopped() {
            return Vec::new();
        }
        self.inner
            .consume_ff_tokens()
            .into_iter()
            .map(|t| t as i32)
            .collect()
    }

    /// Whether the grammar has ended (complete, or failed): no token may follow.
    pub fn is_stopped(&self) -> bool {
        self.inner.is_stopped()
    }

    /// Whether the answer is complete and nothing may follow it.
    pub fn is_complete(&self) -> bool {
        self.inner.is_stopped() && !self.inner.is_error()
    }

    fn error(&self, e: impl std::fmt::Display) -> String {
        let text = self.inner.get_error().unwrap_or_else(|| e.to_string());
        format!("the output grammar: {}", step_reason(&text))
    }
}

/// The reason a step's mask failed, naming the operator's limit where the lexer ran out of
/// fuel (llguidance says only "too many expressions constructed").
fn step_reason(text: &str) -> String {
    let why = reason(text);
    if why.contains("too many expressions constructed") {
        format!("{why} (one token's mask needs more lexer work than --max-grammar-step-fuel)")
    } else {
        why
    }
}

/// llguidance's message without what it appends for its own debugging (the parser's state,
/// or a marker that it was left out; a panic's backtrace): not a reason a client can act on.
fn reason(text: &str) -> String {
    let end = ["\n<state>", "\n<non-verbose/>", "\n<backtrace>"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(text.len());
    text[..end].trim_end().to_string()
}

/// Sets `row[t]` to -inf for every token `t` whose bit is clear in `mask` (ids past the
/// mask included).
pub fn apply_bitmask(row: &mut [f32], mask: &[u32]) {
    for (t, v) in row.iter_mut().enumerate() {
        let word = mask.get(t / 32).copied().unwrap_or(0);
        if word >> (t % 32) & 1 == 0 {
            *v = f32::NEG_INFINITY;
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    fn fixture() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mlc/model")
    }

    /// The fixture's 320-token byte-level BPE; token 2 (`<|im_end|>`) ends an answer.
    pub(in crate::structured) fn grammars() -> (Grammars, Arc<TextCodec>) {
        let codec = Arc::new(TextCodec::load(&fixture()).unwrap());
        let g = Grammars::load(&fixture(), codec.clone(), 320, &[2], &Default::default());
        (g.unwrap(), codec)
    }

    fn allowed_ids(mask: &[u32]) -> Vec<i32> {
        (0..320)
            .filter(|&t| mask[t / 32] >> (t % 32) & 1 == 1)
            .map(|t| t as i32)
            .collect()
    }

    /// The mask after each hand-made prefix against llguidance's own answer for every single
    /// token (`validate_tokens` on a fresh matcher fed the same prefix): equal where the grammar
    /// forces nothing, the forced token alone where it forces text.
    #[test]
    fn masks_agree_with_llguidance_token_by_token() {
        let (g, codec) = grammars();
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"enum": ["x", "yz"]}},
            "required": ["a", "b"], "additionalProperties": false});
        let c = Constraint::JsonSchema {
            schema,
            compact: true,
        };
        let compiled = g.compile(&c).unwrap();
        for prefix in [
            "",
            "{\"a\":",
            "{\"a\":-1",
            "{\"a\":12,\"b\":\"",
            "{\"a\":12,\"b\":\"x\"",
        ] {
            let tokens = codec.encode(prefix).unwrap();
            let mut ours = Matcher::new(&compiled);
            for &t in &tokens {
                ours.commit(t).unwrap();
            }
            let got = allowed_ids(&ours.allowed().unwrap());
            let mut reference = llguidance::Matcher::new(Ok(compiled.lexers.take().0));
            reference
                .consume_tokens(&tokens.iter().map(|&t| t as u32).collect::<Vec<_>>())
                .unwrap();
            let forced = reference.clone().compute_ff_tokens();
            let valid: Vec<i32> = (0..320)
                .filter(|&t| reference.clone().validate_tokens(&[t]).unwrap() == 1)
                .map(|t| t as i32)
                .collect();
            if forced.is_empty() {
                assert_eq!(got, valid, "after {prefix:?}");
            } else {
                assert_eq!(got, vec![forced[0] as i32], "after {prefix:?}");
                assert!(valid.contains(&got[0]), "after {prefix:?}");
            }
            assert!(!got.is_empty());
        }
        // After `"a":` only a number's start; after the last value only the closing brace;
        // then the answer is complete and nothing follows it.
        let mut m = Matcher::new(&compiled);
        for t in codec.encode("{\"a\":").unwrap() {
            m.commit(t).unwrap();
        }
        for t in allowed_ids(&m.allowed().unwrap()) {
            let text = codec.decode(&[t]);
            assert!(
                text.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-'),
                "{text:?}"
            );
        }
        for t in codec.encode("1,\"b\":\"yz\"").unwrap() {
            m.commit(t).unwrap();
        }
        let close = allowed_ids(&m.allowed().unwrap());
        assert_eq!(
            close
                .iter()
                .map(|&t| codec.decode(&[t]))
                .collect::<Vec<_>>(),
            ["}"]
        );
        assert!(!m.is_complete());
        m.commit(close[0]).unwrap();
        assert!(m.is_complete());
        // A disallowed token is an error, not a silent step.
        let mut m = Matcher::new(&compiled);
        assert!(m.commit(codec.encode("x").unwrap()[0]).is_err());
    }

    #[test]
    fn forced_text_comes_as_tokens_and_stop_tokens_end_complete_answers() {
        let (g, codec) = grammars();
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}},
                            "required": ["name"], "additionalProperties": false});
        let compiled = g
            .compile(&Constraint::JsonSchema {
                schema,
                compact: true,
            })
            .unwrap();
        let mut m = Matcher::new(&compiled);
        let first = allowed_ids(&m.allowed().unwrap());
        assert_eq!(first.len(), 1, "the opening is forced");
        m.commit(first[0]).unwrap();
        let forced = m.forced();
        let text = codec.decode(&first) + &codec.decode(&forced);
        assert_eq!(text, "{\"name\":\"");
        // A regex that may end or go on allows the stop token only where it may end.
        let rx = g.compile(&Constraint::Regex("a+".into())).unwrap();
        let mut m = Matcher::new(&rx);
        assert!(!allowed_ids(&m.allowed().unwrap()).contains(&2));
        m.commit(codec.encode("a").unwrap()[0]).unwrap();
        assert!(allowed_ids(&m.allowed().unwrap()).contains(&2));
    }

    #[test]
    fn grammars_compile_once_and_the_cache_is_bounded() {
        let codec = Arc::new(TextCodec::load(&fixture()).unwrap());
        let limits = GrammarLimits {
            cache_size: 2,
            ..Default::default()
        };
        let g = Grammars::load(&fixture(), codec, 320, &[2], &limits).unwrap();
        let a = g.compile(&Constraint::Regex("a".into())).unwrap();
        let again = g.compile(&Constraint::Regex("a".into())).unwrap();
        assert!(Arc::ptr_eq(&a.lexers, &again.lexers));
        for rx in ["b", "c", "d"] {
            g.compile(&Constraint::Regex(rx.into())).unwrap();
        }
        assert_eq!(g.cached(), 2);
        // Bad grammars are refused with llguidance's reason; a grammar past the size limit too.
        let bad = g.compile(&Constraint::JsonSchema {
            schema: json!({"type": "nope"}),
            compact: true,
        });
        assert!(bad.unwrap_err().contains("nope"));
        assert!(g
            .compile(&Constraint::Lark("start: undefined_rule".into()))
            .is_err());
        let tiny = GrammarLimits {
            max_grammar_size: 10,
            ..Default::default()
        };
        let codec = Arc::new(TextCodec::load(&fixture()).unwrap());
        let g = Grammars::load(&fixture(), codec, 320, &[2], &tiny).unwrap();
        let big = json!({"type": "object", "properties": {"a": {"type": "string"},
            "b": {"type": "array", "items": {"type": "number"}}}});
        let e = g
            .compile(&Constraint::JsonSchema {
                schema: big,
                compact: true,
            })
            .unwrap_err();
        assert!(e.contains("size") || e.contains("limit"), "{e}");
    }

    /// A chain of 3000 `$ref`s makes llguidance recurse far past a test thread's 2 MiB stack:
    /// it compiles on the compile thread's. A constraint past `max_grammar_bytes` is refused
    /// by that limit, before llguidance sees it.
    #[test]
    fn deep_grammars_compile_on_a_deep_stack_and_long_ones_are_refused() {
        let (g, codec) = grammars();
        let chain = |n: usize| {
            let mut defs: serde_json::Map<String, serde_json::Value> = (0..n)
                .map(|i| {
                    (
                        format!("d{i}"),
                        json!({"$ref": format!("#/$defs/d{}", i + 1)}),
                    )
                })
                .collect();
            defs.insert(format!("d{n}"), json!({"enum": [7]}));
            Constraint::JsonSchema {
                schema: json!({"$ref": "#/$defs/d0", "$defs": defs}),
                compact: true,
            }
        };
        let compiled = g.compile(&chain(3000)).unwrap();
        let mut m = Matcher::new(&compiled);
        m.commit(codec.encode("7").unwrap()[0]).unwrap();
        assert!(m.is_complete());
        let e = g.compile(&chain(6000)).unwrap_err();
        assert!(e.contains("--max-grammar-bytes"), "{e}");
    }

    /// Compiles beyond the slots wait their turn, and every one runs.
    #[test]
    fn compiles_run_a_few_at_a_time() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let n = compile_slots() * 3;
        let done: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|k| {
                    let (now, most) = (&now, &most);
                    s.spawn(move || {
                        on_compile_stack(|| {
                            most.fetch_max(now.fetch_add(1, SeqCst) + 1, SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            now.fetch_sub(1, SeqCst);
                            Ok(k)
                        })
                        .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(done, (0..n).collect::<Vec<_>>());
        assert!(most.load(SeqCst) <= compile_slots(), "{most:?}");
        // A panic in a compile is an error, and frees its slot: more of them than there are
        // slots, then a compile that runs.
        for _ in 0..=compile_slots() {
            let e = on_compile_stack::<()>(|| panic!("inside llguidance")).unwrap_err();
            assert!(e.contains("failed"), "{e}");
        }
        assert_eq!(on_compile_stack(|| Ok(7)), Ok(7));
    }

    /// Grammars llguidance accepts but cannot start matching are refused when compiled (the
    /// server's 400); grammars that fail a later step fail it with the limit they passed.
    /// Either way the reason is llguidance's, without its parser state or backtrace.
    #[test]
    fn grammars_past_the_parser_s_limits_fail_with_a_short_reason() {
        let (g, codec) = grammars();
        let schema = |s: serde_json::Value| Constraint::JsonSchema {
            schema: s,
            compact: true,
        };
        let short = |e: &str| {
            assert!(!e.contains('<'), "{e}");
            assert!(e.len() < 200, "{e}");
        };
        // A rule that only refers to itself has no first token; an integer range past i64
        // panics inside llguidance (caught there).
        let cycle = json!({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}});
        let range = json!({"type": "integer", "minimum": -1e300, "maximum": 1e300});
        for (k, c) in [schema(cycle), schema(range)].iter().enumerate() {
            let e = g
                .compile(c)
                .err()
                .unwrap_or_else(|| panic!("case {k} compiled"));
            short(&e);
        }
        assert_eq!(g.cached(), 0);
        // A counted repeat too costly to derive fails at its second step (the first, `a`, is
        // cheap), naming the operator's limit; 5000 alternatives fail after `{`, past the
        // parser's row (a grammar of 400 KB: past the default --max-grammar-bytes, raised).
        let long = GrammarLimits {
            max_grammar_bytes: 1 << 20,
            ..Default::default()
        };
        let g = Grammars::load(&fixture(), codec.clone(), 320, &[2], &long).unwrap();
        let wide: Vec<serde_json::Value> = (0..5000)
            .map(|i| {
                json!({"type": "object", "required": [format!("k{i}")],
                "properties": {format!("k{i}"): {"type": "string"}}})
            })
            .collect();
        let later = [
            (Constraint::Regex("a{1000000000}".into()), "a"),
            (schema(json!({"anyOf": wide})), "{"),
        ];
        let mut errors = Vec::new();
        for (c, first) in &later {
            let mut m = Matcher::new(&g.compile(c).unwrap());
            let e = match m.commit(codec.encode(first).unwrap()[0]) {
                Err(e) => e,
                Ok(()) => m.allowed().unwrap_err(),
            };
            short(&e);
            errors.push(e);
        }
        assert_eq!(
            errors[0],
            "the output grammar: lexer error: too many expressions constructed (one token's \
             mask needs more lexer work than --max-grammar-step-fuel)"
        );
        assert!(
            errors[1].contains("5000 items; max is 2000"),
            "{}",
            errors[1]
        );
        assert!(g.compile(&Constraint::Regex("a{3}".into())).is_ok());
    }

    #[test]
    fn masking_sets_disallowed_logits_to_minus_infinity() {
        let mut row = vec![1.0f32; 40];
        apply_bitmask(&mut row, &[0b101, 1]);
        let kept: Vec<usize> = (0..40).filter(|&t| row[t].is_finite()).collect();
        assert_eq!(kept, [0, 2, 32]);
    }
}
