//! Prometheus metrics of the engine and the HTTP front, recorded where TGI records them (at
//! admission, at the first token, per output token, at the end of a request) and rendered in
//! the text exposition format by `/metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// A latency histogram.
#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    /// Sum in nanoseconds.
    sum_ns: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        for (b, &le) in self.buckets.iter().zip(BUCKETS.iter()) {
            if s <= le {
                b.fetch_add(1, Relaxed);
            }
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// Observations so far and their mean.
    pub fn count_and_mean(&self) -> (u64, Duration) {
        let n = self.count.load(Relaxed);
        let sum = self.sum_ns.load(Relaxed);
        (n, Duration::from_nanos(sum.checked_div(n).unwrap_or(0)))
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, le) in self.buckets.iter().zip(BUCKETS.iter()) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {}", b.load(Relaxed));
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_ns.load(Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Every metric of one server.
#[derive(Default)]
pub struct Metrics {
    pub requests_ok: AtomicU64,
    pub requests_error: AtomicU64,
    pub requests_rejected: AtomicU64,
    pub requests_cancelled: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub generation_tokens: AtomicU64,
    /// Requests taken out of the KV cache for lack of pages (recomputed later).
    pub preemptions: AtomicU64,
    /// Prompt tokens not prefilled because a sequence in the cache held them (forked).
    pub prefix_hit_tokens: AtomicU64,
    /// Steps a constrained sequence sat out because its grammar's mask was late.
    pub grammar_masks_late: AtomicU64,
    pub ttft: Histogram,
    pub tpot: Histogram,
    pub queue_time: Histogram,
    pub running_sequences: AtomicU64,
    pub waiting_requests: AtomicU64,
    pub kv_pages_in_use: AtomicU64,
    pub kv_pages_total: AtomicU64,
    /// Finished sequences kept in the KV cache for prefix sharing.
    pub prefix_cache_sequences: AtomicU64,
}

impl Metrics {
    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Relaxed)
            );
        };
        let _ = writeln!(
            out,
            "# HELP tvmrt_requests_total Requests by outcome.\n# TYPE tvmrt_requests_total counter"
        );
        for (status, v) in [
            ("ok", &self.requests_ok),
            ("error", &self.requests_error),
            ("rejected", &self.requests_rejected),
            ("cancelled", &self.requests_cancelled),
        ] {
            let _ = writeln!(
                out,
                "tvmrt_requests_total{{status=\"{status}\"}} {}",
                v.load(Relaxed)
            );
        }
        counter(
            &mut out,
            "tvmrt_prompt_tokens_total",
            "Prompt tokens prefilled.",
            &self.prompt_tokens,
        );
        counter(
            &mut out,
            "tvmrt_generation_tokens_total",
            "Tokens generated.",
            &self.generation_tokens,
        );
        counter(
            &mut out,
            "tvmrt_preemptions_total",
            "Requests preempted (their KV pages freed, recomputed later) for lack of KV pages.",
            &self.preemptions,
        );
        counter(
            &mut out,
            "tvmrt_prefix_hit_tokens_total",
            "Prompt tokens forked from a sequence in the KV cache instead of prefilled.",
            &self.prefix_hit_tokens,
        );
        counter(
            &mut out,
            "tvmrt_grammar_masks_late_total",
            "Steps a constrained sequence sat out because its grammar's mask was not done in \
             time for the batch (it is sampled once the mask is, the others go on).",
            &self.grammar_masks_late,
        );
        self.ttft.render(
            &mut out,
            "tvmrt_time_to_first_token_seconds",
            "From arrival to the first generated token.",
        );
        self.tpot.render(
            &mut out,
            "tvmrt_time_per_output_token_seconds",
            "Between consecutive generated tokens of a sequence.",
        );
        self.queue_time.render(
            &mut out,
            "tvmrt_queue_time_seconds",
            "From arrival to admission into the running batch.",
        );
        for (name, help, v) in [
            (
                "tvmrt_running_sequences",
                "Sequences in the running batch.",
                &self.running_sequences,
            ),
            (
                "tvmrt_waiting_requests",
                "Requests queued for admission.",
                &self.waiting_requests,
            ),
            (
                "tvmrt_kv_pages_in_use",
                "KV cache pages holding tokens (prefix-cache sequences included).",
                &self.kv_pages_in_use,
            ),
            (
                "tvmrt_prefix_cache_sequences",
                "Finished sequences kept in the KV cache for prefix sharing.",
                &self.prefix_cache_sequences,
            ),
            (
                "tvmrt_kv_pages_total",
                "KV cache pages in all.",
                &self.kv_pages_total,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}",
                v.load(Relaxed)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_render_cumulative_buckets() {
        let m = Metrics::default();
        m.ttft.observe(Duration::from_millis(3));
        m.ttft.observe(Duration::from_secs(20));
        let text = m.render();
        assert!(text.contains("tvmrt_time_to_first_token_seconds_bucket{le=\"0.0025\"} 0"));
        assert!(text.contains("tvmrt_time_to_first_token_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("tvmrt_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("tvmrt_time_to_first_token_seconds_count 2"));
    }
}
