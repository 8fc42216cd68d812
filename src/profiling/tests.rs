use super::*;
use crate::tensor::layout::cpu;

fn sample() -> Report {
    let mut p = Profiler::new(
        vec![cpu()],
        Row::from([("Executor".into(), Metric::Str("VM".into()))]),
    );
    p.start().unwrap();
    for (name, shapes) in [
        ("add", "float32[4]"),
        ("mul", "float32[4]"),
        ("add", "float32[4]"),
    ] {
        let extra = Row::from([("Argument Shapes".into(), Metric::Str(shapes.into()))]);
        p.start_call(name, cpu(), extra).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        p.stop_call().unwrap();
    }
    p.stop().unwrap();
    p.report()
}

#[test]
fn a_report_has_calls_totals_and_shares() {
    let r = sample();
    assert_eq!(r.calls.len(), 3);
    assert_eq!(r.calls[1]["Name"], Metric::Str("mul".into()));
    assert_eq!(r.calls[0]["Device"], Metric::Str("cpu0".into()));
    let total = r.device_metrics["cpu0"]["Duration (us)"]
        .microseconds()
        .unwrap();
    let sum: f64 = r
        .calls
        .iter()
        .filter_map(|c| c["Duration (us)"].microseconds())
        .sum();
    assert!(
        sum >= 6000.0 && total >= sum,
        "calls {sum} us, total {total} us"
    );
    // Each call's share is its duration over the whole run's (exactly; the sleeps only
    // bound the durations from below, so a loaded machine moves the shares, not this).
    let mut pct = 0.0;
    for c in &r.calls {
        let Metric::Percent(p) = c["Percent"] else {
            panic!("no Percent in {c:?}");
        };
        let us = c["Duration (us)"].microseconds().unwrap();
        assert!(
            (p - us / total * 100.0).abs() < 1e-9,
            "{p}% for {us} of {total} us"
        );
        pct += p;
    }
    assert!(pct > 0.0 && pct <= 100.0, "{pct}");
    assert_eq!(r.configuration["Executor"], Metric::Str("VM".into()));
    assert!(matches!(r.configuration["Number of threads"], Metric::Count(n) if n >= 1));
    let stats = r.kernel_stats();
    assert_eq!(stats.len(), 2);
    assert_eq!((stats[0].name.as_str(), stats[0].calls), ("add", 2));
    assert!(stats[0].total >= Duration::from_millis(4));
    assert!(stats[0].mean() >= Duration::from_millis(2));
}

#[test]
fn json_round_trips_in_tvms_format() {
    let r = sample();
    let text = r.to_json();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["calls"][0]["Duration (us)"]["microseconds"].is_f64());
    assert_eq!(v["calls"][0]["Count"]["count"], 1);
    assert_eq!(v["calls"][0]["Name"]["string"], "add");
    assert!(v["device_metrics"]["cpu0"]["Duration (us)"]["microseconds"].is_f64());
    assert_eq!(v["configuration"]["Executor"]["string"], "VM");
    let back = Report::from_json(&text).unwrap();
    assert_eq!(
        back,
        Report {
            overhead: Duration::ZERO,
            ..r
        }
    );
    assert!(Report::from_json("{\"calls\": [{\"x\": {\"furlongs\": 1}}]}").is_err());
    assert!(Report::from_json("[1]").is_err());
}

#[test]
fn table_aggregates_sorts_and_sums() {
    let r = sample();
    let t = r.to_table(true, true, true);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("Name"), "{t}");
    assert!(lines[0].contains("Duration (us)") && lines[0].contains("Argument Shapes"));
    // add (2 calls aggregated) first, mul, separator, Sum, Total.
    assert!(lines[1].starts_with("add"), "{t}");
    assert!(lines[1].contains(" 2 "), "the count of add: {t}");
    assert!(lines[2].starts_with("mul"), "{t}");
    assert!(lines[3].starts_with("----------"), "{t}");
    assert!(lines[4].starts_with("Sum"), "{t}");
    assert!(lines[5].starts_with("Total"), "{t}");
    assert!(
        t.contains("Configuration\n-------------\nExecutor: VM\n"),
        "{t}"
    );
    // Not aggregated: one row per call.
    assert_eq!(
        r.to_table(false, false, false)
            .lines()
            .filter(|l| l.starts_with("add"))
            .count(),
        2
    );
    let csv = r.to_csv();
    assert!(
        csv.starts_with("Argument Shapes,Count,Device,Duration (us),Name,Percent\n"),
        "{csv}"
    );
    assert!(csv.contains("\"mul\""));
}

#[test]
fn time_evaluator_grows_number_to_min_repeat_ms() {
    let mut calls = 0usize;
    let timing = Timing {
        number: 1,
        repeat: 2,
        min_repeat_ms: 5,
        limit_zero_time_iterations: 100,
        cooldown_interval_ms: 0,
        repeats_to_cooldown: 1,
    };
    let times = timing
        .measure(cpu(), || {
            calls += 1;
            std::thread::sleep(Duration::from_micros(200));
            Ok(())
        })
        .unwrap();
    assert_eq!(times.len(), 2);
    for t in &times {
        assert!(*t >= 150e-6 && *t < 0.05, "{t}");
    }
    // One warm-up call, then enough calls for two measurements of at least 5 ms each:
    // sum(number_i * mean_i) >= 10 ms, and sum(number_i) <= calls - 1.
    let slowest = times.iter().copied().fold(0.0, f64::max);
    assert!(
        (calls - 1) as f64 * slowest >= 0.0099,
        "{calls} calls, {times:?}"
    );
    let bad = Timing {
        number: 0,
        ..timing
    };
    assert!(bad.measure(cpu(), || Ok(())).is_err());
}
