//! Tensor arguments of the runtime's library functions (`tvm.contrib.sort.*`, `relax.run.*`)
//! read element by element: checked CPU, compact descriptors, and element keys that order and
//! compare as the C++ and numpy versions of those functions do, sorted by one sort.

use crate::abi::{DLDataType, DLTensor};
use crate::dtype::dtype_to_string;
use crate::error::{Error, Result};
use crate::tensor::layout::{dl_shape, dl_strides, is_contiguous};
use crate::value::AnyView;

/// A compact CPU tensor argument, borrowed for one call.
pub struct TensorArg<'a> {
    pub dl: &'a DLTensor,
    pub shape: &'a [i64],
    /// Bytes per element.
    pub elem: usize,
}

impl<'a> TensorArg<'a> {
    /// Argument `i` of `args`, for function `what`.
    pub fn of(args: &'a [AnyView<'_>], i: usize, what: &str) -> Result<TensorArg<'a>> {
        let v = args.get(i).ok_or_else(|| {
            Error::type_error(format!(
                "{what}: missing argument {i} (a tensor); got {} arguments",
                args.len()
            ))
        })?;
        let p = v
            .as_dltensor()
            .filter(|p| !p.is_null())
            .ok_or_else(|| v.type_mismatch(&format!("{what} argument {i}"), "a tensor"))?;
        // SAFETY: a non-null tensor argument is a live DLTensor for the call (the packed
        // function contract).
        let dl = unsafe { &*p };
        crate::device::require_host(dl.device, what)?;
        // SAFETY: as above.
        let shape = unsafe { dl_shape(dl, what)? };
        // SAFETY: as above.
        let strides = unsafe { dl_strides(dl) };
        if !is_contiguous(shape, strides) {
            crate::bail_value!("{what}: argument {i} is not a compact tensor");
        }
        if dl.dtype.lanes != 1 || dl.dtype.bits % 8 != 0 || dl.dtype.bits == 0 {
            crate::bail_type!(
                "{what}: argument {i} has unsupported dtype {}",
                dtype_to_string(dl.dtype).unwrap_or_default()
            );
        }
        if dl.data.is_null() && shape.iter().product::<i64>() != 0 {
            crate::bail_value!("{what}: argument {i} has no data");
        }
        Ok(TensorArg {
            dl,
            shape,
            elem: dl.dtype.bits as usize / 8,
        })
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }

    /// The dtype's name (`float32`).
    pub fn dtype_name(&self) -> String {
        dtype_to_string(self.dl.dtype).unwrap_or_default()
    }

    fn base(&self) -> *mut u8 {
        self.dl
            .data
            .cast::<u8>()
            .wrapping_add(self.dl.byte_offset as usize)
    }

    /// The raw bytes of element `i` (`i < numel()`).
    pub fn bytes(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.numel());
        // SAFETY: a compact tensor of `numel()` elements of `elem` bytes starts at `base()`.
        unsafe { std::slice::from_raw_parts(self.base().add(i * self.elem), self.elem) }
    }

    /// Writes raw bytes into element `i` (`i < numel()`, `bytes.len() == elem`).
    pub fn write(&self, i: usize, bytes: &[u8]) {
        debug_assert!(i < self.numel() && bytes.len() == self.elem);
        // SAFETY: as in `bytes`; output tensors are written by the function that was given
        // them, as TVM's versions do.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base().add(i * self.elem), self.elem)
        }
    }

    /// The order keys of this tensor's dtype: an error for a dtype with no order, unless the
    /// tensor is empty (no element is read, so no key is needed).
    pub fn keys(&self) -> Result<KeyKind> {
        match KeyKind::of(self.dl.dtype) {
            Err(_) if self.numel() == 0 => Ok(KeyKind::Unsigned(1)),
            kind => kind,
        }
    }
}

/// How the elements of one dtype map to order keys: one `u64` per element whose unsigned order
/// is the C++ comparison of the type (so every dtype sorts with one sort, [`sort_pairs`]).
/// Integers exactly; floats (16, 32 and 64 bits, bfloat16) by value as `f64`, -0.0 equal to
/// 0.0, and every NaN equal to the others and above all numbers (where numpy's sort and unique
/// put them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Signed integers of this many bytes.
    Signed(usize),
    /// Unsigned integers and booleans of this many bytes.
    Unsigned(usize),
    F16,
    BF16,
    F32,
    F64,
}

