//! Checks and arithmetic every tensor path shares: devices, dtypes, dims, sizes, strides.
//!
//! Sizes follow TVM's `GetDataSize` (tvm-ffi `container/tensor.h`): `numel * bits * lanes`
//! rounded up to whole bytes, so sub-byte types are stored packed. All arithmetic is checked:
//! a shape whose size does not fit in memory is an error, never an overflow or an abort.

use crate::abi::{DLDataType, DLTensor};
use crate::error::{Error, Result};

/// Most dimensions a tensor may have. DLPack sets no limit; the bound keeps a corrupt `ndim`
/// from sizing an allocation (NumPy stops at 64).
pub const MAX_NDIM: i32 = 1024;

pub use crate::device::{cpu, device_name, device_type_name, CPU};

/// Fails unless `dtype` is one tvmrt can store: int/uint of 1..64 bits, float16/32/64,
/// bfloat16, bool, complex64/128, handle, the DLPack float8/6/4 formats, with 1..32767 lanes.
pub fn check_dtype(dtype: DLDataType) -> Result<()> {
    let (code, bits, lanes) = (dtype.code.0, dtype.bits, dtype.lanes);
    let bits_ok = match code {
        0 | 1 => matches!(bits, 1 | 2 | 4 | 8 | 16 | 32 | 64),
        2 => matches!(bits, 16 | 32 | 64),
        3 => bits == 64,
        4 => bits == 16,
        5 => matches!(bits, 64 | 128),
        6 => bits == 8,
        7..=14 => bits == 8,
        15 | 16 => bits == 6,
        17 => bits == 4,
        _ => {
            return Err(Error::type_error(format!(
                "unsupported dtype code {code} (bits={bits}, lanes={lanes})"
            )))
        }
    };
    if !bits_ok {
        return Err(Error::type_error(format!(
            "unsupported dtype: {} bits are not valid for type code {code} ({})",
            bits,
            dtype_label(dtype)
        )));
    }
    // Lanes above i16::MAX encode scalable vectors (`xvscalexN`), which have no storage size.
    if lanes == 0 || lanes > i16::MAX as u16 {
        return Err(Error::type_error(format!(
            "unsupported dtype lanes {lanes}: tensors need 1..{} fixed lanes",
            i16::MAX
        )));
    }
    Ok(())
}

/// A dtype for messages: its TVM name, or its raw fields.
pub fn dtype_label(dtype: DLDataType) -> String {
    crate::dtype::dtype_to_string(dtype).unwrap_or_else(|_| {
        format!(
            "code={}, bits={}, lanes={}",
            dtype.code.0, dtype.bits, dtype.lanes
        )
    })
}

/// Checks an `ndim` argument and returns it as a length.
pub fn check_ndim(ndim: i64) -> Result<usize> {
    if ndim < 0 {
        return Err(Error::value(format!("ndim must be >= 0, got {ndim}")));
    }
    if ndim > MAX_NDIM as i64 {
        return Err(Error::value(format!(
            "ndim {ndim} exceeds tvmrt's limit of {MAX_NDIM} dimensions"
        )));
    }
    Ok(ndim as usize)
}

/// Checks dims (none negative, the product of the non-zero ones fits in `i64`) and returns
/// the element count.
pub fn check_shape(shape: &[i64]) -> Result<u64> {
    let mut nonzero: i64 = 1;
    let mut has_zero = false;
    for (i, &d) in shape.iter().enumerate() {
        if d < 0 {
            return Err(Error::value(format!(
                "shape[{i}] = {d} is negative (shape {shape:?})"
            )));
        }
        if d == 0 {
            has_zero = true;
        } else {
            nonzero = nonzero
                .checked_mul(d)
                .ok_or_else(|| Error::value(format!("shape {shape:?} has too many elements")))?;
        }
    }
    Ok(if has_zero { 0 } else { nonzero as u64 })
}

/// Bytes `numel` packed elements of `dtype` take, unchecked.
fn packed_bytes(numel: u64, dtype: DLDataType) -> u128 {
    (numel as u128 * dtype.bits as u128 * dtype.lanes as u128).div_ceil(8)
}

