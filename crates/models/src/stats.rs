//! Triton-style statistics of one model, as its statistics extension reports them
//! (`/v2/models/{m}/stats`): per-request counts and times (success, fail, queue, compute
//! input/infer/output) and per batch size the model ran (`batch_stats`).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::request::Timing;

/// A count of events and their total duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Duration {
    /// How many.
    pub count: u64,
    /// Their nanoseconds, summed.
    pub ns: u64,
}

impl Duration {
    fn add(&mut self, from: u64, to: u64) {
        self.count += 1;
        self.ns += to.saturating_sub(from);
    }

    fn json(&self) -> Value {
        json!({"count": self.count, "ns": self.ns})
    }
}

/// The three parts of a model run: stacking the inputs, running, splitting the outputs (as
/// Triton divides an execution: exec start, compute start, compute end, exec end).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compute {
    /// From the execution's start to the model call (checking and stacking inputs).
    pub input: Duration,
    /// The model call.
    pub infer: Duration,
    /// From the model's return to the responses sent.
    pub output: Duration,
}

impl Compute {
    fn add(&mut self, exec_start: u64, t: Timing, exec_end: u64) {
        self.input.add(exec_start, t.compute_start);
        self.infer.add(t.compute_start, t.compute_end);
        self.output.add(t.compute_end, exec_end);
    }
}

/// One model's statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelStats {
    /// Items inferred (a request's batch size each, successful requests only).
    pub inference_count: u64,
    /// Model runs (one per batch).
    pub execution_count: u64,
    /// Milliseconds since the Unix epoch of the last request answered (0: none yet).
    pub last_inference_ms: u64,
    /// Requests answered with outputs: count, and nanoseconds from arrival to answer.
    pub success: Duration,
    /// Requests answered with an error: count, and nanoseconds from arrival to answer.
    pub fail: Duration,
    /// Time successful requests waited in the queue.
    pub queue: Duration,
    /// The compute parts of successful requests.
    pub compute: Compute,
    /// The compute parts of each model run, by its batch size.
    pub batches: BTreeMap<u64, Compute>,
}

impl ModelStats {
    /// Records one request: `arrived` (when it was queued), `exec_start`, its run's
    /// [`Timing`], `exec_end` ([`crate::request::now_ns`] nanoseconds); `rows`, its batch size.
    pub fn request(
        &mut self,
        success: bool,
        rows: u64,
        arrived: u64,
        exec_start: u64,
        t: Timing,
        exec_end: u64,
    ) {
        self.last_inference_ms = unix_ms();
        if !success {
            self.fail.add(arrived, exec_end);
            return;
        }
        self.success.add(arrived, exec_end);
        self.queue.add(arrived, exec_start);
        self.compute.add(exec_start, t, exec_end);
        self.inference_count += rows;
    }

    /// Records one model run over `batch_size` items.
    pub fn batch(&mut self, batch_size: u64, exec_start: u64, t: Timing, exec_end: u64) {
        self.execution_count += 1;
        self.batches
            .entry(batch_size)
            .or_default()
            .add(exec_start, t, exec_end);
    }

    /// The model's entry of Triton's `model_stats` list.
    pub fn to_json(&self, name: &str, version: &str) -> Value {
        let zero = Duration::default().json();
        let batch_stats: Vec<Value> = self
            .batches
            .iter()
            .map(|(size, c)| {
                json!({
                    "batch_size": size,
                    "compute_input": c.input.json(),
                    "compute_infer": c.infer.json(),
                    "compute_output": c.output.json(),
                })
            })
            .collect();
        json!({
            "name": name,
            "version": version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.json(),
                "fail": self.fail.json(),
                "queue": self.queue.json(),
                "compute_input": self.compute.input.json(),
                "compute_infer": self.compute.infer.json(),
                "compute_output": self.compute.output.json(),
                "cache_hit": zero,
                "cache_miss": zero,
            },
            "batch_stats": batch_stats,
            "memory_usage": [],
        })
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_batches_add_up_as_triton_reports_them() {
        let mut s = ModelStats::default();
        let t = Timing {
            compute_start: 130,
            compute_end: 180,
        };
        s.request(true, 2, 100, 120, t, 200);
        s.request(true, 1, 110, 120, t, 200);
        s.request(false, 4, 100, 120, t, 150);
        s.batch(3, 120, t, 200);
        s.batch(3, 120, t, 210);
        s.batch(1, 120, t, 200);
        let j = s.to_json("m", "1");
        assert_eq!(j["inference_count"], 3);
        assert_eq!(j["execution_count"], 3);
        assert!(j["last_inference"].as_u64().unwrap() > 1_600_000_000_000);
        let st = &j["inference_stats"];
        assert_eq!(st["success"], json!({"count": 2, "ns": 190}));
        assert_eq!(st["fail"], json!({"count": 1, "ns": 50}));
        assert_eq!(st["queue"], json!({"count": 2, "ns": 30}));
        assert_eq!(st["compute_input"], json!({"count": 2, "ns": 20}));
        assert_eq!(st["compute_infer"], json!({"count": 2, "ns": 100}));
        assert_eq!(st["compute_output"], json!({"count": 2, "ns": 40}));
        assert_eq!(
            j["batch_stats"],
            json!([
                {"batch_size": 1, "compute_input": {"count": 1, "ns": 10},
                 "compute_infer": {"count": 1, "ns": 50}, "compute_output": {"count": 1, "ns": 20}},
                {"batch_size": 3, "compute_input": {"count": 2, "ns": 20},
                 "compute_infer": {"count": 2, "ns": 100}, "compute_output": {"count": 2, "ns": 50}},
            ])
        );
    }
}
