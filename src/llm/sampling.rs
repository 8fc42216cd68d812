//! The samplers MLC-LLM calls (TVM `lm_support.cc`): top-p sampling from logits or
//! probabilities, multinomial sampling from given uniform numbers, and the in-place logit
//! transforms (softmax with temperature, repetition, presence and frequency penalties).
//!
//! They compute in TVM's mix of float and double (a `float` compared against a `double`, a
//! `double` quotient stored into a `float`), call the C library's `expf` as TVM's build does,
//! and sort with libstdc++'s `std::sort` order ([`super::std_sort`]), so the same inputs and
//! uniform samples give TVM's tokens and values bit for bit. Unlike TVM they check what TVM
//! leaves to undefined behaviour: token ids outside the logits, NaN logits, empty inputs.

use super::args::Args;
use super::std_sort::sort_by;
use crate::device::require_host;
use crate::dtype::dtypes;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

fn check(t: &Tensor, dtype: crate::abi::DLDataType, func: &str, name: &str) -> Result<()> {
    if !t.is_contiguous() {
        crate::bail_value!("{func}: {name} is not contiguous");
    }
    if t.dtype() != dtype {
        crate::bail_type!(
            "{func}: {name} must be {}",
            crate::dtype::dtype_to_string(dtype).unwrap_or_default()
        );
    }
    require_host(t.device(), func)
}

