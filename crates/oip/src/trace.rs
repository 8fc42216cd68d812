//! Triton's trace extension: sampled inference requests traced to a JSON file Triton's
//! `trace_summary.py` reads. `--trace-config` sets the file, level, rate, count and log
//! frequency at start; `GET/POST /v2[/models/M]/trace/setting` and gRPC `TraceSetting` read and
//! change them while the server runs, globally or per model (a model's settings fall back to
//! the global ones field by field). A sampled request gets a [`Trace`]: the front ends and the
//! model's queue stamp it (`HTTP_RECV_START` ... `COMPUTE_*` ... `HTTP_SEND_END`; with the
//! `TENSORS` level its input and output tensors too), and when the request is done its entries
//! go to the file. With `log_frequency` 0 each trace is appended at once, the file a valid
//! JSON array at every moment (Triton writes it at shutdown); with N, every N traces go to
//! `FILE.0`, `FILE.1`, ...

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tvmrt_models::request::now_ns;
use tvmrt_models::types::DataType;

use crate::codec::JsonData;

/// What a trace records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Level {
    /// `TIMESTAMPS`.
    pub timestamps: bool,
    /// `TENSORS`.
    pub tensors: bool,
}

impl Level {
    fn off(self) -> bool {
        !self.timestamps && !self.tensors
    }

    fn names(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.timestamps {
            out.push("TIMESTAMPS");
        }
        if self.tensors {
            out.push("TENSORS");
        }
        if out.is_empty() {
            out.push("OFF");
        }
        out
    }

    /// The level of Triton's names (`OFF` alone, or any of `TIMESTAMPS`, `TENSORS`).
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Level, String> {
        let names: Vec<&str> = names.into_iter().collect();
        let mut level = Level::default();
        for &name in &names {
            match name {
                "OFF" if names.len() == 1 => {}
                "OFF" => return Err("trace_level OFF must be given alone".into()),
                "TIMESTAMPS" => level.timestamps = true,
                "TENSORS" => level.tensors = true,
                other => {
                    return Err(format!(
                        "unknown trace level '{other}' (OFF, TIMESTAMPS or TENSORS)"
                    ))
                }
            }
        }
        Ok(level)
    }
}

/// Settings given for a scope (the server, or one model); `None`: not given there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Given {
    /// `trace_level` / `level`.
    pub level: Option<Level>,
    /// `trace_rate` / `rate`: one request of every `rate` is traced.
    pub rate: Option<u32>,
    /// `trace_count` / `count`: traces left to take (-1: no end).
    pub count: Option<i32>,
    /// `log_frequency` / `log-frequency`: traces per indexed file (0: one file).
    pub log_frequency: Option<u32>,
}

impl Given {
    fn is_empty(&self) -> bool {
        *self == Given::default()
    }

    /// `self`, with `fallback`'s value where a setting is not given.
    fn over(&self, fallback: &Given) -> Given {
        Given {
            level: self.level.or(fallback.level),
            rate: self.rate.or(fallback.rate),
            count: self.count.or(fallback.count),
            log_frequency: self.log_frequency.or(fallback.log_frequency),
        }
    }

    /// Sets `key` (a setting's name, `--trace-config`'s or the protocol's) from `value`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let number = |what: &str| format!("{what} must be a non-negative integer, not '{value}'");
        match key {
            "level" | "trace_level" => {
                let mut names: Vec<&str> = self
                    .level
                    .filter(|l| !l.off() && key == "level")
                    .map(|l| l.names())
                    .unwrap_or_default();
                names.push(value);
                self.level = Some(Level::parse(names)?);
            }
            "rate" | "trace_rate" => {
                self.rate = Some(value.parse().map_err(|_| number("trace_rate"))?)
            }
            "count" | "trace_count" => {
                let count: i32 = value
                    .parse()
                    .ok()
                    .filter(|&c| c >= -1)
                    .ok_or_else(|| format!("trace_count must be -1 or more, not '{value}'"))?;
                self.count = Some(count);
            }
            "log-frequency" | "log_frequency" => {
                self.log_frequency = Some(value.parse().map_err(|_| number("log_frequency"))?)
            }
            other => return Err(format!("unknown trace setting '{other}'")),
        }
        Ok(())
    }
}

