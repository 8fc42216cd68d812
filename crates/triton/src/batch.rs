//! `ModelInstanceExecute`: the requests of one call checked against the model, stacked into
//! batches (requests whose shapes agree past the batch dimension), each batch run once, its
//! outputs split back per request; statistics reported per request and per batch.

use std::borrow::Cow;

use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;

use crate::runner::{one_line, Executor};
use crate::server::{now_ns, Input, OutputData, Request};
use crate::signature::{check_shapes, TensorSpec};
use crate::types;

/// What `execute` needs of the model.
pub struct ModelView<'a> {
    pub inputs: &'a [TensorSpec],
    /// Output names, in the model's order.
    pub output_names: Vec<String>,
    /// Requests carry a batch dimension first (`max_batch_size` > 0).
    pub batched: bool,
}

/// Timestamps of one model run, for Triton's statistics.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub compute_start: u64,
    pub compute_end: u64,
}

/// Reports statistics to Triton.
pub trait Stats {
    /// One request's (`success`: it got outputs).
    fn request(&self, request: Request, success: bool, exec_start: u64, t: Timing, exec_end: u64);
    /// One model run over `batch_size` items.
    fn batch(&self, batch_size: u64, exec_start: u64, t: Timing, exec_end: u64);
}

/// A request whose inputs passed the checks.
struct Checked<'r> {
    request: Request,
    inputs: Vec<Input<'r>>,
    /// Its batch size (1 when the model is not batched).
    rows: i64,
    wanted: Vec<String>,
}

/// Checks a request's inputs against the model.
fn check<'r>(request: &'r Request, model: &ModelView<'_>) -> Result<Checked<'r>, String> {
    let mut inputs = Vec::with_capacity(model.inputs.len());
    for spec in model.inputs {
        let input = request.input(&spec.name)?;
        let want = types::from_dl(spec.dtype).unwrap_or(0);
        if input.dtype != want {
            return Err(format!(
                "input `{}` is {}, but the model takes {} ({})",
                spec.name,
                types::name(input.dtype),
                types::name(want),
                spec.describe()
            ));
        }
        inputs.push(input);
    }
    let shapes: Vec<&[i64]> = inputs.iter().map(|i| i.shape.as_slice()).collect();
    check_shapes(model.inputs, &shapes)?;
    for (spec, input) in model.inputs.iter().zip(&inputs) {
        let numel: i64 = input.shape.iter().product();
        let expect = numel as u64 * tvmrt::dtype::element_bytes(spec.dtype) as u64;
        let have: u64 = input.buffers.iter().map(|b| b.len() as u64).sum();
        if have != expect || input.byte_size != expect {
            return Err(format!(
                "input `{}` of shape {:?} needs {expect} bytes, the request holds {have}",
                spec.name, input.shape
            ));
        }
    }
    let rows = if model.batched {
        inputs
            .first()
            .and_then(|i| i.shape.first().copied())
            .unwrap_or(1)
    } else {
        1
    };
    let wanted = request.requested_outputs()?;
    if let Some(bad) = wanted.iter().find(|w| !model.output_names.contains(w)) {
        return Err(format!(
            "the model has no output `{bad}` (its outputs: {})",
            model.output_names.join(", ")
        ));
    }
    Ok(Checked {
        request: *request,
        inputs,
        rows,
        wanted,
    })
}

/// Runs `requests` and answers each; never fails as a whole. Releases every request.
pub fn execute(exec: &Executor, model: &ModelView<'_>, requests: &[Request], stats: &dyn Stats) {
    let exec_start = now_ns();
    let mut checked = Vec::with_capacity(requests.len());
    for r in requests {
        match check(r, model) {
            Ok(c) => checked.push(c),
            Err(message) => {
                r.respond(Err(message));
                let now = now_ns();
                let t = Timing {
                    compute_start: now,
                    compute_end: now,
                };
                stats.request(*r, false, exec_start, t, now);
            }
        }
    }
    // Requests stack when their shapes agree past the batch dimension; otherwise each runs alone.
    let mut groups: Vec<Vec<Checked<'_>>> = Vec::new();
    for c in checked {
        let fits = |g: &Vec<Checked<'_>>| {
            model.batched
                && g[0]
                    .inputs
                    .iter()
                    .zip(&c.inputs)
                    .all(|(a, b)| a.shape.get(1..) == b.shape.get(1..))
        };
        match groups.iter_mut().find(|g| fits(g)) {
            Some(g) => g.push(c),
            None => groups.push(vec![c]),
        }
    }
    for group in groups {
        run_group(exec, model, group, exec_start, stats);
    }
    for r in requests {
        r.release();
    }
}

