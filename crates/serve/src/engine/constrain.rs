//! The grammar's part of a step: each constrained row's logits masked to the tokens its
//! grammar allows (before sampling: the samplers and logprobs see only those) and the sampled
//! token advanced in the grammar; where the grammar forces tokens (the jump-forward), the row
//! is not sampled: they are appended at once, not decoded one by one, and join the next
//! iteration's prefill as a chunk of the choice's pending tokens, as a preempted choice's
//! tokens are recomputed.
//!
//! What follows each choice's position (forced tokens, the mask) is computed ahead on the
//! engine's [`crate::structured::MaskPool`], started before the forward it will be needed
//! after. The step waits for it only a little past the forward ([`mask_deadline`]); a choice
//! whose grammar is later sits the step out (its row set aside, [`Worker::park`]) and is
//! sampled at a later iteration, once it is done: the tokens are the same, and a slow grammar
//! slows its own sequence alone.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tvmrt::{Error, Result};

use super::scheduler::Worker;
use super::step::Row;
use super::GRAMMAR_ERROR;
use crate::sampler::{self, TokenLogprob};
use crate::structured::cursor::Next;
use crate::structured::grammar::apply_bitmask;
use crate::structured::GrammarCursor;

/// How one row of a batch came out of its grammar.
pub(super) enum Masked {
    /// Masked (or free: no grammar): to be sampled.
    Ready,
    /// Its grammar's work was not done by the step's deadline: set aside until it is.
    Late,
    /// Not to be sampled: the grammar forces these tokens there (then complete or not).
    Forced(Vec<i32>, bool),
    /// Its grammar failed.
    Failed(Error),
}

/// A decode batch's masks for the library's kernel: the rows masked there and their masks,
/// and how each row came out.
pub(super) type DecodeMasks = (Vec<i32>, Vec<Vec<u32>>, Vec<Masked>);

/// What a late mask is waited for at least, past the forward.
const MIN_MASK_GRACE: Duration = Duration::from_millis(1);

/// The longest wait for forced runs before a step's forwards: enough for llguidance's usual
/// tens of microseconds and a thread's wake-up, a small part of a GPU's decode.
const MAX_FORCED_WAIT: Duration = Duration::from_micros(500);

/// The shortest decode worth waiting for a forced run before the forwards: a run that is late
/// costs its sequence one decode of the token alone, and below this a wait (a thread's
/// wake-up and the timer's slack, 50-100 us on a VM) costs the whole batch about as much.
const MIN_DECODE_TO_WAIT: Duration = Duration::from_millis(1);

/// Until when a step waits for forced runs before its forwards, the last decode having taken
/// `decode`: a quarter of it, 500 us at most; not at all where decodes are short (the CPU).
pub(super) fn forced_deadline(decode: Duration) -> Instant {
    let now = Instant::now();
    if decode < MIN_DECODE_TO_WAIT {
        return now;
    }
    now + (decode / 4).min(MAX_FORCED_WAIT)
}

/// When a step's masks must be done, for a forward started at `started` that takes
/// `forward`: half the forward's time after it ends (at least [`MIN_MASK_GRACE`]). Masks start
/// before the forward, so one slower than that is a grammar slower than the model: its
/// sequence sits the step out rather than hold back the batch by more than half a step.
pub(super) fn mask_deadline(started: Instant, forward: Duration) -> Instant {
    started + forward + (forward / 2).max(MIN_MASK_GRACE)
}

impl Worker {
    /// Starts the next mask of every constrained choice that has none yet, to run while the
    /// engine runs its forward: one batch of the pool's, its threads woken once.
    pub(super) fn prefetch_masks(&mut self) {
        let masks = &self.masks;
        masks.batch(|| {
            for a in &mut self.active {
                for ch in a.choices.iter_mut().filter(|ch| !ch.done) {
                    if let Some(g) = ch.grammar.as_mut() {
                        g.prefetch(masks);
                    }
                }
            }
        });
    }

    /// Masks each row of a constrained choice whose mask is done by `deadline`.
    pub(super) fn mask_rows(&mut self, rows: &mut [Row], deadline: Instant) -> Vec<Masked> {
        let mut out = Vec::with_capacity(rows.len());
        for (i, c, row) in rows.iter_mut() {
            let Some(g) = self.active[*i].choices[*c].grammar.as_mut() else {
                out.push(Masked::Ready);
                continue;
            };
            let (status, mask) = outcome(g, deadline);
            if let Some(mask) = mask {
                apply_bitmask(row, mask);
            }
            out.push(status);
        }
        out
    }