/// Triton's defaults: off, one request in 1000, no end, one file.
fn defaults() -> Given {
    Given {
        level: Some(Level::default()),
        rate: Some(1000),
        count: Some(-1),
        log_frequency: Some(0),
    }
}

/// The trace file and its indexed siblings.
struct TraceFile {
    path: PathBuf,
    started: Mutex<bool>,
    index: AtomicU32,
}

impl TraceFile {
    /// Appends entries (`{...},{...}`) to the file's array, keeping it valid JSON (the
    /// server's first write, or one after the file was removed, starts a new array).
    fn append(&self, entries: &str) -> std::io::Result<()> {
        let mut started = self.started.lock();
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(!*started)
            .open(&self.path)?;
        if file.metadata()?.len() > 0 {
            file.seek(SeekFrom::End(-1))?;
            file.write_all(format!(",{entries}]").as_bytes())?;
        } else {
            file.write_all(format!("[{entries}]").as_bytes())?;
        }
        *started = true;
        Ok(())
    }

    /// Writes entries as the next indexed file, `FILE.N`.
    fn write_indexed(&self, entries: &str) -> std::io::Result<()> {
        let n = self.index.fetch_add(1, Ordering::Relaxed);
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        std::fs::write(name, format!("[{entries}]"))
    }
}

/// The settings one scope runs on, and its sampling state.
struct Scope {
    level: Level,
    rate: u32,
    log_frequency: u32,
    file: Option<Arc<TraceFile>>,
    state: Mutex<Sampling>,
}

#[derive(Default)]
struct Sampling {
    /// Requests seen.
    seen: u64,
    /// Traces left (-1: no end).
    count: i32,
    /// Traces collected for the next indexed file, and how many.
    pending: String,
    pending_traces: u32,
}

impl Scope {
    fn new(given: &Given, file: Option<Arc<TraceFile>>) -> Scope {
        let all = given.over(&defaults());
        Scope {
            level: all.level.unwrap_or_default(),
            rate: all.rate.unwrap_or(1000),
            log_frequency: all.log_frequency.unwrap_or(0),
            file,
            state: Mutex::new(Sampling {
                count: all.count.unwrap_or(-1),
                ..Sampling::default()
            }),
        }
    }

    /// Why tracing cannot run on these settings, unless it is off.
    fn invalid(&self) -> Option<&'static str> {
        if self.level.off() {
            None
        } else if self.rate == 0 {
            Some("the trace rate must be non-zero")
        } else if self.file.is_none() {
            Some("no trace file is given (start the server with --trace-config triton,file=PATH)")
        } else {
            None
        }
    }

    /// Whether the next request is traced (every `rate`-th, while the count lasts).
    fn sample(&self) -> bool {
        if self.level.off() || self.rate == 0 || self.file.is_none() {
            return false;
        }
        let mut s = self.state.lock();
        if s.count == 0 {
            return false;
        }
        s.seen += 1;
        if !s.seen.is_multiple_of(u64::from(self.rate)) {
            return false;
        }
        if s.count > 0 {
            s.count -= 1;
        }
        true
    }

    /// Takes a finished trace's entries to the file.
    fn collect(&self, entries: String) {
        let Some(file) = &self.file else { return };
        let written = if self.log_frequency == 0 {
            file.append(&entries)
        } else {
            let mut s = self.state.lock();
            if !s.pending.is_empty() {
                s.pending.push(',');
            }
            s.pending.push_str(&entries);
            s.pending_traces += 1;
            if s.pending_traces < self.log_frequency {
                return;
            }
            s.pending_traces = 0;
            let full = std::mem::take(&mut s.pending);
            drop(s);
            file.write_indexed(&full)
        };
        if let Err(e) = written {
            crate::log_error!("cannot write the trace file: {e}");
        }
    }

    /// Writes the traces collected for an indexed file that is not full yet.
    fn flush(&self) {
        let pending = {
            let mut s = self.state.lock();
            s.pending_traces = 0;
            std::mem::take(&mut s.pending)
        };
        if let (false, Some(file)) = (pending.is_empty(), &self.file) {
            if let Err(e) = file.write_indexed(&pending) {
                crate::log_error!("cannot write the trace file: {e}");
            }
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        self.flush();
    }
}

