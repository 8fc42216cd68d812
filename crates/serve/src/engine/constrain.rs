//! The grammar's part of a step: each constrained row's logits masked to the tokens its
//! grammar allows (before sampling: the samplers and logprobs see only those), the sampled
//! token advanced in the grammar, and the tokens the grammar then forces appended at once:
//! they are not decoded one by one but join the next iteration's prefill as a chunk of the
//! choice's pending tokens, as a preempted choice's tokens are recomputed.

use tvmrt::{Error, Result};

use super::scheduler::Worker;
use super::step::Row;
use super::GRAMMAR_ERROR;
use crate::sampler::{self, TokenLogprob};

/// A decode batch's masks: the constrained rows, their masks, the rows whose grammar failed.
pub(super) type DecodeMasks = (Vec<i32>, Vec<Vec<u32>>, Vec<(usize, Error)>);

impl Worker {
    /// Masks each row of a constrained choice; returns the rows whose grammar failed (its
    /// index in `rows` and the error).
    pub(super) fn mask_rows(&mut self, rows: &mut [Row]) -> Vec<(usize, Error)> {
        let mut failed = Vec::new();
        for (k, (i, c, row)) in rows.iter_mut().enumerate() {
            if let Some(m) = self.active[*i].choices[*c].matcher.as_mut() {
                if let Err(e) = m.mask_logits(row) {
                    failed.push((k, grammar_error(e)));
                }
            }
        }
        failed
    }

    /// The masks of the constrained choices of a decode batch (`who[k]` its row `k`), for the
    /// library's kernel: their rows and masks, and the rows whose grammar failed.
    pub(super) fn decode_masks(&mut self, who: &[(usize, usize)]) -> DecodeMasks {
        let mut out = DecodeMasks::default();
        for (k, &(i, c)) in who.iter().enumerate() {
            if let Some(m) = self.active[i].choices[c].matcher.as_mut() {
                match m.allowed() {
                    Ok(mask) => {
                        out.0.push(k as i32);
                        out.1.push(mask);
                    }
                    Err(e) => out.2.push((k, grammar_error(e))),
                }
            }
        }
        out
    }

    /// A sampled token of choice `c` of active `i` (`row`: the logits it was sampled from):
    /// its log-probabilities, the grammar advanced past it, then the tokens the grammar
    /// forces after it.
    pub(super) fn accept(&mut self, i: usize, c: usize, token: i32, row: &[f32]) -> Result<()> {
        let top = self.active[i].params().logprobs;
        let logprob = top.map(|k| sampler::logprobs(row, token, k));
        let (mut forced, mut complete) = (Vec::new(), false);
        if !self.stop_ids.contains(&token) {
            if let Some(m) = self.active[i].choices[c].matcher.as_mut() {
                m.commit(token).map_err(grammar_error)?;
                if self.jump_forward {
                    forced = m.forced();
                }
                complete = m.is_complete();
            }
        }
        let last = forced.len();
        if self.push_token((i, c), token, logprob, true, complete && last == 0) {
            return Ok(());
        }
        // A forced token is the only one the grammar allows: probability 1 under the mask.
        let certain = |t: i32| {
            top.map(|k| TokenLogprob {
                logprob: 0.0,
                top: if k > 0 { vec![(t, 0.0)] } else { Vec::new() },
            })
        };
        for (n, t) in forced.into_iter().enumerate() {
            if self.push_token((i, c), t, certain(t), false, complete && n + 1 == last) {
                break;
            }
        }
        Ok(())
    }
}

/// A request's grammar failing a step: the request's fault, answered as a 400.
fn grammar_error(message: String) -> Error {
    Error::new(GRAMMAR_ERROR, message)
}
