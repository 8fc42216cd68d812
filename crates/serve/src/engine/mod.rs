//! The engine: one thread owns the model and its paged KV cache and runs the batching loop,
//! as MLC-LLM's engine does with its actions (new-request prefill, batch decode):
//!
//! - requests wait in a bounded queue ([`Engine::submit`] refuses past `max_queue`: HTTP 429,
//!   and refuses a request the cache could not hold even alone: HTTP 400);
//! - [`scheduler`]: admission, prefix sharing, preemption when the KV pages run out;
//! - [`step`]: every iteration prefills up to `prefill_chunk_size` prompt tokens of admitted
//!   requests (chunked: a long prompt takes several iterations) in one `batch_prefill`, then
//!   decodes one token for every running sequence in one `batch_decode`: new requests join the
//!   running batch without waiting for it to finish (continuous batching); then samples;
//! - [`sequence`]: a request's state (its choices' tokens, what the cache holds of them);
//!   `n` choices share their prompt's pages: the prompt is prefilled once and forked;
//! - [`prefix`]: finished sequences kept for prompts that start with their tokens;
//! - a constrained request (`params.constraint`) has its grammar compiled at
//!   [`Engine::submit`] (a 400 where it does not compile) and a [`Matcher`] per choice: each
//!   step's logits are masked to the tokens the grammar allows before sampling (the mask
//!   computed ahead, beside the forward; a sequence whose mask is late sits the step out),
//!   tokens the grammar forces are appended without a decode step each (they join the next
//!   prefill as a chunk), and a complete answer ends with `stop`;
//! - a client that goes away (its event receiver dropped) has its sequences removed and their
//!   pages freed at the next iteration.

mod constrain;
mod prefix;
mod scheduler;
mod sequence;
mod step;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;
use tvmrt::abi::DLDevice;
use tvmrt::{Error, Result};

use crate::metrics::Metrics;
use crate::model::Model;
use crate::sampler::{Rng, SamplingParams, TokenLogprob};
use crate::structured::grammar::{compile_slots, Compiled, Matcher};
use crate::structured::{Constraint, GrammarLimits, Grammars, MaskPool};
use crate::text::TextCodec;
use prefix::PrefixPool;
use scheduler::Worker;

/// KV cache page size (tokens), as MLC's engine creates the cache.
pub const PAGE_SIZE: i64 = 16;

/// Engine limits, named as MLC-LLM's `EngineConfig` names them.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Most sequences decoded together (MLC: `max_num_sequence`, the max batch size).
    pub max_num_sequence: usize,
    /// KV cache capacity in tokens, over all sequences (MLC: `max_total_sequence_length`).
    pub max_total_sequence_length: i64,
    /// Most prompt tokens in one prefill forward (MLC: `prefill_chunk_size`).
    pub prefill_chunk_size: i64,
    /// Most requests waiting for admission; more are refused (HTTP 429).
    pub max_queue: usize,
    /// Finished sequences kept in the KV cache for prefix sharing (MLC:
    /// `prefix_cache_max_num_recycling_seqs`); 0 turns prefix sharing with finished requests
    /// off (live ones are still shared).
    pub prefix_cache_max_num_recycling_seqs: usize,
    /// Where the model runs (`--device`: the CPU, or `opencl:N`, `cuda:N`, `vulkan:N` for a
    /// library MLC-LLM built for that device).
    pub device: DLDevice,
}

/// What the engine knows of its model, for the HTTP front.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    pub context_window: usize,
    pub vocab_size: usize,
    /// Whether the library gives every prompt position's logits (`batch_verify`), which
    /// `echo` with `logprobs` needs.
    pub prompt_logprobs: bool,
    pub config: EngineConfig,
}

/// Why a choice ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// What a request's receiver gets, in order.
#[derive(Clone, Debug)]
pub enum Event {
    /// A generated token of a choice (a stop token too, which ends it) and the text it
    /// releases (none for a stop token; text held back for an unfinished character comes
    /// out with a later token).
    Delta {
        choice: usize,
        token: i32,
        text: String,
        logprob: Option<TokenLogprob>,
    },
    /// The prompt of an `echo` request, once it is in the KV cache: sent for each choice
    /// before its first token, with the log-probability of each prompt token after the first
    /// when `logprobs` is set (else empty).
    Prompt {
        choice: usize,
        logprobs: Arc<Vec<TokenLogprob>>,
    },
    /// A choice ended.
    Finish { choice: usize, reason: FinishReason },
    /// All choices ended.
    Done {
        prompt_tokens: usize,
        completion_tokens: usize,
    },
    /// The request failed; nothing follows.
    Error(Failure),
}

/// Why a request failed after it was accepted.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// The message.
    pub message: String,
    /// The request's own output grammar failed (a step past the operator's limits): the
    /// client's to fix, answered as a 400, not the server's 500 (which clients retry).
    pub by_request: bool,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The kind of [`tvmrt::Error`] of a request's grammar that fails mid-answer.
