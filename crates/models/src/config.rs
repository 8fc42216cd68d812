//! A model's configuration (its `config.pbtxt` as JSON, as Triton hands it to the backend and
//! as the OIP server reads it): the parameters both servers read, and auto-completion of the
//! inputs, outputs and batching from the model.

use serde_json::{json, Map, Value};

use crate::signature::{describe_all, output_name, TensorSpec};
use crate::types;

/// What the backend reads from a model's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `parameters { key: "function" }`: the Relax function (default `main`) or kernel.
    pub function: Option<String>,
    /// `parameters { key: "device" }`: `cpu`, `cuda:0`, `opencl:0`, `vulkan:0`... (default:
    /// the instance's kind: the CPU, or the instance's GPU for `KIND_GPU`).
    pub device: Option<String>,
    /// `parameters { key: "threads" }`: the size of tvmrt's (process-wide) parallel pool.
    pub threads: Option<usize>,
    /// `parameters { key: "num_outputs" }`: how many of a kernel's last parameters are outputs.
    pub num_outputs: usize,
    /// `parameters { key: "weights" }`: a Relax model's tensor cache directory, relative to
    /// the version directory (default: its `weights` directory, when there is one).
    pub weights: Option<String>,
    /// `default_model_filename`, else `model.so`.
    pub filename: String,
    /// `max_batch_size` (0: requests are not batched).
    pub max_batch_size: i64,
}

/// A parameter's `string_value`.
pub fn parameter(config: &Value, key: &str) -> Option<String> {
    config
        .get("parameters")?
        .get(key)?
        .get("string_value")?
        .as_str()
        .map(str::to_string)
}

fn int_field(config: &Value, key: &str) -> i64 {
    config.as_object().map_or(0, |o| int_entry(o, key))
}

fn int_entry(config: &Map<String, Value>, key: &str) -> i64 {
    int_value(config.get(key), 0)
}

impl Settings {
    /// Reads the settings; a malformed parameter is an error naming it.
    pub fn from_config(config: &Value) -> Result<Settings, String> {
        let threads = match parameter(config, "threads") {
            None => None,
            Some(t) => Some(
                t.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        format!("parameter `threads` is `{t}`, not a positive integer")
                    })?,
            ),
        };
        let num_outputs = match parameter(config, "num_outputs") {
            None => 1,
            Some(t) => t
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    format!("parameter `num_outputs` is `{t}`, not a positive integer")
                })?,
        };
        let filename = config
            .get("default_model_filename")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("model.so")
            .to_string();
        Ok(Settings {
            function: parameter(config, "function").filter(|s| !s.is_empty()),
            device: parameter(config, "device").filter(|s| !s.is_empty()),
            weights: parameter(config, "weights").filter(|s| !s.is_empty()),
            threads,
            num_outputs,
            filename,
            max_batch_size: int_field(config, "max_batch_size"),
        })
    }
}

/// The batch size auto-complete gives a batchable model whose configuration sets none.
pub const DEFAULT_MAX_BATCH_SIZE: i64 = 8;

fn tensor_json(spec: &TensorSpec, batched: bool) -> Value {
    let dims = spec.triton_dims();
    let dims = if batched { &dims[1..] } else { &dims[..] };
    let mut t = json!({
        "name": spec.name,
        "data_type": types::config_name(spec.dtype).unwrap_or_else(|| "TYPE_INVALID".into()),
        "dims": dims,
    });
    // Triton wants dims: a tensor that is only its batch dimension (token ids `[n]`) is
    // `dims: [1]` reshaped to `[]`, Triton's own idiom (requests send `[n, 1]`).
    if dims.is_empty() {
        t["dims"] = json!([1]);
        t["reshape"] = json!({"shape": []});
    }
    t
}

fn is_empty_list(config: &Map<String, Value>, key: &str) -> bool {
    config
        .get(key)
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
}

