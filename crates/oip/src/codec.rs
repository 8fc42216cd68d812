//! Tensor contents as the protocol carries them: JSON arrays (flat or nested, row-major) to
//! and from little-endian bytes, and `BYTES` tensors as Triton serializes them (each element a
//! 4-byte little-endian length, then its bytes).

use serde::ser::{Serialize, SerializeSeq, Serializer};
use serde_json::Value;
use tvmrt_models::types::DataType;

/// The number of elements of `shape`, or why it is not a shape.
pub fn element_count(shape: &[i64]) -> Result<usize, String> {
    let mut n: usize = 1;
    for &d in shape {
        if d < 0 {
            return Err(format!("shape {shape:?} has a negative dimension"));
        }
        n = n
            .checked_mul(d as usize)
            .ok_or_else(|| format!("shape {shape:?} is too large"))?;
    }
    Ok(n)
}

/// The bytes of a JSON tensor `data` (flat or nested arrays) holding `count` elements of
/// `dtype`. Nothing is sized by `count` before the elements are counted: the shape is the
/// client's word, the elements are what it sent.
pub fn json_to_bytes(data: &Value, dtype: DataType, count: usize) -> Result<Vec<u8>, String> {
    let mut flat = Vec::new();
    flatten(data, &mut flat)?;
    if flat.len() != count {
        return Err(format!(
            "holds {} elements, its shape has {count}",
            flat.len()
        ));
    }
    let mut out = Vec::with_capacity(count * dtype.element_bytes().unwrap_or(4));
    for (k, v) in flat.iter().enumerate() {
        push_element(v, dtype, &mut out).map_err(|why| format!("element {k} ({v}): {why}"))?;
    }
    Ok(out)
}

fn flatten<'v>(v: &'v Value, out: &mut Vec<&'v Value>) -> Result<(), String> {
    match v {
        Value::Array(items) => {
            for item in items {
                flatten(item, out)?;
            }
        }
        Value::Object(_) => return Err("`data` holds an object, not tensor elements".into()),
        Value::Null => return Err("`data` holds a null".into()),
        _ => out.push(v),
    }
    Ok(())
}

fn int(v: &Value, min: i128, max: i128) -> Result<i128, String> {
    let n = match v {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .ok_or("not an integer")?,
        Value::Bool(b) => i128::from(*b),
        _ => return Err("not a number".into()),
    };
    if n < min || n > max {
        return Err("out of the type's range".into());
    }
    Ok(n)
}

fn float(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| "not a number".into()),
        _ => Err("not a number".into()),
    }
}

fn push_element(v: &Value, dtype: DataType, out: &mut Vec<u8>) -> Result<(), String> {
    use DataType as D;
    match dtype {
        D::Bool => match v {
            Value::Bool(b) => out.push(u8::from(*b)),
            _ => return Err("not a boolean".into()),
        },
        D::Uint8 => out.push(int(v, 0, u8::MAX.into())? as u8),
        D::Uint16 => out.extend((int(v, 0, u16::MAX.into())? as u16).to_le_bytes()),
        D::Uint32 => out.extend((int(v, 0, u32::MAX.into())? as u32).to_le_bytes()),
        D::Uint64 => out.extend((int(v, 0, u64::MAX.into())? as u64).to_le_bytes()),
        D::Int8 => out.push(int(v, i8::MIN.into(), i8::MAX.into())? as i8 as u8),
        D::Int16 => out.extend((int(v, i16::MIN.into(), i16::MAX.into())? as i16).to_le_bytes()),
        D::Int32 => out.extend((int(v, i32::MIN.into(), i32::MAX.into())? as i32).to_le_bytes()),
        D::Int64 => out.extend((int(v, i64::MIN.into(), i64::MAX.into())? as i64).to_le_bytes()),
        D::Fp16 => out.extend(half::f16::from_f64(float(v)?).to_le_bytes()),
        D::Bf16 => out.extend(half::bf16::from_f64(float(v)?).to_le_bytes()),
        D::Fp32 => out.extend((float(v)? as f32).to_le_bytes()),
        D::Fp64 => out.extend(float(v)?.to_le_bytes()),
        D::Bytes => {
            let s = v.as_str().ok_or("not a string")?;
            out.extend((s.len() as u32).to_le_bytes());
            out.extend(s.as_bytes());
        }
        D::Invalid => return Err("the type is invalid".into()),
    }
    Ok(())
}

