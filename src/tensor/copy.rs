//! Copies between `DLTensor`s and byte buffers, on any device.
//!
//! Between two tensors in host memory: TVM's CPU copy (`cpu_device_api.cc`, `CopyDataFromTo`)
//! is a `memcpy` of equal byte sizes and refuses strided tensors. tvmrt does the same for
//! compact tensors and also copies strided ones (NumPy-style views, negative strides included)
//! when both sides have the same shape and element size; sub-byte element types must be
//! compact, since their elements have no address.
//!
//! When either side is on a device the host cannot address (OpenCL), the copy goes through that
//! device's back end ([`crate::device::copy_via_device`]): both sides compact, equal byte
//! sizes, as TVM's `Tensor::CopyFromTo`. Copies between bytes and a device tensor have finished
//! when they return (TVM's `CopyFromBytes` / `CopyToBytes` synchronize too).

use super::layout::{self, dl_shape, dl_strides, is_contiguous};
use crate::abi::DLTensor;
use crate::device;
use crate::error::{Error, Result};

/// A checked description of one side of a copy.
struct Side<'a> {
    /// First byte of element 0 (`data + byte_offset`).
    base: *mut u8,
    shape: &'a [i64],
    /// Strides in elements, `None` when compact.
    strides: Option<&'a [i64]>,
    nbytes: usize,
}

impl<'a> Side<'a> {
    /// # Safety
    /// `t` describes memory valid for the copy (`shape`/`strides` readable for `'a`).
    unsafe fn new(t: &DLTensor, what: &str) -> Result<Side<'a>> {
        device::require_host(t.device, what)?;
        // SAFETY: per the contract.
        let shape = unsafe { dl_shape(t, what)? };
        let nbytes = layout::shape_bytes(shape, t.dtype)
            .map_err(|e| Error::value(format!("{what}: {}", e.message)))?;
        if t.data.is_null() && nbytes > 0 {
            return Err(Error::value(format!(
                "{what}: data is null but the tensor holds {nbytes} bytes"
            )));
        }
        // SAFETY: per the contract.
        let strides = unsafe { dl_strides(t) }.filter(|s| !is_contiguous(shape, Some(s)));
        Ok(Side {
            base: t.data.cast::<u8>().wrapping_add(t.byte_offset as usize),
            shape,
            strides,
            nbytes,
        })
    }

    /// A compact byte buffer seen as a tensor of `shape`.
    fn compact(base: *mut u8, shape: &'a [i64], nbytes: usize) -> Side<'a> {
        Side {
            base,
            shape,
            strides: None,
            nbytes,
        }
    }

    /// Strides in bytes for every dim (compact ones computed).
    fn byte_strides(&self, elem_bytes: usize, what: &str) -> Result<Vec<isize>> {
        let elems = match self.strides {
            Some(s) => s.to_vec(),
            None => layout::compact_strides(self.shape),
        };
        // The farthest element must be addressable: sum of (dim-1)*|stride| bytes.
        let mut reach: i128 = 0;
        for (d, s) in self.shape.iter().zip(&elems) {
            if *d > 0 {
                reach += (*d as i128 - 1) * (*s as i128).abs() * elem_bytes as i128;
            }
        }
        if reach > isize::MAX as i128 {
            return Err(Error::value(format!(
                "{what}: strides {elems:?} reach beyond the address space"
            )));
        }
        Ok(elems
            .iter()
            .map(|s| (*s as isize).wrapping_mul(elem_bytes as isize))
            .collect())
    }
}

/// Copies `src` into `dst`. Equal byte sizes are required; strided sides (host memory only)
/// also need equal shapes and whole-byte elements.
///
/// # Safety
/// Both tensors describe live memory of the size their shapes say; `dst` is writable.
pub unsafe fn copy_dltensor(src: &DLTensor, dst: &DLTensor) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { copy_dltensor_on(src, dst, std::ptr::null_mut()) }
}

