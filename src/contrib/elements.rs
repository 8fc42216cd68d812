//! Tensor arguments of the runtime's library functions (`tvm.contrib.sort.*`, `relax.run.*`)
//! read element by element: checked CPU, compact descriptors, and element keys that order and
//! compare as the C++ and numpy versions of those functions do.

use std::cmp::Ordering;

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

    /// Element `i` as an ordering key.
    pub fn key(&self, i: usize) -> Result<Key> {
        Key::read(self.dl.dtype, self.bytes(i))
    }
}

/// An element value that orders like the C++ comparison of its type: integers exactly,
/// floats (16, 32 and 64 bits, bfloat16) as `f64`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Key {
    Int(i128),
    Float(f64),
}

impl Key {
    /// Reads one element of `dtype` from little-endian bytes.
    pub fn read(dtype: DLDataType, b: &[u8]) -> Result<Key> {
        let code = dtype.code.0;
        let le = |n: usize| {
            let mut buf = [0u8; 16];
            buf[..n].copy_from_slice(&b[..n]);
            u128::from_le_bytes(buf)
        };
        Ok(match (code, dtype.bits) {
            (0, bits @ (8 | 16 | 32 | 64)) => {
                let shift = 128 - bits as u32;
                Key::Int(((le(bits as usize / 8) << shift) as i128) >> shift)
            }
            (1 | 6, 8 | 16 | 32 | 64) => Key::Int(le(dtype.bits as usize / 8) as i128),
            (2, 16) => Key::Float(half::f16::from_bits(le(2) as u16).to_f64()),
            (2, 32) => Key::Float(f32::from_bits(le(4) as u32) as f64),
            (2, 64) => Key::Float(f64::from_bits(le(8) as u64)),
            (4, 16) => Key::Float(half::bf16::from_bits(le(2) as u16).to_f64()),
            _ => crate::bail_type!(
                "unsupported element dtype {}",
                dtype_to_string(dtype).unwrap_or_default()
            ),
        })
    }

    /// A total order: integers exactly, floats by value with -0.0 equal to 0.0 and every NaN
    /// equal to the others and above all numbers (where numpy's sort and unique put them).
    pub fn total_cmp(&self, other: &Key) -> Ordering {
        let float = |a: f64, b: f64| match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => a.partial_cmp(&b).expect("neither is NaN"),
        };
        match (self, other) {
            (Key::Int(a), Key::Int(b)) => a.cmp(b),
            (Key::Float(a), Key::Float(b)) => float(*a, *b),
            (Key::Int(a), Key::Float(b)) => float(*a as f64, *b),
            (Key::Float(a), Key::Int(b)) => float(*a, *b as f64),
        }
    }

    /// Whether the element is nonzero (NaN is; -0.0 is not).
    pub fn is_nonzero(&self) -> bool {
        match self {
            Key::Int(v) => *v != 0,
            Key::Float(v) => *v != 0.0 || v.is_nan(),
        }
    }
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
