//! Per-model statistics as Triton's statistics extension reports them
//! (`/v2/models/{m}/stats`: request successes and failures, queue and compute times, and the
//! same per batch size), and as Prometheus text under Triton's metric names (`/metrics`).

use std::collections::BTreeMap;
use std::fmt::Write;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tvmrt_models::request::Timing;

/// A count and the nanoseconds they took together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Duration {
    /// How many.
    pub count: u64,
    /// Their total time in nanoseconds.
    pub ns: u64,
}

impl Duration {
    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.ns += ns;
    }

    fn json(&self) -> Value {
        json!({"count": self.count, "ns": self.ns})
    }
}

/// The times of the model runs of one batch size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchTimes {
    /// Stacking the inputs.
    pub compute_input: Duration,
    /// Running the model.
    pub compute_infer: Duration,
    /// Splitting the outputs back and answering.
    pub compute_output: Duration,
}

/// One model's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// When the last request was answered (milliseconds since the Unix epoch).
    pub last_inference_ms: u64,
    /// Inferences run: the rows of every batch.
    pub inference_count: u64,
    /// Model runs.
    pub execution_count: u64,
    /// Requests answered with outputs, from arrival to answer.
    pub success: Duration,
    /// Requests answered with an error.
    pub fail: Duration,
    /// Time requests waited in the queue.
    pub queue: Duration,
    /// Per request: stacking inputs, running the model, splitting outputs.
    pub compute: BatchTimes,
    /// Per batch size, the model runs.
    pub batches: BTreeMap<u64, BatchTimes>,
}

/// A model's statistics, updated by its instances.
#[derive(Default)]
pub struct ModelStats {
    counters: Mutex<Counters>,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn times(exec_start: u64, t: Timing, exec_end: u64) -> [u64; 3] {
    [
        t.compute_start.saturating_sub(exec_start),
        t.compute_end.saturating_sub(t.compute_start),
        exec_end.saturating_sub(t.compute_end),
    ]
}

impl ModelStats {
    /// One request answered: it arrived at `arrived` and its batch ran at `exec_start` ..
    /// `exec_end` (`now_ns` clock).
    pub fn request(&self, arrived: u64, success: bool, exec_start: u64, t: Timing, exec_end: u64) {
        let mut c = self.counters.lock();
        let total = exec_end.saturating_sub(arrived);
        if success {
            c.success.add(total);
            c.queue.add(exec_start.saturating_sub(arrived));
            let [input, infer, output] = times(exec_start, t, exec_end);
            c.compute.compute_input.add(input);
            c.compute.compute_infer.add(infer);
            c.compute.compute_output.add(output);
        } else {
            c.fail.add(total);
        }
        c.last_inference_ms = unix_ms();
    }

    /// A request refused before it reached the model (bad form, queue full).
    pub fn refused(&self) {
        let mut c = self.counters.lock();
        c.fail.add(0);
        c.last_inference_ms = unix_ms();
    }

