//! One iteration's forwards and what follows them: a `batch_prefill` of prompt chunks (and of
//! the tokens a preempted request recomputes; a prompt echoed with logprobs goes through
//! `batch_verify`, which gives every position's logits), a `batch_decode` of one token for
//! every running choice, sampling through the model's logit processors, and each new token's
//! stop checks, text and events.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use tvmrt::Result;

use super::constrain::{forced_deadline, mask_deadline, Masked};
use super::scheduler::Worker;
use super::sequence::pages_to_grow;
use super::{Event, FinishReason};
use crate::model::read_f32;
use crate::sampler::{self, TokenLogprob, GREEDY_BELOW};

/// A chunk of one prefill: `take` tokens of a request's prompt (`choice` None) or of a
/// choice's generated tokens being recomputed.
struct Chunk {
    active: usize,
    choice: Option<usize>,
    seq: i64,
    take: usize,
}

/// Logits to sample from, for choice `.1` of active request `.0`.
pub(super) type Row = (usize, usize, Vec<f32>);

/// The logit kernels' arguments of a batch (see [`Worker::logit_args`]).
type LogitArgs = (Vec<(i32, i32, f32)>, Vec<(i32, i32, i32)>, Vec<[f32; 3]>);

impl Worker {
    /// The prefill chunks of this iteration, oldest requests first, within the chunk budget.
    fn plan_prefill(&self) -> Vec<Chunk> {
        let mut budget = self.info.config.prefill_chunk_size.max(1) as usize;
        let mut out = Vec::new();
        for (i, a) in self.active.iter().enumerate() {
            if budget == 0 {
                break;
            }
            if a.prefilling() {
                let take = (a.prompt().len() - a.prefilled).min(budget);
                budget -= take;
                let seq = a.parent.expect("admitted");
                out.push(Chunk {
                    active: i,
                    choice: None,
                    seq,
                    take,
                });
                continue;
            }
            for (c, ch) in a.choices.iter().enumerate() {
                if budget > 0 && !ch.done && ch.pending() > 1 {
                    let take = ch.pending().min(budget);
                    budget -= take;
                    let seq = ch.seq.expect("forked");
                    out.push(Chunk {
                        active: i,
                        choice: Some(c),
                        seq,
                        take,
                    });
                }
            }
        }
        out
    }

    /// Pages the prefill chunks need, with a page per choice a finished prompt forks (the
    /// fork copies the page it falls in).
    fn prefill_pages(&self) -> i64 {
        self.plan_prefill()
            .iter()
            .map(|ch| {
                let a = &self.active[ch.active];
                match ch.choice {
                    None => {
                        let forks = if a.prefilled + ch.take == a.prompt().len() {
                            a.live_choices() as i64
                        } else {
                            0
                        };
                        pages_to_grow(a.prefilled, ch.take) + forks
                    }
                    Some(c) => pages_to_grow(a.prompt().len() + a.choices[c].in_kv, ch.take),
                }
            })
            .sum()
    }

    /// Prefills this iteration's chunks and samples the choices they complete. Returns
    /// whether there was anything to prefill.
    pub fn prefill_step(&mut self) -> bool {
        self.append_forced_runs(forced_deadline(self.decode_time));
        self.make_room(Worker::prefill_pages);
        let plan = self.plan_prefill();
        if plan.is_empty() {
            return false;
        }
        self.prefetch_masks();
        let seqs: Vec<i64> = plan.iter().map(|c| c.seq).collect();
        let chunks: Vec<&[i32]> = plan
            .iter()
            .map(|c| {
                let a = &self.active[c.active];
                match c.choice {
                    None => &a.prompt()[a.prefilled..a.prefilled + c.take],
                    Some(k) => {
                        let ch = &a.choices[k];
                        &ch.tokens[ch.in_kv..ch.in_kv + c.take]
                    }
                }
            })
            .collect();
        let which: Vec<usize> = plan.iter().map(|c| c.active).collect();
        // A prompt whose every position's logits are wanted (echo with logprobs) goes through
        // its own forward; the others give their last token's.
        let every: Vec<bool> = plan
            .iter()
            .map(|c| c.choice.is_none() && self.active[c.active].wants_prompt_logprobs())
            .collect();
        let started = Instant::now();
        let logits = match self.chunk_logits(&seqs, &chunks, &every) {
            Ok(l) => l,
            Err(e) => {
                self.fail(&which, &e);
                return true;
            }
        };
        let deadline = mask_deadline(started, started.elapsed());
        let vocab = self.info.vocab_size;
        let mut rows = Vec::new();
        let mut failed = Vec::new();
        for (k, chunk) in plan.iter().enumerate() {
            let row = || logits[k][logits[k].len() - vocab..].to_vec();
            let i = chunk.active;
            self.metrics
                .prompt_tokens
                .fetch_add(chunk.take as u64, Relaxed);
            match chunk.choice {
                Some(c) => {
                    let ch = &mut self.active[i].choices[c];
                    ch.in_kv += chunk.take;
                    if ch.pending() == 0 {
                        rows.push((i, c, row()));
                    }
                }
                None => {
                    let a = &mut self.active[i];
                    if every[k] {
                        for (r, at) in (a.prefilled..a.prefilled + chunk.take).enumerate() {
                            a.gather_prompt_logprob(at, &logits[k][r * vocab..(r + 1) * vocab]);
                        }
                    }
                    a.prefilled += chunk.take;
                    if a.prefilled < a.prompt().len() {
                        continue;
                    }
                    match self.fork_choices(i) {
                        Ok(fresh) => rows.extend(fresh.into_iter().map(|c| (i, c, row()))),
                        Err(e) => failed.push((i, e)),
                    }
                }
            }
        }
        if let Some((_, e)) = failed.first() {
            // Fail every request of this chunk's rows too: failing shifts the indices.
            let mut which: Vec<usize> = failed.iter().map(|f| f.0).collect();
            which.extend(rows.iter().map(|r| r.0));
            let e = e.clone();
            self.fail(&which, &e);
            return true;
        }
        self.sample(rows, false, None, deadline);
        true
    }