/// Completes `config` from the model, as Triton's auto-complete asks: a batchable model (see
/// [`crate::signature::batch_var`]) with no `max_batch_size` gets [`DEFAULT_MAX_BATCH_SIZE`]
/// and the dynamic batcher (unless another scheduler is set), and missing inputs and outputs
/// are listed with their dtypes and shapes. Returns whether anything changed.
pub fn autocomplete(
    config: &mut Value,
    inputs: &[TensorSpec],
    outputs: &[TensorSpec],
    batchable: bool,
) -> bool {
    let Some(obj) = config.as_object_mut() else {
        return false;
    };
    let mut changed = false;
    let untouched = is_empty_list(obj, "input") && is_empty_list(obj, "output");
    if batchable && untouched && int_entry(obj, "max_batch_size") == 0 {
        obj.insert("max_batch_size".into(), json!(DEFAULT_MAX_BATCH_SIZE));
        let scheduled = [
            "dynamic_batching",
            "sequence_batching",
            "ensemble_scheduling",
        ]
        .iter()
        .any(|k| obj.get(*k).is_some_and(|v| !v.is_null()));
        if !scheduled {
            obj.insert("dynamic_batching".into(), Value::Object(Map::new()));
        }
        changed = true;
    }
    let batched = int_entry(obj, "max_batch_size") > 0;
    for (key, specs) in [("input", inputs), ("output", outputs)] {
        if is_empty_list(obj, key) && !specs.is_empty() {
            let list = specs.iter().map(|s| tensor_json(s, batched)).collect();
            obj.insert(key.into(), Value::Array(list));
            changed = true;
        }
    }
    changed
}

/// The CUDA ordinal of the first `KIND_GPU` instance group (its first listed GPU, else 0), if
/// any: where a model whose instances run on GPUs is run at load time (the output probe), so
/// that code built for CUDA sees its inputs on a CUDA device.
pub fn first_gpu(config: &Value) -> Option<i64> {
    let groups = config.get("instance_group")?.as_array()?;
    let group = groups
        .iter()
        .find(|g| g.get("kind").and_then(Value::as_str) == Some("KIND_GPU"))?;
    let first = group
        .get("gpus")
        .and_then(Value::as_array)
        .and_then(|g| g.first())
        .map(|v| int_value(Some(v), 0));
    Some(first.unwrap_or(0))
}

/// A JSON integer (protobuf's JSON writes 64-bit ones as strings), else `default`.
fn int_value(v: Option<&Value>, default: i64) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => s.parse().unwrap_or(default),
        _ => default,
    }
}

/// Each instance the configuration's `instance_group`s ask for, as the GPU it runs on (`None`:
/// the CPU): a `KIND_GPU` group's `count` (default 1) instances on each GPU it lists (GPU 0 when
/// it lists none), any other group's `count` on the CPU; one CPU instance when no group is
/// given.
pub fn instance_gpus(config: &Value) -> Vec<Option<i64>> {
    let groups = config
        .get("instance_group")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for g in groups {
        let count = int_value(g.get("count"), 1).max(0) as usize;
        if g.get("kind").and_then(Value::as_str) == Some("KIND_GPU") {
            let gpus: Vec<i64> = match g.get("gpus").and_then(Value::as_array) {
                Some(list) if !list.is_empty() => {
                    list.iter().map(|v| int_value(Some(v), 0)).collect()
                }
                _ => vec![0],
            };
            for gpu in gpus {
                out.extend(std::iter::repeat_n(Some(gpu), count));
            }
        } else {
            out.extend(std::iter::repeat_n(None, count));
        }
    }
    if groups.is_empty() {
        out.push(None);
    }
    out
}

/// The names and dims (batch dimension excluded) a configuration lists under `key`.
pub fn listed_tensors(config: &Value, key: &str) -> Vec<(String, Option<String>, Vec<i64>)> {
    let Some(list) = config.get(key).and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .map(|t| {
            let name = t
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let dtype = t
                .get("data_type")
                .and_then(Value::as_str)
                .map(str::to_string);
            let dims = t
                .get("dims")
                .and_then(Value::as_array)
                .map(|d| d.iter().map(|v| int_value(Some(v), -1)).collect())
                .unwrap_or_default();
            (name, dtype, dims)
        })
        .collect()
}

/// What [`check_against_model`] found.
#[derive(Debug, PartialEq, Eq)]
pub struct Checked {
    /// The outputs the configuration lists, in order.
    pub output_names: Vec<String>,
    /// Things that will make requests fail, worth a line in the log.
    pub warnings: Vec<String>,
}

