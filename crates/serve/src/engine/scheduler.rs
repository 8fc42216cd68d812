//! The engine thread's loop and its scheduling: which requests run, which KV pages they get,
//! and what gives way when the pages run out.
//!
//! - Admission (first come first served) takes a waiting request when the running batch has
//!   room for its choices and the cache has pages for what it must prefill now plus a page
//!   per running choice for the next step. Its prompt forks the longest shared prefix among
//!   the live and recently finished sequences ([`super::prefix`]).
//! - Pages are not reserved for a request's whole output: before each forward the engine
//!   counts the pages the forward needs; when the cache has fewer, it first drops finished
//!   sequences kept for prefix sharing, then preempts the newest running request, as vLLM and
//!   MLC-LLM do: its sequences leave the cache and it goes back to the head of the queue, to
//!   be recomputed from its prompt and the tokens it had generated (its client sees nothing
//!   of it but a pause). A request that cannot fit even alone is refused up front
//!   ([`super::Engine::submit`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use tvmrt::object::ObjectRef;
use tvmrt::Error;

use super::prefix::{best_hit, Hit, PrefixPool};
use super::sequence::{pages_to_grow, Active};
use super::{random_seed, Event, Job, ModelInfo};
use crate::metrics::Metrics;
use crate::model::Model;
use crate::structured::MaskPool;
use crate::text::TextCodec;

/// The engine thread's state: the model, its cache and every request it holds.
pub struct Worker {
    pub info: ModelInfo,
    pub model: Model,
    pub cache: ObjectRef,
    pub total_pages: i64,
    pub stop_ids: Vec<i32>,
    pub codec: Arc<TextCodec>,
    pub metrics: Arc<Metrics>,
    pub pending: Arc<AtomicUsize>,
    /// Requests not running: new ones, and preempted ones at the head.
    pub waiting: VecDeque<Active>,
    /// Running requests, in admission order.
    pub active: Vec<Active>,
    pub pool: PrefixPool,
    pub next_seq: i64,
    pub next_order: u64,
    /// Whether forced tokens are appended at once ([`crate::structured::GrammarLimits`]).
    pub jump_forward: bool,
    /// Where the constrained choices' next masks are computed, ahead of the forward.
    pub masks: MaskPool,
    /// How long the last decode forward took (the deadline of the masks a GPU's kernel
    /// applies, needed before the forward ends).
    pub decode_time: Duration,
}

/// How long an iteration that has only choices waiting for their masks waits for one before
/// it looks at the queue again.
const PARKED_POLL: Duration = Duration::from_millis(5);

impl Worker {
    pub fn run(&mut self, rx: mpsc::Receiver<Job>) {
        loop {
            if self.active.is_empty() && self.waiting.is_empty() {
                match rx.recv() {
                    Ok(j) => self.enqueue(j),
                    Err(_) => return,
                }
            }
            while let Ok(j) = rx.try_recv() {
                self.enqueue(j);
            }
            self.drop_cancelled();
            self.admit();
            if self.active.is_empty() {
                // Only a request the cache cannot hold even alone gets here (submit refuses
                // those): fail it rather than spin.
                if let Some(a) = self.waiting.pop_front() {
                    self.fail_one(a, &Error::runtime("the KV cache cannot hold this request"));
                }
                // Cancellations may have freed pages.
                self.update_gauges();
                continue;
            }
            let ready = self.unpark_ready();
            self.sample(ready, true, None, std::time::Instant::now());
            let prefilled = self.prefill_step();
            let decoded = self.decode_step();
            self.retire();
            if !prefilled && !decoded && self.any_parked() {
                self.masks.wait_any(PARKED_POLL);
            }
        }
    }

    fn enqueue(&mut self, job: Job) {
        let seed = job.req.params.seed.unwrap_or_else(random_seed);
        self.waiting
            .push_back(Active::new(job, seed, self.jump_forward));
    }

    fn drop_cancelled(&mut self) {
        let mut i = 0;
        while i < self.waiting.len() {
            if self.waiting[i].job.req.events.is_closed() {
                let a = self.waiting.remove(i).expect("in range");
                if !a.dequeued {
                    self.pending.fetch_sub(1, Relaxed);
                }
                self.metrics.requests_cancelled.fetch_add(1, Relaxed);
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].job.req.events.is_closed() {
                let a = self.active.remove(i);
                self.metrics.requests_cancelled.fetch_add(1, Relaxed);
                self.remove_sequences(&a);
            } else {
                i += 1;
            }
        }
    }

    /// Removes every sequence of `a` from the cache.
    pub fn remove_sequences(&self, a: &Active) {
        for s in a.sequences() {
            let _ = self.model.remove_sequence(&self.cache, s);
        }
    }

    pub fn running_sequences(&self) -> usize {
        self.active.iter().map(Active::live_choices).sum()
    }

    pub fn free_pages(&self) -> i64 {
        self.model.available_pages(&self.cache).unwrap_or(0)
    }

    /// Drops the oldest finished sequence kept for prefix sharing; false if none is left.
    fn evict_one(&mut self) -> bool {
        match self.pool.pop_oldest() {
            Some(s) => {
                let _ = self.model.remove_sequence(&self.cache, s);
                true
            }
            None => false,
        }
    }