impl KeyKind {
    /// The key kind of `dtype`.
    pub fn of(dtype: DLDataType) -> Result<KeyKind> {
        Ok(match (dtype.code.0, dtype.bits) {
            (0, bits @ (8 | 16 | 32 | 64)) => KeyKind::Signed(bits as usize / 8),
            (1 | 6, bits @ (8 | 16 | 32 | 64)) => KeyKind::Unsigned(bits as usize / 8),
            (2, 16) => KeyKind::F16,
            (2, 32) => KeyKind::F32,
            (2, 64) => KeyKind::F64,
            (4, 16) => KeyKind::BF16,
            _ => crate::bail_type!(
                "unsupported element dtype {}",
                dtype_to_string(dtype).unwrap_or_default()
            ),
        })
    }

    /// The order key of one element's little-endian bytes.
    #[inline]
    pub fn key(self, b: &[u8]) -> u64 {
        let le = |n: usize| {
            let mut buf = [0u8; 8];
            buf[..n].copy_from_slice(&b[..n]);
            u64::from_le_bytes(buf)
        };
        match self {
            KeyKind::Signed(n) => {
                let shift = 64 - 8 * n as u32;
                let v = ((le(n) << shift) as i64) >> shift;
                (v as u64) ^ (1 << 63)
            }
            KeyKind::Unsigned(n) => le(n),
            KeyKind::F16 => float_key(half::f16::from_bits(le(2) as u16).to_f64()),
            KeyKind::BF16 => float_key(half::bf16::from_bits(le(2) as u16).to_f64()),
            KeyKind::F32 => float_key(f32::from_bits(le(4) as u32) as f64),
            KeyKind::F64 => float_key(f64::from_bits(le(8))),
        }
    }

    /// Whether an element is nonzero (NaN is; -0.0 is not).
    pub fn is_nonzero(self, b: &[u8]) -> bool {
        self.key(b) != self.key(&[0; 8])
    }
}

