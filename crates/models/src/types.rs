//! Element types: Triton's names (`TYPE_FP32` in a configuration, `FP32` on the wire, the
//! `TRITONSERVER_DataType` enum) against the DLPack types tvmrt's tensors carry.

use tvmrt::abi::DLDataType;
use tvmrt::dtype::dtypes;

use crate::sys::{self, DataType};

/// Each Triton type with its DLPack type and its configuration name (without `TYPE_`).
/// `BYTES` (variable-length strings) has no tensor type and is left out.
const TABLE: &[(DataType, DLDataType, &str)] = &[
    (sys::TYPE_BOOL, dtypes::BOOL, "BOOL"),
    (sys::TYPE_UINT8, dtypes::UINT8, "UINT8"),
    (sys::TYPE_UINT16, dtypes::UINT16, "UINT16"),
    (sys::TYPE_UINT32, dtypes::UINT32, "UINT32"),
    (sys::TYPE_UINT64, dtypes::UINT64, "UINT64"),
    (sys::TYPE_INT8, dtypes::INT8, "INT8"),
    (sys::TYPE_INT16, dtypes::INT16, "INT16"),
    (sys::TYPE_INT32, dtypes::INT32, "INT32"),
    (sys::TYPE_INT64, dtypes::INT64, "INT64"),
    (sys::TYPE_FP16, dtypes::FLOAT16, "FP16"),
    (sys::TYPE_FP32, dtypes::FLOAT32, "FP32"),
    (sys::TYPE_FP64, dtypes::FLOAT64, "FP64"),
    (sys::TYPE_BF16, dtypes::BFLOAT16, "BF16"),
];

/// The Triton type of a tensor element type, if Triton has one.
pub fn from_dl(t: DLDataType) -> Option<DataType> {
    TABLE.iter().find(|e| e.1 == t).map(|e| e.0)
}

/// `FP32`, as the protocol and error messages name a Triton type.
pub fn name(t: DataType) -> &'static str {
    match t {
        sys::TYPE_BYTES => "BYTES",
        _ => TABLE.iter().find(|e| e.0 == t).map_or("INVALID", |e| e.2),
    }
}

/// `TYPE_FP32`, the configuration's name of a tensor element type.
pub fn config_name(t: DLDataType) -> Option<String> {
    TABLE
        .iter()
        .find(|e| e.1 == t)
        .map(|e| format!("TYPE_{}", e.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &(t, dl, short) in TABLE {
            assert_eq!(from_dl(dl), Some(t));
            assert_eq!(name(t), short);
            assert_eq!(config_name(dl).unwrap(), format!("TYPE_{short}"));
        }
        assert_eq!(name(sys::TYPE_BYTES), "BYTES");
        assert_eq!(from_dl(tvmrt::dtype::dtype(2, 32, 4)), None);
    }
}
