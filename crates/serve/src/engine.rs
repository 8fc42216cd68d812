//! The engine: one thread owns the model and its paged KV cache and runs the batching loop,
//! as MLC-LLM's engine does with its actions (new-request prefill, batch decode):
//!
//! - requests wait in a bounded queue ([`Engine::submit`] refuses past `max_queue`: HTTP 429);
//! - a request is admitted when the running batch has room for its sequences and the KV cache
//!   for its tokens (prompt plus `max_tokens` per choice, reserved up front, so a running
//!   sequence never runs out of pages: requests that do not fit wait, first come first served);
//! - every iteration prefills up to `prefill_chunk_size` prompt tokens of admitted requests
//!   (chunked: a long prompt takes several iterations) in one `batch_prefill`, then decodes one
//!   token for every running sequence in one `batch_decode`: new requests join the running
//!   batch without waiting for it to finish (continuous batching);
//! - `n` choices share their prompt's pages: the prompt is prefilled once and forked;
//! - a client that goes away (its event receiver dropped) has its sequences removed and their
//!   pages freed at the next iteration.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;
use tvmrt::object::ObjectRef;
use tvmrt::{Error, Result};

use crate::metrics::Metrics;
use crate::model::{read_f32, Model};
use crate::sampler::{self, Rng, SamplingParams, TokenLogprob, GREEDY_BELOW};
use crate::text::{Detokenized, TextCodec};

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
}

/// What the engine knows of its model, for the HTTP front.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    pub context_window: usize,
    pub vocab_size: usize,
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
    /// A generated token of a choice (`None` for a text flush without a token) and the text
    /// it releases.
    Delta {
        choice: usize,
        token: Option<i32>,
        text: String,
        logprob: Option<TokenLogprob>,
    },
    /// A choice ended.
    Finish { choice: usize, reason: FinishReason },
    /// All choices ended.
    Done {
        prompt_tokens: usize,
        completion_tokens: usize,
    },
    /// The request failed; nothing follows.
    Error(String),
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
    /// The engine has stopped.
    Stopped,
}

struct Job {
    req: Request,
    arrived: Instant,
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
}

