//! Running requests: each checked against the model, those whose shapes agree past the batch
//! dimension stacked into one batch, each batch run once and its outputs split back per
//! request; a batch that fails is rerun request by request, so that only the request at fault
//! gets the error. Statistics are reported per request and per batch.

use std::borrow::Cow;

use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;

use crate::request::{now_ns, Input, OutputData, Pending, Run, Stats, Timing};
use crate::runner::one_line;
use crate::signature::{check_shapes, TensorSpec};
use crate::types::DataType;

/// What `execute` needs of the model.
pub struct ModelView<'a> {
    /// Its inputs, in call order.
    pub inputs: &'a [TensorSpec],
    /// Output names, in the model's order.
    pub output_names: Vec<String>,
    /// Requests carry a batch dimension first (`max_batch_size` > 0).
    pub batched: bool,
}

/// A request whose inputs passed the checks.
struct Checked<'r, R> {
    request: &'r R,
    inputs: Vec<Input<'r>>,
    /// Its batch size (1 when the model is not batched).
    rows: i64,
    wanted: Vec<String>,
}

/// Checks a request's inputs against the model.
fn check<'r, R: Pending>(request: &'r R, model: &ModelView<'_>) -> Result<Checked<'r, R>, String> {
    let mut inputs = Vec::with_capacity(model.inputs.len());
    for spec in model.inputs {
        let input = request.input(&spec.name)?;
        let want = DataType::from_dl(spec.dtype).unwrap_or(DataType::Invalid);
        if input.dtype != want {
            return Err(format!(
                "input `{}` is {}, but the model takes {} ({})",
                spec.name,
                input.dtype.name(),
                want.name(),
                spec.describe()
            ));
        }
        inputs.push(input);
    }
    let shapes: Vec<&[i64]> = inputs.iter().map(|i| i.shape.as_slice()).collect();
    check_shapes(model.inputs, &shapes)?;
    for (spec, input) in model.inputs.iter().zip(&inputs) {
        let element = tvmrt::dtype::element_bytes(spec.dtype) as u64;
        let expect = input.shape.iter().try_fold(element, |bytes, &d| {
            u64::try_from(d).ok().and_then(|d| bytes.checked_mul(d))
        });
        let Some(expect) = expect else {
            return Err(format!(
                "input `{}` has shape {:?}: a negative dimension, or more bytes than can be held",
                spec.name, input.shape
            ));
        };
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
        request,
        inputs,
        rows,
        wanted,
    })
}