/// The order key of a float: NaN above everything, -0.0 as 0.0, otherwise the bits made
/// unsigned-comparable (negatives' bits reversed, positives above them).
fn float_key(v: f64) -> u64 {
    if v.is_nan() {
        return u64::MAX;
    }
    let bits = if v == 0.0 { 0 } else { v.to_bits() };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Stably sorts (key, index) pairs by key: equal keys keep their order. The one sort of every
/// dtype and direction (descending sorts `!key`), so the library holds one copy of it; the
/// pairs are built in index order, so the tuple order (an unstable sort of distinct tuples)
/// is the stable order by key.
pub fn sort_pairs(v: &mut [(u64, usize)]) {
    v.sort_unstable();
}

/// Writes `v` (an index) into element `i` of an integer or float output tensor.
pub fn write_index(out: &TensorArg<'_>, i: usize, v: i64) -> Result<()> {
    let t = out.dl.dtype;
    let bytes: Vec<u8> = match (t.code.0, t.bits) {
        (0, 8) => (v as i8).to_le_bytes().to_vec(),
        (0, 16) => (v as i16).to_le_bytes().to_vec(),
        (0, 32) => (v as i32).to_le_bytes().to_vec(),
        (0, 64) => v.to_le_bytes().to_vec(),
        (1, 8) => (v as u8).to_le_bytes().to_vec(),
        (1, 16) => (v as u16).to_le_bytes().to_vec(),
        (1, 32) => (v as u32).to_le_bytes().to_vec(),
        (1, 64) => (v as u64).to_le_bytes().to_vec(),
        (2, 16) => half::f16::from_f64(v as f64).to_le_bytes().to_vec(),
        (2, 32) => (v as f32).to_le_bytes().to_vec(),
        (2, 64) => (v as f64).to_le_bytes().to_vec(),
        _ => crate::bail_type!("unsupported index output dtype {}", out.dtype_name()),
    };
    out.write(i, &bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::*;
    use crate::abi::DLDataTypeCode;

    /// The order the keys must give: each element read as i128 or f64 and compared as numpy
    /// and the C++ comparison do (what the sorts compared before the keys).
    fn reference(kind: KeyKind, b: &[u8]) -> (Option<i128>, f64) {
        let mut buf = [0u8; 16];
        buf[..b.len()].copy_from_slice(b);
        let raw = u128::from_le_bytes(buf);
        match kind {
            KeyKind::Signed(n) => {
                let shift = 128 - 8 * n as u32;
                (Some(((raw << shift) as i128) >> shift), 0.0)
            }
            KeyKind::Unsigned(_) => (Some(raw as i128), 0.0),
            KeyKind::F16 => (None, half::f16::from_bits(raw as u16).to_f64()),
            KeyKind::BF16 => (None, half::bf16::from_bits(raw as u16).to_f64()),
            KeyKind::F32 => (None, f32::from_bits(raw as u32) as f64),
            KeyKind::F64 => (None, f64::from_bits(raw as u64)),
        }
    }

    fn reference_cmp(a: (Option<i128>, f64), b: (Option<i128>, f64)) -> Ordering {
        match (a, b) {
            ((Some(x), _), (Some(y), _)) => x.cmp(&y),
            ((_, x), (_, y)) => match (x.is_nan(), y.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                _ => x.partial_cmp(&y).unwrap(),
            },
        }
    }

    fn dtype(code: u8, bits: u8) -> DLDataType {
        DLDataType {
            code: DLDataTypeCode(code),
            bits,
            lanes: 1,
        }
    }

    /// Elements of `n` bytes: the edges (zero, all ones, sign bits, NaN and infinity patterns
    /// of every float width) and pseudo-random ones.
    fn samples(n: usize) -> Vec<Vec<u8>> {
        let mut words: Vec<u64> = vec![
            0,
            1,
            u64::MAX,
            1 << (8 * n - 1),
            (1 << (8 * n - 1)) - 1,
            (1u64 << (8 * n - 1)) + 1,
        ];
        // float16 / bfloat16 / float32 / float64 specials: +-0, +-inf, NaNs, tiny, max.
        words.extend([
            0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x0001, 0x8001, 0x7bff, 0xfbff, 0x7f80,
            0xff80, 0x7fc0, 0xffc0, 0x3c00, 0xbc00, 0x3f80, 0xbf80,
        ]);
        words.extend([
            0x8000_0000,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0xffc0_0001,
            0x0000_0001,
            0x8000_0001,
            0x3f80_0000,
            0xbf80_0000,
        ]);
        words.extend([
            0x8000_0000_0000_0000,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x7ff8_0000_0000_0000,
            0xfff8_0000_0000_0001,
            0x3ff0_0000_0000_0000,
            0xbff0_0000_0000_0000,
        ]);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..150 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            words.push(seed ^ (seed >> 29));
        }
        words
            .iter()
            .map(|w| w.to_le_bytes()[..n].to_vec())
            .collect()
    }

    #[test]
    fn keys_order_as_the_element_comparison() {
        let dtypes = [
            (0, 8),
            (0, 16),
            (0, 32),
            (0, 64),
            (1, 8),
            (1, 16),
            (1, 32),
            (1, 64),
            (6, 8),
            (2, 16),
            (2, 32),
            (2, 64),
            (4, 16),
        ];
        for (code, bits) in dtypes {
            let kind = KeyKind::of(dtype(code, bits)).unwrap();
            let xs = samples(bits as usize / 8);
            for a in &xs {
                let (ka, ra) = (kind.key(a), reference(kind, a));
                let nonzero = match ra {
                    (Some(v), _) => v != 0,
                    (None, v) => v != 0.0 || v.is_nan(),
                };
                assert_eq!(kind.is_nonzero(a), nonzero, "{kind:?} {a:?}");
                for b in &xs {
                    let want = reference_cmp(ra, reference(kind, b));
                    assert_eq!(ka.cmp(&kind.key(b)), want, "{kind:?} {a:?} {b:?}");
                }
            }
        }
        assert!(KeyKind::of(dtype(2, 8)).is_err());
    }

    #[test]
    fn pairs_sort_stably_by_key() {
        let mut seed = 11u64;
        let keys: Vec<u64> = (0..5000)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) % 97
            })
            .collect();
        let mut pairs: Vec<(u64, usize)> = keys.iter().copied().zip(0..).collect();
        sort_pairs(&mut pairs);
        let mut want: Vec<usize> = (0..keys.len()).collect();
        want.sort_by_key(|&i| keys[i]);
        assert_eq!(pairs.iter().map(|p| p.1).collect::<Vec<_>>(), want);
    }
}
