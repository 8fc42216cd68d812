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

fn row_to_json(row: &Row) -> Value {
    Value::Object(row.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
}

fn row_from_json(v: &Value, what: &str) -> Result<Row> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::value(format!("profiling report: `{what}` must be an object")))?;
    obj.iter()
        .map(|(k, x)| Ok((k.clone(), Metric::from_json(x, &format!("{what}.{k}"))?)))
        .collect()
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
    /// TVM's `AsJSON`.
    pub fn to_json(&self) -> String {
        let v = serde_json::json!({
            "calls": self.calls.iter().map(row_to_json).collect::<Vec<_>>(),
            "device_metrics": Value::Object(
                self.device_metrics
                    .iter()
                    .map(|(k, r)| (k.clone(), row_to_json(r)))
                    .collect()
            ),
            "configuration": row_to_json(&self.configuration),
        });
        v.to_string()
    }

    /// TVM's `Report::FromJSON`.
    pub fn from_json(text: &str) -> Result<Report> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::value(format!("profiling report: not JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| Error::value("profiling report: the top level must be an object"))?;
        let mut r = Report::default();
        if let Some(calls) = obj.get("calls") {
            let calls = calls
                .as_array()
                .ok_or_else(|| Error::value("profiling report: `calls` must be an array"))?;
            for (i, c) in calls.iter().enumerate() {
                r.calls.push(row_from_json(c, &format!("calls[{i}]"))?);
            }
        }
        if let Some(devs) = obj.get("device_metrics") {
            let devs = devs.as_object().ok_or_else(|| {
                Error::value("profiling report: `device_metrics` must be an object")
            })?;
            for (k, d) in devs {
                r.device_metrics
                    .insert(k.clone(), row_from_json(d, &format!("device_metrics.{k}"))?);
            }
        }
        if let Some(c) = obj.get("configuration") {
            r.configuration = row_from_json(c, "configuration")?;
        }
        Ok(r)
    }

    /// TVM's `AsCSV`: every call, one column per metric name (sorted), strings quoted.
    pub fn to_csv(&self) -> String {
        let headers: std::collections::BTreeSet<&String> =
            self.calls.iter().flat_map(|r| r.keys()).collect();
        let mut s = headers
            .iter()
            .map(|h| h.as_str())
            .collect::<Vec<_>>()
            .join(",");
        s.push('\n');
        for row in &self.calls {
            let cells: Vec<String> = headers
                .iter()
                .map(|h| match row.get(*h) {
                    Some(Metric::Str(t)) => format!("\"{t}\""),
                    Some(Metric::Duration(v) | Metric::Percent(v) | Metric::Ratio(v)) => {
                        v.to_string()
                    }
                    Some(Metric::Count(n)) => n.to_string(),
                    None => String::new(),
                })
                .collect();
            s.push_str(&cells.join(","));
            s.push('\n');
        }
        s
    }

    /// TVM's `AsTable(sort, aggregate, compute_col_sums)`: calls aggregated by kernel (its hash
    /// when it has one), argument shapes and device; sorted by duration; a "Sum" row; a "Total"
    /// row per device; then the configuration.
    pub fn to_table(&self, sort: bool, aggregate_calls: bool, col_sums: bool) -> String {
        let mut rows: Vec<Row> = if aggregate_calls {
            let mut order: Vec<String> = Vec::new();
            let mut groups: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
            for call in &self.calls {
                let text = |k: &str| match call.get(k) {
                    Some(Metric::Str(s)) => s.clone(),
                    _ => String::new(),
                };
                let mut key = match call.get("Hash") {
                    Some(Metric::Str(h)) => h.clone(),
                    _ => text("Name"),
                };
                key.push_str(&text("Argument Shapes"));
                key.push_str(&text("Device"));
                if !groups.contains_key(&key) {
                    order.push(key.clone());
                }
                groups.entry(key).or_default().push(call);
            }
            order
                .iter()
                .map(|k| {
                    let members = &groups[k];
                    let names: std::collections::BTreeSet<&String> =
                        members.iter().flat_map(|r| r.keys()).collect();
                    names
                        .into_iter()
                        .map(|name| {
                            let values: Vec<&Metric> =
                                members.iter().filter_map(|r| r.get(name)).collect();
                            (name.clone(), aggregate(&values))
                        })
                        .collect()
                })
                .collect()
        } else {
            self.calls.clone()
        };
        let duration = |r: &Row| r.get("Duration (us)").and_then(Metric::microseconds);
        if sort {
            rows.sort_by(|a, b| {
                duration(b)
                    .unwrap_or(0.0)
                    .partial_cmp(&duration(a).unwrap_or(0.0))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        }
        if col_sums {
            let mut sums = Row::new();
            for row in &rows {
                for (k, v) in row {
                    let next = match (sums.get(k), v) {
                        (_, Metric::Ratio(_) | Metric::Str(_)) => continue,
                        (Some(prev), v) => aggregate(&[prev, v]),
                        (None, v) => v.clone(),
                    };
                    sums.insert(k.clone(), next);
                }
            }
            sums.insert("Name".into(), Metric::Str("Sum".into()));
            let mut sep = Row::new();
            sep.insert("Name".into(), Metric::Str("----------".into()));
            rows.push(sep);
            rows.push(sums);
        }
        for metrics in self.device_metrics.values() {
            let mut total = metrics.clone();
            total.insert("Name".into(), Metric::Str("Total".into()));
            rows.push(total);
        }
        let mut headers: Vec<String> = [
            "Name",
            "Duration (us)",
            "Percent",
            "Device",
            "Count",
            "Argument Shapes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let extra: std::collections::BTreeSet<&String> = rows
            .iter()
            .flat_map(|r| r.keys())
            .filter(|k| !headers.contains(k))
            .collect();
        let extra: Vec<String> = extra.into_iter().cloned().collect();
        headers.extend(extra);
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                headers
                    .iter()
                    .map(|h| r.get(h).map(Metric::printed).unwrap_or_default())
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = headers
            .iter()
            .enumerate()
            .map(|(i, h)| cells.iter().map(|r| r[i].len()).fold(h.len(), usize::max))
            .collect();
        let mut s = String::new();
        for line in std::iter::once(&headers).chain(cells.iter()) {
            for (i, cell) in line.iter().enumerate() {
                if i == 0 {
                    let _ = write!(s, "{cell:<w$}  ", w = widths[i]);
                } else {
                    let _ = write!(s, "{cell:>w$}  ", w = widths[i]);
                }
            }
            s.push('\n');
        }
        s.push_str("\nConfiguration\n-------------\n");
        for (k, v) in &self.configuration {
            let _ = writeln!(s, "{k}: {}", v.printed());
        }
        s
    }

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

struct Frame {
    name: String,
    device: DLDevice,
    extra: Row,
    shapes: Option<Shapes>,
    start: Instant,
}

/// Records calls between [`Profiler::start`] and [`Profiler::stop`] (TVM's
/// `profiling::Profiler`, with the wall clock as its timer).
pub struct Profiler {
    devices: Vec<DLDevice>,
    configuration: Row,
    running: bool,
    in_flight: Vec<Frame>,
    calls: Vec<(Frame, Duration)>,
    overhead: Duration,
}

impl Profiler {
    /// A profiler of calls on `devices`; `configuration` adds to the number of threads.
    pub fn new(devices: Vec<DLDevice>, configuration: Row) -> Profiler {
        let mut configuration = configuration;
        configuration.insert(
            "Number of threads".into(),
            Metric::Count(crate::backend::thread_pool::num_threads() as i64),
        );
        Profiler {
            devices,
            configuration,
            running: false,
            in_flight: Vec::new(),
            calls: Vec::new(),
            overhead: Duration::ZERO,
        }
    }

    /// Adds time the caller spent recording a call (outside its timer) to the overhead the
    /// report keeps apart.
    pub fn add_overhead(&mut self, d: Duration) {
        self.overhead += d;
    }

    /// Whether calls are being recorded.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Starts the whole-run timer of every device.
    pub fn start(&mut self) -> Result<()> {
        self.running = true;
        for d in self.devices.clone() {
            self.start_call("Total", d, Row::new())?;
        }
        Ok(())
    }

    /// Starts timing a call of `name` on `device` with extra metrics (argument shapes, hash).
    pub fn start_call(&mut self, name: &str, device: DLDevice, extra: Row) -> Result<()> {
        self.start_call_with_shapes(name, device, extra, None)
    }

    /// [`Profiler::start_call`] with the tensor arguments' types and shapes, formatted as the
    /// "Argument Shapes" metric only when the report is made.
    pub fn start_call_with_shapes(
        &mut self,
        name: &str,
        device: DLDevice,
        extra: Row,
        shapes: Option<Shapes>,
    ) -> Result<()> {
        sync_device(device)?;
        self.in_flight.push(Frame {
            name: name.to_string(),
            device,
            extra,
            shapes,
            start: Instant::now(),
        });
        Ok(())
    }

    /// Stops the innermost call's timer; returns the time it recorded.
    pub fn stop_call(&mut self) -> Result<Duration> {
        let frame = self
            .in_flight
            .pop()
            .ok_or_else(|| Error::runtime("profiling: stop_call without a call in flight"))?;
        sync_device(frame.device)?;
        let elapsed = frame.start.elapsed();
        self.calls.push((frame, elapsed));
        Ok(elapsed)
    }

    /// Stops the whole-run timers.
    pub fn stop(&mut self) -> Result<()> {
        self.running = false;
        for _ in 0..self.devices.len() {
            self.stop_call()?;
        }
        Ok(())
    }

    /// The report (TVM's `Profiler::Report`): a row per call with its share of the longest
    /// device total.
    pub fn report(&self) -> Report {
        let mut report = Report {
            configuration: self.configuration.clone(),
            overhead: self.overhead,
            ..Report::default()
        };
        let mut overall_us = 0.0f64;
        let n_dev = self.devices.len().min(self.calls.len());
        let (calls, totals) = self.calls.split_at(self.calls.len() - n_dev);
        for (frame, d) in totals {
            let us = d.as_secs_f64() * 1e6;
            overall_us = overall_us.max(us);
            let mut row = Row::new();
            row.insert("Duration (us)".into(), Metric::Duration(us));
            row.insert("Count".into(), Metric::Count(1));
            row.insert("Name".into(), Metric::Str(frame.name.clone()));
            let dev = device_string(frame.device);
            row.insert("Device".into(), Metric::Str(dev.clone()));
            report.device_metrics.insert(dev, row);
        }
        for (frame, d) in calls {
            let us = d.as_secs_f64() * 1e6;
            let mut row = frame.extra.clone();
            if let Some(shapes) = &frame.shapes {
                let text = shape_string(shapes.iter().map(|(t, s)| (*t, s.as_slice())));
                row.insert("Argument Shapes".into(), Metric::Str(text));
            }
            row.insert("Duration (us)".into(), Metric::Duration(us));
            row.insert("Count".into(), Metric::Count(1));
            row.insert("Name".into(), Metric::Str(frame.name.clone()));
            row.insert("Device".into(), Metric::Str(device_string(frame.device)));
            let pct = if overall_us > 0.0 {
                us / overall_us * 100.0
            } else {
                0.0
            };
            row.insert("Percent".into(), Metric::Percent(pct));
            report.calls.push(row);
        }
        report
    }
}

/// The settings of TVM's time evaluator (`WrapTimeEvaluator`, the arguments of
/// `run_individual`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Calls per measurement (grown to reach `min_repeat_ms`).
    pub number: usize,
    /// Measurements.
    pub repeat: usize,
    /// The least a measurement lasts, in milliseconds (0: `number` calls).
    pub min_repeat_ms: u64,
    /// Measurements of zero time after which `number` stops growing.
    pub limit_zero_time_iterations: usize,
    /// A sleep after every `repeats_to_cooldown` measurements, in milliseconds.
    pub cooldown_interval_ms: u64,
    pub repeats_to_cooldown: usize,
}

impl Timing {
    /// TVM's time evaluator: one untimed call, then `repeat` measurements, each the mean
    /// seconds per call over `number` calls, where `number` grows (by the golden ratio, or to
    /// what `min_repeat_ms` needs) until a measurement lasts `min_repeat_ms`, giving up after
    /// `limit_zero_time_iterations` measurements of zero time; a sleep of
    /// `cooldown_interval_ms` after every `repeats_to_cooldown` measurements.
    pub fn measure(&self, device: DLDevice, mut f: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
        if self.number == 0 || self.repeat == 0 || self.repeats_to_cooldown == 0 {
            return Err(Error::value(format!(
                "time evaluator: number ({}), repeat ({}) and repeats_to_cooldown ({}) must be \
                 positive",
                self.number, self.repeat, self.repeats_to_cooldown
            )));
        }
        let mut number = self.number;
        f()?;
        sync_device(device)?;
        let mut out = Vec::with_capacity(self.repeat);
        for i in 0..self.repeat {
            let mut duration_ms = 0.0f64;
            let mut zero_times = 0;
            loop {
                if duration_ms > 0.0 {
                    let per_call = duration_ms / number as f64;
                    let want =
                        (self.min_repeat_ms as f64 / per_call + 1.0).max(number as f64 * 1.618);
                    number = (want as usize).max(1);
                }
                sync_device(device)?;
                let start = Instant::now();
                for _ in 0..number {
                    f()?;
                }
                sync_device(device)?;
                let nanos = start.elapsed().as_nanos();
                if nanos == 0 {
                    zero_times += 1;
                }
                duration_ms = nanos as f64 / 1e6;
                if duration_ms >= self.min_repeat_ms as f64
                    || zero_times >= self.limit_zero_time_iterations
                {
                    break;
                }
            }
            out.push(duration_ms / 1e3 / number as f64);
            if self.cooldown_interval_ms > 0 && i % self.repeats_to_cooldown == 0 {
                std::thread::sleep(Duration::from_millis(self.cooldown_interval_ms));
            }
        }
        Ok(out)
    }
}

/// A report as an object (TVM's `runtime.profiling.Report`), for the debug graph executor's
/// `profile` and the `runtime.profiling.*` globals.
pub struct ReportObj(pub Report);

// SAFETY: no public cell: the report is only read through tvmrt's functions; it takes the
// generic object index as the type is private to tvmrt.
unsafe impl ObjectPayload for ReportObj {
    const TYPE_INDEX: i32 = type_index::OBJECT;
}

/// A report object.
pub fn new_report(report: Report) -> ObjectRef {
    new_object(ReportObj(report))
}

/// The report inside an argument, or a `TypeError` naming `what`.
pub fn report_arg(v: &AnyView<'_>, what: &str) -> Result<ObjectRef> {
    let obj = v
        .as_object()
        .filter(|o| o.downcast_ref::<ReportObj>().is_some())
        .ok_or_else(|| v.type_mismatch(what, "runtime.profiling.Report"))?;
    Ok(obj)
}

fn with_report<T>(args: &[AnyView<'_>], f: impl FnOnce(&Report) -> T) -> Result<T> {
    let v = args
        .first()
        .ok_or_else(|| Error::type_error("expected a runtime.profiling.Report argument"))?;
    let obj = report_arg(v, "report")?;
    let r = obj
        .downcast_ref::<ReportObj>()
        .expect("checked by report_arg");
    Ok(f(&r.0))
}

fn flag(args: &[AnyView<'_>], i: usize, default: bool) -> Result<bool> {
    match args.get(i) {
        None => Ok(default),
        Some(v) => v
            .as_bool()
            .or_else(|| v.as_i64().map(|n| n != 0))
            .ok_or_else(|| v.type_mismatch("flag", "bool")),
    }
}

/// `runtime.profiling.AsTable(report, sort, aggregate, col_sums)`, `AsCSV`, `AsJSON`,
/// `FromJSON`, as TVM registers them.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "runtime.profiling.AsTable",
            Function::from_fn(|args| {
                let (sort, agg, sums) = (
                    flag(args, 1, true)?,
                    flag(args, 2, true)?,
                    flag(args, 3, true)?,
                );
                Ok(Any::from(with_report(args, |r| {
                    r.to_table(sort, agg, sums)
                })?))
            }),
        ),
        (
            "runtime.profiling.AsCSV",
            Function::from_fn(|args| Ok(Any::from(with_report(args, Report::to_csv)?))),
        ),
        (
            "runtime.profiling.AsJSON",
            Function::from_fn(|args| Ok(Any::from(with_report(args, Report::to_json)?))),
        ),
        (
            "runtime.profiling.FromJSON",
            Function::from_fn(|args| {
                let text = args
                    .first()
                    .ok_or_else(|| Error::type_error("FromJSON expects the report's JSON"))?
                    .expect_str("json")?;
                Ok(Any::from_object(new_report(Report::from_json(text)?)))
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
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
}
