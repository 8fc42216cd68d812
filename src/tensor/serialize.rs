//! TVM's tensor save format (`SaveDLTensor` / `NDArray::Load`, unchanged from TVM 0.7 to 0.27):
//! the magic `0xDD5E40F096B4A13F`, a reserved `u64`, the device (`i32` type, `i32` id; always
//! CPU), `i32` ndim, the dtype (code, bits, `u16` lanes), ndim `i64` dimensions, an `i64` byte
//! count (`(bits + 7) / 8` per element, lanes not counted, as TVM's reader checks it) and the
//! bytes. Used by Relax executables' constants and by graph-executor parameters. Read from a
//! mapped library, a tensor whose data lies 64-byte aligned views it read-only (no copy).

use super::{layout, Tensor};
use crate::abi::{DLDataType, DLDevice};
use crate::device::api::ALLOC_ALIGNMENT;
use crate::dtype::dtype;
use crate::error::{Error, Result};
use crate::mapped;
use crate::module::blob::{Reader, Writer};

/// Magic of a serialized tensor (`kTVMNDArrayMagic`, `kTVMTensorMagic` in TVM 0.21+).
pub const TENSOR_MAGIC: u64 = 0xDD5E_40F0_96B4_A13F;
/// The highest rank a saved tensor may claim.
const MAX_NDIM: usize = 64;

fn read_i32(r: &mut Reader<'_>) -> Result<i32> {
    Ok(r.read_u32()? as i32)
}

fn read_i64(r: &mut Reader<'_>) -> Result<i64> {
    Ok(r.read_u64()? as i64)
}

/// Reads one tensor, refusing a bad magic, a non-CPU device, an impossible rank or shape, a
/// byte count that disagrees with the shape and dtype, and truncated data.
pub fn read_tensor(r: &mut Reader<'_>) -> Result<Tensor> {
    read_tensor_as(r, |t| t)
}

/// [`read_tensor`] with the saved dtype passed through `dtype_in` first: the classic
/// generation's blobs save bool as `uint1` ([`crate::dtype::classic_bool::from_classic`]).
pub fn read_tensor_as(
    r: &mut Reader<'_>,
    dtype_in: fn(DLDataType) -> DLDataType,
) -> Result<Tensor> {
    let magic = r.read_u64()?;
    if magic != TENSOR_MAGIC {
        crate::bail_value!("bad tensor magic {magic:#x} (expected {TENSOR_MAGIC:#x})");
    }
    let _reserved = r.read_u64()?;
    let device_type = read_i32(r)?;
    let device_id = read_i32(r)?;
    if device_type != 1 {
        crate::bail_value!(
            "tensor saved on device type {device_type}: TVM only saves CPU tensors (type 1)"
        );
    }
    let ndim = read_i32(r)?;
    let b = r.read_raw(4)?;
    let dt = dtype_in(dtype(b[0], b[1], u16::from_le_bytes([b[2], b[3]])));
    let ndim = usize::try_from(ndim)
        .ok()
        .filter(|&n| n <= MAX_NDIM)
        .ok_or_else(|| Error::value(format!("tensor rank {ndim} is out of range")))?;
    let mut shape = Vec::with_capacity(ndim);
    for _ in 0..ndim {
        let d = read_i64(r)?;
        if d < 0 {
            crate::bail_value!("tensor dimension {d} is negative");
        }
        shape.push(d);
    }
    let size = read_i64(r)?;
    let numel = shape
        .iter()
        .fold(1u128, |n, &d| n.saturating_mul(d as u128));
    let expected = numel.saturating_mul((dt.bits as u128).div_ceil(8));
    if size < 0 || size as u128 != expected {
        crate::bail_value!(
            "tensor data size {size} does not match its shape {shape:?} and dtype ({expected} \
             bytes)"
        );
    }
    if size as u64 > r.remaining() as u64 {
        crate::bail_value!(
            "tensor data of {size} bytes is truncated: {} bytes remain",
            r.remaining()
        );
    }
    let data = r.read_raw(size as usize)?;
    let device = DLDevice {
        device_id,
        ..layout::cpu()
    };
    // In a mapped library, aligned data is used where it lies; other data is copied once and
    // its pages dropped (see crate::mapped).
    if !data.is_empty() && (data.as_ptr() as usize).is_multiple_of(ALLOC_ALIGNMENT) {
        if let Some(owner) = mapped::owner_of(data) {
            return Tensor::over_mapped(data, &shape, dt, device, owner);
        }
    }
    let t = Tensor::empty(&shape, dt, device)?;
    t.copy_from_bytes(data)?;
    mapped::release(data);
    Ok(t)
}

/// Writes `t` (any layout; saved compact, on the CPU) as TVM does.
pub fn write_tensor(w: &mut Writer, t: &Tensor) -> Result<()> {
    write_tensor_as(w, t, |t| t)
}