/// Checks that `bytes` hold `count` elements of `dtype` (for `BYTES`, `count` length-prefixed
/// strings, exactly).
pub fn check_size(bytes: &[u8], dtype: DataType, count: usize) -> Result<(), String> {
    match dtype.element_bytes() {
        Some(size) if count.checked_mul(size) == Some(bytes.len()) => Ok(()),
        Some(size) => Err(format!(
            "holds {} bytes, its shape needs {} ({count} elements of {size} bytes)",
            bytes.len(),
            count as u128 * size as u128
        )),
        None => {
            let strings = split_strings(bytes)?;
            if strings.len() == count {
                Ok(())
            } else {
                Err(format!(
                    "holds {} strings, its shape has {count}",
                    strings.len()
                ))
            }
        }
    }
}

/// The strings of a `BYTES` tensor's serialization.
pub fn split_strings(mut bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
            return Err("a BYTES element is cut short in its length".into());
        };
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err("a BYTES element is cut short".into());
        }
        out.push(&rest[..len]);
        bytes = &rest[len..];
    }
    Ok(out)
}

/// A tensor's bytes written as a flat JSON array (shortest round-tripping floats; NaN and
/// infinities as `null`, which JSON cannot spell otherwise).
pub struct JsonData<'a> {
    /// Its element type.
    pub dtype: DataType,
    /// Its little-endian bytes.
    pub bytes: &'a [u8],
}

