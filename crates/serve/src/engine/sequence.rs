//! The state of a request in the engine: its prompt, its choices' generated tokens and which
//! of its tokens the KV cache holds. A request keeps its generated tokens when it is preempted
//! (its sequences removed from the cache): it is recomputed from them later, so what its
//! client has seen stays valid.

use std::collections::HashMap;
use std::time::Instant;

use super::{Event, Job, PAGE_SIZE};
use crate::sampler::{self, Rng, SamplingParams, TokenLogprob};
use crate::structured::GrammarCursor;
use crate::text::Detokenized;

/// Pages a sequence of `len` tokens occupies.
pub fn pages(len: usize) -> i64 {
    (len as i64 + PAGE_SIZE - 1) / PAGE_SIZE
}

/// New pages `add` tokens appended to a sequence of `len` tokens take.
pub fn pages_to_grow(len: usize, add: usize) -> i64 {
    pages(len + add) - pages(len)
}

/// One of a request's `n` choices.
pub struct Choice {
    /// Its sequence in the KV cache; `None` until the prompt is in (and after a preemption).
    pub seq: Option<i64>,
    /// Generated tokens, the last one possibly not yet in the KV cache.
    pub tokens: Vec<i32>,
    /// How many of `tokens` the KV cache holds (after the prompt).
    pub in_kv: usize,
    pub counts: HashMap<i32, u32>,
    pub rng: Rng,
    pub detok: Detokenized,
    pub done: bool,
    pub last_token_at: Option<Instant>,
    /// Its position in the request's output grammar (constrained requests), with the next
    /// mask computed ahead: it goes with the tokens, so a preempted choice keeps it.
    pub grammar: Option<GrammarCursor>,
    /// Logits it is to be sampled from once its grammar's mask is done (it was late for its
    /// step); dropped on preemption (the recompute gives them again).
    pub parked: Option<Vec<f32>>,
}

impl Choice {
    /// Generated tokens still to feed to the model: one while decoding, several after a
    /// preemption (recomputed by a prefill), none before the first token.
    pub fn pending(&self) -> usize {
        self.tokens.len() - self.in_kv
    }
}

/// A request the engine has taken from its queue (running, or waiting after a preemption).
pub struct Active {
    pub job: Job,
    pub max_tokens: usize,
    /// Admission order (the newest is preempted first).
    pub order: u64,
    /// The sequence the prompt is prefilled into (choice 0's once the prompt is in);
    /// `None` while waiting.
    pub parent: Option<i64>,
    /// Prompt tokens the parent holds.
    pub prefilled: usize,
    /// Whether the prompt's choices have their sequences (the prompt is in).
    pub forked: bool,
    pub choices: Vec<Choice>,
    /// Whether it has been counted out of the engine's queue bound.
    pub dequeued: bool,
    /// For `echo` with `logprobs`: the log-probabilities of prompt tokens 1, 2, ... gathered
    /// so far, from every position's logits (`batch_verify`).
    pub prompt_logprobs: Vec<TokenLogprob>,
    /// Whether its [`Event::Prompt`]s were sent (the prompt is not echoed again after a
    /// preemption).
    pub echoed: bool,
}

impl Active {
    /// A request fresh from the queue, its choices seeded.
    pub fn new(mut job: Job, seed: u64, jump_forward: bool) -> Active {
        let mut matchers = std::mem::take(&mut job.matchers).into_iter();
        let p = &job.req.params;
        let choices = (0..p.n)
            .map(|c| Choice {
                seq: None,
                tokens: Vec::new(),
                in_kv: 0,
                counts: HashMap::new(),
                rng: Rng::new(seed.wrapping_add(c as u64)),
                detok: Detokenized::default(),
                done: false,
                last_token_at: None,
                grammar: matchers.next().map(|m| GrammarCursor::new(m, jump_forward)),
                parked: None,
            })
            .collect();
        Active {
            max_tokens: p.max_tokens.unwrap_or(1),
            job,
            order: 0,
            parent: None,
            prefilled: 0,
            forked: false,
            choices,
            dequeued: false,
            prompt_logprobs: Vec::new(),
            echoed: false,
        }
    }

    pub fn prompt(&self) -> &[i32] {
        &self.job.req.prompt
    }

    pub fn params(&self) -> &SamplingParams {
        &self.job.req.params
    }

    /// Whether its prompt's prefill must give the logits of every position: `echo` with
    /// `logprobs`, until the prompt has been echoed. Such a prompt shares no prefix (the
    /// shared tokens' logits would be missing).
    pub fn wants_prompt_logprobs(&self) -> bool {
        let p = self.params();
        p.echo && p.logprobs.is_some() && !self.echoed
    }

