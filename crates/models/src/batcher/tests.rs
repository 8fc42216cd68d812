//! The batcher with test requests ([`Job`]) and the doubling test model.

use std::time::Instant;

use serde_json::json;

use super::*;
use crate::signature::Dim;
use crate::testing::{answer, bytes, input_x, job, n, stats_when, Answer, Doubler, Job};

fn spec() -> ModelSpec {
    ModelSpec {
        inputs: vec![input_x(vec![n(), Dim::Fixed(2)])],
        output_names: vec!["output0".into()],
        batched: true,
    }
}

fn config(max: i64, delay: Duration, queue: usize, instances: usize) -> BatcherConfig {
    BatcherConfig {
        max_batch_size: max,
        dynamic: true,
        max_queue_delay: delay,
        preferred_batch_sizes: Vec::new(),
        max_queue_size: queue,
        instances,
        queue_timeout: None,
    }
}

/// A batcher whose instances share one [`Doubler`] (to see every call).
fn doubling(config: BatcherConfig) -> (Batcher<Job>, Arc<Doubler>) {
    let doubler = Arc::new(Doubler::default());
    let shared = doubler.clone();
    let make: Arc<MakeRunner> =
        Arc::new(move |_| Ok(Box::new(SharedRunner(shared.clone())) as Box<dyn Run>));
    (
        Batcher::start("double", spec(), config, make).unwrap(),
        doubler,
    )
}

struct SharedRunner<T>(Arc<T>);

impl<T: Run> Run for SharedRunner<T> {
    fn run(&self, inputs: &[tvmrt::tensor::Tensor]) -> tvmrt::Result<Vec<tvmrt::tensor::Tensor>> {
        self.0.run(inputs)
    }
}

#[test]
fn single_requests_join_into_batches_and_split_back() {
    let (b, doubler) = doubling(config(8, Duration::from_millis(300), 64, 1));
    let answers: Vec<Answer> = (0..5)
        .map(|k| {
            let (j, a) = job(&[1, 2], &[k as f32, 20.0 + k as f32]);
            b.submit(j).map_err(|e| e.0).unwrap();
            a
        })
        .collect();
    for (k, a) in answers.iter().enumerate() {
        assert_eq!(answer(a), Ok(vec![2.0 * k as f32, 40.0 + 2.0 * k as f32]));
    }
    assert_eq!(doubler.calls(), vec![5]);
    let stats = stats_when(&b, |s| s.execution_count == 1);
    assert_eq!((stats.inference_count, stats.execution_count), (5, 1));
    assert_eq!(stats.success.count, 5);
    let sizes: Vec<(u64, u64)> = stats
        .batches
        .iter()
        .map(|(s, c)| (*s, c.infer.count))
        .collect();
    assert_eq!(sizes, vec![(5, 1)]);
    let j = stats.to_json("double", "1");
    assert_eq!(j["batch_stats"][0]["batch_size"], json!(5));
    assert_eq!(j["batch_stats"][0]["compute_infer"]["count"], json!(1));
    // The first waited the whole delay in the queue.
    assert!(stats.queue.ns >= 300_000_000, "{:?}", stats.queue);
}

