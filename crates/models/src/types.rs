//! Element types: the protocol's names (`FP32` on the wire, `TYPE_FP32` in a configuration, the
//! numbers of Triton's `model_config.proto` `DataType`, which `TRITONSERVER_DataType` shares)
//! against the DLPack types tvmrt's tensors carry.

use tvmrt::abi::DLDataType;
use tvmrt::dtype::dtypes;

/// A tensor element type as Triton and KServe's Open Inference Protocol name it. The values are
/// `model_config.proto`'s `DataType` numbers (and `TRITONSERVER_DataType`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DataType {
    /// Not a type Triton knows.
    Invalid = 0,
    /// `BOOL`: one byte, 0 or 1.
    Bool = 1,
    /// `UINT8`.
    Uint8 = 2,
    /// `UINT16`.
    Uint16 = 3,
    /// `UINT32`.
    Uint32 = 4,
    /// `UINT64`.
    Uint64 = 5,
    /// `INT8`.
    Int8 = 6,
    /// `INT16`.
    Int16 = 7,
    /// `INT32`.
    Int32 = 8,
    /// `INT64`.
    Int64 = 9,
    /// `FP16`.
    Fp16 = 10,
    /// `FP32`.
    Fp32 = 11,
    /// `FP64`.
    Fp64 = 12,
    /// `BYTES`: variable-length strings (no tensor type; tvmrt models take none).
    Bytes = 13,
    /// `BF16`.
    Bf16 = 14,
}

/// Each type with a tensor type: its DLPack type and its name (without `TYPE_`).
const TABLE: &[(DataType, DLDataType, &str)] = &[
    (DataType::Bool, dtypes::BOOL, "BOOL"),
    (DataType::Uint8, dtypes::UINT8, "UINT8"),
    (DataType::Uint16, dtypes::UINT16, "UINT16"),
    (DataType::Uint32, dtypes::UINT32, "UINT32"),
    (DataType::Uint64, dtypes::UINT64, "UINT64"),
    (DataType::Int8, dtypes::INT8, "INT8"),
    (DataType::Int16, dtypes::INT16, "INT16"),
    (DataType::Int32, dtypes::INT32, "INT32"),
    (DataType::Int64, dtypes::INT64, "INT64"),
    (DataType::Fp16, dtypes::FLOAT16, "FP16"),
    (DataType::Fp32, dtypes::FLOAT32, "FP32"),
    (DataType::Fp64, dtypes::FLOAT64, "FP64"),
    (DataType::Bf16, dtypes::BFLOAT16, "BF16"),
];

impl DataType {
    /// The type of a tensor element type, if the protocol has one.
    pub fn from_dl(t: DLDataType) -> Option<DataType> {
        TABLE.iter().find(|e| e.1 == t).map(|e| e.0)
    }

    /// The tensor element type of this type (`None` for `BYTES` and `INVALID`).
    pub fn to_dl(self) -> Option<DLDataType> {
        TABLE.iter().find(|e| e.0 == self).map(|e| e.1)
    }

    /// The type numbered `code` (`model_config.proto`, `TRITONSERVER_DataType`); `Invalid`
    /// for a number it does not have.
    pub fn from_code(code: u32) -> DataType {
        match code {
            13 => DataType::Bytes,
            _ => TABLE
                .iter()
                .find(|e| e.0 as u32 == code)
                .map_or(DataType::Invalid, |e| e.0),
        }
    }

    /// Its number (`model_config.proto`, `TRITONSERVER_DataType`).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// `FP32`, as the protocol and error messages name it.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Bytes => "BYTES",
            _ => TABLE
                .iter()
                .find(|e| e.0 == self)
                .map_or("INVALID", |e| e.2),
        }
    }

    /// The type the protocol names `name` (`FP32`, `BYTES`), if any.
    pub fn from_name(name: &str) -> Option<DataType> {
        match name {
            "BYTES" => Some(DataType::Bytes),
            _ => TABLE.iter().find(|e| e.2 == name).map(|e| e.0),
        }
    }

    /// The type a configuration names `name` (`TYPE_FP32`; `TYPE_STRING` is `BYTES`), if any.
    pub fn from_config_name(name: &str) -> Option<DataType> {
        match name.strip_prefix("TYPE_")? {
            "STRING" => Some(DataType::Bytes),
            short => TABLE.iter().find(|e| e.2 == short).map(|e| e.0),
        }
    }

    /// Bytes per element (`None` for `BYTES` and `INVALID`).
    pub fn element_bytes(self) -> Option<usize> {
        self.to_dl().map(tvmrt::dtype::element_bytes)
    }
}

/// `TYPE_FP32`, the configuration's name of a tensor element type.
pub fn config_name(t: DLDataType) -> Option<String> {
    DataType::from_dl(t).map(|d| format!("TYPE_{}", d.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &(t, dl, short) in TABLE {
            assert_eq!(DataType::from_dl(dl), Some(t));
            assert_eq!(t.to_dl(), Some(dl));
            assert_eq!(t.name(), short);
            assert_eq!(DataType::from_name(short), Some(t));
            assert_eq!(DataType::from_code(t.code()), t);
            assert_eq!(config_name(dl).unwrap(), format!("TYPE_{short}"));
            assert_eq!(
                DataType::from_config_name(&format!("TYPE_{short}")),
                Some(t)
            );
        }
        assert_eq!(DataType::Fp32.code(), 11);
        assert_eq!(DataType::Fp64.element_bytes(), Some(8));
        assert_eq!(DataType::Bytes.name(), "BYTES");
        assert_eq!(DataType::from_code(13), DataType::Bytes);
        assert_eq!(DataType::from_code(99), DataType::Invalid);
        assert_eq!(DataType::from_name("FLOAT"), None);
        assert_eq!(
            DataType::from_config_name("TYPE_STRING"),
            Some(DataType::Bytes)
        );
        assert_eq!(DataType::from_config_name("FP32"), None);
        assert_eq!(DataType::from_dl(tvmrt::dtype::dtype(2, 32, 4)), None);
    }
}