    /// The logits of each chunk (`chunks[k]` of sequence `seqs[k]`): every position's rows
    /// where `every[k]`, else its last token's row. At most two forwards: one
    /// `batch_prefill`, one `batch_verify`.
    fn chunk_logits(
        &self,
        seqs: &[i64],
        chunks: &[&[i32]],
        every: &[bool],
    ) -> Result<Vec<Vec<f32>>> {
        let vocab = self.info.vocab_size;
        let mut out = vec![Vec::new(); chunks.len()];
        for all in [false, true] {
            let part: Vec<usize> = (0..chunks.len()).filter(|&k| every[k] == all).collect();
            if part.is_empty() {
                continue;
            }
            let s: Vec<i64> = part.iter().map(|&k| seqs[k]).collect();
            let c: Vec<&[i32]> = part.iter().map(|&k| chunks[k]).collect();
            let flat = read_f32(&self.model.prefill(&self.cache, &s, &c, all)?)?;
            let mut at = 0;
            for &k in &part {
                let rows = if all { chunks[k].len() } else { 1 };
                out[k] = flat[at * vocab..(at + rows) * vocab].to_vec();
                at += rows;
            }
        }
        Ok(out)
    }

    /// The prompt of active `i` is in: its live choices get their sequences (choice 0 the
    /// prompt's own, the others forks of it), an `echo` its [`Event::Prompt`]s; with
    /// max_tokens 0 (echo alone) every choice ends there. Returns the choices to sample a
    /// first token for (those that have none yet; a recomputed choice goes on with its own
    /// tokens).
    fn fork_choices(&mut self, i: usize) -> Result<Vec<usize>> {
        let parent = self.active[i].parent.expect("admitted");
        // `echo` with max_tokens 0 asks for the prompt alone: no choice forks or samples.
        let prompt_only = self.active[i].max_tokens == 0;
        let mut fresh = Vec::new();
        for c in 0..self.active[i].choices.len() {
            if self.active[i].choices[c].done || prompt_only {
                continue;
            }
            let seq = if c == 0 {
                parent
            } else {
                let s = self.next_seq;
                self.next_seq += 1;
                self.model.fork_sequence(&self.cache, parent, s, -1)?;
                s
            };
            let ch = &mut self.active[i].choices[c];
            ch.seq = Some(seq);
            ch.in_kv = 0;
            if ch.tokens.is_empty() {
                fresh.push(c);
            }
        }
        let a = &mut self.active[i];
        a.forked = true;
        a.parent = None;
        if a.params().echo && !a.echoed {
            a.echoed = true;
            let logprobs = Arc::new(std::mem::take(&mut a.prompt_logprobs));
            for choice in 0..a.choices.len() {
                a.send(Event::Prompt {
                    choice,
                    logprobs: logprobs.clone(),
                });
            }
        }
        if prompt_only {
            for (choice, ch) in a.choices.iter_mut().enumerate() {
                ch.done = true;
                let _ = a.job.req.events.send(Event::Finish {
                    choice,
                    reason: FinishReason::Length,
                });
            }
            let kv = a.prompt().to_vec();
            self.finish_sequence(parent, kv);
        } else if a.choices[0].done {
            self.model.remove_sequence(&self.cache, parent)?;
        }
        Ok(fresh)
    }