    /// One model run over `batch_size` rows.
    pub fn batch(&self, batch_size: u64, exec_start: u64, t: Timing, exec_end: u64) {
        let mut c = self.counters.lock();
        c.execution_count += 1;
        c.inference_count += batch_size;
        let [input, infer, output] = times(exec_start, t, exec_end);
        let b = c.batches.entry(batch_size).or_default();
        b.compute_input.add(input);
        b.compute_infer.add(infer);
        b.compute_output.add(output);
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> Counters {
        self.counters.lock().clone()
    }
}

/// One entry of `model_stats`, as Triton writes it.
pub fn model_json(name: &str, version: &str, c: &Counters) -> Value {
    let batch_stats: Vec<Value> = c
        .batches
        .iter()
        .map(|(size, b)| {
            json!({
                "batch_size": size,
                "compute_input": b.compute_input.json(),
                "compute_infer": b.compute_infer.json(),
                "compute_output": b.compute_output.json(),
            })
        })
        .collect();
    json!({
        "name": name,
        "version": version,
        "last_inference": c.last_inference_ms,
        "inference_count": c.inference_count,
        "execution_count": c.execution_count,
        "inference_stats": {
            "success": c.success.json(),
            "fail": c.fail.json(),
            "queue": c.queue.json(),
            "compute_input": c.compute.compute_input.json(),
            "compute_infer": c.compute.compute_infer.json(),
            "compute_output": c.compute.compute_output.json(),
            "cache_hit": Duration::default().json(),
            "cache_miss": Duration::default().json(),
        },
        "batch_stats": batch_stats,
        "memory_usage": [],
    })
}

/// The Prometheus text of every model's counters, under Triton's metric names; `pending` is
/// each model's queued requests.
pub fn prometheus(models: &[(String, String, Counters, usize)]) -> String {
    type Pick = fn(&Counters) -> u64;
    let metrics: [(&str, &str, &str, Pick); 9] = [
        (
            "nv_inference_request_success",
            "counter",
            "Number of successful inference requests",
            |c| c.success.count,
        ),
        (
            "nv_inference_request_failure",
            "counter",
            "Number of failed inference requests",
            |c| c.fail.count,
        ),
        (
            "nv_inference_count",
            "counter",
            "Number of inferences performed",
            |c| c.inference_count,
        ),
        (
            "nv_inference_exec_count",
            "counter",
            "Number of model executions performed",
            |c| c.execution_count,
        ),
        (
            "nv_inference_request_duration_us",
            "counter",
            "Cumulative inference request duration in microseconds",
            |c| (c.success.ns + c.fail.ns) / 1000,
        ),
        (
            "nv_inference_queue_duration_us",
            "counter",
            "Cumulative inference queuing duration in microseconds",
            |c| c.queue.ns / 1000,
        ),
        (
            "nv_inference_compute_input_duration_us",
            "counter",
            "Cumulative compute input duration in microseconds",
            |c| c.compute.compute_input.ns / 1000,
        ),
        (
            "nv_inference_compute_infer_duration_us",
            "counter",
            "Cumulative compute inference duration in microseconds",
            |c| c.compute.compute_infer.ns / 1000,
        ),
        (
            "nv_inference_compute_output_duration_us",
            "counter",
            "Cumulative inference compute output duration in microseconds",
            |c| c.compute.compute_output.ns / 1000,
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, pick) in metrics {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (model, version, c, _) in models {
            let _ = writeln!(
                out,
                "{name}{{model=\"{model}\",version=\"{version}\"}} {}",
                pick(c)
            );
        }
    }
    let name = "nv_inference_pending_request_count";
    let _ = writeln!(out, "# HELP {name} Instantaneous number of pending requests awaiting execution per-model.\n# TYPE {name} gauge");
    for (model, version, _, pending) in models {
        let _ = writeln!(
            out,
            "{name}{{model=\"{model}\",version=\"{version}\"}} {pending}"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_batches_are_counted_as_triton_does() {
        let s = ModelStats::default();
        let t = Timing {
            compute_start: 110,
            compute_end: 150,
        };
        s.request(100, true, 105, t, 160);
        s.request(90, true, 105, t, 160);
        s.batch(2, 105, t, 160);
        s.request(100, false, 105, t, 160);
        s.refused();
        let c = s.snapshot();
        assert_eq!(
            c.success,
            Duration {
                count: 2,
                ns: 60 + 70
            }
        );
        assert_eq!(c.fail, Duration { count: 2, ns: 60 });
        assert_eq!(
            c.queue,
            Duration {
                count: 2,
                ns: 5 + 15
            }
        );
        assert_eq!(c.compute.compute_infer, Duration { count: 2, ns: 80 });
        assert_eq!((c.inference_count, c.execution_count), (2, 1));
        let j = model_json("m", "1", &c);
        assert_eq!(j["batch_stats"][0]["batch_size"], 2);
        assert_eq!(
            j["batch_stats"][0]["compute_infer"],
            json!({"count": 1, "ns": 40})
        );
        assert_eq!(j["inference_stats"]["success"]["count"], 2);
        let text = prometheus(&[("m".into(), "1".into(), c, 3)]);
        assert!(
            text.contains("nv_inference_exec_count{model=\"m\",version=\"1\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("nv_inference_request_failure{model=\"m\",version=\"1\"} 2\n"));
        assert!(text.contains("nv_inference_pending_request_count{model=\"m\",version=\"1\"} 3\n"));
    }
}
