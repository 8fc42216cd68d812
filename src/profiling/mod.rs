//! Per-kernel timing: TVM's profiler (`src/runtime/profiling.cc`, TVM 0.19 – 0.23): a
//! [`Profiler`] records each call an executor makes (name, device, duration, argument shapes)
//! between `start` and `stop`, and its [`Report`] prints as TVM prints one (`AsTable`,
//! `AsCSV`, `AsJSON`, and back with `FromJSON`), so reports read alike on both runtimes. Used
//! by the Relax VM's `profile`, the classic debug graph executor (`profile`, `run_individual`)
//! and `tvmrt bench --profile`.
//!
//! Executors only call [`Profiler::start_call`] / [`Profiler::stop_call`] around a kernel call
//! when a profiler is running, so a run that is not profiled pays nothing. The clock is read
//! after [`sync_device`]: a device kernel has only been queued when its launcher returns.

mod format;
mod globals;
mod profiler;
mod timing;

pub(crate) use globals::builtins;
pub use globals::{new_report, report_arg, ReportObj};
pub use profiler::Profiler;
pub use timing::{Hooks, Timing};

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::abi::{type_index, DLDataType, DLDevice};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::value::{Any, AnyView};

/// One value of a report (TVM's `DurationNode`, `CountNode`, `PercentNode`, `RatioNode`,
/// `String`).
#[derive(Clone, Debug, PartialEq)]
pub enum Metric {
    /// Microseconds.
    Duration(f64),
    Count(i64),
    Percent(f64),
    Ratio(f64),
    Str(String),
}

impl Metric {
    /// As TVM's `AsTable` prints it (no thousands separators: the C locale).
    fn printed(&self) -> String {
        match self {
            Metric::Duration(us) => format!("{us:.2}"),
            Metric::Count(n) => n.to_string(),
            Metric::Percent(p) => format!("{p:.2}"),
            Metric::Ratio(r) => format!("{r:.2}"),
            Metric::Str(s) => s.clone(),
        }
    }

    fn to_json(&self) -> Value {
        let (key, v) = match self {
            Metric::Duration(us) => ("microseconds", Value::from(*us)),
            Metric::Count(n) => ("count", Value::from(*n)),
            Metric::Percent(p) => ("percent", Value::from(*p)),
            Metric::Ratio(r) => ("ratio", Value::from(*r)),
            Metric::Str(s) => ("string", Value::from(s.as_str())),
        };
        let mut m = Map::new();
        m.insert(key.to_string(), v);
        Value::Object(m)
    }

    fn from_json(v: &Value, what: &str) -> Result<Metric> {
        let bad = || {
            Error::value(format!(
                "profiling report: `{what}` must be an object with one of microseconds, \
                 percent, count, ratio, string; got {v}"
            ))
        };
        let m = v.as_object().filter(|m| m.len() == 1).ok_or_else(bad)?;
        let (key, x) = m.iter().next().ok_or_else(bad)?;
        Ok(match key.as_str() {
            "microseconds" => Metric::Duration(x.as_f64().ok_or_else(bad)?),
            "percent" => Metric::Percent(x.as_f64().ok_or_else(bad)?),
            "ratio" => Metric::Ratio(x.as_f64().ok_or_else(bad)?),
            "count" => Metric::Count(x.as_i64().ok_or_else(bad)?),
            "string" => Metric::Str(x.as_str().ok_or_else(bad)?.to_string()),
            _ => return Err(bad()),
        })
    }

    /// Duration in microseconds, if this is one.
    pub fn microseconds(&self) -> Option<f64> {
        match self {
            Metric::Duration(us) => Some(*us),
            _ => None,
        }
    }
}

/// The metrics of one call (or one device, or the configuration), by name.
pub type Row = BTreeMap<String, Metric>;

/// TVM's `profiling::Report`: one row per call, a "Total" row per device, and the run's
/// configuration (executor, number of threads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub calls: Vec<Row>,
    pub device_metrics: BTreeMap<String, Row>,
    pub configuration: Row,
    /// Time the profiler itself took inside the device totals (recording calls, not running
    /// them); not part of TVM's report, kept for `tvmrt bench --profile`'s shares.
    pub overhead: Duration,
}

/// Sums metrics of one name as TVM's `AggregateMetric` does: durations, counts and percents
/// add up, ratios average, strings stay when they all agree (else become empty).
fn aggregate(values: &[&Metric]) -> Metric {
    match values[0] {
        Metric::Duration(_) => {
            Metric::Duration(values.iter().filter_map(|m| m.microseconds()).sum())
        }
        Metric::Count(_) => Metric::Count(
            values
                .iter()
                .map(|m| if let Metric::Count(n) = m { *n } else { 0 })
                .sum(),
        ),
        Metric::Percent(_) => Metric::Percent(
            values
                .iter()
                .map(|m| if let Metric::Percent(p) = m { *p } else { 0.0 })
                .sum(),
        ),
        Metric::Ratio(_) => Metric::Ratio(
            values
                .iter()
                .map(|m| if let Metric::Ratio(r) = m { *r } else { 0.0 })
                .sum::<f64>()
                / values.len() as f64,
        ),
        Metric::Str(s) => {
            if values.iter().all(|m| matches!(m, Metric::Str(t) if t == s)) {
                Metric::Str(s.clone())
            } else {
                Metric::Str(String::new())
            }
        }
    }
}