/// Runs one batch; if it fails and holds several requests, each is run alone so that only
/// the request at fault gets the error.
fn run_group(
    exec: &Executor,
    model: &ModelView<'_>,
    group: Vec<Checked<'_>>,
    exec_start: u64,
    stats: &dyn Stats,
) {
    let total: i64 = group.iter().map(|c| c.rows).sum();
    let compute_start = now_ns();
    let ran = stack(model, &group, total).and_then(|inputs| {
        exec.run(&inputs)
            .map_err(|e| format!("running the model: {}", one_line(&e.message)))
    });
    let t = Timing {
        compute_start,
        compute_end: now_ns(),
    };
    let outputs = match ran {
        Err(_) if group.len() > 1 => {
            for c in group {
                run_group(exec, model, vec![c], exec_start, stats);
            }
            return;
        }
        Err(message) => {
            for c in &group {
                c.request.respond(Err(message.clone()));
            }
            let end = now_ns();
            for c in &group {
                stats.request(c.request, false, exec_start, t, end);
            }
            return;
        }
        Ok(outputs) => outputs,
    };
    let bytes: Result<Vec<Cow<'_, [u8]>>, String> = outputs.iter().map(host_bytes).collect();
    let scattered = match &bytes {
        Ok(b) => scatter(model, &group, total, &outputs, b),
        Err(m) => Err(m.clone()),
    };
    let success = scattered.is_ok();
    match scattered {
        Ok(per_request) => {
            for (c, outs) in group.iter().zip(per_request) {
                c.request.respond(Ok(outs));
            }
        }
        Err(message) => {
            for c in &group {
                c.request.respond(Err(message.clone()));
            }
        }
    }
    let end = now_ns();
    for c in &group {
        stats.request(c.request, success, exec_start, t, end);
    }
    if success {
        stats.batch(total as u64, exec_start, t, end);
    }
}

/// The model's inputs for a batch: each request's rows one after another.
fn stack(model: &ModelView<'_>, group: &[Checked<'_>], total: i64) -> Result<Vec<Tensor>, String> {
    (0..model.inputs.len())
        .map(|k| {
            let mut shape = group[0].inputs[k].shape.clone();
            if model.batched {
                shape[0] = total;
            }
            let t = Tensor::empty(&shape, model.inputs[k].dtype, cpu())
                .map_err(|e| format!("input `{}`: {}", model.inputs[k].name, e.message))?;
            // One request's input in one buffer (the common case) is copied straight in.
            let parts: Vec<&[u8]> = group
                .iter()
                .flat_map(|c| c.inputs[k].buffers.iter().copied())
                .collect();
            let joined;
            let bytes: &[u8] = match parts.as_slice() {
                [one] => one,
                _ => {
                    joined = parts.concat();
                    &joined
                }
            };
            t.copy_from_bytes(bytes)
                .map_err(|e| format!("input `{}`: {}", model.inputs[k].name, e.message))?;
            Ok(t)
        })
        .collect()
}

/// Each request's share of the outputs, as response outputs.
fn scatter<'a>(
    model: &'a ModelView<'_>,
    group: &[Checked<'_>],
    total: i64,
    outputs: &[Tensor],
    bytes: &'a [Cow<'a, [u8]>],
) -> Result<Vec<Vec<OutputData<'a>>>, String> {
    if outputs.len() != model.output_names.len() {
        return Err(format!(
            "the model returned {} outputs, its configuration lists {}",
            outputs.len(),
            model.output_names.len()
        ));
    }
    let mut per_request: Vec<Vec<OutputData<'a>>> = group.iter().map(|_| Vec::new()).collect();
    for (k, (t, bytes)) in outputs.iter().zip(bytes).enumerate() {
        let name = model.output_names[k].as_str();
        let dtype = types::from_dl(t.dtype())
            .ok_or_else(|| format!("output `{name}` has an element type Triton cannot carry"))?;
        let shape = t.shape();
        if model.batched && shape.first() != Some(&total) {
            return Err(format!(
                "output `{name}` has shape {shape:?}, whose first dimension is not the batch of {total}"
            ));
        }
        let row = if model.batched && total > 0 {
            bytes.len() / total as usize
        } else {
            0
        };
        let mut offset = 0usize;
        for (c, outs) in group.iter().zip(per_request.iter_mut()) {
            let (mine, out_shape) = if model.batched {
                let n = c.rows as usize * row;
                let mut s = shape.to_vec();
                s[0] = c.rows;
                (&bytes[offset..offset + n], s)
            } else {
                (&bytes[..], shape.to_vec())
            };
            offset += mine.len();
            if c.wanted.is_empty() || c.wanted.iter().any(|w| w == name) {
                outs.push(OutputData {
                    name,
                    dtype,
                    shape: out_shape,
                    bytes: mine,
                });
            }
        }
    }
    Ok(per_request)
}

/// An output's bytes: read in place from a compact host tensor, else copied.
fn host_bytes(t: &Tensor) -> Result<Cow<'_, [u8]>, String> {
    // SAFETY: the executor returned `t` and runs nothing until this batch's responses are
    // sent (one thread per instance), so nothing writes its memory while the slice lives.
    if let Ok(b) = unsafe { t.as_bytes() } {
        return Ok(Cow::Borrowed(b));
    }
    t.to_vec()
        .map(Cow::Owned)
        .map_err(|e| format!("reading an output: {}", e.message))
}
