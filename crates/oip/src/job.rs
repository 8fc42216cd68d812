//! One inference request on its way through a model: the decoded request as
//! `tvmrt_models::batch::execute` reads it ([`Pending`]), and the channel its answer goes back
//! on.

use std::borrow::Cow;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tvmrt_models::request::{Input, OutputData, Pending};

use crate::infer::{InferRequest, Tensor};

/// The answer to a job: the outputs, or why there are none.
pub type Answer = Result<Vec<Tensor>, String>;

/// A request queued for a model.
pub struct Job {
    /// The request.
    pub request: InferRequest,
    reply: Mutex<Option<oneshot::Sender<Answer>>>,
}

impl Job {
    /// A job for `request`, and where its answer will come.
    pub fn new(request: InferRequest) -> (Job, oneshot::Receiver<Answer>) {
        let (tx, rx) = oneshot::channel();
        let job = Job {
            request,
            reply: Mutex::new(Some(tx)),
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
    }
}
