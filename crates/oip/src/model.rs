//! A model being served: loaded from its version directory by `tvmrt_models::load` (the
//! Triton backend's steps: open, complete the configuration, check it), its instances started
//! on a `tvmrt_models` batcher, and requests checked against its configuration as Triton's core checks
//! them before they are queued (names, dtypes, shapes, batch size, `reshape`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tvmrt_models::batcher::{Batcher, BatcherConfig, ModelSpec, Refused};
use tvmrt_models::load::{self, Loaded};
use tvmrt_models::request::Run;
use tvmrt_models::stats::ModelStats;
use tvmrt_models::types::DataType;

use crate::error::ApiError;
use crate::infer::InferRequest;
use crate::job::{Answer, Job};

/// An input as the configuration lists it.
#[derive(Clone, Debug)]
pub struct ListedInput {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub datatype: DataType,
    /// Its dims without the batch dimension (-1: any size).
    pub dims: Vec<i64>,
    /// `reshape`: the shape the model takes instead of `dims`.
    pub reshape: Option<Vec<i64>>,
    /// `optional: true`.
    pub optional: bool,
}

/// A loaded model version, ready for requests.
pub struct ServedModel {
    /// Its name.
    pub name: String,
    /// Its version (the version directory's name).
    pub version: String,
    /// Its completed configuration, as `/config` returns it.
    pub config: Value,
    /// The inputs its configuration lists.
    pub inputs: Vec<ListedInput>,
    /// Its outputs as the configuration lists them: name, type, dims.
    pub outputs: Vec<(String, DataType, Vec<i64>)>,
    /// `max_batch_size`.
    pub max_batch_size: u64,
    batcher: Batcher<Job>,
}

/// Server-wide limits a model takes when its configuration sets none.
#[derive(Clone, Debug)]
pub struct Defaults {
    /// Requests waiting per model.
    pub max_queue: usize,
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn ints(v: Option<&Value>) -> Vec<i64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(int).collect())
        .unwrap_or_default()
}

fn listed_inputs(config: &Value) -> Vec<ListedInput> {
    let list = config.get("input").and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .map(|t| ListedInput {
            name: t["name"].as_str().unwrap_or("").to_string(),
            datatype: t["data_type"]
                .as_str()
                .and_then(DataType::from_config_name)
                .unwrap_or(DataType::Invalid),
            dims: ints(t.get("dims")),
            reshape: t.get("reshape").map(|r| ints(r.get("shape"))),
            optional: t.get("optional").and_then(Value::as_bool).unwrap_or(false),
        })
        .collect()
}

fn listed_outputs(config: &Value) -> Vec<(String, DataType, Vec<i64>)> {
    let list = config.get("output").and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_string(),
                t["data_type"]
                    .as_str()
                    .and_then(DataType::from_config_name)
                    .unwrap_or(DataType::Invalid),
                ints(t.get("dims")),
            )
        })
        .collect()
}

/// The most instances one model may have: each is a thread with its own executor, and a load
/// request may carry its configuration, so a count is bounded before any thread starts (a
/// million of them had ended the process when thread stacks ran out).
pub const MAX_INSTANCES: usize = 256;

/// The instances a configuration asks for: each one's name and GPU (`None`: the CPU).
fn instances(name: &str, config: &mut Value) -> Result<Vec<(String, Option<i64>)>, String> {
    let groups = match config.get("instance_group").and_then(Value::as_array) {
        Some(g) if !g.is_empty() => g.clone(),
        _ => vec![json!({"kind": "KIND_CPU", "count": 1})],
    };
    let mut out = Vec::new();
    let mut completed = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let count = group.get("count").and_then(int).unwrap_or(1);
        if count < 1 {
            return Err(format!("instance_group {g} has count {count}"));
        }
        let kind = group
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("KIND_CPU");
        let gpus = ints(group.get("gpus"));
        let gpus: Vec<Option<i64>> = match kind {
            "KIND_CPU" | "KIND_AUTO" | "KIND_MODEL" => vec![None],
            "KIND_GPU" if gpus.is_empty() => vec![Some(0)],
            "KIND_GPU" => gpus.iter().map(|&d| Some(d)).collect(),
            other => return Err(format!("instance_group {g} has kind `{other}`")),
        };
        let group_name = group
            .get("name")
            .and_then(Value::as_str)
            .map_or_else(|| format!("{name}_{g}"), str::to_string);
        let asked = (count as u128) * (gpus.len() as u128) + out.len() as u128;
        if asked > MAX_INSTANCES as u128 {
            return Err(format!(
                "instance_group asks for {asked} instances or more; a model may have at most \
                 {MAX_INSTANCES}"
            ));
        }
        let mut n = 0;
        for gpu in &gpus {
            for _ in 0..count {
                out.push((format!("{group_name}_{n}"), *gpu));
                n += 1;
            }
        }
        let mut full = group.clone();
        full["name"] = json!(group_name);
        full["kind"] = json!(if kind == "KIND_AUTO" {
            "KIND_CPU"
        } else {
            kind
        });
        full["count"] = json!(count);
        completed.push(full);
    }
    config["instance_group"] = Value::Array(completed);
    Ok(out)
}

