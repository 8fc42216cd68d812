//! A model's queue and its instances: one thread per instance, each with its own executor,
//! taking requests from one bounded queue. With `dynamic_batching`, an instance joins queued
//! requests into one batch (up to `max_batch_size` rows, waiting at most
//! `max_queue_delay_microseconds` for more unless a preferred size is reached); the batch runs
//! through `tvmrt_models::batch::execute`, which checks, stacks, splits and reruns a failing
//! batch request by request.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tvmrt_models::request::{Run, Stats, Timing};
use tvmrt_models::{execute, ModelView, TensorSpec};

use crate::job::Job;
use crate::stats::ModelStats;

/// How a model's requests are queued and joined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The most rows in one model run (0: the model does not batch).
    pub max_batch_size: u64,
    /// `dynamic_batching` is on: queued requests are joined.
    pub dynamic: bool,
    /// How long the first request of a batch waits for more.
    pub max_delay: Duration,
    /// Batch sizes run as soon as they are reached.
    pub preferred: Vec<u64>,
    /// The most requests waiting; more are refused.
    pub max_queue: usize,
}

/// What the instances run: the model's signature and outputs.
pub struct Signature {
    /// Its inputs.
    pub inputs: Vec<TensorSpec>,
    /// Its output names, in order.
    pub output_names: Vec<String>,
    /// Requests carry a batch dimension.
    pub batched: bool,
}

struct State {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
    policy: Policy,
}

/// A running model: its queue and instance threads.
pub struct Scheduler {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// Hands statistics of `execute` to the model's counters.
struct Sink<'a>(&'a ModelStats);

impl Stats<Job> for Sink<'_> {
    fn request(&self, job: &Job, success: bool, exec_start: u64, t: Timing, exec_end: u64) {
        self.0
            .request(job.arrived, success, exec_start, t, exec_end);
    }
    fn batch(&self, batch_size: u64, exec_start: u64, t: Timing, exec_end: u64) {
        self.0.batch(batch_size, exec_start, t, exec_end);
    }
}