/// Checks the (completed) configuration against the model: batching only along a shared
/// symbolic first dimension, the same inputs by name, outputs named `output0`, `output1`, ...
/// in order (`outputs` empty: not known, any count). A dtype that differs from the model's is
/// a warning only: such requests get an error each, which names it.
pub fn check_against_model(
    config: &Value,
    function: &str,
    inputs: &[TensorSpec],
    outputs: &[TensorSpec],
    batchable: bool,
) -> Result<Checked, String> {
    let max_batch_size = int_field(config, "max_batch_size");
    if max_batch_size > 0 && !batchable {
        return Err(format!(
            "max_batch_size is {max_batch_size}, but the inputs of `{function}` do not share a \
             symbolic first dimension to batch along ({}): set max_batch_size to 0",
            describe_all(inputs)
        ));
    }
    let listed = listed_tensors(config, "input");
    if let Some((name, ..)) = listed
        .iter()
        .find(|l| !inputs.iter().any(|i| i.name == l.0))
    {
        return Err(format!(
            "config.pbtxt lists input `{name}`, which `{function}` does not take (its inputs: {})",
            describe_all(inputs)
        ));
    }
    let mut warnings = Vec::new();
    for spec in inputs {
        let Some((_, dtype, _)) = listed.iter().find(|l| l.0 == spec.name) else {
            return Err(format!(
                "config.pbtxt does not list input `{}` ({})",
                spec.name,
                spec.describe()
            ));
        };
        let want = types::config_name(spec.dtype);
        if dtype.is_some() && *dtype != want {
            warnings.push(format!(
                "config.pbtxt gives input `{}` as {}, the model takes {}: such requests will be \
                 refused",
                spec.name,
                dtype.as_deref().unwrap_or("?"),
                spec.describe()
            ));
        }
    }
    let output_names: Vec<String> = listed_tensors(config, "output")
        .into_iter()
        .map(|o| o.0)
        .collect();
    let count = if outputs.is_empty() {
        output_names.len()
    } else {
        outputs.len()
    };
    for (k, o) in output_names.iter().enumerate() {
        if *o != output_name(k) || k >= count {
            let names: Vec<String> = (0..count.max(1)).map(output_name).collect();
            return Err(format!(
                "config.pbtxt's output {k} is `{o}`: the backend names the model's outputs {} \
                 in order",
                names.join(", ")
            ));
        }
    }
    Ok(Checked {
        output_names,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Dim;
    use tvmrt::dtype::dtypes::FLOAT32;

    fn spec(name: &str, dims: Vec<Dim>) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            dtype: FLOAT32,
            dims,
        }
    }

    #[test]
    fn settings_from_parameters() {
        let c = json!({
            "max_batch_size": 4,
            "parameters": {
                "function": {"string_value": "add"},
                "threads": {"string_value": "2"},
            }
        });
        let s = Settings::from_config(&c).unwrap();
        assert_eq!(s.function.as_deref(), Some("add"));
        assert_eq!(s.threads, Some(2));
        assert_eq!(s.filename, "model.so");
        assert_eq!(s.max_batch_size, 4);
        assert_eq!(s.num_outputs, 1);
        assert_eq!(s.weights, None);
        let bad = json!({"parameters": {"threads": {"string_value": "many"}}});
        assert_eq!(
            Settings::from_config(&bad).unwrap_err(),
            "parameter `threads` is `many`, not a positive integer"
        );
        let c = json!({"max_batch_size": "3", "default_model_filename": "m.so"});
        let s = Settings::from_config(&c).unwrap();
        assert_eq!((s.max_batch_size, s.filename.as_str()), (3, "m.so"));
    }

    #[test]
    fn autocomplete_batchable_and_fixed() {
        let n = || Dim::Var("n".into());
        let inputs = vec![spec("x", vec![n(), Dim::Fixed(16)])];
        let outputs = vec![spec("output0", vec![n(), Dim::Fixed(8)])];
        let mut c = json!({"name": "m", "backend": "tvmrt"});
        assert!(autocomplete(&mut c, &inputs, &outputs, true));
        assert_eq!(c["max_batch_size"], 8);
        assert_eq!(c["dynamic_batching"], json!({}));
        assert_eq!(
            c["input"],
            json!([{"name": "x", "data_type": "TYPE_FP32", "dims": [16]}])
        );
        assert_eq!(c["output"][0]["dims"], json!([8]));
        assert!(!autocomplete(&mut c, &inputs, &outputs, true));

        let ids = vec![spec("ids", vec![n()])];
        let mut c = json!({});
        autocomplete(&mut c, &ids, &outputs, true);
        assert_eq!(
            c["input"],
            json!([{"name": "ids", "data_type": "TYPE_FP32", "dims": [1], "reshape": {"shape": []}}])
        );

        let mut c = json!({"input": [], "output": []});
        autocomplete(&mut c, &inputs, &outputs, false);
        assert_eq!(c.get("max_batch_size"), None);
        assert_eq!(c["input"][0]["dims"], json!([-1, 16]));
        assert_eq!(listed_tensors(&c, "input")[0].2, vec![-1, 16]);
    }

    #[test]
    fn configuration_checked_against_the_model() {
        let n = || Dim::Var("n".into());
        let inputs = vec![spec("x", vec![n(), Dim::Fixed(16)])];
        let outputs = vec![spec("output0", vec![n(), Dim::Fixed(8)])];
        let mut c = json!({});
        autocomplete(&mut c, &inputs, &outputs, true);
        let ok = check_against_model(&c, "main", &inputs, &outputs, true).unwrap();
        assert_eq!(ok.output_names, vec!["output0"]);
        assert!(ok.warnings.is_empty());

        let e = check_against_model(&c, "main", &inputs, &outputs, false).unwrap_err();
        assert!(
            e.starts_with("max_batch_size is 8, but the inputs of `main`"),
            "{e}"
        );

        let mut wrong = c.clone();
        wrong["input"][0]["data_type"] = json!("TYPE_FP64");
        let w = check_against_model(&wrong, "main", &inputs, &outputs, true).unwrap();
        assert_eq!(
            w.warnings,
            vec![
                "config.pbtxt gives input `x` as TYPE_FP64, the model takes x: float32[n, 16]: \
                  such requests will be refused"
            ]
        );
        wrong["input"][0]["name"] = json!("y");
        let e = check_against_model(&wrong, "main", &inputs, &outputs, true).unwrap_err();
        assert_eq!(
            e,
            "config.pbtxt lists input `y`, which `main` does not take (its inputs: x: float32[n, \
             16])"
        );
        let mut renamed = c.clone();
        renamed["output"][0]["name"] = json!("y");
        let e = check_against_model(&renamed, "main", &inputs, &outputs, true).unwrap_err();
        assert_eq!(
            e,
            "config.pbtxt's output 0 is `y`: the backend names the model's outputs output0 in order"
        );
        let missing = json!({"input": []});
        let e = check_against_model(&missing, "main", &inputs, &outputs, false).unwrap_err();
        assert_eq!(
            e,
            "config.pbtxt does not list input `x` (x: float32[n, 16])"
        );
    }

    #[test]
    fn instances_of_each_group() {
        let c = |t: &str| serde_json::from_str::<Value>(t).unwrap();
        assert_eq!(instance_gpus(&c("{}")), vec![None]);
        assert_eq!(
            instance_gpus(&c(r#"{"instance_group": [{"kind": "KIND_CPU", "count": 2},
                {"kind": "KIND_GPU", "count": "2", "gpus": [1, 3]}, {"kind": "KIND_GPU"}]}"#)),
            vec![None, None, Some(1), Some(1), Some(3), Some(3), Some(0)]
        );
        assert_eq!(instance_gpus(&c(r#"{"instance_group": [{}]}"#)), vec![None]);
    }

    #[test]
    fn first_gpu_is_the_first_kind_gpu_group_s_first_gpu() {
        let c = |t: &str| serde_json::from_str::<Value>(t).unwrap();
        assert_eq!(
            first_gpu(&c(
                r#"{"instance_group": [{"kind": "KIND_CPU", "count": 2}]}"#
            )),
            None
        );
        assert_eq!(first_gpu(&c(r#"{}"#)), None);
        assert_eq!(
            first_gpu(&c(r#"{"instance_group": [{"kind": "KIND_CPU"},
                {"kind": "KIND_GPU", "count": 2, "gpus": [3, 1]}]}"#)),
            Some(3)
        );
        assert_eq!(
            first_gpu(&c(r#"{"instance_group": [{"kind": "KIND_GPU"}]}"#)),
            Some(0)
        );
    }
}