/// Bytes `numel` packed elements of `dtype` describe, failing beyond what DLPack's `int64_t`
/// sizes express (`i64::MAX`) but not beyond this process's address space: an imported tensor
/// may describe far more than it stores (zero strides broadcast one element), on a 32-bit
/// target as on a 64-bit one.
pub fn logical_size(numel: u64, dtype: DLDataType) -> Result<u64> {
    let bytes = packed_bytes(numel, dtype);
    u64::try_from(bytes)
        .ok()
        .filter(|&b| b <= i64::MAX as u64)
        .ok_or_else(|| {
            Error::value(format!(
                "tensor of {numel} elements of {} describes {bytes} bytes, more than int64 \
                 sizes hold",
                dtype_label(dtype)
            ))
        })
}

/// Bytes `numel` packed elements of `dtype` occupy, failing when it exceeds what can be
/// addressed (`isize::MAX`).
pub fn data_size(numel: u64, dtype: DLDataType) -> Result<usize> {
    let bytes = packed_bytes(numel, dtype);
    usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| {
            Error::value(format!(
                "tensor of {numel} elements of {} needs {bytes} bytes, more than can be \
                 allocated",
                dtype_label(dtype)
            ))
        })
}

/// Checked bytes of a whole tensor of `shape` and `dtype`.
pub fn shape_bytes(shape: &[i64], dtype: DLDataType) -> Result<usize> {
    data_size(check_shape(shape)?, dtype)
}

/// Row-major strides of `shape` (in elements), exactly as tvm-ffi's `FillStridesFromShape`:
/// the running product of the inner dims, so a zero dim makes every outer stride 0 ((20, 0, 5)
/// gives (0, 5, 1)), which TVM's kernels compare against when they check for compact arrays.
/// The caller checked the shape, so the products fit in `i64`.
pub fn compact_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    fill_compact_strides(shape, &mut strides);
    strides
}

/// [`compact_strides`] into `out` (as long as `shape`), without allocating.
pub fn fill_compact_strides(shape: &[i64], out: &mut [i64]) {
    let mut stride: i64 = 1;
    for (s, &d) in out.iter_mut().zip(shape).rev() {
        *s = stride;
        stride = stride.saturating_mul(d);
    }
}

/// Whether the layout is row-major compact (tvm-ffi `IsContiguous`): no strides, an empty
/// tensor, or strides equal to the compact ones with size-1 dims ignored (as PyTorch exports).
pub fn is_contiguous(shape: &[i64], strides: Option<&[i64]>) -> bool {
    let Some(strides) = strides else {
        return true;
    };
    if shape.contains(&0) {
        return true;
    }
    let mut expected: i64 = 1;
    for k in (0..shape.len()).rev() {
        if shape[k] == 1 {
            continue;
        }
        if strides[k] != expected {
            return false;
        }
        expected = expected.saturating_mul(shape[k]);
    }
    true
}

/// The dims of a `DLTensor`, after checking `ndim` and the shape pointer.
///
/// # Safety
/// `t.shape` is null or points to `t.ndim` readable values that outlive `'a`.
pub unsafe fn dl_shape<'a>(t: &DLTensor, what: &str) -> Result<&'a [i64]> {
    let ndim =
        check_ndim(t.ndim as i64).map_err(|e| Error::value(format!("{what}: {}", e.message)))?;
    if ndim == 0 {
        return Ok(&[]);
    }
    if t.shape.is_null() {
        return Err(Error::value(format!(
            "{what}: shape is null but ndim is {ndim}"
        )));
    }
    // SAFETY: non-null with `ndim` entries per the contract.
    Ok(unsafe { std::slice::from_raw_parts(t.shape, ndim) })
}

/// The strides of a `DLTensor` (`None` when null, meaning compact).
///
/// # Safety
/// As [`dl_shape`], for `t.strides`.
pub unsafe fn dl_strides<'a>(t: &DLTensor) -> Option<&'a [i64]> {
    if t.strides.is_null() || t.ndim <= 0 {
        return None;
    }
    let ndim = (t.ndim.min(MAX_NDIM)) as usize;
    // SAFETY: non-null with `ndim` entries per the contract.
    Some(unsafe { std::slice::from_raw_parts(t.strides, ndim) })
}

/// Checked byte size of the data a `DLTensor` describes (its shape times its dtype).
///
/// # Safety
/// As [`dl_shape`].
pub unsafe fn dl_bytes(t: &DLTensor, what: &str) -> Result<usize> {
    // SAFETY: per the contract.
    let shape = unsafe { dl_shape(t, what)? };
    shape_bytes(shape, t.dtype).map_err(|e| Error::value(format!("{what}: {}", e.message)))
}