/// [`write_tensor`] with the dtype saved as `dtype_out` gives it (classic blobs:
/// [`crate::dtype::classic_bool::to_classic`]).
pub fn write_tensor_as(
    w: &mut Writer,
    t: &Tensor,
    dtype_out: fn(DLDataType) -> DLDataType,
) -> Result<()> {
    let dt: DLDataType = dtype_out(t.dtype());
    w.write_u64(TENSOR_MAGIC);
    w.write_u64(0);
    w.write_u32(1);
    w.write_u32(0);
    w.write_u32(t.shape().len() as u32);
    w.write_raw(&[dt.code.0, dt.bits]);
    w.write_raw(&dt.lanes.to_le_bytes());
    for &d in t.shape() {
        w.write_u64(d as u64);
    }
    let bytes = t.to_vec()?;
    w.write_u64(bytes.len() as u64);
    w.write_raw(&bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::dtypes;

    #[test]
    fn write_then_read_gives_the_same_tensor() {
        let t = Tensor::empty(&[2, 3], dtypes::FLOAT32, layout::cpu()).unwrap();
        let values: Vec<u8> = (0..6u32)
            .flat_map(|v| (v as f32 * 1.5).to_le_bytes())
            .collect();
        t.copy_from_bytes(&values).unwrap();
        let mut w = Writer::new();
        write_tensor(&mut w, &t).unwrap();
        let bytes = w.into_inner();
        // magic, reserved, device, ndim, dtype, 2 dims, size, 24 data bytes
        assert_eq!(bytes.len(), 8 + 8 + 8 + 4 + 4 + 16 + 8 + 24);
        let back = read_tensor(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(back.shape(), &[2, 3]);
        assert_eq!(back.dtype(), dtypes::FLOAT32);
        assert_eq!(back.to_vec().unwrap(), values);
    }

    fn floats(t: &Tensor) -> Vec<f32> {
        t.to_vec()
            .unwrap()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// `values` (float32, shape [n]) serialized into a buffer at an offset that puts the data
    /// at `misalign` bytes past a 64-byte boundary; returns the buffer and the record's range.
    fn placed_record(values: &[f32], misalign: usize) -> (Vec<u8>, std::ops::Range<usize>) {
        let t = Tensor::empty(&[values.len() as i64], dtypes::FLOAT32, layout::cpu()).unwrap();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        t.copy_from_bytes(&bytes).unwrap();
        let mut w = Writer::new();
        write_tensor(&mut w, &t).unwrap();
        let record = w.into_inner();
        let header = record.len() - bytes.len();
        let mut buf = vec![0u8; record.len() + 2 * ALLOC_ALIGNMENT];
        let base = buf.as_ptr() as usize;
        let data_at = (base + header).next_multiple_of(ALLOC_ALIGNMENT) + misalign;
        let start = data_at - base - header;
        buf[start..start + record.len()].copy_from_slice(&record);
        (buf, start..start + record.len())
    }

    #[test]
    fn aligned_data_in_lent_bytes_is_viewed_in_place_and_keeps_its_owner() {
        let values = [1.5f32, -2.0, 3.25, 4.0, 0.5];
        let (buf, range) = placed_record(&values, 0);
        let owner: mapped::Owner = std::sync::Arc::new(String::from("library"));
        let t = mapped::lend(&buf, owner.clone(), false, || {
            read_tensor(&mut Reader::new(&buf[range.clone()])).unwrap()
        });
        let data_at = buf[range.end - 20..].as_ptr();
        assert_eq!(t.data_ptr() as *const u8, data_at, "no copy");
        assert!(t.is_read_only());
        assert_eq!(
            std::sync::Arc::strong_count(&owner),
            2,
            "the tensor holds the owner"
        );
        assert_eq!(floats(&t), values);
        drop(t);
        assert_eq!(std::sync::Arc::strong_count(&owner), 1);
    }

    #[test]
    fn misaligned_or_unlent_data_is_copied() {
        let values = [7.0f32, 8.0, 9.0];
        // TVM 0.27 places constant data 2 bytes past a 4-byte boundary.
        let (buf, range) = placed_record(&values, 2);
        let owner: mapped::Owner = std::sync::Arc::new(());
        let t = mapped::lend(&buf, owner.clone(), false, || {
            read_tensor(&mut Reader::new(&buf[range.clone()])).unwrap()
        });
        assert!(!buf.as_ptr_range().contains(&(t.data_ptr() as *const u8)));
        assert!(!t.is_read_only());
        assert_eq!(std::sync::Arc::strong_count(&owner), 1);
        assert_eq!(floats(&t), values);
        // Aligned but not lent: copied too.
        let (buf, range) = placed_record(&values, 0);
        let t = read_tensor(&mut Reader::new(&buf[range])).unwrap();
        assert!(!buf.as_ptr_range().contains(&(t.data_ptr() as *const u8)));
        assert_eq!(floats(&t), values);
    }

    #[test]
    fn bad_magic_size_and_truncation_are_refused() {
        let t = Tensor::empty(&[4], dtypes::INT32, layout::cpu()).unwrap();
        let mut w = Writer::new();
        write_tensor(&mut w, &t).unwrap();
        let good = w.into_inner();
        let mut bad = good.clone();
        bad[0] ^= 1;
        let e = read_tensor(&mut Reader::new(&bad)).unwrap_err();
        assert!(e.message.contains("bad tensor magic"), "{}", e.message);
        let e = read_tensor(&mut Reader::new(&good[..good.len() - 1])).unwrap_err();
        assert!(e.message.contains("truncated"), "{}", e.message);
        let mut wrong_size = good.clone();
        let at = good.len() - 16 - 8;
        wrong_size[at] = 15;
        let e = read_tensor(&mut Reader::new(&wrong_size)).unwrap_err();
        assert!(
            e.message.contains("does not match its shape"),
            "{}",
            e.message
        );
    }
}