    /// The longest prefix of `a`'s prompt some sequence in the cache holds (none for a prompt
    /// whose every position's logits are wanted).
    fn prefix_hit(&self, a: &Active) -> Option<Hit> {
        if a.wants_prompt_logprobs() {
            return None;
        }
        let live: Vec<(i64, Vec<i32>)> = self.active.iter().flat_map(Active::kv_tokens).collect();
        let cands = self
            .pool
            .entries
            .iter()
            .map(|c| (c.seq, c.tokens.as_slice()))
            .chain(live.iter().map(|(s, t)| (*s, t.as_slice())));
        best_hit(a.prompt(), cands)
    }

    fn admit(&mut self) {
        while let Some(a) = self.waiting.front() {
            if self.running_sequences() + a.live_choices() > self.info.config.max_num_sequence {
                break;
            }
            // The running choices may each need a page for their next token.
            let headroom = self.running_sequences() as i64;
            let (hit, fits) = loop {
                let a = self.waiting.front().expect("front exists");
                let hit = self.prefix_hit(a);
                let need = a.pages_to_run(hit.map_or(0, |h| h.len)) + headroom;
                if need <= self.free_pages() {
                    break (hit, true);
                }
                if !self.evict_one() {
                    break (hit, false);
                }
            };
            if !fits {
                break;
            }
            let mut a = self.waiting.pop_front().expect("front exists");
            if !a.dequeued {
                a.dequeued = true;
                self.pending.fetch_sub(1, Relaxed);
                self.metrics.queue_time.observe(a.job.arrived.elapsed());
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            let added = match hit {
                Some(h) => self
                    .model
                    .fork_sequence(&self.cache, h.seq, seq, h.len as i64)
                    .map(|()| {
                        self.pool.touch(h.seq);
                        self.metrics
                            .prefix_hit_tokens
                            .fetch_add(h.len as u64, Relaxed);
                        h.len
                    }),
                None => self.model.add_sequence(&self.cache, seq).map(|()| 0),
            };
            match added {
                Ok(len) => {
                    a.parent = Some(seq);
                    a.prefilled = len;
                    a.order = self.next_order;
                    self.next_order += 1;
                    self.active.push(a);
                }
                Err(e) => self.fail_one(a, &e),
            }
        }
    }

    /// Makes the cache hold `need(self)` free pages, dropping prefix-cache entries and then
    /// preempting the newest requests. `need` is evaluated again after each, as the batch
    /// shrinks.
    pub fn make_room(&mut self, need: impl Fn(&Worker) -> i64) {
        while need(self) > self.free_pages() {
            if self.evict_one() {
                continue;
            }
            if self.active.len() <= 1 {
                // Alone, a request always fits (submit checks it): nothing better to do than
                // to let the forward report the shortage.
                return;
            }
            let newest = (0..self.active.len())
                .max_by_key(|&i| self.active[i].order)
                .expect("non-empty");
            self.preempt(newest);
        }
    }

    /// Takes active request `i` out of the cache and back to the head of the queue.
    fn preempt(&mut self, i: usize) {
        let mut a = self.active.remove(i);
        self.remove_sequences(&a);
        a.reset_for_recompute();
        self.metrics.preemptions.fetch_add(1, Relaxed);
        log::debug!("preempted a request of {} prompt tokens", a.prompt().len());
        self.waiting.push_front(a);
    }

    /// Pages the decode step needs: a page for each decoding choice whose last page is full.
    pub fn decode_pages(&self) -> i64 {
        self.active
            .iter()
            .flat_map(|a| {
                let prompt = a.prompt().len();
                a.choices
                    .iter()
                    .filter(|c| c.seq.is_some() && !c.done && c.pending() == 1)
                    .map(move |c| pages_to_grow(prompt + c.in_kv, 1))
            })
            .sum()
    }

    /// Fails one request that is in neither list.
    pub fn fail_one(&mut self, a: Active, e: &Error) {
        if !a.dequeued {
            self.pending.fetch_sub(1, Relaxed);
        }
        a.send(Event::Error(super::Failure::of(e)));
        self.metrics.requests_error.fetch_add(1, Relaxed);
        self.remove_sequences(&a);
    }

    /// Fails the active requests at `which` (indices, ascending) with `e`.
    pub fn fail(&mut self, which: &[usize], e: &Error) {
        let mut which = which.to_vec();
        which.sort_unstable();
        which.dedup();
        for &i in which.iter().rev() {
            let a = self.active.remove(i);
            self.fail_one(a, e);
        }
    }

    /// A finished sequence: kept for prefix sharing if the pool takes it, else removed.
    pub fn finish_sequence(&mut self, seq: i64, kv_tokens: Vec<i32>) {
        for s in self.pool.insert(seq, kv_tokens) {
            let _ = self.model.remove_sequence(&self.cache, s);
        }
    }

    /// Removes the finished requests and reports them (after the gauges are updated, so that
    /// a client that reads `/metrics` after its answer sees its pages freed).
    fn retire(&mut self) {
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].finished() {
                done.push(self.active.remove(i));
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
        let running: usize = self.active.iter().map(|a| a.live_choices().max(1)).sum();
        let m = &self.metrics;
        m.running_sequences.store(running as u64, Relaxed);
        m.waiting_requests.store(self.waiting.len() as u64, Relaxed);
        m.prefix_cache_sequences
            .store(self.pool.len() as u64, Relaxed);
        if let Ok(free) = self.model.available_pages(&self.cache) {
            m.kv_pages_in_use
                .store((self.total_pages - free).max(0) as u64, Relaxed);
        }
    }
}