impl ServedModel {
    /// Loads version directory `version_dir` of model `name` with configuration `config`
    /// (read from its `config.pbtxt`, or `{}`), completing it from the model.
    pub fn load(
        name: &str,
        version: &str,
        version_dir: &Path,
        mut config: Value,
        defaults: &Defaults,
    ) -> Result<ServedModel, String> {
        let fail = |m: String| format!("model `{name}`: {m}");
        let obj = config
            .as_object_mut()
            .ok_or_else(|| fail("the configuration is not an object".into()))?;
        obj.entry("name").or_insert_with(|| json!(name));
        if let Some(b) = obj.get("backend").and_then(Value::as_str) {
            if !b.is_empty() && b != "tvmrt" {
                return Err(fail(format!(
                    "its configuration asks for backend `{b}`; tvmrt serve runs TVM models \
                     (backend \"tvmrt\")"
                )));
            }
        }
        obj.insert("backend".into(), json!("tvmrt"));
        let loaded: Loaded =
            load::open(name, version_dir, &config, true).map_err(|e| e.message().to_string())?;
        load::complete(&mut config, &loaded);
        // The fields Triton fills in when a configuration leaves them out.
        if let Some(obj) = config.as_object_mut() {
            obj.entry("max_batch_size").or_insert(json!(0));
            obj.entry("version_policy")
                .or_insert(json!({"latest": {"num_versions": 1}}));
            obj.entry("input").or_insert(json!([]));
            obj.entry("output").or_insert(json!([]));
        }
        let served = load::finish(&loaded, &config).map_err(|e| e.message().to_string())?;
        for w in &served.warnings {
            crate::log_warning!("model `{name}`: {w}");
        }
        let instance_list = instances(name, &mut config).map_err(fail)?;
        let devices = instance_list
            .iter()
            .map(|(_, gpu)| load::instance_device(loaded.device, *gpu).map_err(fail))
            .collect::<Result<Vec<_>, String>>()?;
        let mut batching = BatcherConfig::from_config(&config);
        if config
            .pointer("/dynamic_batching/default_queue_policy/max_queue_size")
            .is_none()
        {
            batching.max_queue_size = defaults.max_queue;
        }
        let spec = ModelSpec {
            inputs: loaded.model.inputs.clone(),
            output_names: served.output_names.clone(),
            batched: served.batched,
        };
        crate::log_info!("{}", served.summary(&loaded, version));
        let model = Arc::new(loaded.model);
        let owner = name.to_string();
        // Each instance's executor is made on its own thread, which alone runs it.
        let make = move |k: usize| -> Result<Box<dyn Run>, String> {
            let (iname, device) = (&instance_list[k].0, devices[k]);
            let exec = model.executor(device).map_err(|e| {
                format!(
                    "instance `{iname}`: {}",
                    tvmrt_models::runner::one_line(&e.message)
                )
            })?;
            crate::log_info!(
                "model `{owner}` instance `{iname}` on {}",
                tvmrt::device::device_name(device)
            );
            Ok(Box::new(exec))
        };
        let max_batch_size = batching.max_batch_size.max(0) as u64;
        let batcher = Batcher::start(name, spec, batching, Arc::new(make)).map_err(fail)?;
        Ok(ServedModel {
            name: name.to_string(),
            version: version.to_string(),
            inputs: listed_inputs(&config),
            outputs: listed_outputs(&config),
            max_batch_size,
            config,
            batcher,
        })
    }

