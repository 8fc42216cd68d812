//! `tvmrt bench`: time a function on `.npy` inputs (median, p90, min latency).

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::invoke::{CallArgs, Prepared};

/// Arguments of `tvmrt bench`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  tvmrt bench add.so add -i a.npy -i b.npy -o float32:16 --repeat 200"
)]
pub struct Args {
    #[command(flatten)]
    pub call: CallArgs,

    /// Untimed calls before measuring (at least one is always made).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub warmup: usize,

    /// Timed calls.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub repeat: usize,

    /// Print the results as JSON (times in nanoseconds).
    #[arg(long)]
    pub json: bool,

    /// Also time each kernel: `--repeat` more calls with every kernel call timed (a Relax VM's
    /// call instructions, a graph model's nodes), then a table of calls, total, mean and share
    /// of the whole per kernel.
    #[arg(long)]
    pub profile: bool,
}

/// Per-kernel times of `runs` profiled calls.
struct Profile {
    runs: usize,
    whole: Duration,
    kernels: Vec<tvmrt::profiling::KernelStat>,
}

fn profile(p: &Prepared, runs: usize) -> tvmrt::Result<Profile> {
    let mut merged: Option<tvmrt::profiling::Report> = None;
    for _ in 0..runs {
        let r = p.profile_once()?;
        match &mut merged {
            Some(m) => m.merge(r),
            None => merged = Some(r),
        }
    }
    let report = merged.unwrap_or_default();
    Ok(Profile {
        runs,
        whole: report.total_without_overhead(),
        kernels: report.kernel_stats(),
    })
}

/// Share of `part` in `whole`, in percent.
fn share(part: Duration, whole: Duration) -> f64 {
    if whole.is_zero() {
        0.0
    } else {
        part.as_secs_f64() / whole.as_secs_f64() * 100.0
    }
}

/// The per-kernel table: slowest first, then the time outside kernels and the whole.
fn print_profile(prof: &Profile) {
    let mut kernels = prof.kernels.clone();
    kernels.sort_by_key(|k| std::cmp::Reverse(k.total));
    let width = kernels
        .iter()
        .map(|k| k.name.len())
        .chain([20])
        .max()
        .unwrap_or(20);
    println!(
        "per kernel, {} profiled run(s) (share of the whole run):",
        prof.runs
    );
    println!(
        "  {:<width$}  {:>7}  {:>10}  {:>10}  {:>6}",
        "kernel", "calls", "total", "mean", "share"
    );
    let row = |name: &str, calls: String, total: Duration, mean: String| {
        println!(
            "  {name:<width$}  {calls:>7}  {:>10}  {mean:>10}  {:>5.1}%",
            human(total),
            share(total, prof.whole)
        );
    };
    let mut in_kernels = Duration::ZERO;
    for k in &kernels {
        in_kernels += k.total;
        row(&k.name, k.calls.to_string(), k.total, human(k.mean()));
    }
    let outside = prof.whole.saturating_sub(in_kernels);
    row("(outside kernels)", String::new(), outside, String::new());
    let per_run = prof.whole / prof.runs.max(1) as u32;
    row(
        "whole run",
        prof.runs.to_string(),
        prof.whole,
        human(per_run),
    );
}

/// Latency statistics of a set of timed calls.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    /// Number of timed calls.
    pub runs: usize,
    /// Median.
    pub median: Duration,
    /// 90th percentile (nearest rank).
    pub p90: Duration,
    /// Fastest.
    pub min: Duration,
    /// Slowest.
    pub max: Duration,
    /// Mean.
    pub mean: Duration,
}