#[test]
fn full_and_preferred_batches_run_without_waiting() {
    // A delay far longer than the test: what is answered ran without waiting for it.
    let (b, doubler) = doubling(config(8, Duration::from_secs(600), 64, 1));
    let answers: Vec<Answer> = (0..4)
        .map(|_| {
            let (j, a) = job(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
            b.submit(j).map_err(|e| e.0).unwrap();
            a
        })
        .collect();
    for a in &answers {
        assert_eq!(answer(a), Ok(vec![2.0, 4.0, 6.0, 8.0]));
    }
    assert_eq!(doubler.calls(), vec![8]);

    let mut c = config(8, Duration::from_secs(600), 64, 1);
    c.preferred_batch_sizes = vec![2];
    let (b, doubler) = doubling(c);
    let answers: Vec<Answer> = (0..3)
        .map(|k| {
            let (j, a) = job(&[1, 2], &[k as f32, 1.0]);
            b.submit(j).map_err(|e| e.0).unwrap();
            a
        })
        .collect();
    assert_eq!(answer(&answers[0]), Ok(vec![0.0, 2.0]));
    assert_eq!(answer(&answers[1]), Ok(vec![2.0, 2.0]));
    assert_eq!(doubler.calls(), vec![2]);
    // The third waits for company until the batcher drains.
    assert!(answers[2].try_recv().is_err());
    b.drain();
    assert_eq!(answer(&answers[2]), Ok(vec![4.0, 2.0]));
    assert_eq!(doubler.calls(), vec![2, 1]);
}

#[test]
fn a_request_that_fails_fails_alone() {
    let (b, doubler) = doubling(config(8, Duration::from_millis(200), 64, 1));
    let inputs: [(&[i64], &[f32]); 4] = [
        (&[1, 2], &[1.0, 2.0]),
        (&[1, 2], &[13.0, 0.0]),
        (&[1, 3], &[1.0, 2.0, 3.0]),
        (&[1, 2], &[5.0, 6.0]),
    ];
    let answers: Vec<Answer> = inputs
        .iter()
        .map(|(shape, values)| {
            let (j, a) = job(shape, values);
            b.submit(j).map_err(|e| e.0).unwrap();
            a
        })
        .collect();
    let got: Vec<Result<Vec<f32>, String>> = answers.iter().map(answer).collect();
    assert_eq!(
        got,
        vec![
            Ok(vec![2.0, 4.0]),
            Err("running the model: unlucky 13".into()),
            Err("input `x` has shape [1, 3], but the model takes x: float32[n, 2]".into()),
            Ok(vec![10.0, 12.0]),
        ]
    );
    // The wrong shape never ran; the batch of three failed and was rerun one at a time.
    assert_eq!(doubler.calls(), vec![3, 1, 1, 1]);
    let stats = stats_when(&b, |s| s.execution_count == 2 && s.fail.count == 2);
    assert_eq!((stats.success.count, stats.fail.count), (2, 2));
    assert_eq!(stats.inference_count, 2);
}

/// A runner that holds each call until the gate opens, counting the calls running at once.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    running: Mutex<(usize, usize)>,
}