impl Serialize for JsonData<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use DataType as D;
        macro_rules! each {
            ($t:ty, $n:literal, $f:ident, $conv:expr) => {{
                let mut seq = s.serialize_seq(Some(self.bytes.len() / $n))?;
                for c in self.bytes.chunks_exact($n) {
                    let x = <$t>::from_le_bytes(c.try_into().unwrap());
                    seq.serialize_element(&$conv(x))?;
                }
                seq.end()
            }};
        }
        match self.dtype {
            D::Bool => each!(u8, 1, u8, |x: u8| x != 0),
            D::Uint8 => each!(u8, 1, u8, |x| x),
            D::Uint16 => each!(u16, 2, u16, |x| x),
            D::Uint32 => each!(u32, 4, u32, |x| x),
            D::Uint64 => each!(u64, 8, u64, |x| x),
            D::Int8 => each!(i8, 1, i8, |x| x),
            D::Int16 => each!(i16, 2, i16, |x| x),
            D::Int32 => each!(i32, 4, i32, |x| x),
            D::Int64 => each!(i64, 8, i64, |x| x),
            D::Fp16 => each!(u16, 2, f16, |x| half::f16::from_bits(x).to_f32()),
            D::Bf16 => each!(u16, 2, bf16, |x| half::bf16::from_bits(x).to_f32()),
            D::Fp32 => each!(f32, 4, f32, |x| x),
            D::Fp64 => each!(f64, 8, f64, |x| x),
            D::Bytes | D::Invalid => {
                let strings = split_strings(self.bytes).unwrap_or_default();
                let mut seq = s.serialize_seq(Some(strings.len()))?;
                for b in strings {
                    seq.serialize_element(&String::from_utf8_lossy(b))?;
                }
                seq.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn le<T: Copy, const N: usize>(v: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|x| f(*x)).collect()
    }

    #[test]
    fn nested_and_flat_json_give_the_same_bytes() {
        let flat = json_to_bytes(&json!([1.5, -2, 3, 4.25]), DataType::Fp32, 4).unwrap();
        let nested = json_to_bytes(&json!([[1.5, -2], [3, 4.25]]), DataType::Fp32, 4).unwrap();
        assert_eq!(flat, nested);
        assert_eq!(flat, le(&[1.5f32, -2.0, 3.0, 4.25], f32::to_le_bytes));
        let ints = json_to_bytes(&json!([[-1], [2]]), DataType::Int64, 2).unwrap();
        assert_eq!(ints, le(&[-1i64, 2], i64::to_le_bytes));
        let b = json_to_bytes(&json!([true, false]), DataType::Bool, 2).unwrap();
        assert_eq!(b, vec![1, 0]);
        let h = json_to_bytes(&json!([1.0]), DataType::Fp16, 1).unwrap();
        assert_eq!(h, half::f16::from_f32(1.0).to_le_bytes());
        let s = json_to_bytes(&json!(["ab", ""]), DataType::Bytes, 2).unwrap();
        assert_eq!(s, b"\x02\0\0\0ab\0\0\0\0");
        assert_eq!(split_strings(&s).unwrap(), vec![&b"ab"[..], b""]);
    }

    #[test]
    fn bad_json_data_is_refused_with_the_reason() {
        let e = |d: Value, t: DataType, n: usize| json_to_bytes(&d, t, n).unwrap_err();
        assert_eq!(
            e(json!([1, 2, 3]), DataType::Fp32, 4),
            "holds 3 elements, its shape has 4"
        );
        assert_eq!(
            e(json!([300]), DataType::Uint8, 1),
            "element 0 (300): out of the type's range"
        );
        assert_eq!(
            e(json!([1.5]), DataType::Int32, 1),
            "element 0 (1.5): not an integer"
        );
        assert_eq!(
            e(json!(["x"]), DataType::Fp32, 1),
            "element 0 (\"x\"): not a number"
        );
        assert_eq!(
            e(json!([1]), DataType::Bool, 1),
            "element 0 (1): not a boolean"
        );
        assert_eq!(
            e(json!([{"a": 1}]), DataType::Fp32, 1),
            "`data` holds an object, not tensor elements"
        );
        assert_eq!(
            e(json!([1]), DataType::Bytes, 1),
            "element 0 (1): not a string"
        );
        // A shape of 2^40 elements with one element sent: refused, nothing sized by the shape
        // (this aborted the server: 8 TiB asked of the allocator).
        assert_eq!(
            e(json!([1]), DataType::Fp32, 1 << 40),
            "holds 1 elements, its shape has 1099511627776"
        );
    }

    #[test]
    fn sizes_are_checked() {
        assert!(check_size(&[0; 8], DataType::Fp32, 2).is_ok());
        assert_eq!(
            check_size(&[0; 7], DataType::Fp32, 2).unwrap_err(),
            "holds 7 bytes, its shape needs 8 (2 elements of 4 bytes)"
        );
        assert_eq!(
            check_size(b"\x05\0\0\0ab", DataType::Bytes, 1).unwrap_err(),
            "a BYTES element is cut short"
        );
        // 2^62 + 1 elements of 4 bytes wrap to 4 bytes in 64 bits: refused, not matched.
        let wraps = (1usize << 62) + 1;
        assert_eq!(
            check_size(&[0; 4], DataType::Fp32, wraps).unwrap_err(),
            "holds 4 bytes, its shape needs 18446744073709551620 \
             (4611686018427387905 elements of 4 bytes)"
        );
        assert_eq!(element_count(&[2, 3]).unwrap(), 6);
        assert!(element_count(&[2, -1]).is_err());
        assert!(element_count(&[i64::MAX, i64::MAX]).is_err());
    }

    #[test]
    fn bytes_to_json() {
        let show = |t: DataType, b: &[u8]| {
            serde_json::to_string(&JsonData { dtype: t, bytes: b }).unwrap()
        };
        assert_eq!(
            show(DataType::Fp32, &le(&[0.1f32, -2.0], f32::to_le_bytes)),
            "[0.1,-2.0]"
        );
        assert_eq!(
            show(DataType::Int64, &le(&[-7i64], i64::to_le_bytes)),
            "[-7]"
        );
        assert_eq!(show(DataType::Bool, &[1, 0]), "[true,false]");
        assert_eq!(show(DataType::Fp32, &f32::NAN.to_le_bytes()), "[null]");
        assert_eq!(show(DataType::Bytes, b"\x02\0\0\0hi"), "[\"hi\"]");
        assert_eq!(
            show(DataType::Bf16, &half::bf16::from_f32(1.5).to_le_bytes()),
            "[1.5]"
        );
    }
}
