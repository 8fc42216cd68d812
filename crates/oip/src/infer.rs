//! An inference request and response over HTTP: the JSON body of KServe's protocol, with
//! Triton's binary tensor extension (the JSON header's length in `Inference-Header-Content-
//! Length`, then the tensors' bytes in order: inputs with `binary_data_size`, outputs asked
//! for with `binary_data` or the request's `binary_data_output`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tvmrt_models::types::DataType;

use crate::codec::{check_size, element_count, json_to_bytes, JsonData};
use crate::error::ApiError;
use crate::shm::ShmRef;

/// A tensor in a request or a response, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub datatype: DataType,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its bytes, little-endian and row-major (`BYTES`: length-prefixed strings).
    pub data: Vec<u8>,
}

/// An output a request asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedOutput {
    /// Its name.
    pub name: String,
    /// Its bytes go after the JSON (Triton's binary extension) rather than in it.
    pub binary: bool,
    /// Its bytes go to this place of a shared memory region instead.
    pub shm: Option<ShmRef>,
}

/// An inference request, decoded and checked for form (not yet against a model).
#[derive(Debug, Clone, PartialEq)]
pub struct InferRequest {
    /// The client's id, echoed in the response (empty: none).
    pub id: String,
    /// The inputs.
    pub inputs: Vec<Tensor>,
    /// The outputs asked for (empty: all, binary when `binary_outputs`).
    pub outputs: Vec<RequestedOutput>,
    /// `binary_data_output`: outputs not listed come as binary data.
    pub binary_outputs: bool,
    /// The inputs whose bytes are in shared memory (their `data` empty until read there).
    pub shm_inputs: Vec<(String, ShmRef)>,
}

#[derive(Deserialize)]
struct RequestJson {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parameters: Map<String, Value>,
    inputs: Vec<InputJson>,
    #[serde(default)]
    outputs: Vec<OutputJson>,
}

#[derive(Deserialize)]
struct InputJson {
    name: String,
    shape: Vec<i64>,
    datatype: String,
    #[serde(default)]
    parameters: Map<String, Value>,
    #[serde(default)]
    data: Option<Value>,
}

#[derive(Deserialize)]
struct OutputJson {
    name: String,
    #[serde(default)]
    parameters: Map<String, Value>,
}

/// The shared memory place `parameters` name for tensor `name`, if any.
fn shm_of(name: &str, parameters: &Map<String, Value>) -> Result<Option<ShmRef>, ApiError> {
    ShmRef::from_parameters(
        name,
        |k| {
            parameters
                .get(k)
                .map(|v| v.as_str().map(str::to_string).ok_or(()))
        },
        |k| parameters.get(k).map(|v| v.as_u64().ok_or(())),
    )
}

fn flag(parameters: &Map<String, Value>, key: &str) -> bool {
    parameters
        .get(key)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The element type the protocol names `name`, or a 400 saying it has none.
pub fn datatype(name: &str, input: &str) -> Result<DataType, ApiError> {
    DataType::from_name(name).ok_or_else(|| {
        ApiError::bad_request(format!(
            "input '{input}' has an invalid datatype '{name}' (the protocol's are BOOL, UINT8, \
             ..., INT64, FP16, FP32, FP64, BF16, BYTES)"
        ))
    })
}

/// Decodes an HTTP request body; `header_length` is `Inference-Header-Content-Length` (the
/// JSON's length when binary tensors follow it).
pub fn decode_request(body: &[u8], header_length: Option<usize>) -> Result<InferRequest, ApiError> {
    let json_len = header_length.unwrap_or(body.len());
    if json_len > body.len() {
        return Err(ApiError::bad_request(format!(
            "Inference-Header-Content-Length is {json_len}, but the body holds only {} bytes",
            body.len()
        )));
    }
    let (json, mut binary) = body.split_at(json_len);
    let req: RequestJson = serde_json::from_slice(json)
        .map_err(|e| ApiError::bad_request(format!("malformed inference request JSON: {e}")))?;
    let mut inputs = Vec::with_capacity(req.inputs.len());
    let mut shm_inputs = Vec::new();
    for input in req.inputs {
        let name = input.name;
        let dtype = datatype(&input.datatype, &name)?;
        let count = element_count(&input.shape)
            .map_err(|e| ApiError::bad_request(format!("input '{name}': {e}")))?;
        let shm = shm_of(&name, &input.parameters)?;
        let data = match input.parameters.get("binary_data_size") {
            _ if shm.is_some() => {
                shm_inputs.push((name.clone(), shm.expect("some")));
                Vec::new()
            }
            Some(size) => {
                let size = size
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "input '{name}': binary_data_size is {size}, not a byte count"
                        ))
                    })?;
                if size > binary.len() {
                    return Err(ApiError::bad_request(format!(
                        "input '{name}': binary_data_size is {size}, but only {} bytes of \
                         binary data are left in the body",
                        binary.len()
                    )));
                }
                let (mine, rest) = binary.split_at(size);
                binary = rest;
                check_size(mine, dtype, count)
                    .map_err(|e| ApiError::bad_request(format!("input '{name}': {e}")))?;
                mine.to_vec()
            }
            None => {
                let data = input.data.as_ref().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "input '{name}' has neither `data` nor binary_data_size"
                    ))
                })?;
                json_to_bytes(data, dtype, count)
                    .map_err(|e| ApiError::bad_request(format!("input '{name}': {e}")))?
            }
        };
        inputs.push(Tensor {
            name,
            datatype: dtype,
            shape: input.shape,
            data,
        });
    }
    if !binary.is_empty() {
        return Err(ApiError::bad_request(format!(
            "{} bytes of binary data follow the JSON that no input's binary_data_size claims",
            binary.len()
        )));
    }
    let binary_outputs = flag(&req.parameters, "binary_data_output");
    let outputs = req
        .outputs
        .into_iter()
        .map(|o| {
            Ok(RequestedOutput {
                binary: match o.parameters.get("binary_data") {
                    Some(v) => v.as_bool().unwrap_or(false),
                    None => binary_outputs,
                },
                shm: shm_of(&o.name, &o.parameters)?,
                name: o.name,
            })
        })
        .collect::<Result<_, ApiError>>()?;
    Ok(InferRequest {
        id: req.id.unwrap_or_default(),
        inputs,
        outputs,
        binary_outputs,
        shm_inputs,
    })
}