/// One kernel's share of a profiled run (or of several): what `tvmrt bench --profile` prints.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelStat {
    pub name: String,
    pub calls: u64,
    pub total: Duration,
    /// Of the whole profiled time (the devices' "Total").
    pub percent: f64,
}

impl KernelStat {
    /// Mean time per call.
    pub fn mean(&self) -> Duration {
        self.total / self.calls.max(1) as u32
    }
}

impl Report {
    /// The total profiled time: the longest device "Total".
    pub fn total(&self) -> Duration {
        let us = self
            .device_metrics
            .values()
            .filter_map(|r| r.get("Duration (us)").and_then(Metric::microseconds))
            .fold(0.0, f64::max);
        Duration::from_secs_f64(us / 1e6)
    }

    /// Calls summed per kernel name, in order of first call; `percent` of [`Report::total`].
    pub fn kernel_stats(&self) -> Vec<KernelStat> {
        let mut out: Vec<KernelStat> = Vec::new();
        let total = self.total().as_secs_f64();
        for call in &self.calls {
            let Some(Metric::Str(name)) = call.get("Name") else {
                continue;
            };
            let us = call
                .get("Duration (us)")
                .and_then(Metric::microseconds)
                .unwrap_or(0.0);
            let count = match call.get("Count") {
                Some(Metric::Count(n)) => (*n).max(0) as u64,
                _ => 1,
            };
            let d = Duration::from_secs_f64(us.max(0.0) / 1e6);
            match out.iter_mut().find(|k| &k.name == name) {
                Some(k) => {
                    k.calls += count;
                    k.total += d;
                }
                None => out.push(KernelStat {
                    name: name.clone(),
                    calls: count,
                    total: d,
                    percent: 0.0,
                }),
            }
        }
        for k in &mut out {
            k.percent = if total > 0.0 {
                k.total.as_secs_f64() / total * 100.0
            } else {
                0.0
            };
        }
        out
    }

    /// Adds `other`'s calls and device totals to this report (several profiled runs, one
    /// summary).
    pub fn merge(&mut self, other: Report) {
        self.calls.extend(other.calls);
        for (dev, row) in other.device_metrics {
            match self.device_metrics.get_mut(&dev) {
                Some(mine) => {
                    for (k, v) in row {
                        let next = match mine.get(&k) {
                            Some(prev @ (Metric::Duration(_) | Metric::Count(_))) => {
                                aggregate(&[prev, &v])
                            }
                            _ => v,
                        };
                        mine.insert(k, next);
                    }
                }
                None => {
                    self.device_metrics.insert(dev, row);
                }
            }
        }
        if self.configuration.is_empty() {
            self.configuration = other.configuration;
        }
        self.overhead += other.overhead;
    }

    /// [`Report::total`] less the profiler's own time: what the profiled runs took.
    pub fn total_without_overhead(&self) -> Duration {
        self.total().saturating_sub(self.overhead)
    }
}

/// Waits until the work queued on `dev`'s current stream has finished, so the clock read next
/// covers it (a device kernel has only been queued when its launcher returns; the CPU's sync
/// does nothing). The one place every profiler reads the clock through.
pub fn sync_device(dev: DLDevice) -> Result<()> {
    let api = crate::device::api_of(dev).map_err(|e| e.context("profiling"))?;
    let stream = api.current_stream(dev);
    api.stream_sync(dev, stream)
        .map_err(|e| e.context("profiling: synchronizing before reading the clock"))
}

/// TVM's device string: `cpu0`, `cuda1`.
pub fn device_string(dev: DLDevice) -> String {
    format!(
        "{}{}",
        crate::tensor::layout::device_type_name(dev.device_type.0),
        dev.device_id
    )
}

/// TVM's `ShapeString`: `float32[1, 4], int64[3]`.
pub fn shape_string<'a>(tensors: impl IntoIterator<Item = (DLDataType, &'a [i64])>) -> String {
    tensors
        .into_iter()
        .map(|(dt, shape)| {
            let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
            format!(
                "{}[{}]",
                crate::dtype::dtype_to_string(dt).unwrap_or_else(|_| "?".into()),
                dims.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Tensor arguments as recorded: formatted (TVM's `ShapeString`) only for the report.
pub type Shapes = Vec<(DLDataType, Vec<i64>)>;

#[cfg(test)]
mod tests;
