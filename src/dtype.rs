//! Data types: TVM's string forms (`"float32"`, `"int8x4"`, `"bool"`, `"float8_e4m3fn"`) and
//! storage sizes.
//!
//! Facts from tvm-ffi `src/ffi/dtype.cc` (`DLDataTypeToString`, `StringViewToDLDataType`):
//! the aliases `i32`/`u8`/`f16`/`bf16`/`fp8_*`, `""`/`"void"` for the empty handle type, bits
//! defaulting to 32, lanes after `x`, scalable vectors as `xvscalexN`.

use crate::abi::{DLDataType, DLDataTypeCode};
use crate::error::{Error, Result};

/// Codes of the named sub-byte and 8-bit float formats (DLPack 1.x), with their names and bits.
const FLOAT_VARIANTS: &[(u8, &str, u8)] = &[
    (7, "float8_e3m4", 8),
    (8, "float8_e4m3", 8),
    (9, "float8_e4m3b11fnuz", 8),
    (10, "float8_e4m3fn", 8),
    (11, "float8_e4m3fnuz", 8),
    (12, "float8_e5m2", 8),
    (13, "float8_e5m2fnuz", 8),
    (14, "float8_e8m0fnu", 8),
    (15, "float6_e2m3fn", 6),
    (16, "float6_e3m2fn", 6),
    (17, "float4_e2m1fn", 4),
];

/// Builds a `DLDataType`.
pub const fn dtype(code: u8, bits: u8, lanes: u16) -> DLDataType {
    DLDataType {
        code: DLDataTypeCode(code),
        bits,
        lanes,
    }
}

/// Common data types.
pub mod dtypes {
    use super::dtype;
    use crate::abi::DLDataType;
    pub const BOOL: DLDataType = dtype(6, 8, 1);
    pub const INT8: DLDataType = dtype(0, 8, 1);
    pub const INT16: DLDataType = dtype(0, 16, 1);
    pub const INT32: DLDataType = dtype(0, 32, 1);
    pub const INT64: DLDataType = dtype(0, 64, 1);
    pub const UINT8: DLDataType = dtype(1, 8, 1);
    pub const UINT16: DLDataType = dtype(1, 16, 1);
    pub const UINT32: DLDataType = dtype(1, 32, 1);
    pub const UINT64: DLDataType = dtype(1, 64, 1);
    pub const FLOAT16: DLDataType = dtype(2, 16, 1);
    pub const FLOAT32: DLDataType = dtype(2, 32, 1);
    pub const FLOAT64: DLDataType = dtype(2, 64, 1);
    pub const BFLOAT16: DLDataType = dtype(4, 16, 1);
}

fn code_name(code: u8) -> Option<&'static str> {
    Some(match code {
        0 => "int",
        1 => "uint",
        2 => "float",
        3 => "handle",
        4 => "bfloat",
        5 => "complex",
        6 => "bool",
        c => return FLOAT_VARIANTS.iter().find(|v| v.0 == c).map(|v| v.1),
    })
}

/// Formats a data type as TVM does (`TVMFFIDataTypeToString`).
pub fn dtype_to_string(t: DLDataType) -> Result<String> {
    let code = t.code.0;
    if code == 6 && t.bits == 8 && t.lanes == 1 {
        return Ok("bool".into());
    }
    if code == 3 && t.bits == 0 && t.lanes == 0 {
        return Ok(String::new());
    }
    let name = code_name(code)
        .ok_or_else(|| Error::value(format!("DLDataType contains unknown type_code={code}")))?;
    let mut s = String::from(name);
    if code == 3 {
        return Ok(s);
    }
    if code < 7 && !(code == 6 && t.bits == 8) {
        s.push_str(&t.bits.to_string());
    }
    let lanes = t.lanes as i16;
    if lanes > 1 {
        s.push_str(&format!("x{lanes}"));
    } else if lanes < -1 {
        s.push_str(&format!("xvscalex{}", -(lanes as i32)));
    }
    Ok(s)
}

fn unknown(s: &str) -> Error {
    Error::value(format!("unknown dtype `{s}`"))
}

/// Parses `"x4"`-style lanes (or nothing) at the end of a dtype string.
fn parse_lanes(rest: &str, whole: &str) -> Result<u16> {
    let (scalable, rest) = match rest.strip_prefix("xvscale") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    if rest.is_empty() && !scalable {
        return Ok(1);
    }
    let digits = rest.strip_prefix('x').ok_or_else(|| unknown(whole))?;
    let lanes: u32 = digits.parse().map_err(|_| {
        Error::value(format!(
            "Invalid lanes specification in dtype '{whole}'. Lanes must be a positive integer."
        ))
    })?;
    if lanes == 0 || lanes > u16::MAX as u32 {
        return Err(Error::value(format!(
            "Invalid lanes specification in dtype '{whole}'. Lanes must be a positive integer."
        )));
    }
    Ok(if scalable {
        (-(lanes as i32)) as i16 as u16
    } else {
        lanes as u16
    })
}

