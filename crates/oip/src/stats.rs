//! The models' statistics (kept by `tvmrt_models`' batcher, as Triton's statistics extension
//! reports them) as Prometheus text under Triton's metric names (`/metrics`).

use std::fmt::Write;

use tvmrt_models::stats::ModelStats as Counters;

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
            |c| c.compute.input.ns / 1000,
        ),
        (
            "nv_inference_compute_infer_duration_us",
            "counter",
            "Cumulative compute inference duration in microseconds",
            |c| c.compute.infer.ns / 1000,
        ),
        (
            "nv_inference_compute_output_duration_us",
            "counter",
            "Cumulative inference compute output duration in microseconds",
            |c| c.compute.output.ns / 1000,
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
    use tvmrt_models::request::Timing;

    #[test]
    fn counters_are_written_under_triton_s_names() {
        let mut c = Counters::default();
        let t = Timing {
            compute_start: 110,
            compute_end: 150,
        };
        c.request(true, 2, 100, 105, t, 160);
        c.request(false, 1, 100, 105, t, 160);
        c.batch(2, 105, t, 160);
        let text = prometheus(&[("m".into(), "1".into(), c, 3)]);
        let line = |name: &str| format!("{name}{{model=\"m\",version=\"1\"}} ");
        for (name, value) in [
            ("nv_inference_request_success", "1"),
            ("nv_inference_request_failure", "1"),
            ("nv_inference_count", "2"),
            ("nv_inference_exec_count", "1"),
            ("nv_inference_pending_request_count", "3"),
        ] {
            assert!(
                text.contains(&format!("{}{value}\n", line(name))),
                "{name}: {text}"
            );
        }
        assert!(text.contains("# TYPE nv_inference_pending_request_count gauge\n"));
    }
}