/// Runs `requests` and answers each; never fails as a whole. Releases every request.
pub fn execute<R: Pending>(
    exec: &dyn Run,
    model: &ModelView<'_>,
    requests: &[R],
    stats: &dyn Stats<R>,
) {
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
                stats.request(r, false, exec_start, t, now);
            }
        }
    }
    // Requests stack when their shapes agree past the batch dimension; otherwise each runs alone.
    let mut groups: Vec<Vec<Checked<'_, R>>> = Vec::new();
    for c in checked {
        let fits = |g: &Vec<Checked<'_, R>>| {
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
fn run_group<R: Pending>(
    exec: &dyn Run,
    model: &ModelView<'_>,
    group: Vec<Checked<'_, R>>,
    exec_start: u64,
    stats: &dyn Stats<R>,
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
fn stack<R>(
    model: &ModelView<'_>,
    group: &[Checked<'_, R>],
    total: i64,
) -> Result<Vec<Tensor>, String> {
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
                .flat_map(|c| c.inputs[k].buffers.iter().map(|b| &b[..]))
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
fn scatter<'a, R>(
    model: &'a ModelView<'_>,
    group: &[Checked<'_, R>],
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
        let dtype = DataType::from_dl(t.dtype()).ok_or_else(|| {
            format!("output `{name}` has an element type the protocol cannot carry")
        })?;
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

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;
    use crate::signature::Dim;
    use crate::testing::{bytes, floats, input_x, n, Doubler};

    type Answer = Result<Vec<(String, Vec<i64>, Vec<f32>)>, String>;

    /// A request with one input, recording its answer.
    struct Fake {
        name: &'static str,
        dtype: DataType,
        shape: Vec<i64>,
        data: Vec<u8>,
        wanted: Vec<String>,
        answer: RefCell<Option<Answer>>,
        released: Cell<bool>,
    }

    fn fake(shape: &[i64], values: &[f32]) -> Fake {
        Fake {
            name: "x",
            dtype: DataType::Fp32,
            shape: shape.to_vec(),
            data: bytes(values),
            wanted: Vec::new(),
            answer: RefCell::new(None),
            released: Cell::new(false),
        }
    }

    impl Pending for Fake {
        fn input(&self, name: &str) -> Result<Input<'_>, String> {
            if name != self.name {
                return Err(format!("the request has no input `{name}`"));
            }
            Ok(Input {
                dtype: self.dtype,
                shape: self.shape.clone(),
                byte_size: self.data.len() as u64,
                buffers: vec![std::borrow::Cow::Borrowed(&self.data[..])],
            })
        }
        fn requested_outputs(&self) -> Result<Vec<String>, String> {
            Ok(self.wanted.clone())
        }
        fn respond(&self, outcome: Result<Vec<OutputData<'_>>, String>) {
            let answer = outcome.map(|outs| {
                outs.iter()
                    .map(|o| (o.name.to_string(), o.shape.clone(), floats(o.bytes)))
                    .collect()
            });
            assert!(
                self.answer.replace(Some(answer)).is_none(),
                "answered twice"
            );
        }
        fn release(&self) {
            assert!(!self.released.replace(true), "released twice");
        }
    }

    #[derive(Default)]
    struct Recorded {
        requests: RefCell<Vec<bool>>,
        batches: RefCell<Vec<u64>>,
    }

    impl Stats<Fake> for Recorded {
        fn request(&self, _: &Fake, success: bool, start: u64, t: Timing, end: u64) {
            assert!(start <= t.compute_start && t.compute_start <= t.compute_end);
            assert!(t.compute_end <= end);
            self.requests.borrow_mut().push(success);
        }
        fn batch(&self, batch_size: u64, _: u64, _: Timing, _: u64) {
            self.batches.borrow_mut().push(batch_size);
        }
    }

    fn model(dims: Vec<Dim>, batched: bool) -> (Vec<TensorSpec>, Vec<String>, bool) {
        (vec![input_x(dims)], vec!["output0".into()], batched)
    }

    fn run(reqs: &[Fake], m: &(Vec<TensorSpec>, Vec<String>, bool)) -> (Doubler, Recorded) {
        let view = ModelView {
            inputs: &m.0,
            output_names: m.1.clone(),
            batched: m.2,
        };
        let (exec, stats) = (Doubler::default(), Recorded::default());
        execute(&exec, &view, reqs, &stats);
        assert!(reqs
            .iter()
            .all(|r| r.released.get() && r.answer.borrow().is_some()));
        (exec, stats)
    }

    fn answer(r: &Fake) -> Answer {
        r.answer.borrow().clone().unwrap()
    }

    #[test]
    fn requests_run_as_one_batch_and_split_back() {
        let m = model(vec![n(), Dim::Fixed(2)], true);
        let reqs = [
            fake(&[1, 2], &[1.0, 2.0]),
            fake(&[2, 2], &[3.0, 4.0, 5.0, 6.0]),
            fake(&[1, 2], &[7.0, 8.0]),
        ];
        let (exec, stats) = run(&reqs, &m);
        assert_eq!(exec.calls(), vec![4]);
        assert_eq!(
            answer(&reqs[1]),
            Ok(vec![(
                "output0".into(),
                vec![2, 2],
                vec![6.0, 8.0, 10.0, 12.0]
            )])
        );
        assert_eq!(
            answer(&reqs[2]),
            Ok(vec![("output0".into(), vec![1, 2], vec![14.0, 16.0])])
        );
        assert_eq!(*stats.requests.borrow(), vec![true; 3]);
        assert_eq!(*stats.batches.borrow(), vec![4]);
    }

    #[test]
    fn a_failing_batch_is_rerun_one_request_at_a_time() {
        let m = model(vec![n(), Dim::Fixed(2)], true);
        let reqs = [
            fake(&[1, 2], &[1.0, 2.0]),
            fake(&[1, 2], &[13.0, 0.0]),
            fake(&[2, 2], &[3.0, 4.0, 5.0, 6.0]),
        ];
        let (exec, stats) = run(&reqs, &m);
        assert_eq!(exec.calls(), vec![4, 1, 1, 2]);
        assert_eq!(
            answer(&reqs[1]),
            Err("running the model: unlucky 13".to_string())
        );
        assert_eq!(answer(&reqs[0]).unwrap()[0].2, vec![2.0, 4.0]);
        assert_eq!(answer(&reqs[2]).unwrap()[0].2, vec![6.0, 8.0, 10.0, 12.0]);
        assert_eq!(*stats.requests.borrow(), vec![true, false, true]);
        assert_eq!(*stats.batches.borrow(), vec![1, 2]);
    }

    #[test]
    fn bad_requests_get_errors_and_never_run() {
        let m = model(vec![n(), Dim::Fixed(2)], true);
        let mut wrong_dtype = fake(&[1, 2], &[1.0, 2.0]);
        wrong_dtype.dtype = DataType::Fp64;
        let mut missing = fake(&[1, 2], &[1.0, 2.0]);
        missing.name = "y";
        let wrong_shape = fake(&[1, 3], &[1.0, 2.0, 3.0]);
        let mut short = fake(&[2, 2], &[1.0, 2.0]);
        short.shape = vec![2, 2];
        let mut unknown_output = fake(&[1, 2], &[1.0, 2.0]);
        unknown_output.wanted = vec!["logits".into()];
        // Sizes that wrap in 64 bits (2^62 rows of 2 floats: 2^65 bytes wraps to 0), and
        // negative dimensions whose product is positive.
        let mut wraps = fake(&[1, 2], &[]);
        wraps.shape = vec![1 << 62, 2];
        let mut negative = fake(&[1, 2], &[1.0, 2.0]);
        negative.shape = vec![-1, 2];
        let reqs = [
            wrong_dtype,
            missing,
            wrong_shape,
            short,
            unknown_output,
            wraps,
            negative,
        ];
        let (exec, stats) = run(&reqs, &m);
        assert!(exec.calls().is_empty());
        let errors: Vec<String> = reqs.iter().map(|r| answer(r).unwrap_err()).collect();
        assert_eq!(
            errors,
            vec![
                "input `x` is FP64, but the model takes FP32 (x: float32[n, 2])",
                "the request has no input `x`",
                "input `x` has shape [1, 3], but the model takes x: float32[n, 2]",
                "input `x` of shape [2, 2] needs 16 bytes, the request holds 8",
                "the model has no output `logits` (its outputs: output0)",
                "input `x` has shape [4611686018427387904, 2]: a negative dimension, or more \
                 bytes than can be held",
                "input `x` has shape [-1, 2]: a negative dimension, or more bytes than can be \
                 held",
            ]
        );
        assert_eq!(*stats.requests.borrow(), vec![false; 7]);
        assert!(stats.batches.borrow().is_empty());
    }

    #[test]
    fn unbatched_models_and_other_shapes_run_alone() {
        let m = model(vec![n(), Dim::Fixed(2)], false);
        let reqs = [
            fake(&[1, 2], &[1.0, 2.0]),
            fake(&[2, 2], &[1.0, 2.0, 3.0, 4.0]),
        ];
        let (exec, _) = run(&reqs, &m);
        assert_eq!(exec.calls(), vec![1, 2]);
        assert_eq!(answer(&reqs[1]).unwrap()[0].1, vec![2, 2]);

        let m = model(vec![n(), Dim::Var("m".into())], true);
        let reqs = [
            fake(&[1, 2], &[1.0, 2.0]),
            fake(&[1, 3], &[1.0, 2.0, 3.0]),
            fake(&[1, 2], &[5.0, 6.0]),
        ];
        let (exec, stats) = run(&reqs, &m);
        assert_eq!(exec.calls(), vec![2, 1]);
        assert_eq!(answer(&reqs[2]).unwrap()[0].2, vec![10.0, 12.0]);
        assert_eq!(*stats.batches.borrow(), vec![2, 1]);
    }
}