impl Engine {
    /// Starts the engine thread: loads `library` and the model directory's weights, creates
    /// the KV cache. Returns once the model is loaded, or its error.
    pub fn start(library: PathBuf, model_dir: PathBuf, config: EngineConfig) -> Result<Engine> {
        let codec = Arc::new(TextCodec::load(&model_dir)?);
        let chat = crate::config::ChatConfig::load(&model_dir)?;
        let stop_ids = chat.stop_token_ids();
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
                    let model = Model::load(&library, &model_dir)?;
                    let mut config = config;
                    config.max_num_sequence = config.max_num_sequence.max(1);
                    if config.prefill_chunk_size <= 0 {
                        config.prefill_chunk_size = model.metadata.prefill_chunk_size;
                    }
                    let cache = model.create_cache(
                        config.max_num_sequence as i64,
                        config.max_total_sequence_length,
                        config.prefill_chunk_size,
                        PAGE_SIZE,
                    )?;
                    let total_pages = model.available_pages(&cache)?;
                    m.kv_pages_total.store(total_pages as u64, Relaxed);
                    Ok(Worker {
                        info: ModelInfo {
                            context_window: model.metadata.context_window_size as usize,
                            vocab_size: model.vocab_size as usize,
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
                        reserved: 0,
                        next_seq: 0,
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
        Ok(Engine {
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

    /// KV tokens a request reserves while it runs: its prompt once (choices fork it) and its
    /// output per choice, each rounded up to whole pages.
    pub fn reservation(prompt: usize, n: usize, max_tokens: usize) -> i64 {
        let pages = |t: usize| (t as i64 + PAGE_SIZE - 1) / PAGE_SIZE + 1;
        (pages(prompt) + n as i64 * pages(max_tokens)) * PAGE_SIZE
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
        // Count first, so that concurrent submits cannot overshoot the bound.
        if self.pending.fetch_add(1, Relaxed) >= self.info.config.max_queue {
            self.pending.fetch_sub(1, Relaxed);
            return Err(Refused::QueueFull);
        }
        self.tx
            .send(Job {
                req,
                arrived: Instant::now(),
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

struct Choice {
    seq: i64,
    tokens: Vec<i32>,
    counts: HashMap<i32, u32>,
    rng: Rng,
    detok: Detokenized,
    done: bool,
    last_token_at: Option<Instant>,
}

struct Active {
    job: Job,
    max_tokens: usize,
    reserved: i64,
    prefilled: usize,
    /// Empty until the prompt is prefilled; then one per choice (the first is the prompt's
    /// own sequence, the others its forks).
    choices: Vec<Choice>,
    parent: i64,
}

impl Active {
    fn prompt(&self) -> &[i32] {
        &self.job.req.prompt
    }
    fn params(&self) -> &SamplingParams {
        &self.job.req.params
    }
    fn prefilling(&self) -> bool {
        self.prefilled < self.prompt().len()
    }
    fn finished(&self) -> bool {
        !self.prefilling() && self.choices.iter().all(|c| c.done)
    }
    fn send(&self, e: Event) {
        let _ = self.job.req.events.send(e);
    }
}

struct Worker {
    info: ModelInfo,
    model: Model,
    cache: ObjectRef,
    total_pages: i64,
    stop_ids: Vec<i32>,
    codec: Arc<TextCodec>,
    metrics: Arc<Metrics>,
    pending: Arc<AtomicUsize>,
    waiting: VecDeque<Job>,
    active: Vec<Active>,
    /// KV tokens reserved by the active requests.
    reserved: i64,
    next_seq: i64,
}

impl Worker {
    fn run(&mut self, rx: mpsc::Receiver<Job>) {
        loop {
            if self.active.is_empty() && self.waiting.is_empty() {
                match rx.recv() {
                    Ok(j) => self.waiting.push_back(j),
                    Err(_) => return,
                }
            }
            while let Ok(j) = rx.try_recv() {
                self.waiting.push_back(j);
            }
            self.drop_cancelled();
            self.admit();
            self.prefill_step();
            self.decode_step();
            self.retire();
        }
    }

    fn drop_cancelled(&mut self) {
        let before = self.waiting.len();
        self.waiting.retain(|j| !j.req.events.is_closed());
        let gone = before - self.waiting.len();
        self.pending.fetch_sub(gone, Relaxed);
        self.metrics
            .requests_cancelled
            .fetch_add(gone as u64, Relaxed);
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].job.req.events.is_closed() {
                let a = self.active.remove(i);
                self.metrics.requests_cancelled.fetch_add(1, Relaxed);
                self.free(a);
            } else {
                i += 1;
            }
        }
    }

    /// Removes every sequence of `a` from the cache and releases its reservation.
    fn free(&mut self, a: Active) {
        if a.choices.is_empty() {
            let _ = self.model.remove_sequence(&self.cache, a.parent);
        }
        for c in &a.choices {
            if !c.done {
                let _ = self.model.remove_sequence(&self.cache, c.seq);
            }
        }
        self.reserved -= a.reserved;
    }

    fn running_sequences(&self) -> usize {
        self.active.iter().map(|a| a.params().n).sum()
    }

    fn admit(&mut self) {
        while let Some(j) = self.waiting.front() {
            let n = j.req.params.n;
            let max_tokens = j.req.params.max_tokens.unwrap_or(1);
            let need = Engine::reservation(j.req.prompt.len(), n, max_tokens);
            if self.running_sequences() + n > self.info.config.max_num_sequence
                || self.reserved + need > self.info.config.max_total_sequence_length
            {
                break;
            }
            let job = self.waiting.pop_front().expect("front exists");
            self.pending.fetch_sub(1, Relaxed);
            self.metrics.queue_time.observe(job.arrived.elapsed());
            let seq = self.next_seq;
            self.next_seq += 1;
            if let Err(e) = self.model.add_sequence(&self.cache, seq) {
                let _ = job.req.events.send(Event::Error(e.to_string()));
                self.metrics.requests_error.fetch_add(1, Relaxed);
                continue;
            }
            self.reserved += need;
            self.active.push(Active {
                job,
                max_tokens,
                reserved: need,
                prefilled: 0,
                choices: Vec::new(),
                parent: seq,
            });
        }
    }

    /// Fails every request in `which` with `e`.
    fn fail(&mut self, which: &[usize], e: &Error) {
        for &i in which.iter().rev() {
            let a = self.active.remove(i);
            a.send(Event::Error(e.to_string()));
            self.metrics.requests_error.fetch_add(1, Relaxed);
            self.free(a);
        }
    }

    fn prefill_step(&mut self) {
        let mut budget = self.info.config.prefill_chunk_size as usize;
        let mut batch: Vec<(usize, usize)> = Vec::new(); // (active index, tokens)
        for (i, a) in self.active.iter().enumerate() {
            if budget == 0 {
                break;
            }
            if a.prefilling() {
                let take = (a.prompt().len() - a.prefilled).min(budget);
                budget -= take;
                batch.push((i, take));
            }
        }
        if batch.is_empty() {
            return;
        }
        let seqs: Vec<i64> = batch.iter().map(|&(i, _)| self.active[i].parent).collect();
        let chunks: Vec<&[i32]> = batch
            .iter()
            .map(|&(i, t)| {
                let a = &self.active[i];
                &a.prompt()[a.prefilled..a.prefilled + t]
            })
            .collect();
        let which: Vec<usize> = batch.iter().map(|b| b.0).collect();
        let logits = match self
            .model
            .prefill(&self.cache, &seqs, &chunks)
            .and_then(|l| read_f32(&l))
        {
            Ok(l) => l,
            Err(e) => return self.fail(&which, &e),
        };
        let vocab = self.info.vocab_size;
        let mut rows = Vec::new();
        for (k, &(i, t)) in batch.iter().enumerate() {
            let a = &mut self.active[i];
            a.prefilled += t;
            self.metrics.prompt_tokens.fetch_add(t as u64, Relaxed);
            if a.prefilling() {
                continue;
            }
            // The prompt is in: its choices fork it and sample from its last logits.
            let seed = a.params().seed.unwrap_or_else(random_seed);
            for c in 0..a.params().n {
                let seq = if c == 0 {
                    a.parent
                } else {
                    let s = self.next_seq;
                    self.next_seq += 1;
                    if let Err(e) = self.model.fork_sequence(&self.cache, a.parent, s) {
                        return self.fail(&[i], &e);
                    }
                    s
                };
                a.choices.push(Choice {
                    seq,
                    tokens: Vec::new(),
                    counts: HashMap::new(),
                    rng: Rng::new(seed.wrapping_add(c as u64)),
                    detok: Detokenized::default(),
                    done: false,
                    last_token_at: None,
                });
                rows.push((i, c, logits[k * vocab..(k + 1) * vocab].to_vec()));
            }
        }
        self.sample(rows);
    }

    fn decode_step(&mut self) {
        let mut who = Vec::new();
        for (i, a) in self.active.iter().enumerate() {
            for (c, ch) in a.choices.iter().enumerate() {
                if !ch.done {
                    who.push((i, c));
                }
            }
        }
        if who.is_empty() {
            return;
        }
        let seqs: Vec<i64> = who
            .iter()
            .map(|&(i, c)| self.active[i].choices[c].seq)
            .collect();
        let tokens: Vec<i32> = who
            .iter()
            .map(|&(i, c)| *self.active[i].choices[c].tokens.last().expect("sampled"))
            .collect();
        let logits = match self
            .model
            .decode(&self.cache, &seqs, &tokens)
            .and_then(|l| read_f32(&l))
        {
            Ok(l) => l,
            Err(e) => {
                let mut which: Vec<usize> = who.iter().map(|w| w.0).collect();
                which.dedup();
                return self.fail(&which, &e);
            }
        };
        let vocab = self.info.vocab_size;
        let rows = who
            .iter()
            .enumerate()
            .map(|(k, &(i, c))| (i, c, logits[k * vocab..(k + 1) * vocab].to_vec()))
            .collect();
        self.sample(rows);
    }

    /// Samples one token for each `(active, choice, logits)` and hands it to the choice.
    fn sample(&mut self, mut rows: Vec<(usize, usize, Vec<f32>)>) {
        // Logit bias and penalties through the model's own kernels, for the whole batch.
        let (mut bias, mut counts, mut penalties) = (Vec::new(), Vec::new(), Vec::new());
        for (k, (i, c, _)) in rows.iter().enumerate() {
            let p = self.active[*i].params();
            let vocab = self.info.vocab_size as i32;
            bias.extend(
                p.logit_bias
                    .iter()
                    .filter(|b| (0..vocab).contains(&b.0))
                    .map(|&(t, b)| (k as i32, t, b)),
            );
            if p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 {
                let ch = &self.active[*i].choices[*c];
                counts.extend(ch.counts.iter().map(|(&t, &n)| (k as i32, t, n as i32)));
            }
            penalties.push([p.presence_penalty, p.frequency_penalty, 1.0]);
        }
        let mut logits: Vec<Vec<f32>> = rows.iter_mut().map(|r| std::mem::take(&mut r.2)).collect();
        if let Err(e) = self
            .model
            .process_logits(&mut logits, &bias, &counts, &penalties)
        {
            let mut which: Vec<usize> = rows.iter().map(|r| r.0).collect();
            which.dedup();
            return self.fail(&which, &e);
        }
        for (r, l) in rows.iter_mut().zip(logits) {
            r.2 = l;
        }
        let hot: Vec<usize> = (0..rows.len())
            .filter(|&k| self.active[rows[k].0].params().temperature >= GREEDY_BELOW)
            .collect();
        let mut chosen: Vec<Result<i32>> = rows.iter().map(|r| Ok(sampler::argmax(&r.2))).collect();
        if !hot.is_empty() {
            let logits: Vec<Vec<f32>> = hot.iter().map(|&k| rows[k].2.clone()).collect();
            let temps: Vec<f32> = hot
                .iter()
                .map(|&k| self.active[rows[k].0].params().temperature)
                .collect();
            match self.model.softmax(&logits, &temps) {
                Ok(probs) => {
                    for (&k, p) in hot.iter().zip(probs) {
                        let (i, c) = (rows[k].0, rows[k].1);
                        let a = &mut self.active[i];
                        let top_p = a.params().top_p;
                        let u = a.choices[c].rng.uniform();
                        chosen[k] = sampler::sample_from_prob(&p, top_p, u);
                    }
                }
                Err(e) => {
                    for &k in &hot {
                        chosen[k] = Err(e.clone());
                    }
                }
            }
        }
        let mut failed = Vec::new();
        for ((i, c, row), token) in rows.into_iter().zip(chosen) {
            match token {
                Ok(t) => self.accept(i, c, t, &row),
                Err(e) => failed.push((i, e)),
            }
        }
        failed.dedup_by_key(|f| f.0);
        for (i, e) in failed.into_iter().rev() {
            self.fail(&[i], &e);
        }
    }

    /// A new token of choice `c` of active `i`: stop checks, text, events.
    fn accept(&mut self, i: usize, c: usize, token: i32, row: &[f32]) {
        let now = Instant::now();
        let a = &mut self.active[i];
        let context = self.info.context_window;
        let prompt_len = a.job.req.prompt.len();
        let logprob = a
            .job
            .req
            .params
            .logprobs
            .map(|k| sampler::logprobs(row, token, k));
        let ch = &mut a.choices[c];
        match ch.last_token_at {
            None if c == 0 => self.metrics.ttft.observe(a.job.arrived.elapsed()),
            Some(t) => self.metrics.tpot.observe(now - t),
            None => {}
        }
        ch.last_token_at = Some(now);
        self.metrics.generation_tokens.fetch_add(1, Relaxed);
        let stops = &a.job.req.params.stop;
        let mut reason = None;
        let mut out_token = None;
        if self.stop_ids.contains(&token) {
            // Release what was held back for an unfinished character.
            ch.detok.push(&self.codec, &ch.tokens, stops, true);
            ch.tokens.push(token);
            reason = Some(FinishReason::Stop);
        } else {
            ch.tokens.push(token);
            *ch.counts.entry(token).or_default() += 1;
            out_token = Some(token);
            let full = ch.tokens.len() >= a.max_tokens || prompt_len + ch.tokens.len() >= context;
            if ch
                .detok
                .push(&self.codec, &ch.tokens, stops, full)
                .is_some()
            {
                reason = Some(FinishReason::Stop);
            } else if full {
                reason = Some(FinishReason::Length);
            }
        }
        let text = ch.detok.take_delta(stops, reason.is_some());
        if out_token.is_some() || !text.is_empty() {
            let _ = a.job.req.events.send(Event::Delta {
                choice: c,
                token: out_token,
                text,
                logprob: if out_token.is_some() { logprob } else { None },
            });
        }
        if let Some(reason) = reason {
            ch.done = true;
            let seq = ch.seq;
            let _ = a.job.req.events.send(Event::Finish { choice: c, reason });
            let _ = self.model.remove_sequence(&self.cache, seq);
        }
    }

    /// Removes the finished requests and reports them (after the gauges are updated, so that
    /// a client that reads `/metrics` after its answer sees its pages freed).
    fn retire(&mut self) {
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].finished() {
                let a = self.active.remove(i);
                self.reserved -= a.reserved;
                done.push(a);
            } else {
                i += 1;
            }
        }
        self.update_gauges();
        for a in done {
            let completion: usize = a.choices.iter().map(|c| c.tokens.len()).sum();
            a.send(Event::Done {
                prompt_tokens: a.prompt().len(),
                completion_tokens: completion,
            });
            self.metrics.requests_ok.fetch_add(1, Relaxed);
        }
    }

    fn update_gauges(&self) {
        let running: usize = self
            .active
            .iter()
            .map(|a| a.choices.iter().filter(|c| !c.done).count().max(1))
            .sum();
        self.metrics
            .running_sequences
            .store(running as u64, Relaxed);
        self.metrics
            .waiting_requests
            .store(self.waiting.len() as u64, Relaxed);
        if let Ok(free) = self.model.available_pages(&self.cache) {
            self.metrics
                .kv_pages_in_use
                .store((self.total_pages - free).max(0) as u64, Relaxed);
        }
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
