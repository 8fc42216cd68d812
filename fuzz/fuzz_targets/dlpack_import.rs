//! Fuzz target: DLPack import (`Tensor::from_dlpack`, `Tensor::from_dlpack_versioned`, the
//! functions behind `TVMArrayFromDLPack` / `TVMFFITensorFromDLPack[Versioned]`).
//!
//! The fuzzer chooses every field of the managed tensor: DLPack version and flags, ndim, shape,
//! strides, dtype, device, byte offset, whether data is null and whether there is a deleter.
//! What it cannot choose is memory: the shape and strides arrays really hold `ndim` entries and
//! the data pointer points into a 4 KiB buffer owned here (a producer pointing elsewhere breaks
//! DLPack's contract, which no consumer can detect). Data is read or written only when the
//! described elements lie inside that buffer.
//!
//! Checked: a refused import leaves the tensor with the caller (deleter not called); an
//! accepted one calls the deleter exactly once when the last reference goes, including after a
//! round trip through `to_dlpack`.
#![no_main]

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlpark::DlpackFlags;
use libfuzzer_sys::fuzz_target;
use tvmrt::abi::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPackVersion, DLTensor,
};
use tvmrt::tensor::dlpack::ImportRequirements;
use tvmrt::tensor::Tensor;

const BUF_WORDS: usize = 512;

static LEGACY_DELETES: AtomicUsize = AtomicUsize::new(0);
static VERSIONED_DELETES: AtomicUsize = AtomicUsize::new(0);

// The harness owns the managed structs; the deleters only count.
unsafe extern "C" fn legacy_deleter(_m: *mut DLManagedTensor) {
    LEGACY_DELETES.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn versioned_deleter(_m: *mut DLManagedTensorVersioned) {
    VERSIONED_DELETES.fetch_add(1, Ordering::SeqCst);
}

#[path = "../common/input.rs"]
mod input;
use input::Input;

impl Input<'_> {
    /// Mostly small values (what real tensors have), sometimes any `i64`.
    fn dim(&mut self) -> i64 {
        let tag = self.u8();
        match tag {
            0xF0..=0xFF => self.u64() as i64,
            0xE0..=0xEF => -((tag & 0xF) as i64),
            _ => (tag % 9) as i64,
        }
    }
}

/// The byte range `[lo, hi)` relative to `data` that the tensor's elements occupy, if it can
/// be computed.
fn extent(
    shape: &[i64],
    strides: Option<&[i64]>,
    dtype: DLDataType,
    offset: u64,
) -> Option<(i128, i128)> {
    let elem = ((dtype.bits as i128) * (dtype.lanes as i128) + 7) / 8;
    if shape.contains(&0) {
        return Some((0, 0));
    }
    let mut lo = offset as i128;
    let mut hi = offset as i128;
    let mut compact: i128 = 1;
    for k in (0..shape.len()).rev() {
        let d = shape[k] as i128;
        if d < 0 {
            return None;
        }
        let s = match strides {
            Some(s) => s[k] as i128,
            None => compact,
        };
        compact = compact.checked_mul(d)?;
        let reach = (d - 1).checked_mul(s)?.checked_mul(elem)?;
        if reach < 0 {
            lo = lo.checked_add(reach)?;
        } else {
            hi = hi.checked_add(reach)?;
        }
    }
    Some((lo, hi.checked_add(elem)?))
}