impl Gate {
    fn open(&self) {
        *lock(&self.open) = true;
        self.opened.notify_all();
    }
    /// Waits (bounded) until `n` calls run at once.
    fn wait_running(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while lock(&self.running).0 < n {
            assert!(Instant::now() < deadline, "never {n} calls at once");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Run for Gate {
    fn run(&self, inputs: &[tvmrt::tensor::Tensor]) -> tvmrt::Result<Vec<tvmrt::tensor::Tensor>> {
        {
            let mut r = lock(&self.running);
            r.0 += 1;
            r.1 = r.1.max(r.0);
        }
        let mut open = lock(&self.open);
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        drop(open);
        lock(&self.running).0 -= 1;
        Doubler::default().run(inputs)
    }
}

fn gated(config: BatcherConfig) -> (Batcher<Job>, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let shared = gate.clone();
    let make: Arc<MakeRunner> =
        Arc::new(move |_| Ok(Box::new(SharedRunner(shared.clone())) as Box<dyn Run>));
    (Batcher::start("gated", spec(), config, make).unwrap(), gate)
}

#[test]
fn a_full_queue_refuses_and_the_rest_are_answered() {
    let (b, gate) = gated(config(8, Duration::ZERO, 2, 1));
    let (first, first_answer) = job(&[1, 2], &[1.0, 1.0]);
    b.submit(first).map_err(|e| e.0).unwrap();
    gate.wait_running(1);
    let queued: Vec<Answer> = (0..2)
        .map(|_| {
            let (j, a) = job(&[1, 2], &[2.0, 2.0]);
            b.submit(j).map_err(|e| e.0).unwrap();
            a
        })
        .collect();
    assert_eq!(b.queued(), 2);
    let (extra, _) = job(&[1, 2], &[3.0, 3.0]);
    let (refused, back) = b.submit(extra).expect_err("the queue is full");
    assert_eq!(
        refused.to_string(),
        "model `gated`: queue full (2 requests waiting); retry later"
    );
    assert_eq!(back.data, bytes(&[3.0, 3.0]));
    gate.open();
    assert_eq!(answer(&first_answer), Ok(vec![2.0, 2.0]));
    for a in &queued {
        assert_eq!(answer(a), Ok(vec![4.0, 4.0]));
    }
    // Room again.
    let (j, a) = job(&[1, 2], &[5.0, 5.0]);
    b.submit(j).map_err(|e| e.0).unwrap();
    assert_eq!(answer(&a), Ok(vec![10.0, 10.0]));
}

#[test]
fn instances_run_at_once() {
    let mut c = config(8, Duration::ZERO, 16, 3);
    c.dynamic = false;
    let (b, gate) = gated(c);
    let answers: Vec<Answer> = (0..3)
        .map(|_| {
            let (j, a) = job(&[1, 2], &[1.0, 2.0]);
            b.submit(j).map_err(|e| e.0).unwrap();
            a
        })
        .collect();
    gate.wait_running(3);
    gate.open();
    for a in &answers {
        assert_eq!(answer(a), Ok(vec![2.0, 4.0]));
    }
    assert_eq!(lock(&gate.running).1, 3);
    let stats = stats_when(&b, |s| s.execution_count == 3);
    assert_eq!(stats.batches.get(&1).map(|c| c.infer.count), Some(3));
}

#[test]
fn oversized_batches_are_refused_before_queueing() {
    let (b, doubler) = doubling(config(4, Duration::ZERO, 16, 1));
    let (j, _) = job(&[5, 2], &[0.0; 10]);
    let (refused, _) = b.submit(j).expect_err("over the maximum");
    assert_eq!(
        refused.to_string(),
        "model `double`: the request's batch size 5 is over the model's max_batch_size of 4"
    );
    let (j, a) = job(&[4, 2], &[1.0; 8]);
    b.submit(j).map_err(|e| e.0).unwrap();
    assert_eq!(answer(&a), Ok(vec![2.0; 8]));
    assert_eq!(doubler.calls(), vec![4]);
}

#[test]
fn drain_finishes_queued_requests_and_refuses_new_ones() {
    // A delay far longer than the test: only draining runs the batch.
    let (b, doubler) = doubling(config(8, Duration::from_secs(600), 16, 2));
    let answers: Vec<Answer> = (0..3)
        .map(|k| {
            let (j, a) = job(&[1, 2], &[k as f32, 0.0]);
            b.submit(j).map_err(|e| e.0).unwrap();
            a
        })
        .collect();
    let start = Instant::now();
    b.drain();
    assert!(start.elapsed() < Duration::from_secs(20));
    for (k, a) in answers.iter().enumerate() {
        assert_eq!(answer(a), Ok(vec![2.0 * k as f32, 0.0]));
    }
    assert_eq!(doubler.calls(), vec![3]);
    let (j, _) = job(&[1, 2], &[1.0, 2.0]);
    let (refused, _) = b.submit(j).expect_err("draining");
    assert_eq!(
        refused.to_string(),
        "model `double` is shutting down: it takes no new requests"
    );
    b.drain();
}

#[test]
fn an_instance_that_cannot_start_fails_the_start() {
    let make: Arc<MakeRunner> = Arc::new(|k| {
        if k == 1 {
            Err("no such device".into())
        } else {
            Ok(Box::new(Doubler::default()) as Box<dyn Run>)
        }
    });
    let err = Batcher::<Job>::start("m", spec(), config(8, Duration::ZERO, 4, 2), make)
        .err()
        .expect("instance 1 fails");
    assert_eq!(err, "instance 1: no such device");
}

#[test]
fn settings_from_a_configuration() {
    let c = json!({
        "max_batch_size": 8,
        "dynamic_batching": {
            "max_queue_delay_microseconds": "2000",
            "preferred_batch_size": [4, 8],
            "default_queue_policy": {"max_queue_size": 32, "default_timeout_microseconds": 5000},
        },
        "instance_group": [{"kind": "KIND_CPU", "count": 3}],
    });
    assert_eq!(
        BatcherConfig::from_config(&c),
        BatcherConfig {
            max_batch_size: 8,
            dynamic: true,
            max_queue_delay: Duration::from_micros(2000),
            preferred_batch_sizes: vec![4, 8],
            max_queue_size: 32,
            instances: 3,
            queue_timeout: Some(Duration::from_millis(5)),
        }
    );
    let delayed = json!({"dynamic_batching": {"default_queue_policy": {
        "timeout_action": "DELAY", "default_timeout_microseconds": 5000}}});
    assert_eq!(BatcherConfig::from_config(&delayed).queue_timeout, None);
    let plain = BatcherConfig::from_config(&json!({"max_batch_size": 4}));
    assert!(!plain.dynamic);
    assert_eq!(plain.max_queue_size, DEFAULT_MAX_QUEUE_SIZE);
    assert_eq!(
        (plain.instances, plain.max_queue_delay),
        (1, Duration::ZERO)
    );
    assert_eq!(plain.queue_timeout, None);
}

#[test]
fn requests_past_their_queue_timeout_are_refused_unrun() {
    let mut c = config(8, Duration::ZERO, 16, 1);
    c.queue_timeout = Some(Duration::from_millis(50));
    let (b, gate) = gated(c);
    let (first, first_answer) = job(&[1, 2], &[1.0, 1.0]);
    b.submit(first).map_err(|e| e.0).unwrap();
    gate.wait_running(1);
    let (late, late_answer) = job(&[1, 2], &[2.0, 2.0]);
    b.submit(late).map_err(|e| e.0).unwrap();
    std::thread::sleep(Duration::from_millis(120));
    gate.open();
    assert_eq!(answer(&first_answer), Ok(vec![2.0, 2.0]));
    let refused = answer(&late_answer).unwrap_err();
    assert!(
        refused.starts_with("model `gated`: the request waited ")
            && refused.ends_with("ms in the queue, over the model's queue timeout of 50 ms"),
        "{refused}"
    );
    let stats = stats_when(&b, |s| s.fail.count == 1 && s.success.count == 1);
    assert_eq!(stats.execution_count, 1);
    // A timeout shorter than the batching delay still refuses in time.
    let mut c = config(8, Duration::from_secs(600), 16, 1);
    c.queue_timeout = Some(Duration::from_millis(20));
    let (b, doubler) = doubling(c);
    let (j, a) = job(&[1, 2], &[1.0, 1.0]);
    b.submit(j).map_err(|e| e.0).unwrap();
    assert!(answer(&a).unwrap_err().contains("queue timeout of 20 ms"));
    assert!(doubler.calls().is_empty());
}

/// Panics on every call.
struct Panics;

impl Run for Panics {
    fn run(&self, _: &[tvmrt::tensor::Tensor]) -> tvmrt::Result<Vec<tvmrt::tensor::Tensor>> {
        panic!("a model that panics")
    }
}

#[test]
fn a_panicking_model_answers_every_request_and_serves_on() {
    let make: Arc<MakeRunner> = Arc::new(|_| Ok(Box::new(Panics) as Box<dyn Run>));
    let b = Batcher::start("panics", spec(), config(8, Duration::ZERO, 16, 1), make).unwrap();
    for _ in 0..2 {
        let (j, a) = job(&[1, 2], &[1.0, 2.0]);
        b.submit(j).map_err(|e| e.0).unwrap();
        assert_eq!(
            answer(&a),
            Err("model `panics`: running the model panicked".into())
        );
    }
}

#[test]
fn a_lone_client_stops_paying_the_delay_until_company_comes() {
    use super::plan::{LONE_RUNS_TO_SKIP, PROBE_EVERY};
    let delay = Duration::from_millis(40);
    let (b, doubler) = doubling(config(8, delay, 64, 1));
    let one = |k: f32| {
        let (j, a) = job(&[1, 2], &[k, 1.0]);
        let start = Instant::now();
        b.submit(j).map_err(|e| e.0).unwrap();
        assert_eq!(answer(&a), Ok(vec![2.0 * k, 2.0]));
        start.elapsed()
    };
    // One request at a time: the first runs wait out the delay...
    for k in 0..LONE_RUNS_TO_SKIP {
        assert!(one(k as f32) >= delay);
    }
    // ...then a lone request runs at once, but for one probe in PROBE_EVERY.
    let times: Vec<Duration> = (0..PROBE_EVERY).map(|k| one((k % 10) as f32)).collect();
    let waited = times.iter().filter(|t| **t >= delay).count();
    assert_eq!(waited, 1, "{times:?}");
    assert!(times[..PROBE_EVERY as usize - 1].iter().all(|t| *t < delay));
    // Company: requests that queue while one runs (the model held by the lock on its call
    // record) form a batch again, and the wait is back.
    let held = doubler.calls.lock().unwrap();
    let answers: Vec<Answer> = (0..4)
        .map(|k| {
            let (j, a) = job(&[1, 2], &[k as f32, 1.0]);
            b.submit(j).map_err(|e| e.0).unwrap();
            a
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    drop(held);
    for (k, a) in answers.iter().enumerate() {
        assert_eq!(answer(a), Ok(vec![2.0 * k as f32, 2.0]));
    }
    let calls = doubler.calls();
    let tail = &calls[(LONE_RUNS_TO_SKIP + PROBE_EVERY) as usize..];
    assert!(tail.iter().any(|&rows| rows > 1), "{calls:?}");
    assert!(
        one(9.0) >= delay,
        "after a batch, a lone request waits again"
    );
}