/// [`copy_dltensor`], queued on `stream` when a device copies (a device-to-device copy may
/// still be running when this returns, as in TVM).
///
/// # Safety
/// As [`copy_dltensor`]; `stream` is null or a stream of the copying device.
pub unsafe fn copy_dltensor_on(
    src: &DLTensor,
    dst: &DLTensor,
    stream: device::StreamHandle,
) -> Result<()> {
    if !device::is_host_accessible(src.device) || !device::is_host_accessible(dst.device) {
        // SAFETY: per the contract.
        return unsafe { device::copy_via_device(src, dst, stream) };
    }
    // SAFETY: per the contract.
    let from = unsafe { Side::new(src, "source tensor")? };
    // SAFETY: per the contract.
    let to = unsafe { Side::new(dst, "destination tensor")? };
    if from.nbytes != to.nbytes {
        return Err(Error::value(format!(
            "copy size mismatch: destination expects {} bytes, source has {} bytes \
             (source shape {:?} {}, destination shape {:?} {})",
            to.nbytes,
            from.nbytes,
            from.shape,
            layout::dtype_label(src.dtype),
            to.shape,
            layout::dtype_label(dst.dtype)
        )));
    }
    let elem_bits = src.dtype.bits as usize * src.dtype.lanes as usize;
    let dst_elem_bits = dst.dtype.bits as usize * dst.dtype.lanes as usize;
    if (from.strides.is_some() || to.strides.is_some())
        && (from.shape != to.shape || elem_bits != dst_elem_bits)
    {
        return Err(Error::value(format!(
            "strided copy needs equal shapes and element sizes: source {:?} {}, \
             destination {:?} {}",
            from.shape,
            layout::dtype_label(src.dtype),
            to.shape,
            layout::dtype_label(dst.dtype)
        )));
    }
    // SAFETY: both sides were checked and describe live memory per the contract.
    unsafe { copy_sides(&from, &to, elem_bits) }
}

/// Copies `bytes` (compact row-major) into `dst`.
///
/// # Safety
/// As [`copy_dltensor`] for `dst`.
pub unsafe fn copy_from_bytes(dst: &DLTensor, bytes: &[u8]) -> Result<()> {
    if !device::is_host_accessible(dst.device) {
        // SAFETY: per the contract.
        let host = unsafe { host_twin(dst, bytes.as_ptr().cast_mut(), bytes.len())? };
        // SAFETY: `host` describes `bytes` (read only); `dst` per the contract.
        return unsafe { copy_and_sync(&host, dst) };
    }
    // SAFETY: per the contract.
    let to = unsafe { Side::new(dst, "tensor")? };
    if bytes.len() != to.nbytes {
        return Err(Error::value(format!(
            "copy from bytes: expected {} bytes, got {}",
            to.nbytes,
            bytes.len()
        )));
    }
    let from = Side::compact(bytes.as_ptr().cast_mut(), to.shape, bytes.len());
    let bits = dst.dtype.bits as usize * dst.dtype.lanes as usize;
    // SAFETY: `from` only reads `bytes`; `to` was checked.
    unsafe { copy_sides(&from, &to, bits) }
}

/// Copies `src` into `out` (compact row-major).
///
/// # Safety
/// As [`copy_dltensor`] for `src`.
pub unsafe fn copy_to_bytes(src: &DLTensor, out: &mut [u8]) -> Result<()> {
    if !device::is_host_accessible(src.device) {
        // SAFETY: per the contract.
        let host = unsafe { host_twin(src, out.as_mut_ptr(), out.len())? };
        // SAFETY: `host` describes `out` (writable); `src` per the contract.
        return unsafe { copy_and_sync(src, &host) };
    }
    // SAFETY: per the contract.
    let from = unsafe { Side::new(src, "tensor")? };
    if out.len() != from.nbytes {
        return Err(Error::value(format!(
            "copy to bytes: expected {} bytes, got {}",
            from.nbytes,
            out.len()
        )));
    }
    let len = out.len();
    let to = Side::compact(out.as_mut_ptr(), from.shape, len);
    let bits = src.dtype.bits as usize * src.dtype.lanes as usize;
    // SAFETY: `to` writes only `out`; `from` was checked.
    unsafe { copy_sides(&from, &to, bits) }
}