/// Parses a TVM dtype string (`TVMFFIDataTypeFromString`).
pub fn dtype_from_str(input: &str) -> Result<DLDataType> {
    if input.is_empty() || input == "void" {
        return Ok(dtype(3, 0, 0));
    }
    let starts_digit = |s: &str, n: usize| s.as_bytes().get(n).is_some_and(u8::is_ascii_digit);
    let normalized: String = if input.starts_with('i') && starts_digit(input, 1) {
        format!("int{}", &input[1..])
    } else if input.starts_with('u') && starts_digit(input, 1) {
        format!("uint{}", &input[1..])
    } else if input.starts_with("bf") && starts_digit(input, 2) {
        format!("bfloat{}", &input[2..])
    } else if let Some(r) = input.strip_prefix("fp8_") {
        format!("float8_{r}")
    } else if let Some(r) = input.strip_prefix("fp6_") {
        format!("float6_{r}")
    } else if let Some(r) = input.strip_prefix("fp4_") {
        format!("float4_{r}")
    } else if input.starts_with('f') && starts_digit(input, 1) {
        format!("float{}", &input[1..])
    } else {
        input.to_string()
    };
    let s = normalized.as_str();
    // Named float formats first: longest names first so `e4m3fn` wins over `e4m3`.
    let mut variants: Vec<&(u8, &str, u8)> = FLOAT_VARIANTS.iter().collect();
    crate::cold_sort::sort_by_key(&mut variants, |v| std::cmp::Reverse(v.1.len()));
    for (code, name, bits) in variants {
        if let Some(rest) = s.strip_prefix(name) {
            if rest.is_empty() || rest.starts_with('x') || (*code == 17 && rest.starts_with('_')) {
                let rest = rest.strip_prefix('_').unwrap_or(rest);
                return Ok(dtype(*code, *bits, parse_lanes(rest, input)?));
            }
        }
    }
    if s.starts_with("float8_") || s.starts_with("float6_") || s.starts_with("float4_") {
        return Err(unknown(input));
    }
    if s == "bool" {
        return Ok(dtype(6, 8, 1));
    }
    if let Some(rest) = s.strip_prefix("handle") {
        let (bits, rest) = split_digits(rest);
        return Ok(dtype(
            3,
            bits.unwrap_or(64) as u8,
            parse_lanes(rest, input)?,
        ));
    }
    let (code, rest) = if let Some(r) = s.strip_prefix("uint") {
        (1, r)
    } else if let Some(r) = s.strip_prefix("int") {
        (0, r)
    } else if let Some(r) = s.strip_prefix("bfloat") {
        (4, r)
    } else if let Some(r) = s.strip_prefix("float") {
        (2, r)
    } else if let Some(r) = s.strip_prefix("bool") {
        (6, r)
    } else if let Some(r) = s.strip_prefix("complex") {
        (5, r)
    } else {
        return Err(unknown(input));
    };
    let (bits, rest) = split_digits(rest);
    let bits = match bits {
        Some(b) if b == 0 || b > 255 => return Err(unknown(input)),
        Some(b) => b as u8,
        None if code == 6 => 8,
        None => 32,
    };
    Ok(dtype(code, bits, parse_lanes(rest, input)?))
}

fn split_digits(s: &str) -> (Option<u32>, &str) {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    if end == 0 {
        return (None, s);
    }
    (s[..end].parse().ok().or(Some(u32::MAX)), &s[end..])
}

/// How a boolean is typed in each ABI generation. The classic one (TVM <= 0.20: graph JSON
/// `"bool"`, params blobs, `NDArray`s, and compiled kernels, which check
/// `code * 1000 + bits == 1001`) calls it `uint1` stored one byte per element (TVM 0.19
/// `String2DLDataType`, `GetDataSize`); tvm-ffi calls it DLPack's `kDLBool` (code 6, 8 bits),
/// also one byte per element. tvmrt's objects hold the tvm-ffi form; each classic door
/// converts with these two functions (only scalar lanes: `uint1xN` is a packed vector in TVM).
pub mod classic_bool {
    use super::{dtype, dtypes, DLDataType};

    /// The classic generation's bool: `uint1`.
    pub const CLASSIC: DLDataType = dtype(1, 1, 1);