pub const GRAMMAR_ERROR: &str = "GrammarError";

impl Failure {
    /// The failure `e` makes: the request's (its message alone) where it is a
    /// [`GRAMMAR_ERROR`], else the engine's.
    pub fn of(e: &Error) -> Failure {
        let by_request = e.kind == GRAMMAR_ERROR;
        Failure {
            message: if by_request {
                e.message.clone()
            } else {
                e.to_string()
            },
            by_request,
        }
    }
}

/// A generation request.
pub struct Request {
    pub prompt: Vec<i32>,
    pub params: SamplingParams,
    pub events: UnboundedSender<Event>,
}

/// Why [`Engine::submit`] refused a request.
#[derive(Debug)]
pub enum Refused {
    /// The queue is full: try again later (HTTP 429).
    QueueFull,
    /// The request can never run (HTTP 400).
    Invalid(String),
    /// The request's output constraint does not compile (HTTP 400 naming `response_format`):
    /// llguidance's reason.
    BadConstraint(String),
    /// The engine has stopped.
    Stopped,
}

/// A request as queued.
pub(crate) struct Job {
    pub req: Request,
    pub arrived: Instant,
    /// One matcher of `req.params.constraint`'s grammar per choice (none where it has
    /// none), made here rather than on the engine thread: a matcher may copy its grammar's
    /// lexer ([`crate::structured::grammar::Matcher::new`]), milliseconds for a large one.
    pub matchers: Vec<Matcher>,
}

/// A handle on the engine thread; dropping the last one stops it.
pub struct Engine {
    tx: mpsc::Sender<Job>,
    pending: Arc<AtomicUsize>,
    /// False once the engine thread has ended (a panic included): `/health` then fails.
    alive: Arc<AtomicBool>,
    pub info: ModelInfo,
    pub metrics: Arc<Metrics>,
    pub codec: Arc<TextCodec>,
    /// The model's compiled output grammars, or why constrained decoding is not available
    /// for its tokenizer.
    grammars: std::result::Result<Arc<Grammars>, String>,
}

impl Engine {
    /// Starts the engine thread: loads `library` and the model directory's weights, creates
    /// the KV cache. Returns once the model is loaded, or its error.
    pub fn start(library: PathBuf, model_dir: PathBuf, config: EngineConfig) -> Result<Engine> {
        Engine::start_with(library, model_dir, config, GrammarLimits::default())
    }