/// A compact CPU descriptor of `t`'s shape and dtype over `len` bytes at `data`, after checking
/// `len` is `t`'s size.
///
/// # Safety
/// `t.shape` is readable for `t.ndim` entries, and stays so while the result is used.
unsafe fn host_twin(t: &DLTensor, data: *mut u8, len: usize) -> Result<DLTensor> {
    // SAFETY: per the contract.
    let expected = unsafe { layout::dl_bytes(t, "tensor")? };
    if len != expected {
        return Err(Error::value(format!(
            "copy between bytes and a tensor on {}: expected {expected} bytes, got {len}",
            device::device_name(t.device)
        )));
    }
    Ok(DLTensor {
        data: data.cast(),
        device: device::cpu(),
        ndim: t.ndim,
        dtype: t.dtype,
        shape: t.shape,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    })
}

/// Copies through the device side's back end and waits for the copy to finish.
///
/// # Safety
/// As [`copy_dltensor`].
unsafe fn copy_and_sync(from: &DLTensor, to: &DLTensor) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { device::copy_via_device(from, to, std::ptr::null_mut())? };
    let dev = if device::is_host_accessible(from.device) {
        to.device
    } else {
        from.device
    };
    device::api_of(dev)?.stream_sync(dev, std::ptr::null_mut())
}

/// # Safety
/// Both sides describe live memory; `to` is writable.
unsafe fn copy_sides(from: &Side<'_>, to: &Side<'_>, elem_bits: usize) -> Result<()> {
    if from.nbytes == 0 {
        return Ok(());
    }
    if from.strides.is_none() && to.strides.is_none() {
        // SAFETY: both hold `nbytes`; `copy` tolerates overlap (a tensor copied onto itself).
        unsafe { std::ptr::copy(from.base.cast_const(), to.base, from.nbytes) };
        return Ok(());
    }
    if !elem_bits.is_multiple_of(8) {
        return Err(Error::value(format!(
            "strided copy of a {elem_bits}-bit sub-byte element type is not supported; \
             make the tensor compact first"
        )));
    }
    let elem = elem_bits / 8;
    let fs = from.byte_strides(elem, "source tensor")?;
    let ts = to.byte_strides(elem, "destination tensor")?;
    let shape = from.shape;
    let ndim = shape.len();
    if ndim == 0 {
        // SAFETY: one element on each side.
        unsafe { std::ptr::copy(from.base.cast_const(), to.base, elem) };
        return Ok(());
    }
    // Odometer over all dims but the last; the last dim is a run of `inner` elements.
    let inner = shape[ndim - 1] as usize;
    let (fi, ti) = (fs[ndim - 1], ts[ndim - 1]);
    let run_is_compact = fi == elem as isize && ti == elem as isize;
    let mut index = vec![0i64; ndim - 1];
    loop {
        let mut f_off: isize = 0;
        let mut t_off: isize = 0;
        for (k, &i) in index.iter().enumerate() {
            f_off += i as isize * fs[k];
            t_off += i as isize * ts[k];
        }
        let f = from.base.wrapping_offset(f_off);
        let t = to.base.wrapping_offset(t_off);
        if run_is_compact {
            // SAFETY: the run of `inner` elements lies inside both tensors (reach checked).
            unsafe { std::ptr::copy(f.cast_const(), t, inner * elem) };
        } else {
            for j in 0..inner as isize {
                // SAFETY: element `j` of the run lies inside both tensors (reach checked).
                unsafe {
                    std::ptr::copy(
                        f.wrapping_offset(j * fi).cast_const(),
                        t.wrapping_offset(j * ti),
                        elem,
                    )
                };
            }
        }
        // Advance the odometer.
        let mut k = ndim - 1;
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
}