    /// Checks `request` against the configuration (as Triton's core does before queueing)
    /// and applies `reshape`.
    pub fn prepare(&self, request: &mut InferRequest) -> Result<(), ApiError> {
        let m = &self.name;
        let bad = |msg: String| ApiError::bad_request(msg);
        for t in &request.inputs {
            if !self.inputs.iter().any(|i| i.name == t.name) {
                return Err(bad(format!(
                    "unexpected inference input '{}' for model '{m}'",
                    t.name
                )));
            }
        }
        let missing: Vec<&str> = self
            .inputs
            .iter()
            .filter(|i| !i.optional && !request.inputs.iter().any(|t| t.name == i.name))
            .map(|i| i.name.as_str())
            .collect();
        if !missing.is_empty() {
            // Triton's words, names quoted as it quotes them.
            let quoted = |names: Vec<&str>| {
                let names: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
                format!("[{}]", names.join(", "))
            };
            let got = quoted(request.inputs.iter().map(|t| t.name.as_str()).collect());
            let missing = quoted(missing);
            return Err(bad(format!(
                "expected {} inputs but got {} inputs for model '{m}'. Got input(s) {got}, but \
                 missing required input(s) {missing}. Please provide all required input(s).",
                self.inputs.iter().filter(|i| !i.optional).count(),
                request.inputs.len(),
            )));
        }
        let batched = self.max_batch_size > 0;
        let mut rows = None;
        for t in &mut request.inputs {
            let spec = self
                .inputs
                .iter()
                .find(|i| i.name == t.name)
                .expect("listed");
            if spec.datatype != t.datatype && spec.datatype != DataType::Invalid {
                return Err(bad(format!(
                    "inference input '{}' data-type is '{}', but model '{m}' expects '{}'",
                    t.name,
                    t.datatype.name(),
                    spec.datatype.name()
                )));
            }
            let (batch, dims) = if batched {
                match t.shape.split_first() {
                    Some((b, rest)) => (Some(*b), rest),
                    None => {
                        return Err(bad(format!(
                            "input '{}' has no batch dimension, but model '{m}' batches (its \
                             shape must start with the batch size)",
                            t.name
                        )))
                    }
                }
            } else {
                (None, &t.shape[..])
            };
            let fits = dims.len() == spec.dims.len()
                && dims.iter().zip(&spec.dims).all(|(&d, &s)| s < 0 || d == s);
            if !fits {
                let mut expected = spec.dims.clone();
                if batched {
                    expected.insert(0, -1);
                }
                return Err(bad(format!(
                    "unexpected shape for input '{}' for model '{m}'. Expected {expected:?}, got \
                     {:?}",
                    t.name, t.shape
                )));
            }
            if let Some(b) = batch {
                if b < 1 || b as u64 > self.max_batch_size {
                    return Err(bad(format!(
                        "inference request batch-size must be <= {} for '{m}'",
                        self.max_batch_size
                    )));
                }
                if rows.is_some_and(|r| r != b) {
                    return Err(bad(format!(
                        "the inputs of a request to '{m}' must share their batch size (the \
                         first dimension): input '{}' has {b}, another {}",
                        t.name,
                        rows.unwrap_or(0)
                    )));
                }
                rows = Some(b);
            }
            if let Some(shape) = &spec.reshape {
                t.shape = batch.into_iter().chain(shape.iter().copied()).collect();
            }
        }
        Ok(())
    }

    /// Checks, queues and waits for `request`'s answer; `timeout` bounds the wait, `trace`
    /// records its way if it is traced.
    pub async fn infer(
        &self,
        mut request: InferRequest,
        timeout: Duration,
        trace: Option<Arc<crate::trace::Trace>>,
    ) -> Result<Answer, ApiError> {
        self.prepare(&mut request)?;
        let (job, rx) = Job::new(request, trace);
        if let Err((refused, _)) = self.batcher.submit(job) {
            return Err(match refused {
                Refused::TooLarge { .. } => ApiError::bad_request(refused.to_string()),
                Refused::QueueFull { .. } | Refused::ShuttingDown { .. } => {
                    ApiError::unavailable(refused.to_string())
                }
            });
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "the model's instance stopped without answering",
            )),
            Err(_) => Err(ApiError::new(
                axum::http::StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "model '{}' did not answer within {} s (--request-timeout)",
                    self.name,
                    timeout.as_secs_f64()
                ),
            )),
        }
    }

    /// Requests waiting in its queue.
    pub fn pending(&self) -> usize {
        self.batcher.queued()
    }

    /// Its statistics so far.
    pub fn stats(&self) -> ModelStats {
        self.batcher.stats()
    }

    /// Refuses new requests, finishes those queued and running, stops the instances
    /// (blocking; idempotent).
    pub fn stop(&self) {
        self.batcher.drain();
    }

    /// Its inputs and outputs as the metadata lists them: name, type, shape (the batch
    /// dimension first as -1 when the model batches).
    pub fn tensors(&self) -> [Vec<(String, DataType, Vec<i64>)>; 2] {
        let shape = |dims: &[i64]| -> Vec<i64> {
            let batch = (self.max_batch_size > 0).then_some(-1);
            batch.into_iter().chain(dims.iter().copied()).collect()
        };
        let inputs = self
            .inputs
            .iter()
            .map(|i| (i.name.clone(), i.datatype, shape(&i.dims)))
            .collect();
        let outputs = self
            .outputs
            .iter()
            .map(|(n, t, d)| (n.clone(), *t, shape(d)))
            .collect();
        [inputs, outputs]
    }

    /// The model's metadata (`/v2/models/{m}`).
    pub fn metadata(&self) -> Value {
        let [inputs, outputs] = self.tensors().map(|list| {
            list.into_iter()
                .map(|(n, t, s)| json!({"name": n, "datatype": t.name(), "shape": s}))
                .collect::<Vec<_>>()
        });
        json!({
            "name": self.name,
            "versions": [self.version],
            "platform": "tvmrt",
            "inputs": inputs,
            "outputs": outputs,
        })
    }
}

impl Drop for ServedModel {
    fn drop(&mut self) {
        self.stop();
    }
}