/// Whether the `DLTensor` is compact row-major.
///
/// # Safety
/// As [`dl_shape`].
pub unsafe fn dl_is_contiguous(t: &DLTensor) -> bool {
    // SAFETY: per the contract.
    match unsafe { dl_shape(t, "tensor") } {
        // SAFETY: per the contract.
        Ok(shape) => is_contiguous(shape, unsafe { dl_strides(t) }),
        Err(_) => false,
    }
}

/// Whether `data + byte_offset` is a multiple of `alignment` (tvm-ffi `IsAligned` for
/// directly addressed memory; `alignment` 0 means no requirement).
pub fn is_aligned(t: &DLTensor, alignment: usize) -> bool {
    if alignment <= 1 {
        return true;
    }
    let addr = (t.data as usize).wrapping_add(t.byte_offset as usize);
    addr.is_multiple_of(alignment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{dtype, dtypes};

    #[test]
    fn sizes_of_every_dtype() {
        let cases: &[(DLDataType, usize)] = &[
            (dtype(0, 1, 1), 1),
            (dtype(1, 4, 1), 1),
            (dtypes::INT8, 1),
            (dtypes::INT16, 2),
            (dtypes::INT32, 4),
            (dtypes::INT64, 8),
            (dtypes::UINT8, 1),
            (dtypes::UINT64, 8),
            (dtypes::FLOAT16, 2),
            (dtypes::FLOAT32, 4),
            (dtypes::FLOAT64, 8),
            (dtypes::BFLOAT16, 2),
            (dtypes::BOOL, 1),
            (dtype(10, 8, 1), 1),
            (dtype(5, 64, 1), 8),
            (dtype(2, 32, 4), 16),
        ];
        for &(t, bytes) in cases {
            check_dtype(t).unwrap();
            assert_eq!(data_size(1, t).unwrap(), bytes, "{}", dtype_label(t));
        }
        // Packed sub-byte storage: 10 int4 values take 5 bytes, 9 bools-as-uint1 take 2.
        assert_eq!(data_size(10, dtype(0, 4, 1)).unwrap(), 5);
        assert_eq!(data_size(9, dtype(1, 1, 1)).unwrap(), 2);
        assert_eq!(data_size(3, dtype(17, 4, 1)).unwrap(), 2);
    }

    #[test]
    fn rejects_bad_dtypes() {
        let e = check_dtype(dtype(99, 8, 1)).unwrap_err();
        assert!(e.message.contains("dtype code 99"), "{}", e.message);
        assert!(check_dtype(dtype(2, 8, 1)).is_err());
        assert!(check_dtype(dtype(2, 32, 0)).is_err());
        assert!(check_dtype(dtype(2, 32, 0xfffc)).is_err());
        assert!(check_dtype(dtype(0, 3, 1)).is_err());
    }

    #[test]
    fn shape_checks() {
        assert_eq!(check_shape(&[2, 3, 4]).unwrap(), 24);
        assert_eq!(check_shape(&[]).unwrap(), 1);
        assert_eq!(check_shape(&[0, 5]).unwrap(), 0);
        assert!(check_shape(&[2, -1])
            .unwrap_err()
            .message
            .contains("shape[1] = -1"));
        assert!(check_shape(&[i64::MAX, 2]).is_err());
        assert!(shape_bytes(&[1 << 40, 1 << 22], dtypes::FLOAT64).is_err());
        assert!(check_ndim(-1).is_err());
        assert!(check_ndim(1 << 20).is_err());
    }

    #[test]
    fn strides_and_contiguity() {
        assert_eq!(compact_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(compact_strides(&[]), Vec::<i64>::new());
        // Zero-sized dims: tvm-ffi's running product, so outer strides are 0.
        assert_eq!(compact_strides(&[20, 0, 5]), vec![0, 5, 1]);
        assert_eq!(compact_strides(&[3, 0]), vec![0, 1]);
        assert_eq!(compact_strides(&[0, 3]), vec![3, 1]);
        assert_eq!(compact_strides(&[0]), vec![1]);
        assert_eq!(compact_strides(&[2, 0, 0, 4]), vec![0, 0, 4, 1]);
        assert!(is_contiguous(&[2, 3], Some(&[3, 1])));
        assert!(!is_contiguous(&[2, 3], Some(&[1, 2])));
        assert!(is_contiguous(&[1, 3], Some(&[99, 1])));
        assert!(is_contiguous(&[0, 3], Some(&[7, 7])));
        assert!(is_contiguous(&[2, 3], None));
    }
}