    /// Whether `t` is the classic bool (`uint1`).
    #[inline(always)]
    pub fn is_classic(t: DLDataType) -> bool {
        t.code.0 == 1 && t.bits == 1 && t.lanes == 1
    }

    /// Whether `t` is tvm-ffi's bool (`kDLBool`, 8 bits).
    #[inline(always)]
    pub fn is_ffi(t: DLDataType) -> bool {
        t.code.0 == 6 && t.bits == 8 && t.lanes == 1
    }

    /// A dtype that came through a classic door, in tvm-ffi's terms: `uint1` becomes
    /// `kDLBool`; every other dtype is unchanged.
    #[inline]
    pub fn from_classic(t: DLDataType) -> DLDataType {
        if is_classic(t) {
            dtypes::BOOL
        } else {
            t
        }
    }

    /// A dtype leaving through a classic door: `kDLBool` becomes `uint1`; every other dtype
    /// is unchanged.
    #[inline]
    pub fn to_classic(t: DLDataType) -> DLDataType {
        if is_ffi(t) {
            CLASSIC
        } else {
            t
        }
    }
}

/// Bytes one element occupies in memory (`(bits * lanes + 7) / 8`, as TVM's `GetDataSize`).
pub fn element_bytes(t: DLDataType) -> usize {
    (t.bits as usize * t.lanes.max(1) as usize).div_ceil(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_tvm() {
        assert_eq!(dtype_to_string(dtypes::FLOAT32).unwrap(), "float32");
        assert_eq!(dtype_to_string(dtypes::BOOL).unwrap(), "bool");
        assert_eq!(dtype_to_string(dtype(0, 8, 4)).unwrap(), "int8x4");
        assert_eq!(dtype_to_string(dtypes::BFLOAT16).unwrap(), "bfloat16");
        assert_eq!(dtype_to_string(dtype(10, 8, 1)).unwrap(), "float8_e4m3fn");
        assert_eq!(dtype_to_string(dtype(3, 0, 0)).unwrap(), "");
        assert_eq!(dtype_to_string(dtype(3, 64, 1)).unwrap(), "handle");
        assert!(dtype_to_string(dtype(99, 8, 1)).is_err());
    }

    #[test]
    fn parses_like_tvm() {
        for s in [
            "float32",
            "int8x4",
            "bool",
            "uint1",
            "bfloat16",
            "float8_e4m3fn",
            "float8_e4m3",
            "float4_e2m1fn",
            "float16x8",
            "int64",
        ] {
            let t = dtype_from_str(s).unwrap();
            assert_eq!(dtype_to_string(t).unwrap(), s, "{s}");
        }
        assert_eq!(dtype_from_str("i32").unwrap(), dtypes::INT32);
        assert_eq!(dtype_from_str("f16").unwrap(), dtypes::FLOAT16);
        assert_eq!(dtype_from_str("bf16").unwrap(), dtypes::BFLOAT16);
        assert_eq!(dtype_from_str("float").unwrap(), dtypes::FLOAT32);
        assert_eq!(dtype_from_str("handle").unwrap(), dtype(3, 64, 1));
        assert!(dtype_from_str("floaty").is_err());
        assert!(dtype_from_str("int32x0").is_err());
        assert!(dtype_from_str("int999").is_err());
    }

    #[test]
    fn bool_converts_between_the_generations() {
        use classic_bool::*;
        assert_eq!(from_classic(dtype(1, 1, 1)), dtypes::BOOL);
        assert_eq!(to_classic(dtypes::BOOL), dtype(1, 1, 1));
        // Vectors and other types pass unchanged.
        for t in [
            dtype(1, 1, 4),
            dtypes::UINT8,
            dtype(6, 8, 2),
            dtypes::FLOAT32,
        ] {
            assert_eq!(from_classic(t), t);
            assert_eq!(to_classic(t), t);
        }
        // TVM 0.19 prints uint1 as "bool", as tvm-ffi prints kDLBool.
        assert_eq!(dtype_to_string(from_classic(CLASSIC)).unwrap(), "bool");
    }

    #[test]
    fn element_sizes() {
        assert_eq!(element_bytes(dtypes::BOOL), 1);
        assert_eq!(element_bytes(dtypes::FLOAT16), 2);
        assert_eq!(element_bytes(dtypes::BFLOAT16), 2);
        assert_eq!(element_bytes(dtype(2, 32, 4)), 16);
        assert_eq!(element_bytes(dtype(17, 4, 1)), 1);
        assert_eq!(element_bytes(dtypes::INT64), 8);
    }
}