fn exercise(t: &Tensor, in_buffer: bool) {
    let _ = (
        t.shape(),
        t.strides(),
        t.ndim(),
        t.dtype(),
        t.numel(),
        t.nbytes(),
    );
    let _ = t.is_contiguous();
    let _ = format!("{t:?}");
    if !in_buffer {
        return;
    }
    // Zero strides let a few stored bytes describe a huge tensor; its compact copy is then
    // too large to make (to_vec fails with an error, which the regression tests check
    // without a sanitizer that reports the allocation attempt itself).
    if t.nbytes() > 1 << 20 {
        let _ = t.view(&[1], t.dtype(), 0);
        return;
    }
    if let Ok(bytes) = t.to_vec() {
        assert_eq!(bytes.len(), t.nbytes());
        let _ = t.copy_from_bytes(&bytes);
    }
    let _ = t.view(&[1], t.dtype(), 0);
    // A round trip through export and re-import must release everything once.
    if let Ok(exported) = t.to_dlpack() {
        // SAFETY: a managed tensor tvmrt just exported, owned by us.
        match unsafe { Tensor::from_dlpack(exported, ImportRequirements::default()) } {
            Ok(again) => {
                assert_eq!(again.shape(), t.shape());
                drop(again);
            }
            // SAFETY: refused, so still ours to release.
            Err(_) => unsafe { tvmrt::tensor::dlpack::release_exported_legacy(exported) },
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mode = inp.u8();
    let ndim = (inp.u8() % 44) as i32 - 3;
    let dtype = DLDataType {
        code: DLDataTypeCode(inp.u8() % 20),
        bits: inp.u8(),
        lanes: match inp.u8() {
            0..=200 => 1,
            _ => inp.u16(),
        },
    };
    let device = DLDevice {
        device_type: match inp.u8() {
            0..=239 => DLDeviceType::CPU,
            _ => DLDeviceType(inp.u32()),
        },
        device_id: (inp.u8() % 3) as i32,
    };
    let byte_offset = match inp.u8() {
        0..=199 => 0,
        200..=249 => (inp.u8() as u64) * 4,
        _ => inp.u64(),
    };
    let version = DLPackVersion {
        major: if inp.u8() < 240 { 1 } else { inp.u32() },
        minor: inp.u8() as u32,
    };
    let flags = inp.u8() as u64 & 7;
    let alloc_len = ndim.max(0) as usize;
    let mut shape: Vec<i64> = (0..alloc_len).map(|_| inp.dim()).collect();
    let mut strides: Vec<i64> = (0..alloc_len).map(|_| inp.dim()).collect();
    let mut buf = vec![0u64; BUF_WORDS];
    for (i, w) in buf.iter_mut().enumerate() {
        *w = i as u64;
    }
    let buf_bytes = (BUF_WORDS * 8) as i128;

    let use_strides = mode & 2 != 0;
    let dl = DLTensor {
        data: if mode & 4 != 0 {
            std::ptr::null_mut()
        } else {
            buf.as_mut_ptr().cast::<c_void>()
        },
        device,
        ndim,
        dtype,
        shape: if alloc_len == 0 && mode & 8 != 0 {
            std::ptr::null_mut()
        } else {
            shape.as_mut_ptr()
        },
        strides: if use_strides {
            strides.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        },
        byte_offset,
    };
    let req = ImportRequirements {
        alignment: if mode & 16 != 0 { 64 } else { 0 },
        contiguous: mode & 32 != 0,
    };
    let in_buffer = !dl.data.is_null()
        && ndim >= 0
        && extent(
            &shape,
            use_strides.then_some(strides.as_slice()),
            dtype,
            byte_offset,
        )
        .is_some_and(|(lo, hi)| lo >= 0 && hi <= buf_bytes);
    let with_deleter = mode & 64 == 0;

    if mode & 1 == 0 {
        let mut managed = Box::new(DLManagedTensor {
            dl_tensor: dl,
            manager_ctx: std::ptr::null_mut(),
            deleter: with_deleter.then_some(legacy_deleter as unsafe extern "C" fn(_)),
        });
        let before = LEGACY_DELETES.load(Ordering::SeqCst);
        // SAFETY: a live managed tensor whose shape/strides hold `ndim` entries; the deleter
        // only counts, and the box outlives the tensor (dropped below, before the box).
        match unsafe { Tensor::from_dlpack(&mut *managed, req) } {
            Ok(t) => {
                exercise(&t, in_buffer);
                drop(t);
                let calls = LEGACY_DELETES.load(Ordering::SeqCst) - before;
                assert_eq!(calls, with_deleter as usize, "deleter calls after release");
            }
            Err(e) => {
                assert!(!e.message.is_empty());
                assert_eq!(
                    LEGACY_DELETES.load(Ordering::SeqCst),
                    before,
                    "refused import deleted"
                );
            }
        }
    } else {
        let mut managed = Box::new(DLManagedTensorVersioned {
            version,
            manager_ctx: std::ptr::null_mut(),
            deleter: with_deleter.then_some(versioned_deleter as unsafe extern "C" fn(_)),
            flags: DlpackFlags::from_bits_retain(flags),
            dl_tensor: dl,
        });
        let before = VERSIONED_DELETES.load(Ordering::SeqCst);
        // SAFETY: as above.
        match unsafe { Tensor::from_dlpack_versioned(&mut *managed, req) } {
            Ok(t) => {
                assert_eq!(t.is_read_only(), flags & 1 != 0);
                exercise(&t, in_buffer);
                drop(t);
                let calls = VERSIONED_DELETES.load(Ordering::SeqCst) - before;
                assert_eq!(calls, with_deleter as usize, "deleter calls after release");
            }
            Err(e) => {
                assert!(!e.message.is_empty());
                assert_eq!(
                    VERSIONED_DELETES.load(Ordering::SeqCst),
                    before,
                    "refused import deleted"
                );
            }
        }
    }
    drop((shape, strides, buf));
});