    /// Decodes one token for every running choice and samples it. Returns whether any ran.
    pub fn decode_step(&mut self) -> bool {
        self.make_room(Worker::decode_pages);
        let mut who = Vec::new();
        for (i, a) in self.active.iter().enumerate() {
            for (c, ch) in a.choices.iter().enumerate() {
                if ch.seq.is_some() && !ch.done && ch.pending() == 1 {
                    who.push((i, c));
                }
            }
        }
        if who.is_empty() {
            return false;
        }
        self.prefetch_masks();
        let seqs: Vec<i64> = who
            .iter()
            .map(|&(i, c)| self.active[i].choices[c].seq.expect("running"))
            .collect();
        let tokens: Vec<i32> = who
            .iter()
            .map(|&(i, c)| *self.active[i].choices[c].tokens.last().expect("sampled"))
            .collect();
        // The logit bias and penalties on the device, in the decode's own logits, before
        // they come back to the host: one transfer of the arguments, no round trip of the
        // logits (as MLC's engine keeps them on the device).
        let (bias, counts, penalties) = self.logit_args(&who);
        let started = Instant::now();
        let forward = self
            .model
            .decode(&self.cache, &seqs, &tokens)
            .and_then(|l| {
                self.model
                    .process_logits_in_place(&l, &bias, &counts, &penalties)?;
                Ok(l)
            });
        // The grammars' masks, computed on the host while a GPU runs the queued forward, and
        // applied by the library's kernel where it has one: those done when the forward
        // should be (as long as the last one took).
        let on_device = self.model.has_bitmask_kernel();
        let waited = Instant::now();
        let (mask_rows, masks, mask_status) = if on_device && forward.is_ok() {
            self.decode_masks(&who, mask_deadline(started, self.decode_time))
        } else {
            Default::default()
        };
        let waited = waited.elapsed();
        let logits = match forward.and_then(|l| {
            self.model.apply_bitmask_in_place(&l, &mask_rows, &masks)?;
            read_f32(&l)
        }) {
            Ok(l) => l,
            Err(e) => {
                let which: Vec<usize> = who.iter().map(|w| w.0).collect();
                self.fail(&which, &e);
                return true;
            }
        };
        // The forward's time without the wait for the masks (which would otherwise feed
        // itself: a late mask's wait lengthening the next deadline). Where the forward ran
        // during the wait (a GPU) this is less than the forward took: the deadline errs on
        // the side of the batch.
        let took = started.elapsed();
        self.decode_time = took.saturating_sub(waited);
        let deadline = mask_deadline(started, took);
        let vocab = self.info.vocab_size;
        let rows = who
            .iter()
            .enumerate()
            .map(|(k, &(i, c))| {
                self.active[i].choices[c].in_kv += 1;
                (i, c, logits[k * vocab..(k + 1) * vocab].to_vec())
            })
            .collect();
        self.sample(rows, true, on_device.then_some(mask_status), deadline);
        true
    }

    /// The arguments of the model's logit-bias and penalty kernels for the choices `who`, row
    /// `k` of the batch being `who[k]`: (row, token, bias), (row, token, count), and each
    /// row's (presence, frequency, repetition) penalties.
    fn logit_args(&self, who: &[(usize, usize)]) -> LogitArgs {
        let (mut bias, mut counts, mut penalties) = (Vec::new(), Vec::new(), Vec::new());
        let vocab = self.info.vocab_size as i32;
        for (k, &(i, c)) in who.iter().enumerate() {
            let p = self.active[i].params();
            bias.extend(
                p.logit_bias
                    .iter()
                    .filter(|b| (0..vocab).contains(&b.0))
                    .map(|&(t, b)| (k as i32, t, b)),
            );
            if p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 {
                let ch = &self.active[i].choices[c];
                counts.extend(ch.counts.iter().map(|(&t, &n)| (k as i32, t, n as i32)));
            }
            penalties.push([p.presence_penalty, p.frequency_penalty, 1.0]);
        }
        (bias, counts, penalties)
    }