fn read_f32(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.to_vec()?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn read_i32(t: &Tensor) -> Result<Vec<i32>> {
    Ok(t.to_vec()?
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn write_f32(t: &Tensor, v: &[f32]) -> Result<()> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    t.copy_from_bytes(&bytes)
}

/// The last dimension, checked to hold all elements when the leading ones are 1.
fn vocab_of(t: &Tensor, func: &str) -> Result<usize> {
    let shape = t.shape();
    let Some((&last, lead)) = shape.split_last() else {
        crate::bail_value!("{func}: expected at least one dimension");
    };
    if lead.iter().any(|&d| d != 1) {
        crate::bail_value!("{func}: The leading dimensions of logits must be 1");
    }
    if last <= 0 {
        crate::bail_value!("{func}: nothing to sample from (the last dimension is {last})");
    }
    Ok(last as usize)
}

fn desc(a: &(f32, i32), b: &(f32, i32)) -> bool {
    a.0 > b.0
}

/// `vm.builtin.sample_top_p_from_logits`: softmax at `temperature`, then a draw from the
/// smallest set of tokens whose probability reaches `top_p`; argmax when `temperature` is 0.
pub fn sample_top_p_from_logits(
    logits: &Tensor,
    temperature: f64,
    top_p: f64,
    uniform: f64,
) -> Result<i64> {
    const F: &str = "vm.builtin.sample_top_p_from_logits";
    check(logits, dtypes::FLOAT32, F, "logits")?;
    let n = vocab_of(logits, F)?;
    let values = read_f32(logits)?;
    if values.iter().any(|v| v.is_nan()) {
        crate::bail_value!("{F}: the logits contain NaN");
    }
    let mut data: Vec<(f32, i32)> = values
        .iter()
        .zip(0..n as i32)
        .map(|(&v, i)| (v, i))
        .collect();
    sort_by(&mut data, desc);
    if temperature < 1e-6f32 as f64 {
        return Ok(data[0].1 as i64);
    }
    let logit_scale = (1.0f64 / temperature) as f32;
    let max_value = data[0].0;
    let mut sum = 0.0f32;
    for d in data.iter_mut() {
        d.0 = ((d.0 - max_value) * logit_scale).exp();
        sum += d.0;
    }
    let mut cum = 0.0f32;
    let mut top_p_sum = 0.0f32;
    for d in data.iter_mut() {
        let prob = d.0 / sum;
        if (cum as f64) < top_p {
            top_p_sum += prob;
        }
        cum += prob;
        d.0 = cum;
    }
    for d in &data {
        if uniform < (d.0 / top_p_sum) as f64 {
            return Ok(d.1 as i64);
        }
    }
    let first = data[0].0 as f64;
    if uniform.partial_cmp(&first).is_none_or(|o| o.is_gt()) {
        return Err(Error::runtime(format!(
            "{F}: Check failed: uniform_sample <= data[0].first ({uniform} vs {})",
            data[0].0
        )));
    }
    Ok(data[0].1 as i64)
}

/// `vm.builtin.sample_top_p_from_prob`: a draw from the smallest set of tokens whose
/// probability reaches `top_p`.
pub fn sample_top_p_from_prob(prob: &Tensor, top_p: f64, uniform: f64) -> Result<i64> {
    const F: &str = "vm.builtin.sample_top_p_from_prob";
    check(prob, dtypes::FLOAT32, F, "prob")?;
    vocab_of(prob, F)?;
    let p = read_f32(prob)?;
    let mut data: Vec<(f32, i32)> = Vec::new();
    let mut with_cutoff = |cutoff: f32| -> i64 {
        data.clear();
        for (i, &v) in p.iter().enumerate() {
            if v >= cutoff {
                data.push((v, i as i32));
            }
        }
        if data.is_empty() {
            return -1;
        }
        sort_by(&mut data, desc);
        // uniform < p[0] / top_p implies uniform < p[0] / top_p_sum.
        if uniform < data[0].0 as f64 / top_p {
            return data[0].1 as i64;
        }
        let mut cum = 0.0f32;
        let mut top_p_sum = 0.0f32;
        for d in data.iter_mut() {
            let prob = d.0;
            if (cum as f64) < top_p {
                top_p_sum += prob;
            } else {
                break;
            }
            cum += prob;
            d.0 = cum;
        }
        if (cum as f64) < top_p && cutoff != 0.0 {
            return -1;
        }
        for d in &data {
            if uniform < (d.0 / top_p_sum) as f64 {
                return d.1 as i64;
            }
        }
        data[data.len() - 1].1 as i64
    };
    if top_p < 1.0 {
        let i = with_cutoff((top_p / 1024.0) as f32);
        if i >= 0 {
            return Ok(i);
        }
    }
    let i = with_cutoff(0.0);
    if i < 0 {
        if p.iter().all(|v| v.is_nan()) {
            return Err(Error::runtime(
                "The output probabilities are all NaNs, can not sample from it",
            ));
        }
        return Err(Error::runtime(
            "Cannot sample from the given probability distribution due to unknown reason",
        ));
    }
    Ok(i)
}

/// `vm.builtin.multinomial_from_uniform`: for each row of `prob` (batch, vocab), the first
/// token whose cumulative probability exceeds the row's uniform sample; int64 (batch, 1).
pub fn multinomial_from_uniform(prob: &Tensor, uniform: &Tensor) -> Result<Tensor> {
    const F: &str = "vm.builtin.multinomial_from_uniform";
    check(prob, dtypes::FLOAT32, F, "prob")?;
    check(uniform, dtypes::FLOAT32, F, "uniform_sample")?;
    let shape = prob.shape();
    if shape.is_empty() {
        crate::bail_value!("{F}: prob must have a batch dimension");
    }
    let batch = shape[0];
    let vocab = shape[shape.len() - 1];
    if prob.numel() as i64 != batch * vocab {
        crate::bail_value!("{F}: prob must be (batch, vocab), got shape {shape:?}");
    }
    if uniform.numel() as i64 != batch {
        crate::bail_value!(
            "{F}: uniform_sample has {} values for a batch of {batch}",
            uniform.numel()
        );
    }
    let p = read_f32(prob)?;
    let u = read_f32(uniform)?;
    let out = Tensor::empty(&[batch, 1], dtypes::INT64, uniform.device())?;
    let mut picked = Vec::with_capacity(batch as usize * 8);
    for i in 0..batch as usize {
        let mut cum = 0.0f32;
        let mut idx = 0i64;
        for j in 0..vocab as usize {
            idx = j as i64;
            cum += p[i * vocab as usize + j];
            if cum > u[i] {
                break;
            }
        }
        picked.extend_from_slice(&idx.to_le_bytes());
    }
    out.copy_from_bytes(&picked)?;
    Ok(out)
}

fn token_ids(logits: &Tensor, ids: &Tensor, func: &str) -> Result<(Vec<f32>, Vec<i32>)> {
    check(logits, dtypes::FLOAT32, func, "logits")?;
    check(ids, dtypes::INT32, func, "token_ids")?;
    if logits.is_read_only() {
        crate::bail_value!("{func}: logits are read-only");
    }
    let values = read_f32(logits)?;
    let n = ids.shape().last().copied().unwrap_or(1).max(0) as usize;
    let ids = read_i32(ids)?;
    if ids.len() < n {
        crate::bail_value!("{func}: token_ids has fewer values than its last dimension");
    }
    let ids = ids[..n].to_vec();
    if let Some(bad) = ids.iter().find(|&&t| t < 0 || t as usize >= values.len()) {
        crate::bail_value!(
            "{func}: token id {bad} is outside the {} logits",
            values.len()
        );
    }
    Ok((values, ids))
}

/// `vm.builtin.apply_repetition_penalty`: in place, each listed token's logit divided by
/// `penalty` (multiplied when it is not positive).
pub fn apply_repetition_penalty(logits: &Tensor, ids: &Tensor, penalty: f64) -> Result<()> {
    let (mut v, ids) = token_ids(logits, ids, "vm.builtin.apply_repetition_penalty")?;
    for t in ids {
        let x = &mut v[t as usize];
        *x = if *x <= 0.0 {
            (*x as f64 * penalty) as f32
        } else {
            (*x as f64 / penalty) as f32
        };
    }
    write_f32(logits, &v)
}

/// `vm.builtin.apply_presence_and_frequency_penalty`: in place, each listed token's logit
/// lowered by `freq * frequency_penalty + presence_penalty`.
pub fn apply_presence_and_frequency_penalty(
    logits: &Tensor,
    ids: &Tensor,
    freqs: &Tensor,
    presence: f64,
    frequency: f64,
) -> Result<()> {
    const F: &str = "vm.builtin.apply_presence_and_frequency_penalty";
    let (mut v, ids) = token_ids(logits, ids, F)?;
    check(freqs, dtypes::INT32, F, "token_freqs")?;
    let freqs = read_i32(freqs)?;
    if freqs.len() < ids.len() {
        crate::bail_value!("{F}: token_freqs has fewer values than token_ids");
    }
    for (t, f) in ids.iter().zip(freqs) {
        let x = &mut v[*t as usize];
        *x = (*x as f64 - (f as f64 * frequency + presence)) as f32;
    }
    write_f32(logits, &v)
}

/// `vm.builtin.apply_softmax_with_temperature`: in place, softmax of `logits / temperature`
/// over the last dimension (of the first row, as TVM).
pub fn apply_softmax_with_temperature(logits: &Tensor, temperature: f64) -> Result<()> {
    const F: &str = "vm.builtin.apply_softmax_with_temperature";
    check(logits, dtypes::FLOAT32, F, "logits")?;
    if logits.is_read_only() {
        crate::bail_value!("{F}: logits are read-only");
    }
    let mut v = read_f32(logits)?;
    let vocab = logits.shape().last().copied().unwrap_or(1).max(0) as usize;
    let inv_temp = (1.0f64 / temperature) as f32;
    // TVM starts the running max at the smallest positive float (not the lowest one).
    let mut m = f32::MIN_POSITIVE;
    let mut d = 0.0f64;
    for &l in &v[..vocab] {
        let x = l * inv_temp;
        let m_prev = m;
        m = if m < x { x } else { m };
        d = d * (m_prev - m).exp() as f64 + (x - m).exp() as f64;
    }
    for l in v[..vocab].iter_mut() {
        let x = *l * inv_temp;
        *l = ((x - m).exp() as f64 / d) as f32;
    }
    write_f32(logits, &v)
}

/// The sampling globals.
pub(super) fn builtins() -> Vec<(&'static str, Function)> {
    type F = fn(&Args<'_, '_>) -> Result<Any>;
    let entries: Vec<(&'static str, usize, F)> = vec![
        ("vm.builtin.sample_top_p_from_logits", 4, |a| {
            Ok(Any::from(sample_top_p_from_logits(
                &a.tensor(0, "logits")?,
                a.f64(1, "temperature")?,
                a.f64(2, "top_p")?,
                a.f64(3, "uniform_sample")?,
            )?))
        }),
        ("vm.builtin.sample_top_p_from_prob", 3, |a| {
            Ok(Any::from(sample_top_p_from_prob(
                &a.tensor(0, "prob")?,
                a.f64(1, "top_p")?,
                a.f64(2, "uniform_sample")?,
            )?))
        }),
        ("vm.builtin.multinomial_from_uniform", 2, |a| {
            Ok(Any::from(multinomial_from_uniform(
                &a.tensor(0, "prob")?,
                &a.tensor(1, "uniform_sample")?,
            )?))
        }),
        ("vm.builtin.apply_repetition_penalty", 3, |a| {
            apply_repetition_penalty(
                &a.tensor(0, "logits")?,
                &a.tensor(1, "token_ids")?,
                a.f64(2, "penalty")?,
            )?;
            Ok(Any::none())
        }),
        ("vm.builtin.apply_presence_and_frequency_penalty", 5, |a| {
            apply_presence_and_frequency_penalty(
                &a.tensor(0, "logits")?,
                &a.tensor(1, "token_ids")?,
                &a.tensor(2, "token_freqs")?,
                a.f64(3, "presence_penalty")?,
                a.f64(4, "frequency_penalty")?,
            )?;
            Ok(Any::none())
        }),
        ("vm.builtin.apply_softmax_with_temperature", 2, |a| {
            apply_softmax_with_temperature(&a.tensor(0, "logits")?, a.f64(1, "temperature")?)?;
            Ok(Any::none())
        }),
    ];
    entries
        .into_iter()
        .map(|(name, n, f)| {
            (
                name,
                Function::from_fn(move |raw: &[AnyView<'_>]| f(&Args::exact(name, raw, n)?)),
            )
        })
        .collect()
}
