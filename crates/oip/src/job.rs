//! One inference request on its way through a model: the decoded request as
//! `tvmrt_models::batch::execute` reads it ([`Pending`]), and the channel its answer goes back
//! on.

use std::borrow::Cow;

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tvmrt_models::request::{Input, OutputData, Pending, Timing};

use crate::infer::{InferRequest, Tensor};
use crate::trace::Trace;

/// The answer to a job: the outputs, or why there are none.
pub type Answer = Result<Vec<Tensor>, String>;

/// A request queued for a model.
pub struct Job {
    /// The request.
    pub request: InferRequest,
    reply: Mutex<Option<oneshot::Sender<Answer>>>,
    trace: Option<Arc<Trace>>,
}

impl Job {
    /// A job for `request` (traced by `trace`: queued now), and where its answer will come.
    pub fn new(
        request: InferRequest,
        trace: Option<Arc<Trace>>,
    ) -> (Job, oneshot::Receiver<Answer>) {
        let (tx, rx) = oneshot::channel();
        if let Some(t) = &trace {
            t.stamp("QUEUE_START");
            if t.tensors() {
                for x in &request.inputs {
                    t.tensor("TENSOR_QUEUE_INPUT", &x.name, x.datatype, &x.shape, &x.data);
                }
            }
        }
        let job = Job {
            request,
            reply: Mutex::new(Some(tx)),
            trace,
        };
        (job, rx)
    }

    /// Answers the job (once; later answers are dropped). A client that went away is not an
    /// error.
    pub fn answer(&self, answer: Answer) {
        if let Some(tx) = self.reply.lock().take() {
            let _ = tx.send(answer);
        }
    }
}

impl Pending for Job {
    fn input(&self, name: &str) -> Result<Input<'_>, String> {
        let t = self
            .request
            .inputs
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| format!("the request has no input `{name}`"))?;
        Ok(Input {
            dtype: t.datatype,
            shape: t.shape.clone(),
            byte_size: t.data.len() as u64,
            buffers: vec![Cow::Borrowed(&t.data[..])],
        })
    }

    fn requested_outputs(&self) -> Result<Vec<String>, String> {
        Ok(self
            .request
            .outputs
            .iter()
            .map(|o| o.name.clone())
            .collect())
    }

    fn respond(&self, outcome: Result<Vec<OutputData<'_>>, String>) {
        if let (Some(t), Ok(outputs)) = (&self.trace, &outcome) {
            for o in outputs {
                t.tensor("TENSOR_BACKEND_OUTPUT", o.name, o.dtype, &o.shape, o.bytes);
            }
            t.stamp("INFER_RESPONSE_COMPLETE");
        }
        self.answer(outcome.map(|outputs| {
            outputs
                .into_iter()
                .map(|o| Tensor {
                    name: o.name.to_string(),
                    datatype: o.dtype,
                    shape: o.shape,
                    data: o.bytes.to_vec(),
                })
                .collect()
        }));
    }

    fn release(&self) {
        // A job that `execute` never answered (it answers every one) still gets a reply.
        self.answer(Err("the request was dropped without an answer".into()));
        if let Some(t) = &self.trace {
            t.stamp("REQUEST_END");
        }
    }

    fn computed(&self, exec_start: u64, t: Timing, exec_end: u64) {
        if let Some(trace) = &self.trace {
            trace.stamp_at("COMPUTE_START", exec_start);
            trace.stamp_at("COMPUTE_INPUT_END", t.compute_start);
            trace.stamp_at("COMPUTE_OUTPUT_START", t.compute_end);
            trace.stamp_at("COMPUTE_END", exec_end);
        }
    }
}
