//! The parameters of a model load request (Triton's model repository extension: the body of
//! `POST /v2/repository/models/M/load`, or `RepositoryModelLoadRequest.parameters` over gRPC).
//!
//! `config` is a model configuration in Triton's JSON, used in place of the model's
//! `config.pbtxt` for this load (a later load without it reads the file again), as tritonclient's
//! `load_model(name, config=...)` sends it. It is read through the protocol's `ModelConfig`
//! message, so a misspelt field or a wrong type is a 400 naming it rather than a setting
//! silently left out, and it reaches the loader in the form `config.pbtxt` takes.
//!
//! `file:<version>/<name>` parameters (a model's files in the request) are refused: loading
//! them would run a library any client sent. Any other parameter is refused by name.

use serde_json::Value;

use crate::error::ApiError;

/// A parameter's value, as either front carries it.
pub enum Param {
    /// A string (`config` must be one).
    Text(String),
    /// Any other kind, named (`bool`, `int64`, `bytes`, a JSON number...).
    Other(&'static str),
}

/// The configuration a load request gives in place of `config.pbtxt`, if any.
pub fn config_override(
    model: &str,
    params: impl IntoIterator<Item = (String, Param)>,
) -> Result<Option<Value>, ApiError> {
    let bad = |why: String| ApiError::bad_request(format!("failed to load '{model}': {why}"));
    let mut config = None;
    for (key, value) in params {
        match (key.as_str(), value) {
            ("config", Param::Text(text)) => {
                let json: Value = serde_json::from_str(&text)
                    .map_err(|e| bad(format!("its `config` parameter is not JSON: {e}")))?;
                if !json.is_object() {
                    return Err(bad("its `config` parameter is not a JSON object".into()));
                }
                let read = crate::protojson::normalize("inference.ModelConfig", &json)
                    .map_err(|e| bad(format!("its `config` parameter: {e}")))?;
                config = Some(read);
            }
            ("config", Param::Other(kind)) => {
                return Err(bad(format!(
                    "its `config` parameter is a {kind}, not a string of JSON"
                )))
            }
            (k, _) if k.starts_with("file:") => {
                return Err(bad(format!(
                    "model files in the load request (`{k}`) are not accepted: loading them \
                     would run a library any client sent; put the model in the repository"
                )))
            }
            (k, _) => {
                return Err(bad(format!(
                    "unknown load parameter `{k}` (Triton's are `config` and `file:<path>`)"
                )))
            }
        }
    }
    Ok(config)
}

/// The parameters of an HTTP load request's body (empty: none).
pub fn http_params(model: &str, body: &[u8]) -> Result<Vec<(String, Param)>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let bad = |why: String| ApiError::bad_request(format!("failed to load '{model}': {why}"));
    let json: Value = serde_json::from_slice(body)
        .map_err(|e| bad(format!("malformed load request JSON: {e}")))?;
    let params = match json.get("parameters") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(bad("`parameters` is not an object".into())),
    };
    Ok(params
        .into_iter()
        .map(|(k, v)| (k, json_param(v)))
        .collect())
}

fn json_param(v: Value) -> Param {
    match v {
        Value::String(s) => Param::Text(s),
        Value::Bool(_) => Param::Other("boolean"),
        Value::Number(_) => Param::Other("number"),
        Value::Array(_) => Param::Other("list"),
        Value::Object(_) => Param::Other("JSON object"),
        Value::Null => Param::Other("null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(body: &str) -> Result<Option<Value>, String> {
        http_params("m", body.as_bytes())
            .and_then(|p| config_override("m", p))
            .map_err(|e| e.message)
    }

    #[test]
    fn a_config_replaces_the_file_in_the_form_the_file_takes() {
        assert_eq!(read("").unwrap(), None);
        assert_eq!(read(r#"{"parameters": {}}"#).unwrap(), None);
        let config = json!({"max_batch_size": 4, "dynamic_batching": {},
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": ["16"]}],
            "instance_group": [{"kind": "KIND_CPU", "count": 2}],
            "parameters": {"threads": {"string_value": "1"}}});
        let body = json!({"parameters": {"config": config.to_string()}}).to_string();
        let got = read(&body).unwrap().unwrap();
        // 64-bit integers as numbers (protobuf's JSON writes them as strings), enums by name,
        // a present but empty message kept (it turns dynamic batching on).
        assert_eq!(
            got,
            json!({"max_batch_size": 4, "dynamic_batching": {},
                "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [16]}],
                "instance_group": [{"kind": "KIND_CPU", "count": 2}],
                "parameters": {"threads": {"string_value": "1"}}})
        );
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        let e = |params: Value| read(&json!({ "parameters": params }).to_string()).unwrap_err();
        assert_eq!(
            e(json!({"config": "{\"max_batch_sise\": 4}"})),
            "failed to load 'm': its `config` parameter: inference.ModelConfig from JSON: \
             unrecognized field name 'max_batch_sise'"
        );
        assert!(e(json!({"config": "{\"max_batch_size\": \"four\"}"})).contains("invalid digit"));
        assert!(e(json!({"config": "{not json"})).contains("is not JSON"));
        assert!(e(json!({"config": "[1]"})).contains("not a JSON object"));
        assert!(e(json!({"config": {"max_batch_size": 4}})).contains("is a JSON object, not a"));
        assert!(e(json!({"file:1/model.so": "AAAA"})).contains("`file:1/model.so`"));
        assert!(e(json!({"polling": true})).contains("unknown load parameter `polling`"));
        assert!(read("{oops")
            .unwrap_err()
            .contains("malformed load request JSON"));
    }
}
