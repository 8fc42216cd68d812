//! A dynamic batcher for a server outside Triton: one bounded queue per model, served by N
//! instance threads (each with its own runner, an [`crate::Executor`]). A free instance takes
//! the requests at the front of the queue that fit in `max_batch_size` rows and runs them as
//! one [`crate::batch::execute`] call (one model run per shape group, outputs split back, a
//! failing batch rerun request by request). It waits for more only while the oldest request
//! is younger than `max_queue_delay_microseconds` and no preferred batch size can be formed,
//! as Triton's dynamic batcher does, except while waiting has been forming no batches
//! ([`IdleWait`]: then a lone request runs at once). Each request answers itself
//! ([`Pending::respond`]: the server's callback or channel). [`Batcher::drain`] refuses new
//! requests and finishes the queued and running ones; a request past its queue timeout is
//! refused unrun, and a model that panics answers its batch with an error. Statistics are kept
//! as Triton reports them ([`ModelStats`]).

#[cfg(test)]
mod model_tests;
mod plan;
#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tvmrt::device::device_name;

use crate::batch::{execute, ModelView};
use crate::config;
use crate::load::{instance_device, Loaded, Served};
use crate::request::{now_ns, Input, OutputData, Pending, Run, Stats, Timing};
use crate::runner::one_line;
use crate::signature::TensorSpec;
use crate::stats::ModelStats;

pub use plan::{plan, IdleWait, Plan};

/// The queue bound when the configuration sets none (`dynamic_batching {
/// default_queue_policy { max_queue_size } }`).
pub const DEFAULT_MAX_QUEUE_SIZE: usize = 1024;

/// How a model's requests are queued and batched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatcherConfig {
    /// The most rows one model run takes (0: the model is not batched; one request a run).
    pub max_batch_size: i64,
    /// Requests are joined into batches (`dynamic_batching` is set); otherwise each runs alone.
    pub dynamic: bool,
    /// How long the oldest request may wait for others to join it.
    pub max_queue_delay: Duration,
    /// Batch sizes to run as soon as they can be formed.
    pub preferred_batch_sizes: Vec<i64>,
    /// The most requests waiting; more are refused ([`Refused::QueueFull`]).
    pub max_queue_size: usize,
    /// The instance threads to start.
    pub instances: usize,
    /// How long a request may wait in the queue before it is refused unrun
    /// (`default_queue_policy { default_timeout_microseconds }` with `timeout_action: REJECT`,
    /// Triton's default action); `None`: no limit.
    pub queue_timeout: Option<Duration>,
}

impl BatcherConfig {
    /// Reads a (completed) configuration: `max_batch_size`, `dynamic_batching`'s
    /// `max_queue_delay_microseconds`, `preferred_batch_size` and `default_queue_policy {
    /// max_queue_size default_timeout_microseconds timeout_action }` (else
    /// [`DEFAULT_MAX_QUEUE_SIZE`], no timeout), and the instances its
    /// `instance_group`s ask for ([`config::instance_gpus`]).
    pub fn from_config(config: &Value) -> BatcherConfig {
        let int = |v: Option<&Value>| match v {
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) => s.parse().ok(),
            _ => None,
        };
        let dynamic = config.get("dynamic_batching").filter(|d| d.is_object());
        let field = |key: &str| dynamic.and_then(|d| d.get(key));
        let policy = field("default_queue_policy");
        let queue_size = policy
            .and_then(|p| int(p.get("max_queue_size")))
            .filter(|&n| n > 0)
            .map_or(DEFAULT_MAX_QUEUE_SIZE, |n| n as usize);
        let rejects = policy
            .and_then(|p| p.get("timeout_action"))
            .and_then(Value::as_str)
            .is_none_or(|a| a == "REJECT");
        let queue_timeout = policy
            .and_then(|p| int(p.get("default_timeout_microseconds")))
            .filter(|&t| t > 0 && rejects)
            .map(|t| Duration::from_micros(t as u64));
        BatcherConfig {
            max_batch_size: int(config.get("max_batch_size")).unwrap_or(0).max(0),
            dynamic: dynamic.is_some(),
            max_queue_delay: Duration::from_micros(
                int(field("max_queue_delay_microseconds"))
                    .unwrap_or(0)
                    .max(0) as u64,
            ),
            preferred_batch_sizes: field("preferred_batch_size")
                .and_then(Value::as_array)
                .map(|l| l.iter().filter_map(|v| int(Some(v))).collect())
                .unwrap_or_default(),
            max_queue_size: queue_size,
            instances: config::instance_gpus(config).len(),
            queue_timeout,
        }
    }
}