    /// [`Engine::start`] with the operator's limits on output grammars.
    pub fn start_with(
        library: PathBuf,
        model_dir: PathBuf,
        config: EngineConfig,
        limits: GrammarLimits,
    ) -> Result<Engine> {
        let codec = Arc::new(TextCodec::load(&model_dir)?);
        let chat = crate::config::ChatConfig::load(&model_dir)?;
        let stop_ids = chat.stop_token_ids();
        let grammar_stops = stop_ids.clone();
        let grammar_dir = model_dir.clone();
        let on_cpu = config.device.device_type == tvmrt::abi::DLDeviceType::CPU;
        let jump_forward = limits.jump_forward.unwrap_or(!on_cpu);
        let metrics = Arc::new(Metrics::default());
        let pending = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<ModelInfo>>();
        let (m, p, c) = (metrics.clone(), pending.clone(), codec.clone());
        let alive = Arc::new(AtomicBool::new(true));
        let guard = AliveGuard(alive.clone());
        std::thread::Builder::new()
            .name("tvmrt-engine".into())
            .spawn(move || {
                let _guard = guard;
                let setup = || -> Result<Worker> {
                    let model = Model::load(&library, &model_dir, config.device)?;
                    let mut config = config;
                    config.max_num_sequence = config.max_num_sequence.max(1);
                    if config.prefill_chunk_size <= 0 {
                        config.prefill_chunk_size = model.metadata.prefill_chunk_size;
                    }
                    // Room for the running sequences and the finished ones kept for sharing.
                    let seqs = config.max_num_sequence + config.prefix_cache_max_num_recycling_seqs;
                    let cache = model.create_cache(
                        seqs as i64 + 1,
                        config.max_total_sequence_length,
                        config.prefill_chunk_size,
                        PAGE_SIZE,
                    )?;
                    let total_pages = model.available_pages(&cache)?;
                    let config_pool = config.prefix_cache_max_num_recycling_seqs;
                    m.kv_pages_total.store(total_pages as u64, Relaxed);
                    Ok(Worker {
                        info: ModelInfo {
                            context_window: model.metadata.context_window_size as usize,
                            vocab_size: model.vocab_size as usize,
                            prompt_logprobs: model.has_every_position_logits(),
                            config,
                        },
                        model,
                        cache,
                        total_pages,
                        stop_ids,
                        codec: c,
                        metrics: m,
                        pending: p,
                        waiting: VecDeque::new(),
                        active: Vec::new(),
                        pool: PrefixPool::new(config_pool),
                        next_seq: 0,
                        next_order: 0,
                        jump_forward,
                        masks: MaskPool::new(compile_slots()).map_err(|e| {
                            Error::runtime(format!("cannot start the grammar mask threads: {e}"))
                        })?,
                        decode_time: std::time::Duration::ZERO,
                    })
                };
                match setup() {
                    Ok(mut w) => {
                        let _ = ready_tx.send(Ok(w.info.clone()));
                        // A bug must not take the process down silently: the requests in
                        // flight see their channels close (HTTP 500), new ones are refused
                        // (503), and /health reports it.
                        let run = std::panic::AssertUnwindSafe(|| w.run(rx));
                        if std::panic::catch_unwind(run).is_err() {
                            log::error!("tvmrt serve: the engine thread panicked and stopped");
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| Error::runtime(format!("cannot start the engine thread: {e}")))?;
        let info = ready_rx
            .recv()
            .map_err(|_| Error::runtime("the engine thread ended while loading the model"))??;
        // The token table, once per model.
        let grammars = Grammars::load(
            &grammar_dir,
            codec.clone(),
            info.vocab_size,
            &grammar_stops,
            &limits,
        )
        .map(Arc::new)
        .map_err(|e| {
            log::warn!("tvmrt serve: no structured output for this model: {e}");
            format!("structured output is not available for this model's tokenizer: {e}")
        });
        Ok(Engine {
            grammars,
            tx,
            pending,
            alive,
            info,
            metrics,
            codec,
        })
    }

    /// Whether the engine thread is still running.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Relaxed)
    }

    /// KV tokens a request may need alone: its prompt once (choices fork it) and its output
    /// per choice, each rounded up to whole pages with a page to spare. More than the cache
    /// holds is refused up front; less always fits once the requests admitted before it are
    /// done or preempted.
    pub fn reservation(prompt: usize, n: usize, max_tokens: usize) -> i64 {
        let pages = |t: usize| (t as i64 + PAGE_SIZE - 1) / PAGE_SIZE + 1;
        (pages(prompt) + n as i64 * pages(max_tokens)) * PAGE_SIZE
    }

    /// Compiles an output constraint (or finds it compiled): llguidance's reason where it
    /// does not compile. [`Engine::submit`] does it for a request's own constraint; the HTTP
    /// front may check one first to name its field in the error.
    pub fn compile(&self, c: &Constraint) -> std::result::Result<Compiled, String> {
        let grammars = self.grammars.as_ref().map_err(String::clone)?;
        grammars
            .compile(c)
            .map_err(|e| format!("the output constraint is invalid: {e}"))
    }

    /// The model's compiled grammars (none where its tokenizer does not allow them).
    pub fn grammars(&self) -> Option<&Arc<Grammars>> {
        self.grammars.as_ref().ok()
    }

    /// Queues a request. Its `params.max_tokens` must be set (the HTTP front fills it in).
    pub fn submit(&self, req: Request) -> std::result::Result<(), Refused> {
        let max_tokens = req.params.max_tokens.unwrap_or(0);
        let need = Self::reservation(req.prompt.len(), req.params.n, max_tokens);
        if need > self.info.config.max_total_sequence_length {
            return Err(Refused::Invalid(format!(
                "the request needs {need} tokens of KV cache (prompt of {}, {} choices of up to \
                 {max_tokens} tokens), more than the engine's max_total_sequence_length {}",
                req.prompt.len(),
                req.params.n,
                self.info.config.max_total_sequence_length
            )));
        }
        if req.params.n > self.info.config.max_num_sequence {
            return Err(Refused::Invalid(format!(
                "n = {} is more than the engine's max_num_sequence {}",
                req.params.n, self.info.config.max_num_sequence
            )));
        }
        let matchers = match &req.params.constraint {
            None => Vec::new(),
            Some(c) => {
                let grammar = self.compile(c).map_err(Refused::BadConstraint)?;
                (0..req.params.n).map(|_| Matcher::new(&grammar)).collect()
            }
        };
        // Count first, so that concurrent submits cannot overshoot the bound.
        if self.pending.fetch_add(1, Relaxed) >= self.info.config.max_queue {
            self.pending.fetch_sub(1, Relaxed);
            return Err(Refused::QueueFull);
        }
        self.tx
            .send(Job {
                req,
                arrived: Instant::now(),
                matchers,
            })
            .map_err(|_| {
                self.pending.fetch_sub(1, Relaxed);
                Refused::Stopped
            })
    }
}

/// Marks the engine dead when its thread ends, however it ends.
struct AliveGuard(Arc<AtomicBool>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Relaxed);
    }
}

/// A seed for requests without one: the clock's nanoseconds, mixed.
fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    Rng::new(t).uniform().to_bits()
}