struct Scopes {
    global_given: Given,
    global: Arc<Scope>,
    models: HashMap<String, (Given, Arc<Scope>)>,
}

/// The server's tracing: its settings and the file.
pub struct Tracer {
    file: Option<Arc<TraceFile>>,
    scopes: Mutex<Scopes>,
    /// Set while any scope's level is not `OFF` (requests skip the lock otherwise).
    on: AtomicBool,
    next_id: AtomicU64,
}

impl Tracer {
    /// The tracer of `--trace-config` settings: the file (`None`: tracing cannot be turned on)
    /// and the global settings.
    pub fn new(file: Option<PathBuf>, given: Given) -> Result<Tracer, String> {
        let file = file.map(|path| {
            Arc::new(TraceFile {
                path,
                started: Mutex::new(false),
                index: AtomicU32::new(0),
            })
        });
        let global = Arc::new(Scope::new(&given, file.clone()));
        if let Some(why) = global.invalid() {
            return Err(why.into());
        }
        let tracer = Tracer {
            file,
            on: AtomicBool::new(!global.level.off()),
            scopes: Mutex::new(Scopes {
                global_given: given,
                global,
                models: HashMap::new(),
            }),
            next_id: AtomicU64::new(1),
        };
        Ok(tracer)
    }

    /// The settings in force for `model` (or the server's), as `/trace/setting` answers them.
    pub fn settings_json(&self, model: Option<&str>) -> Value {
        let scopes = self.scopes.lock();
        let scope = model
            .and_then(|m| scopes.models.get(m))
            .map_or(&scopes.global, |(_, s)| s);
        let file = self.file.as_ref();
        json!({
            "trace_level": scope.level.names(),
            "trace_rate": scope.rate.to_string(),
            "trace_count": scope.state.lock().count.to_string(),
            "log_frequency": scope.log_frequency.to_string(),
            "trace_file": file.map(|f| f.path.display().to_string()).unwrap_or_default(),
            "trace_mode": "triton",
        })
    }