    /// The masks of the constrained choices of a decode batch (`who[k]` its row `k`) done by
    /// `deadline`, for the library's kernel.
    pub(super) fn decode_masks(
        &mut self,
        who: &[(usize, usize)],
        deadline: Instant,
    ) -> DecodeMasks {
        let mut out = DecodeMasks::default();
        for (k, &(i, c)) in who.iter().enumerate() {
            let Some(g) = self.active[i].choices[c].grammar.as_mut() else {
                out.2.push(Masked::Ready);
                continue;
            };
            let (status, mask) = outcome(g, deadline);
            if let Some(mask) = mask {
                out.0.push(k as i32);
                out.1.push(mask.to_vec());
            }
            out.2.push(status);
        }
        out
    }

    /// Sets aside a row whose mask was late: its choice is sampled from it once the mask is
    /// done ([`Worker::resume_parked`]), and decodes nothing until then.
    pub(super) fn park(&mut self, (i, c, row): Row) {
        self.metrics.grammar_masks_late.fetch_add(1, Relaxed);
        self.active[i].choices[c].parked = Some(row);
    }

    /// The set-aside rows whose masks are done now: taken back, to be sampled.
    pub(super) fn unpark_ready(&mut self) -> Vec<Row> {
        let mut rows = Vec::new();
        for (i, a) in self.active.iter_mut().enumerate() {
            for (c, ch) in a.choices.iter_mut().enumerate() {
                if ch.parked.is_some() && ch.grammar.as_mut().is_some_and(|g| g.is_ready()) {
                    rows.push((i, c, ch.parked.take().expect("parked")));
                }
            }
        }
        rows
    }

    /// Whether a choice waits for its mask.
    pub(super) fn any_parked(&self) -> bool {
        self.active
            .iter()
            .any(|a| a.choices.iter().any(|ch| ch.parked.is_some()))
    }

    /// A sampled token of choice `c` of active `i` (`row`: the logits it was sampled from):
    /// its log-probabilities, and the grammar advanced past it (its next mask is started with
    /// the batch's others, [`Worker::prefetch_masks`]).
    pub(super) fn accept(&mut self, i: usize, c: usize, token: i32, row: &[f32]) -> Result<()> {
        let top = self.active[i].params().logprobs;
        let logprob = top.map(|k| sampler::logprobs(row, token, k));
        let mut complete = false;
        if !self.stop_ids.contains(&token) {
            if let Some(g) = self.active[i].choices[c].grammar.as_mut() {
                complete = g.commit(token).map_err(grammar_error)?;
            }
        }
        self.push_token((i, c), token, logprob, true, complete);
        Ok(())
    }

    /// Forced runs known by `deadline` of the choices that sampled a token and have not fed
    /// it to the model yet: appended after it at once, so that they join the next prefill as
    /// one chunk with it (the jump-forward's one forward for the lot), rather than the token
    /// decoded alone and the run fed after it, as a run that is later comes.
    pub(super) fn append_forced_runs(&mut self, deadline: Instant) {
        if !self.jump_forward {
            return;
        }
        for i in 0..self.active.len() {
            for c in 0..self.active[i].choices.len() {
                let ch = &mut self.active[i].choices[c];
                if ch.done || ch.seq.is_none() || ch.pending() != 1 || ch.parked.is_some() {
                    continue;
                }
                let run = ch.grammar.as_mut().and_then(|g| g.forced_by(deadline));
                if let Some((tokens, complete)) = run {
                    self.push_forced((i, c), tokens, complete);
                }
            }
        }
    }

    /// Tokens the grammar of choice `c` of active `i` forces at its position, in place of a
    /// sampled one: appended at once (they join the next prefill as a chunk), the answer
    /// ending with the last where it is then `complete`.
    pub(super) fn push_forced(&mut self, (i, c): (usize, usize), forced: Vec<i32>, complete: bool) {
        let top = self.active[i].params().logprobs;
        // A forced token is the only one the grammar allows: probability 1 under the mask.
        let certain = |t: i32| {
            top.map(|k| TokenLogprob {
                logprob: 0.0,
                top: if k > 0 { vec![(t, 0.0)] } else { Vec::new() },
            })
        };
        let last = forced.len();
        for (n, t) in forced.into_iter().enumerate() {
            if self.push_token((i, c), t, certain(t), false, complete && n + 1 == last) {
                break;
            }
        }
    }
}

/// What a row's grammar comes to by `deadline`: how the row goes on, and the mask to apply
/// where it is to be sampled.
fn outcome(g: &mut GrammarCursor, deadline: Instant) -> (Masked, Option<&[u32]>) {
    match g.next_by(deadline) {
        None => (Masked::Late, None),
        Some(Ok(Next::Mask(mask))) => (Masked::Ready, Some(mask)),
        Some(Ok(Next::Forced(tokens, complete))) => (Masked::Forced(tokens, complete), None),
        Some(Err(e)) => (Masked::Failed(grammar_error(e)), None),
    }
}

/// A request's grammar failing a step: the request's fault, answered as a 400.
fn grammar_error(message: String) -> Error {
    Error::new(GRAMMAR_ERROR, message)
}