impl Scheduler {
    /// Starts one thread per runner in `instances`.
    pub fn start<R: Run + Send + 'static>(
        name: &str,
        instances: Vec<R>,
        signature: Arc<Signature>,
        policy: Policy,
        stats: Arc<ModelStats>,
    ) -> std::io::Result<Scheduler> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
            policy,
        });
        let mut threads = Vec::new();
        for (k, runner) in instances.into_iter().enumerate() {
            let (mine, signature, stats) = (shared.clone(), signature.clone(), stats.clone());
            let thread = std::thread::Builder::new()
                .name(format!("{name}_{k}"))
                .spawn(move || instance_loop(&runner, &signature, &mine, &stats));
            match thread {
                Ok(t) => threads.push(t),
                Err(e) => {
                    Scheduler { shared, threads }.stop();
                    return Err(e);
                }
            }
        }
        Ok(Scheduler { shared, threads })
    }

    /// Queues `job`; refuses it (with the reason) when the queue is full or the model is
    /// being unloaded.
    pub fn submit(&self, job: Job) -> Result<(), String> {
        let mut st = self.shared.state.lock();
        if st.closed {
            return Err("the model is being unloaded".into());
        }
        let max = self.shared.policy.max_queue;
        if st.jobs.len() >= max {
            return Err(format!(
                "the model's queue is full ({max} requests waiting); retry later"
            ));
        }
        st.jobs.push_back(job);
        drop(st);
        self.shared.ready.notify_one();
        Ok(())
    }

    /// Requests waiting.
    pub fn pending(&self) -> usize {
        self.shared.state.lock().jobs.len()
    }

    /// Refuses new requests, lets the instances finish those queued and in flight, and joins
    /// them.
    pub fn stop(mut self) {
        self.shared.state.lock().closed = true;
        self.shared.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Takes the next batch off the queue: `None` once it is closed and empty.
fn next_batch(shared: &Shared) -> Option<Vec<Job>> {
    let p = &shared.policy;
    let mut st = shared.state.lock();
    let first = loop {
        if let Some(j) = st.jobs.pop_front() {
            break j;
        }
        if st.closed {
            return None;
        }
        shared.ready.wait(&mut st);
    };
    let mut rows = first.rows;
    let deadline = Instant::now()
        + p.max_delay.saturating_sub(Duration::from_nanos(
            tvmrt_models::request::now_ns().saturating_sub(first.arrived),
        ));
    let mut batch = vec![first];
    if !(p.dynamic && p.max_batch_size > 1) {
        return Some(batch);
    }
    loop {
        while let Some(next) = st.jobs.front() {
            if rows + next.rows > p.max_batch_size {
                break;
            }
            rows += next.rows;
            batch.push(st.jobs.pop_front().expect("a queued job"));
        }
        let full =
            rows >= p.max_batch_size || p.preferred.contains(&rows) || st.jobs.front().is_some();
        if full || st.closed || shared.ready.wait_until(&mut st, deadline).timed_out() {
            break;
        }
    }
    // Another instance may take what this one left.
    if !st.jobs.is_empty() {
        shared.ready.notify_one();
    }
    Some(batch)
}

fn instance_loop<R: Run>(runner: &R, sig: &Signature, shared: &Shared, stats: &ModelStats) {
    let view = ModelView {
        inputs: &sig.inputs,
        output_names: sig.output_names.clone(),
        batched: sig.batched,
    };
    while let Some(batch) = next_batch(shared) {
        let ran = catch_unwind(AssertUnwindSafe(|| {
            execute(runner, &view, &batch, &Sink(stats));
        }));
        if ran.is_err() {
            for job in &batch {
                job.answer(Err("running the model panicked".into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::{InferRequest, Tensor};
    use tvmrt::dtype::dtypes::FLOAT32;
    use tvmrt::tensor::layout::cpu;
    use tvmrt_models::{DataType, Dim};

    /// Doubles its input, recording each call's rows.
    struct Doubler(Arc<Mutex<Vec<i64>>>);

    impl Run for Doubler {
        fn run(
            &self,
            inputs: &[tvmrt::tensor::Tensor],
        ) -> tvmrt::Result<Vec<tvmrt::tensor::Tensor>> {
            let t = &inputs[0];
            self.0.lock().push(t.shape()[0]);
            let v: Vec<u8> = t
                .to_vec()?
                .chunks_exact(4)
                .flat_map(|c| (f32::from_le_bytes(c.try_into().unwrap()) * 2.0).to_le_bytes())
                .collect();
            let out = tvmrt::tensor::Tensor::empty(t.shape(), FLOAT32, cpu())?;
            out.copy_from_bytes(&v)?;
            Ok(vec![out])
        }
    }

    fn request(x: f32) -> InferRequest {
        InferRequest {
            id: String::new(),
            inputs: vec![Tensor {
                name: "x".into(),
                datatype: DataType::Fp32,
                shape: vec![1, 1],
                data: x.to_le_bytes().to_vec(),
            }],
            outputs: vec![],
            binary_outputs: false,
        }
    }

    #[test]
    fn queued_requests_run_as_batches_and_each_gets_its_rows() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let sig = Arc::new(Signature {
            inputs: vec![TensorSpec {
                name: "x".into(),
                dtype: FLOAT32,
                dims: vec![Dim::Var("n".into()), Dim::Fixed(1)],
            }],
            output_names: vec!["output0".into()],
            batched: true,
        });
        let policy = Policy {
            max_batch_size: 4,
            dynamic: true,
            max_delay: Duration::from_millis(200),
            preferred: vec![],
            max_queue: 6,
        };
        let stats = Arc::new(ModelStats::default());
        // No instance takes them: the seventh request finds the queue full.
        let idle =
            Scheduler::start::<Doubler>("q", vec![], sig.clone(), policy.clone(), stats.clone())
                .unwrap();
        for k in 0..6 {
            idle.submit(Job::new(request(k as f32), 1).0).unwrap();
        }
        let refused = idle.submit(Job::new(request(9.0), 1).0).unwrap_err();
        assert_eq!(
            refused,
            "the model's queue is full (6 requests waiting); retry later"
        );
        let s = Scheduler::start(
            "m",
            vec![Doubler(calls.clone())],
            sig,
            policy,
            stats.clone(),
        )
        .unwrap();
        let mut answers = Vec::new();
        for k in 0..6 {
            let (job, rx) = Job::new(request(k as f32), 1);
            s.submit(job).unwrap();
            answers.push(rx);
        }
        for (k, rx) in answers.into_iter().enumerate() {
            let out = rx.blocking_recv().unwrap().unwrap();
            assert_eq!(out[0].data, (2.0 * k as f32).to_le_bytes());
            assert_eq!(out[0].shape, vec![1, 1]);
        }
        s.stop();
        assert_eq!(*calls.lock(), vec![4, 2]);
        let c = stats.snapshot();
        assert_eq!((c.execution_count, c.inference_count), (2, 6));
        assert_eq!(c.batches.keys().copied().collect::<Vec<_>>(), vec![2, 4]);
    }
}