/// What the batcher needs of the model: [`ModelView`]'s content, owned.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// Its inputs, in call order.
    pub inputs: Vec<TensorSpec>,
    /// Output names, in the model's order.
    pub output_names: Vec<String>,
    /// Requests carry a batch dimension first (`max_batch_size` > 0).
    pub batched: bool,
}

impl ModelSpec {
    /// The spec of a loaded model as its final configuration serves it.
    pub fn of(loaded: &Loaded, served: &Served) -> ModelSpec {
        ModelSpec {
            inputs: loaded.model.inputs.clone(),
            output_names: served.output_names.clone(),
            batched: served.batched,
        }
    }

    fn view(&self) -> ModelView<'_> {
        ModelView {
            inputs: &self.inputs,
            output_names: self.output_names.clone(),
            batched: self.batched,
        }
    }
}

/// Why a request was not queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The queue holds its maximum of requests (a server's 503/429).
    QueueFull {
        /// The model, for the message.
        model: String,
        /// The queue's bound.
        max_queue_size: usize,
    },
    /// The request's batch is over the model's maximum (a 400).
    TooLarge {
        /// The model, for the message.
        model: String,
        /// The request's batch size.
        rows: i64,
        /// The model's `max_batch_size`.
        max_batch_size: i64,
    },
    /// The batcher is draining for shutdown or unload (a 503).
    ShuttingDown {
        /// The model, for the message.
        model: String,
    },
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::QueueFull {
                model,
                max_queue_size,
            } => write!(
                f,
                "model `{model}`: queue full ({max_queue_size} requests waiting); retry later"
            ),
            Refused::TooLarge {
                model,
                rows,
                max_batch_size,
            } => write!(
                f,
                "model `{model}`: the request's batch size {rows} is over the model's \
                 max_batch_size of {max_batch_size}"
            ),
            Refused::ShuttingDown { model } => {
                write!(
                    f,
                    "model `{model}` is shutting down: it takes no new requests"
                )
            }
        }
    }
}

impl std::error::Error for Refused {}

/// A request in the queue: the server's request, its batch size and when it came, and
/// whether it was answered and released (so that a panic leaves none unanswered).
struct Queued<R> {
    request: R,
    rows: i64,
    arrived: u64,
    answered: Cell<bool>,
    released: Cell<bool>,
}

impl<R: Pending> Queued<R> {
    /// Answers with `message` and releases, unless that was done.
    fn fail(&self, message: &str) {
        if !self.answered.get() {
            self.respond(Err(message.to_string()));
        }
        if !self.released.get() {
            self.release();
        }
    }
}

impl<R: Pending> Pending for Queued<R> {
    fn input(&self, name: &str) -> Result<Input<'_>, String> {
        self.request.input(name)
    }
    fn requested_outputs(&self) -> Result<Vec<String>, String> {
        self.request.requested_outputs()
    }
    fn respond(&self, outcome: Result<Vec<OutputData<'_>>, String>) {
        self.answered.set(true);
        self.request.respond(outcome)
    }
    fn release(&self) {
        self.released.set(true);
        self.request.release()
    }
    fn computed(&self, exec_start: u64, t: Timing, exec_end: u64) {
        self.request.computed(exec_start, t, exec_end)
    }
}

struct State<R> {
    queue: VecDeque<Queued<R>>,
    draining: bool,
    idle: IdleWait,
}

struct Shared<R> {
    name: String,
    model: ModelSpec,
    config: BatcherConfig,
    state: Mutex<State<R>>,
    /// Signalled when a request is queued or the batcher drains.
    wake: Condvar,
    stats: Mutex<ModelStats>,
}

/// A lock that survives a panicking holder: the state it guards stays consistent (every
/// change to it is a single push or drain).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<R: Pending> Stats<Queued<R>> for Shared<R> {
    fn request(&self, r: &Queued<R>, success: bool, exec_start: u64, t: Timing, exec_end: u64) {
        r.computed(exec_start, t, exec_end);
        lock(&self.stats).request(
            success,
            r.rows.max(0) as u64,
            r.arrived,
            exec_start,
            t,
            exec_end,
        );
    }
    fn batch(&self, batch_size: u64, exec_start: u64, t: Timing, exec_end: u64) {
        lock(&self.stats).batch(batch_size, exec_start, t, exec_end);
    }
}

