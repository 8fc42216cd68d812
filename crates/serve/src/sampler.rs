//! Per-request sampling: the logit processors OpenAI's parameters ask for (logit bias,
//! presence and frequency penalties; the engine runs the model's kernels for them), then greedy decoding at temperature 0, or the model's
//! `softmax_with_temperature` and the runtime's `vm.builtin.sample_top_p_from_prob` (what
//! MLC-LLM's CPU sampler calls) with a uniform draw from the request's seeded generator.

use std::collections::HashMap;

use tvmrt::Result;

use crate::model::tensor_f32;

/// Sampling parameters of one request, validated.
#[derive(Clone, Debug)]
pub struct SamplingParams {
    pub temperature: f32,
    pub top_p: f32,
    pub max_tokens: Option<usize>,
    pub stop: Vec<String>,
    pub seed: Option<u64>,
    pub n: usize,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub logit_bias: Vec<(i32, f32)>,
    /// Return the chosen token's log-probability and this many of the most likely tokens'.
    pub logprobs: Option<usize>,
    /// Return the prompt before the completion (`echo`), with its tokens' log-probabilities
    /// where `logprobs` is set (the first token has none).
    pub echo: bool,
    /// What the answer must match (`response_format`, a tool call): the engine masks each
    /// step's logits to the tokens the grammar allows. `None`: free text.
    pub constraint: Option<crate::structured::Constraint>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            max_tokens: None,
            stop: Vec::new(),
            seed: None,
            n: 1,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: Vec::new(),
            logprobs: None,
            echo: false,
            constraint: None,
        }
    }
}

/// Temperatures below this decode greedily (MLC's threshold).
pub const GREEDY_BELOW: f32 = 1e-5;

/// SplitMix64: a small seeded generator for the uniform draws (one per sequence).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A uniform draw in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The chosen token's log-probability and the most likely alternatives.
#[derive(Clone, Debug)]
pub struct TokenLogprob {
    pub logprob: f32,
    pub top: Vec<(i32, f32)>,
}

/// Applies the logit bias and the penalties of `params` to one row of logits, given the
/// counts of the tokens the sequence has generated so far (OpenAI's definitions). The engine
/// runs the model's own kernels (`apply_logit_bias_inplace`, `apply_penalty_inplace`); this is
/// the definition the tests hold them to.
pub fn process_logits(row: &mut [f32], params: &SamplingParams, counts: &HashMap<i32, u32>) {
    for &(id, bias) in &params.logit_bias {
        if let Some(v) = row.get_mut(id as usize) {
            *v += bias;
        }
    }
    if params.presence_penalty != 0.0 || params.frequency_penalty != 0.0 {
        for (&id, &c) in counts {
            if let Some(v) = row.get_mut(id as usize) {
                *v -= params.frequency_penalty * c as f32 + params.presence_penalty;
            }
        }
    }
}

/// The highest logit (ties: the first), as `argmax` picks.
pub fn argmax(row: &[f32]) -> i32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as i32
}

/// A draw from `prob` (one row of the model's softmax) within `top_p`, through the runtime's
/// sampler.
pub fn sample_from_prob(prob: &[f32], top_p: f32, uniform: f64) -> Result<i32> {
    let t = tensor_f32(prob, &[1, prob.len() as i64])?;
    Ok(tvmrt::llm::sampling::sample_top_p_from_prob(&t, top_p as f64, uniform)? as i32)
}

/// Log-probabilities of `row` (log-softmax at temperature 1, as vLLM reports them): the
/// chosen token's and the `k` most likely tokens'.
pub fn logprobs(row: &[f32], chosen: i32, k: usize) -> TokenLogprob {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f32>().ln();
    let mut top: Vec<(i32, f32)> = row
        .iter()
        .enumerate()
        .map(|(i, v)| (i as i32, v - lse))
        .collect();
    // The k largest (ties: the smaller id) without sorting the whole vocabulary: an echoed
    // prompt asks this at every position.
    let order = |a: &(i32, f32), b: &(i32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if k < top.len() {
        if k > 0 {
            top.select_nth_unstable_by(k - 1, order);
        }
        top.truncate(k);
    }
    top.sort_unstable_by(order);
    // Tokens a grammar ruled out (-inf, or the lowest float the library's mask kernel
    // writes) are no alternatives.
    top.retain(|t| t.1 > f32::MIN / 2.0);
    TokenLogprob {
        logprob: row
            .get(chosen as usize)
            .map_or(f32::NEG_INFINITY, |v| v - lse),
        top,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn penalties_and_bias_follow_openai() {
        let mut row = vec![1.0, 2.0, 3.0];
        let p = SamplingParams {
            presence_penalty: 0.5,
            frequency_penalty: 0.25,
            logit_bias: vec![(0, 10.0)],
            ..Default::default()
        };
        let counts = HashMap::from([(2, 2u32)]);
        process_logits(&mut row, &p, &counts);
        assert_eq!(row, vec![11.0, 2.0, 3.0 - 0.5 - 0.5]);
        assert_eq!(argmax(&row), 0);
    }

    #[test]
    fn logprobs_sum_to_one_and_rank() {
        let lp = logprobs(&[0.0, 1.0, 2.0], 1, 2);
        assert_eq!(lp.top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![2, 1]);
        let total: f32 = [0.0f32, 1.0, 2.0]
            .iter()
            .map(|v| (v - 2.0 + lp.top[0].1).exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-5);
        assert!((lp.logprob - lp.top[1].1).abs() < 1e-7);
    }

    #[test]
    fn top_logprobs_are_the_largest_in_order() {
        let row: Vec<f32> = (0..50).map(|i| ((i * 37) % 23) as f32).collect();
        let mut want: Vec<usize> = (0..50).collect();
        want.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        for k in [0, 1, 5, 49, 50, 80] {
            let got: Vec<usize> = logprobs(&row, 0, k)
                .top
                .iter()
                .map(|t| t.0 as usize)
                .collect();
            assert_eq!(got, want[..k.min(50)], "k = {k}");
        }
    }

    #[test]
    fn seeded_draws_repeat() {
        let a: Vec<f64> = (0..4).scan(Rng::new(7), |r, _| Some(r.uniform())).collect();
        let b: Vec<f64> = (0..4).scan(Rng::new(7), |r, _| Some(r.uniform())).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|&u| (0.0..1.0).contains(&u)));
    }

    #[test]
    fn runtime_sampler_draws_within_top_p() {
        let prob = [0.05f32, 0.9, 0.05];
        assert_eq!(sample_from_prob(&prob, 0.5, 0.99).unwrap(), 1);
    }
}