    /// Applies a `/trace/setting` update to `model` (or the server): each setting named
    /// changes, `null` takes a model's back to the global one, an empty update takes every one
    /// back. The scope starts afresh (its count and sampling); nothing changes if any setting
    /// is refused.
    pub fn update(&self, model: Option<&str>, request: &Map<String, Value>) -> Result<(), String> {
        let mut scopes = self.scopes.lock();
        let mut given = match model {
            None => scopes.global_given.clone(),
            Some(m) => scopes
                .models
                .get(m)
                .map(|(g, _)| g.clone())
                .unwrap_or_default(),
        };
        for (key, value) in request {
            if key == "trace_file" {
                return Err(
                    "the trace file cannot be changed through the network protocol; \
                            start the server with --trace-config triton,file=PATH"
                        .into(),
                );
            }
            if key == "trace_mode" && value.as_str() == Some("triton") {
                continue;
            }
            let text = |v: &Value| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                other => Err(format!("{key} must be a string, not {other}")),
            };
            match (key.as_str(), value) {
                ("trace_level" | "trace_rate" | "trace_count" | "log_frequency", Value::Null) => {
                    clear(&mut given, key)
                }
                ("trace_level", Value::Array(names)) => {
                    let names: Vec<String> = names.iter().map(text).collect::<Result<_, _>>()?;
                    given.level = Some(Level::parse(names.iter().map(String::as_str))?);
                }
                ("trace_level", other) => {
                    return Err(format!(
                        "trace_level must be an array of strings, not {other}"
                    ))
                }
                ("trace_rate" | "trace_count" | "log_frequency", v) => given.set(key, &text(v)?)?,
                (other, _) => return Err(format!("unknown trace setting '{other}'")),
            }
        }
        let fallback = scopes.global_given.clone();
        let scope = match model {
            None => Scope::new(&given, self.file.clone()),
            Some(_) => Scope::new(&given.over(&fallback), self.file.clone()),
        };
        if let Some(why) = scope.invalid() {
            return Err(format!("invalid trace setting: {why}"));
        }
        match model {
            None => {
                // Models whose settings fall back to these start afresh on them.
                for (g, s) in scopes.models.values_mut() {
                    *s = Arc::new(Scope::new(&g.over(&given), self.file.clone()));
                }
                scopes.global = Arc::new(scope);
                scopes.global_given = given;
            }
            Some(m) if given.is_empty() || request.is_empty() => {
                scopes.models.remove(m);
            }
            Some(m) => {
                scopes
                    .models
                    .insert(m.to_string(), (given, Arc::new(scope)));
            }
        }
        let on = !scopes.global.level.off() || scopes.models.values().any(|(_, s)| !s.level.off());
        self.on.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// A trace for a request to `model`, if it is sampled.
    pub fn start(&self, model: &str) -> Option<Arc<Trace>> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let scope = {
            let scopes = self.scopes.lock();
            scopes
                .models
                .get(model)
                .map_or(&scopes.global, |(_, s)| s)
                .clone()
        };
        if !scope.sample() {
            return None;
        }
        Some(Arc::new(Trace {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            model: model.to_string(),
            version: Mutex::new(String::new()),
            level: scope.level,
            entries: Mutex::new(Vec::new()),
            stamps: Mutex::new(Vec::new()),
            scope,
        }))
    }

    /// Writes what every scope holds for an indexed file (at shutdown).
    pub fn flush(&self) {
        let scopes = self.scopes.lock();
        scopes.global.flush();
        for (_, s) in scopes.models.values() {
            s.flush();
        }
    }
}

/// Takes setting `key` out of `given` (back to the fallback's).
fn clear(given: &mut Given, key: &str) {
    match key {
        "trace_level" => given.level = None,
        "trace_rate" => given.rate = None,
        "trace_count" => given.count = None,
        _ => given.log_frequency = None,
    }
}

/// One sampled request's trace; written when the last holder drops it.
pub struct Trace {
    id: u64,
    model: String,
    version: Mutex<String>,
    level: Level,
    stamps: Mutex<Vec<(&'static str, u64)>>,
    entries: Mutex<Vec<Value>>,
    scope: Arc<Scope>,
}

/// Records timestamp `name` now on `trace`, if the request is traced.
pub fn stamp(trace: Option<&Arc<Trace>>, name: &'static str) {
    if let Some(t) = trace {
        t.stamp(name);
    }
}

impl Trace {
    /// Records timestamp `name` now.
    pub fn stamp(&self, name: &'static str) {
        self.stamp_at(name, now_ns());
    }

    /// Records timestamp `name` at `ns` ([`now_ns`]'s clock, as Triton's).
    pub fn stamp_at(&self, name: &'static str, ns: u64) {
        if self.level.timestamps {
            self.stamps.lock().push((name, ns));
        }
    }

    /// The model version that serves the request.
    pub fn set_version(&self, version: &str) {
        *self.version.lock() = version.to_string();
    }

    /// Whether tensors are traced.
    pub fn tensors(&self) -> bool {
        self.level.tensors
    }