    /// Samples one token for each row and hands it to its choice; the logit bias and
    /// penalties go through the model's own kernels first, for the whole batch, unless the
    /// rows come `processed` (a decode applies them on the device), and the grammars' masks
    /// done by `deadline` unless `masked` (applied on the device: how each row came out).
    /// Rows whose masks are late are set aside ([`Worker::park`]).
    pub(super) fn sample(
        &mut self,
        mut rows: Vec<Row>,
        processed: bool,
        masked: Option<Vec<Masked>>,
        deadline: Instant,
    ) {
        if rows.is_empty() {
            return;
        }
        if !processed {
            let who: Vec<(usize, usize)> = rows.iter().map(|r| (r.0, r.1)).collect();
            let (bias, counts, penalties) = self.logit_args(&who);
            let mut logits: Vec<Vec<f32>> =
                rows.iter_mut().map(|r| std::mem::take(&mut r.2)).collect();
            if let Err(e) = self
                .model
                .process_logits(&mut logits, &bias, &counts, &penalties)
            {
                let which: Vec<usize> = rows.iter().map(|r| r.0).collect();
                return self.fail(&which, &e);
            }
            for (r, l) in rows.iter_mut().zip(logits) {
                r.2 = l;
            }
        }
        // Constrained choices: every token their grammar does not allow to -inf.
        let masked = match masked {
            Some(status) => status,
            None => self.mask_rows(&mut rows, deadline),
        };
        let mut ready = Vec::with_capacity(rows.len());
        let mut grammar_errors = Vec::with_capacity(rows.len());
        for (row, status) in rows.into_iter().zip(masked) {
            match status {
                Masked::Late => self.park(row),
                Masked::Forced(tokens, complete) => {
                    self.push_forced((row.0, row.1), tokens, complete)
                }
                Masked::Ready => {
                    ready.push(row);
                    grammar_errors.push(None);
                }
                Masked::Failed(e) => {
                    ready.push(row);
                    grammar_errors.push(Some(e));
                }
            }
        }
        let rows = ready;
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
        for (k, e) in grammar_errors.into_iter().enumerate() {
            if let Some(e) = e {
                chosen[k] = Err(e);
            }
        }
        let mut failed = Vec::new();
        for ((i, c, row), token) in rows.into_iter().zip(chosen) {
            match token.and_then(|t| self.accept(i, c, t, &row)) {
                Ok(()) => {}
                Err(e) => failed.push((i, e)),
            }
        }
        failed.dedup_by_key(|f| f.0);
        for (i, e) in failed.into_iter().rev() {
            self.fail(&[i], &e);
        }
        // The next masks, once every row's token is committed (a commit takes its lexer's
        // lock, which a mask already started for another sequence of that lexer would hold),
        // in one batch: the pool's threads woken once.
        self.prefetch_masks();
    }

    /// A new token of choice `c` of active `i` (`sampled`, or forced by its grammar): stop
    /// checks, text, events. `complete`: its grammar is complete with it (a `stop`).
    /// Returns whether the choice ended.
    pub(super) fn push_token(
        &mut self,
        (i, c): (usize, usize),
        token: i32,
        logprob: Option<TokenLogprob>,
        sampled: bool,
        complete: bool,
    ) -> bool {
        let now = Instant::now();
        let a = &mut self.active[i];
        let context = self.info.context_window;
        let prompt_len = a.job.req.prompt.len();
        let ch = &mut a.choices[c];
        if sampled {
            match ch.last_token_at {
                None if c == 0 => self.metrics.ttft.observe(a.job.arrived.elapsed()),
                Some(t) => self.metrics.tpot.observe(now - t),
                None => {}
            }
            ch.last_token_at = Some(now);
        }
        self.metrics.generation_tokens.fetch_add(1, Relaxed);
        let stops = &a.job.req.params.stop;
        let mut reason = None;
        if self.stop_ids.contains(&token) {
            // A stop token ends the choice as one of its tokens (with its logprob, as vLLM
            // returns an EOS), but adds no text; what was held back for an unfinished
            // character is released.
            ch.detok.push(&self.codec, &ch.tokens, stops, true);
            ch.tokens.push(token);
            reason = Some(FinishReason::Stop);
        } else {
            ch.tokens.push(token);
            *ch.counts.entry(token).or_default() += 1;
            let full = ch.tokens.len() >= a.max_tokens || prompt_len + ch.tokens.len() >= context;
            let stopped = ch
                .detok
                .push(&self.codec, &ch.tokens, stops, full || complete)
                .is_some();
            if stopped || complete {
                reason = Some(FinishReason::Stop);
            } else if full {
                reason = Some(FinishReason::Length);
            }
        }
        let text = ch.detok.take_delta(stops, reason.is_some());
        let _ = a.job.req.events.send(Event::Delta {
            choice: c,
            token,
            text,
            logprob,
        });
        if let Some(reason) = reason {
            ch.done = true;
            // Its grammar's work in flight (a last token's next mask, a forced run) is stopped
            // now, not when the whole request ends.
            ch.grammar = None;
            let seq = ch.seq.take().expect("running");
            let mut kv = a.job.req.prompt.clone();
            kv.extend_from_slice(&ch.tokens[..ch.in_kv]);
            let _ = a.job.req.events.send(Event::Finish { choice: c, reason });
            self.finish_sequence(seq, kv);
        }
        reason.is_some()
    }
}