impl Latency {
    /// Statistics of `times`, or `None` when it is empty.
    pub fn of(times: &[Duration]) -> Option<Latency> {
        if times.is_empty() {
            return None;
        }
        let mut t = times.to_vec();
        t.sort();
        let n = t.len();
        let rank = |q: f64| t[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        let median = if n % 2 == 1 {
            t[n / 2]
        } else {
            (t[n / 2 - 1] + t[n / 2]) / 2
        };
        let total: Duration = t.iter().sum();
        Some(Latency {
            runs: n,
            median,
            p90: rank(0.9),
            min: t[0],
            max: t[n - 1],
            mean: total / n as u32,
        })
    }
}

/// `12.3 us`, `4.56 ms`, `1.23 s`.
pub fn human(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// Runs longer than this (estimated from the warm-up) show a progress bar.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Runs `tvmrt bench`.
pub fn main(args: Args) -> tvmrt::Result<()> {
    if args.repeat == 0 {
        return Err(tvmrt::Error::value("--repeat must be at least 1"));
    }
    let p = Prepared::new(&args.call)?;
    // The first call also checks that the function runs at all.
    // Each timed call includes waiting for the device to finish it (kernels on OpenCL are
    // queued when the call returns).
    let start = Instant::now();
    p.call()?;
    p.sync()?;
    let mut estimate = start.elapsed();
    for _ in 1..args.warmup {
        let t = Instant::now();
        p.call()?;
        p.sync()?;
        estimate = t.elapsed();
    }
    let bar = if estimate * args.repeat as u32 > PROGRESS_AFTER {
        // Drawn on standard error, and only when it is a terminal.
        let bar = ProgressBar::new(args.repeat as u64);
        if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta} left)")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message("timing");
        Some(bar)
    } else {
        None
    };
    let mut times = Vec::with_capacity(args.repeat);
    for _ in 0..args.repeat {
        let t = Instant::now();
        p.call()?;
        p.sync()?;
        times.push(t.elapsed());
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let lat = Latency::of(&times).expect("repeat >= 1");
    let threads = tvmrt::backend::thread_pool::num_threads();
    let prof = if args.profile {
        Some(profile(&p, args.repeat)?)
    } else {
        None
    };
    if args.json {
        let mut v = serde_json::json!({
            "library": args.call.library,
            "function": p.function,
            "kind": p.kind(),
            "warmup": args.warmup.max(1),
            "runs": lat.runs,
            "threads": threads,
            "device": tvmrt::device::device_name(args.call.device),
            "median_ns": lat.median.as_nanos() as u64,
            "p90_ns": lat.p90.as_nanos() as u64,
            "min_ns": lat.min.as_nanos() as u64,
            "max_ns": lat.max.as_nanos() as u64,
            "mean_ns": lat.mean.as_nanos() as u64,
        });
        if let Some(prof) = &prof {
            let kernels: Vec<serde_json::Value> = prof
                .kernels
                .iter()
                .map(|k| {
                    serde_json::json!({
                        "name": k.name,
                        "calls": k.calls,
                        "total_ns": k.total.as_nanos() as u64,
                        "mean_ns": k.mean().as_nanos() as u64,
                        "share": share(k.total, prof.whole),
                    })
                })
                .collect();
            v["profile"] = serde_json::json!({
                "runs": prof.runs,
                "whole_ns": prof.whole.as_nanos() as u64,
                "kernels": kernels,
            });
        }
        println!("{v:#}");
        return Ok(());
    }
    println!(
        "{} `{}` ({}) on {}: {} runs after {} warm-up, {threads} thread(s)",
        args.call.library,
        p.function,
        p.kind(),
        tvmrt::device::device_name(args.call.device),
        lat.runs,
        args.warmup.max(1)
    );
    println!("  median {}", human(lat.median));
    println!("  p90    {}", human(lat.p90));
    println!("  min    {}", human(lat.min));
    println!("  mean   {}  max {}", human(lat.mean), human(lat.max));
    if let Some(prof) = &prof {
        print_profile(prof);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let ms = |v: u64| Duration::from_millis(v);
        let times: Vec<Duration> = (1..=10).rev().map(ms).collect();
        let l = Latency::of(&times).unwrap();
        assert_eq!(l.runs, 10);
        assert_eq!(l.min, ms(1));
        assert_eq!(l.max, ms(10));
        assert_eq!(l.median, Duration::from_micros(5500));
        assert_eq!(l.p90, ms(9));
        assert_eq!(l.mean, Duration::from_micros(5500));
        let one = Latency::of(&[ms(3)]).unwrap();
        assert_eq!((one.median, one.p90, one.min), (ms(3), ms(3), ms(3)));
        assert!(Latency::of(&[]).is_none());
    }

    #[test]
    fn human_units() {
        assert_eq!(human(Duration::from_nanos(999)), "999 ns");
        assert_eq!(human(Duration::from_nanos(12_345)), "12.35 us");
        assert_eq!(human(Duration::from_micros(4_560)), "4.56 ms");
        assert_eq!(human(Duration::from_millis(1_234)), "1.234 s");
    }
}