#[derive(Serialize)]
struct ResponseJson<'a> {
    model_name: &'a str,
    model_version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    id: &'a str,
    outputs: Vec<OutputJsonOut<'a>>,
}

#[derive(Serialize)]
struct OutputJsonOut<'a> {
    name: &'a str,
    datatype: &'static str,
    shape: &'a [i64],
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<JsonData<'a>>,
}

/// An encoded response: its body, and the JSON's length when binary tensors follow it (the
/// `Inference-Header-Content-Length` to send).
pub struct EncodedResponse {
    /// The body.
    pub body: Vec<u8>,
    /// The JSON's length, when binary data follows.
    pub header_length: Option<usize>,
}

/// Encodes the outputs of `request` as the response body.
pub fn encode_response(
    model: &str,
    version: &str,
    request: &InferRequest,
    outputs: &[Tensor],
) -> EncodedResponse {
    let asked = |name: &str| request.outputs.iter().find(|o| o.name == name);
    let mut tail: Vec<&[u8]> = Vec::new();
    let json_outputs = outputs
        .iter()
        .map(|t| {
            let shm = asked(&t.name).and_then(|o| o.shm.as_ref());
            if let Some(r) = shm {
                // Written to shared memory (crate::shm): its place, no data.
                return OutputJsonOut {
                    name: &t.name,
                    datatype: t.datatype.name(),
                    shape: &t.shape,
                    parameters: Some(serde_json::json!({
                        "shared_memory_region": r.region,
                        "shared_memory_byte_size": r.byte_size,
                    })),
                    data: None,
                };
            }
            let binary = asked(&t.name).map_or(request.binary_outputs, |o| o.binary);
            if binary {
                tail.push(&t.data);
            }
            OutputJsonOut {
                name: &t.name,
                datatype: t.datatype.name(),
                shape: &t.shape,
                parameters: binary.then(|| serde_json::json!({"binary_data_size": t.data.len()})),
                data: (!binary).then_some(JsonData {
                    dtype: t.datatype,
                    bytes: &t.data,
                }),
            }
        })
        .collect();
    let response = ResponseJson {
        model_name: model,
        model_version: version,
        id: &request.id,
        outputs: json_outputs,
    };
    let mut body = serde_json::to_vec(&response).expect("a response serializes");
    if tail.is_empty() {
        return EncodedResponse {
            body,
            header_length: None,
        };
    }
    let header_length = body.len();
    for t in tail {
        body.extend_from_slice(t);
    }
    EncodedResponse {
        body,
        header_length: Some(header_length),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn json_request_decodes() {
        let body = br#"{"id": "7", "inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32",
            "data": [[1, 2], [3, 4]]}], "outputs": [{"name": "output0"}]}"#;
        let r = decode_request(body, None).unwrap();
        assert_eq!(r.id, "7");
        assert_eq!(r.inputs[0].data, floats(&[1.0, 2.0, 3.0, 4.0]));
        assert_eq!(r.inputs[0].shape, vec![2, 2]);
        assert_eq!(
            r.outputs,
            vec![RequestedOutput {
                name: "output0".into(),
                binary: false,
                shm: None,
            }]
        );
    }

    #[test]
    fn binary_request_decodes_in_order() {
        let json = br#"{"inputs": [
            {"name": "a", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 8}},
            {"name": "b", "shape": [1], "datatype": "INT32", "data": [5]},
            {"name": "c", "shape": [1], "datatype": "FP32", "parameters": {"binary_data_size": 4}}],
            "parameters": {"binary_data_output": true}}"#;
        let mut body = json.to_vec();
        body.extend(floats(&[1.0, 2.0]));
        body.extend(floats(&[3.0]));
        let r = decode_request(&body, Some(json.len())).unwrap();
        assert_eq!(r.inputs[0].data, floats(&[1.0, 2.0]));
        assert_eq!(r.inputs[1].data, 5i32.to_le_bytes());
        assert_eq!(r.inputs[2].data, floats(&[3.0]));
        assert!(r.binary_outputs);
    }

    #[test]
    fn malformed_requests_are_400_with_the_reason() {
        let e = |body: &[u8], h: Option<usize>| {
            let e = decode_request(body, h).unwrap_err();
            assert_eq!(e.status, 400);
            e.message
        };
        assert!(e(b"{not json", None).starts_with("malformed inference request JSON"));
        assert!(e(br#"{"inputs": [{"name": "x"}]}"#, None).contains("missing field `shape`"));
        let bad_type =
            br#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FLOAT", "data": [1]}]}"#;
        assert!(e(bad_type, None).starts_with("input 'x' has an invalid datatype 'FLOAT'"));
        let short =
            br#"{"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "data": [1, 2]}]}"#;
        assert_eq!(
            e(short, None),
            "input 'x': holds 2 elements, its shape has 3"
        );
        let no_data = br#"{"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]}"#;
        assert_eq!(
            e(no_data, None),
            "input 'x' has neither `data` nor binary_data_size"
        );
        let json = br#"{"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]}"#;
        let mut body = json.to_vec();
        body.extend([0u8; 4]);
        assert_eq!(
            e(&body, Some(json.len())),
            "input 'x': binary_data_size is 8, but only 4 bytes of binary data are left in the body"
        );
        body.extend([0u8; 8]);
        assert_eq!(
            e(&body, Some(json.len())),
            "4 bytes of binary data follow the JSON that no input's binary_data_size claims"
        );
        assert!(e(json, Some(999)).starts_with("Inference-Header-Content-Length is 999"));
        let json = br#"{"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 4}}]}"#;
        let mut body = json.to_vec();
        body.extend([0u8; 4]);
        assert_eq!(
            e(&body, Some(json.len())),
            "input 'x': holds 4 bytes, its shape needs 8 (2 elements of 4 bytes)"
        );
    }

    #[test]
    fn responses_encode_json_and_binary_outputs() {
        let req = InferRequest {
            id: "r1".into(),
            inputs: vec![],
            outputs: vec![RequestedOutput {
                name: "output1".into(),
                binary: true,
                shm: None,
            }],
            binary_outputs: false,
            shm_inputs: Vec::new(),
        };
        let outs = vec![
            Tensor {
                name: "output0".into(),
                datatype: DataType::Fp32,
                shape: vec![1, 2],
                data: floats(&[0.5, 1.0]),
            },
            Tensor {
                name: "output1".into(),
                datatype: DataType::Fp32,
                shape: vec![1],
                data: floats(&[2.0]),
            },
        ];
        let r = encode_response("m", "1", &req, &outs);
        let n = r.header_length.unwrap();
        let head: Value = serde_json::from_slice(&r.body[..n]).unwrap();
        assert_eq!(
            head,
            serde_json::json!({"model_name": "m", "model_version": "1", "id": "r1", "outputs": [
                {"name": "output0", "datatype": "FP32", "shape": [1, 2], "data": [0.5, 1.0]},
                {"name": "output1", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}}]})
        );
        assert_eq!(&r.body[n..], &floats(&[2.0])[..]);
        let all_json = InferRequest {
            outputs: vec![],
            id: String::new(),
            ..req
        };
        let r = encode_response("m", "1", &all_json, &outs[..1]);
        assert!(r.header_length.is_none());
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert!(v.get("id").is_none());
    }
}