    /// Records a tensor (`activity`: `TENSOR_QUEUE_INPUT` or `TENSOR_BACKEND_OUTPUT`), its
    /// elements written as Triton writes them (comma-separated, booleans as 0 and 1).
    pub fn tensor(
        &self,
        activity: &'static str,
        name: &str,
        dtype: DataType,
        shape: &[i64],
        bytes: &[u8],
    ) {
        if !self.level.tensors {
            return;
        }
        let data = match dtype {
            DataType::Bool => bytes
                .iter()
                .map(|&b| if b != 0 { "1" } else { "0" })
                .collect::<Vec<_>>()
                .join(","),
            _ => {
                let list = serde_json::to_string(&JsonData { dtype, bytes }).unwrap_or_default();
                list.trim_start_matches('[')
                    .trim_end_matches(']')
                    .replace("null", "nan")
            }
        };
        let shape: Vec<String> = shape.iter().map(i64::to_string).collect();
        self.entries.lock().push(json!({
            "id": self.id,
            "activity": activity,
            "tensor": {"name": name, "data": data, "shape": shape.join(","), "dtype": dtype.name()},
        }));
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        let version = self.version.lock().parse::<i64>().unwrap_or(-1);
        let mut out =
            vec![json!({"id": self.id, "model_name": self.model, "model_version": version})];
        let mut stamps = std::mem::take(&mut *self.stamps.lock());
        // In the order they happened (the front end and the model's thread stamp apart).
        stamps.sort_by_key(|&(_, ns)| ns);
        if !stamps.is_empty() {
            let stamps: Vec<Value> = stamps
                .into_iter()
                .map(|(name, ns)| json!({"name": name, "ns": ns}))
                .collect();
            out.push(json!({"id": self.id, "timestamps": stamps}));
        }
        out.append(&mut self.entries.lock());
        let text: Vec<String> = out.iter().map(Value::to_string).collect();
        self.scope.collect(text.join(","));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracer(dir: &std::path::Path, settings: &[(&str, &str)]) -> Tracer {
        let mut given = Given::default();
        for (k, v) in settings {
            given.set(k, v).unwrap();
        }
        Tracer::new(Some(dir.join("trace.json")), given).unwrap()
    }

    fn read(path: &std::path::Path) -> Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn every_rate_th_request_is_traced_while_the_count_lasts() {
        let dir = tempdir("rate");
        let t = tracer(
            &dir,
            &[("level", "TIMESTAMPS"), ("rate", "3"), ("count", "2")],
        );
        let sampled: Vec<bool> = (0..10).map(|_| t.start("m").is_some()).collect();
        let expect = [
            false, false, true, false, false, true, false, false, false, false,
        ];
        assert_eq!(sampled, expect);
        assert_eq!(t.settings_json(None)["trace_count"], "0");
        // Two traces, each its header alone (nothing was stamped).
        let file = read(&dir.join("trace.json"));
        assert_eq!(file.as_array().unwrap().len(), 2, "{file}");
    }

    #[test]
    fn a_trace_is_written_when_its_last_holder_drops_it() {
        let dir = tempdir("write");
        let t = tracer(
            &dir,
            &[("level", "TIMESTAMPS"), ("level", "TENSORS"), ("rate", "1")],
        );
        let trace = t.start("m").unwrap();
        trace.set_version("2");
        trace.stamp_at("REQUEST_START", 10);
        trace.stamp_at("REQUEST_END", 30);
        let bytes: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        trace.tensor("TENSOR_QUEUE_INPUT", "x", DataType::Fp32, &[1, 2], &bytes);
        trace.tensor("TENSOR_BACKEND_OUTPUT", "b", DataType::Bool, &[2], &[1, 0]);
        let holder = trace.clone();
        drop(trace);
        assert!(!dir.join("trace.json").exists());
        drop(holder);
        let id = 1;
        assert_eq!(
            read(&dir.join("trace.json")),
            json!([
                {"id": id, "model_name": "m", "model_version": 2},
                {"id": id, "timestamps": [{"name": "REQUEST_START", "ns": 10}, {"name": "REQUEST_END", "ns": 30}]},
                {"id": id, "activity": "TENSOR_QUEUE_INPUT", "tensor": {"name": "x", "data": "1.5,-2.0", "shape": "1,2", "dtype": "FP32"}},
                {"id": id, "activity": "TENSOR_BACKEND_OUTPUT", "tensor": {"name": "b", "data": "1,0", "shape": "2", "dtype": "BOOL"}},
            ])
        );
        // The next trace appended to the same array; one after the file was removed starts
        // a new one.
        drop(t.start("m"));
        assert_eq!(read(&dir.join("trace.json")).as_array().unwrap().len(), 5);
        std::fs::remove_file(dir.join("trace.json")).unwrap();
        drop(t.start("m"));
        assert_eq!(read(&dir.join("trace.json")).as_array().unwrap().len(), 1);
    }

    #[test]
    fn log_frequency_writes_indexed_files() {
        let dir = tempdir("frequency");
        let t = tracer(
            &dir,
            &[
                ("level", "TIMESTAMPS"),
                ("rate", "1"),
                ("log-frequency", "2"),
            ],
        );
        for _ in 0..5 {
            drop(t.start("m"));
        }
        assert_eq!(read(&dir.join("trace.json.0")).as_array().unwrap().len(), 2);
        assert_eq!(read(&dir.join("trace.json.1")).as_array().unwrap().len(), 2);
        assert!(!dir.join("trace.json.2").exists());
        t.flush();
        assert_eq!(read(&dir.join("trace.json.2")).as_array().unwrap().len(), 1);
    }

    #[test]
    fn model_settings_fall_back_to_the_global_ones() {
        let dir = tempdir("models");
        let t = tracer(&dir, &[]);
        assert!(t.start("m").is_none());
        let set = |m: Option<&str>, v: Value| t.update(m, v.as_object().unwrap());
        set(
            Some("m"),
            json!({"trace_level": ["TIMESTAMPS"], "trace_rate": "1"}),
        )
        .unwrap();
        assert!(t.start("m").is_some());
        assert!(t.start("other").is_none());
        assert_eq!(t.settings_json(Some("m"))["trace_count"], "-1");
        set(None, json!({"trace_count": "1"})).unwrap();
        assert_eq!(t.settings_json(Some("m"))["trace_count"], "1");
        assert!(t.start("m").is_some() && t.start("m").is_none());
        set(Some("m"), json!({"trace_level": null})).unwrap();
        assert_eq!(t.settings_json(Some("m"))["trace_level"], json!(["OFF"]));
        set(Some("m"), json!({})).unwrap();
        assert_eq!(t.settings_json(Some("m"))["trace_rate"], "1000");
        let before = t.settings_json(None);
        let bad = |v: Value| set(None, v).unwrap_err();
        assert!(bad(json!({"trace_file": "/x"})).contains("--trace-config"));
        assert!(
            bad(json!({"trace_level": ["TIMESTAMPS"], "trace_rate": "0"})).contains("non-zero")
        );
        assert!(bad(json!({"trace_level": ["OFF", "TENSORS"]})).contains("alone"));
        assert!(bad(json!({"trace_level": ["LOUD"]})).contains("'LOUD'"));
        assert!(bad(json!({"trace_count": "-2"})).contains("-1 or more"));
        assert!(bad(json!({"trace_rate": "x"})).contains("'x'"));
        assert!(bad(json!({"trace_speed": "1"})).contains("'trace_speed'"));
        assert_eq!(t.settings_json(None), before);
        let no_file = Tracer::new(None, Given::default()).unwrap();
        let e = no_file
            .update(
                None,
                json!({"trace_level": ["TIMESTAMPS"]}).as_object().unwrap(),
            )
            .unwrap_err();
        assert!(e.contains("no trace file"), "{e}");
    }

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tvmrt-trace-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
