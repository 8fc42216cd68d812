//! Triton's JSON answers as their protobuf messages: the HTTP front answers `/config` and
//! `/stats` in JSON whose fields are the protobuf's (`ModelConfig`, `ModelStatistics`, as
//! Triton's own HTTP server prints them), so the gRPC front reads the same JSON into the
//! message through protobuf's JSON mapping (prost-reflect, over the descriptors build.rs
//! compiled from the vendored protos), and both fronts answer the same fields.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, SerializeOptions};
use serde_json::Value;

static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(DESCRIPTORS).expect("build.rs's descriptors"))
}

/// `json` read as message `full_name` (as `inference.ModelConfig`) by protobuf's JSON
/// mapping; fields the message does not have are errors if `deny_unknown`.
fn read(full_name: &str, json: &Value, deny_unknown: bool) -> Result<DynamicMessage, String> {
    let desc = pool()
        .get_message_by_name(full_name)
        .ok_or_else(|| format!("no message {full_name} in the protocol"))?;
    let options = DeserializeOptions::new().deny_unknown_fields(deny_unknown);
    DynamicMessage::deserialize_with_options(desc, json, &options)
        .map_err(|e| format!("{full_name} from JSON: {e}"))
}

/// The message `full_name` (as `inference.ModelConfig`) read from `json` by protobuf's JSON
/// mapping; fields the message does not have are ignored (what Triton's proto does not name).
pub fn message<T: prost::Message + Default>(full_name: &str, json: &Value) -> Result<T, String> {
    read(full_name, json, false)?
        .transcode_to::<T>()
        .map_err(|e| format!("{full_name}: {e}"))
}

/// `json` read as message `full_name` and written back: fields it does not have and values
/// of the wrong type are errors; fields named as the proto names them, 64-bit integers as
/// numbers, enums by name, fields left at their defaults out (as protobuf cannot tell them
/// from absent ones) and set messages kept even when empty: the form `config.pbtxt` is read
/// into.
pub fn normalize(full_name: &str, json: &Value) -> Result<Value, String> {
    let dynamic = read(full_name, json, true)?;
    let options = SerializeOptions::new()
        .stringify_64_bit_integers(false)
        .use_proto_field_name(true)
        .skip_default_fields(true);
    dynamic
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| format!("{full_name} to JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::pb;
    use serde_json::json;

    #[test]
    fn a_config_in_triton_s_json_reads_as_model_config() {
        let config = json!({
            "name": "m", "backend": "tvmrt", "max_batch_size": 8,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [16]}],
            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": ["8"]}],
            "dynamic_batching": {"max_queue_delay_microseconds": 20000, "preferred_batch_size": [4]},
            "instance_group": [{"name": "m_0", "kind": "KIND_CPU", "count": 2}],
            "parameters": {"device": {"string_value": "cpu"}},
            "something_tvmrt_only": 1,
        });
        let c: pb::ModelConfig = message("inference.ModelConfig", &config).unwrap();
        assert_eq!((c.name.as_str(), c.max_batch_size), ("m", 8));
        assert_eq!(c.input[0].dims, vec![16]);
        assert_eq!(c.output[0].dims, vec![8]);
        assert_eq!(c.input[0].data_type, pb::DataType::TypeFp32 as i32);
        assert_eq!(c.instance_group[0].count, 2);
        assert_eq!(c.parameters["device"].string_value, "cpu");
        let e =
            message::<pb::ModelConfig>("inference.ModelConfig", &json!({"max_batch_size": "x"}));
        assert!(e.unwrap_err().contains("ModelConfig"));
    }
}