    /// Takes the logits of prompt position `at` (`row`): the log-probability of the prompt
    /// token after it, unless it is the last position or was gathered before (a preempted
    /// prompt is prefilled again).
    pub fn gather_prompt_logprob(&mut self, at: usize, row: &[f32]) {
        let prompt = &self.job.req.prompt;
        if at == self.prompt_logprobs.len() && at + 1 < prompt.len() {
            let k = self.job.req.params.logprobs.unwrap_or(0);
            self.prompt_logprobs
                .push(sampler::logprobs(row, prompt[at + 1], k));
        }
    }

    pub fn prefilling(&self) -> bool {
        !self.forked
    }

    pub fn finished(&self) -> bool {
        self.forked && self.choices.iter().all(|c| c.done)
    }

    pub fn send(&self, e: Event) {
        let _ = self.job.req.events.send(e);
    }

    /// Choices still generating.
    pub fn live_choices(&self) -> usize {
        self.choices.iter().filter(|c| !c.done).count()
    }

    /// Every sequence of the request in the KV cache.
    pub fn sequences(&self) -> Vec<i64> {
        let mut out: Vec<i64> = self.choices.iter().filter_map(|c| c.seq).collect();
        if let Some(p) = self.parent {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    /// The tokens a sequence of this request holds in the KV cache, for prefix matching:
    /// the parent's prompt part, or a choice's prompt and generated tokens.
    pub fn kv_tokens(&self) -> Vec<(i64, Vec<i32>)> {
        let mut out = Vec::new();
        if !self.forked {
            if let Some(p) = self.parent {
                out.push((p, self.prompt()[..self.prefilled].to_vec()));
            }
            return out;
        }
        for c in &self.choices {
            if let Some(s) = c.seq {
                let mut t = self.prompt().to_vec();
                t.extend_from_slice(&c.tokens[..c.in_kv]);
                out.push((s, t));
            }
        }
        out
    }

    /// Forgets the KV cache (the caller removes the sequences): the prompt and every
    /// choice's tokens are prefilled again when the request runs next.
    pub fn reset_for_recompute(&mut self) {
        self.parent = None;
        self.prefilled = 0;
        self.forked = false;
        for c in &mut self.choices {
            c.seq = None;
            c.in_kv = 0;
            c.parked = None;
        }
    }

    /// Pages to prefill what it still has to (prompt and recomputed tokens), plus one per
    /// live choice for its next token: what admitting it asks of the cache.
    pub fn pages_to_run(&self, prefix_hit: usize) -> i64 {
        let prompt = self.prompt().len();
        let mut need = pages(prompt) - pages(prefix_hit) + 1;
        for c in self.choices.iter().filter(|c| !c.done) {
            need += pages_to_grow(prompt, c.tokens.len()) + 1;
        }
        need
    }
}

/// Length of the common prefix of `a` and `b`.
pub fn common_prefix(a: &[i32], b: &[i32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_arithmetic() {
        assert_eq!(pages(0), 0);
        assert_eq!(pages(16), 1);
        assert_eq!(pages(17), 2);
        assert_eq!(pages_to_grow(16, 1), 1);
        assert_eq!(pages_to_grow(15, 1), 0);
        assert_eq!(pages_to_grow(0, 1), 1);
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(common_prefix(&[1, 2], &[1, 2, 4]), 2);
    }

    #[test]
    fn prompt_logprobs_are_gathered_once_per_position() {
        let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
        let params = SamplingParams {
            echo: true,
            logprobs: Some(1),
            ..Default::default()
        };
        let req = super::super::Request {
            prompt: vec![0, 2, 1],
            params,
            events,
        };
        let mut a = Active::new(
            Job {
                req,
                arrived: Instant::now(),
                matchers: Vec::new(),
            },
            0,
            false,
        );
        assert!(a.wants_prompt_logprobs());
        let row = [0.0f32, 1.0, 2.0];
        a.gather_prompt_logprob(0, &row); // token 2 after position 0
        a.gather_prompt_logprob(0, &row); // position 0 again (a recomputed prefill): ignored
        a.gather_prompt_logprob(2, &row); // out of order: ignored
        a.gather_prompt_logprob(1, &row); // token 1 after position 1
        a.gather_prompt_logprob(2, &row); // the last position has no next prompt token
        let lse = (1.0f32 + 1f32.exp() + 2f32.exp()).ln();
        let got: Vec<f32> = a.prompt_logprobs.iter().map(|l| l.logprob).collect();
        assert_eq!(got.len(), 2);
        assert!((got[0] - (2.0 - lse)).abs() < 1e-6, "{got:?}");
        assert!((got[1] - (1.0 - lse)).abs() < 1e-6, "{got:?}");
        assert_eq!(a.prompt_logprobs[1].top.len(), 1);
        assert_eq!(a.prompt_logprobs[1].top[0].0, 2);
        a.echoed = true;
        assert!(!a.wants_prompt_logprobs());
        a.job.req.params.logprobs = None;
        a.echoed = false;
        assert!(
            !a.wants_prompt_logprobs(),
            "echo alone needs no prompt logits"
        );
    }
}