/// Makes instance `k`'s runner, on that instance's own thread (executors are not `Send`).
pub type MakeRunner = dyn Fn(usize) -> Result<Box<dyn Run>, String> + Send + Sync;

/// Makes instance `k`'s [`crate::Executor`] of `loaded` on its device: the model's `device`
/// parameter, else `gpus[k]` (a `KIND_GPU` instance's GPU, [`config::instance_gpus`]), else
/// the CPU.
pub fn executors(loaded: Arc<Loaded>, gpus: Vec<Option<i64>>) -> Arc<MakeRunner> {
    Arc::new(move |k| {
        let device = instance_device(loaded.device, gpus.get(k).copied().flatten())?;
        let executor = loaded
            .model
            .executor(device)
            .map_err(|e| format!("{}: {}", device_name(device), one_line(&e.message)))?;
        Ok(Box::new(executor) as Box<dyn Run>)
    })
}

/// One model's queue and instance threads.
pub struct Batcher<R: Pending + Send + 'static> {
    shared: Arc<Shared<R>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl<R: Pending + Send + 'static> Batcher<R> {
    /// Starts `config.instances` instance threads (at least one), each running the runner
    /// `make(k)` builds on it; fails, with every thread stopped, if any runner cannot be made
    /// (`instance k: why`).
    pub fn start(
        name: &str,
        model: ModelSpec,
        config: BatcherConfig,
        make: Arc<MakeRunner>,
    ) -> Result<Batcher<R>, String> {
        let instances = config.instances.max(1);
        let shared = Arc::new(Shared {
            name: name.to_string(),
            model,
            config,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                draining: false,
                idle: IdleWait::default(),
            }),
            wake: Condvar::new(),
            stats: Mutex::new(ModelStats::default()),
        });
        let batcher = Batcher {
            shared: shared.clone(),
            threads: Mutex::new(Vec::new()),
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for k in 0..instances {
            let (shared, make, ready) = (shared.clone(), make.clone(), ready_tx.clone());
            let thread = std::thread::Builder::new()
                .name(format!("{name}-{k}"))
                .spawn(move || {
                    let runner = match make(k) {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = ready.send(Err(format!("instance {k}: {e}")));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    drop(ready);
                    serve(&shared, runner.as_ref());
                })
                .map_err(|e| format!("starting an instance thread: {e}"))?;
            lock(&batcher.threads).push(thread);
        }
        drop(ready_tx);
        for _ in 0..instances {
            // A thread that died before reporting (a panic in `make`) closes the channel.
            let outcome = ready_rx
                .recv()
                .unwrap_or_else(|_| Err("an instance thread failed while starting".into()));
            if let Err(e) = outcome {
                batcher.drain();
                return Err(e);
            }
        }
        Ok(batcher)
    }

    /// Queues `request`; it is answered through its own [`Pending::respond`]. Refused (and
    /// handed back) when the queue is full, its batch is over the maximum, or the batcher
    /// drains.
    pub fn submit(&self, request: R) -> Result<(), (Refused, R)> {
        let s = &self.shared;
        let rows = if s.model.batched {
            s.model
                .inputs
                .first()
                .and_then(|spec| request.input(&spec.name).ok())
                .and_then(|i| i.shape.first().copied())
                .unwrap_or(1)
        } else {
            1
        };
        let max = s.config.max_batch_size;
        if s.model.batched && rows > max {
            let refused = Refused::TooLarge {
                model: s.name.clone(),
                rows,
                max_batch_size: max,
            };
            return Err((refused, request));
        }
        let mut state = lock(&s.state);
        if state.draining {
            let refused = Refused::ShuttingDown {
                model: s.name.clone(),
            };
            return Err((refused, request));
        }
        if state.queue.len() >= s.config.max_queue_size {
            let refused = Refused::QueueFull {
                model: s.name.clone(),
                max_queue_size: s.config.max_queue_size,
            };
            return Err((refused, request));
        }
        state.queue.push_back(Queued {
            request,
            rows,
            arrived: now_ns(),
            answered: Cell::new(false),
            released: Cell::new(false),
        });
        drop(state);
        s.wake.notify_all();
        Ok(())
    }

    /// Requests waiting (not yet taken by an instance).
    pub fn queued(&self) -> usize {
        lock(&self.shared.state).queue.len()
    }

    /// A copy of the statistics so far.
    pub fn stats(&self) -> ModelStats {
        lock(&self.shared.stats).clone()
    }

    /// The batching settings.
    pub fn config(&self) -> &BatcherConfig {
        &self.shared.config
    }

    /// Refuses new requests, runs every queued one (without waiting for batches to fill),
    /// and returns when every instance thread has finished. Idempotent.
    pub fn drain(&self) {
        lock(&self.shared.state).draining = true;
        self.shared.wake.notify_all();
        let threads: Vec<JoinHandle<()>> = lock(&self.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

impl<R: Pending + Send + 'static> Drop for Batcher<R> {
    fn drop(&mut self) {
        self.drain();
    }
}

/// An instance thread: takes batches until the batcher drains and its queue is empty.
fn serve<R: Pending + Send>(shared: &Shared<R>, runner: &dyn Run) {
    while let Some(Taken { batch, expired }) = next_batch(shared) {
        for q in &expired {
            let waited = now_ns().saturating_sub(q.arrived);
            q.fail(&format!(
                "model `{}`: the request waited {} ms in the queue, over the model's queue \
                 timeout of {} ms",
                shared.name,
                waited / 1_000_000,
                shared.config.queue_timeout.map_or(0, |t| t.as_millis())
            ));
            let t = Timing {
                compute_start: now_ns(),
                compute_end: now_ns(),
            };
            shared.request(q, false, t.compute_start, t, t.compute_end);
        }
        if batch.is_empty() {
            continue;
        }
        let view = shared.model.view();
        // A panic in a model is this batch's alone: its requests not yet answered get an
        // error, and the instance goes on.
        let ran = catch_unwind(AssertUnwindSafe(|| {
            execute(runner, &view, &batch, shared);
        }));
        if ran.is_err() {
            for q in &batch {
                q.fail(&format!(
                    "model `{}`: running the model panicked",
                    shared.name
                ));
            }
        }
    }
}

/// What an instance took off the queue: a batch to run, and requests past their queue
/// timeout to refuse.
struct Taken<R> {
    batch: Vec<Queued<R>>,
    expired: Vec<Queued<R>>,
}

/// Waits for the next batch to run (or requests past their timeout); `None` when draining is
/// done.
fn next_batch<R>(shared: &Shared<R>) -> Option<Taken<R>> {
    let mut state = lock(&shared.state);
    loop {
        if let Some(timeout) = shared.config.queue_timeout {
            let limit = now_ns().saturating_sub(timeout.as_nanos() as u64);
            if state.queue.iter().any(|q| q.arrived < limit) {
                let (expired, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut state.queue)
                    .into_iter()
                    .partition(|q| q.arrived < limit);
                state.queue = kept;
                return Some(Taken {
                    batch: Vec::new(),
                    expired: expired.into(),
                });
            }
        }
        if state.queue.is_empty() {
            if state.draining {
                return None;
            }
            state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            continue;
        }
        let now = now_ns();
        let skip_wait = state.idle.skips_wait();
        let queued = state.queue.iter().map(|q| (q.rows, q.arrived));
        match plan(queued, &shared.config, now, state.draining || skip_wait) {
            Plan::Take(n) => {
                if shared.config.dynamic && !shared.config.max_queue_delay.is_zero() {
                    state.idle.ran(n, skip_wait);
                }
                let batch: Vec<Queued<R>> = state.queue.drain(..n).collect();
                if !state.queue.is_empty() {
                    shared.wake.notify_all();
                }
                return Some(Taken {
                    batch,
                    expired: Vec::new(),
                });
            }
            Plan::WaitUntil(deadline) => {
                // Woken in time to refuse the oldest request when its queue timeout is up.
                let expiry = shared.config.queue_timeout.and_then(|t| {
                    let oldest = state.queue.iter().map(|q| q.arrived).min()?;
                    Some(oldest.saturating_add(t.as_nanos() as u64))
                });
                let deadline = expiry.map_or(deadline, |e| e.min(deadline));
                let wait = Duration::from_nanos(deadline.saturating_sub(now));
                state = shared
                    .wake
                    .wait_timeout(state, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }
}
