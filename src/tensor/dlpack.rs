//! DLPack exchange: importing `DLManagedTensor` / `DLManagedTensorVersioned` as tensors and
//! exporting tensors as either.
//!
//! Ownership follows tvm-ffi (`container/tensor.h`, `Tensor::FromDLPack*`): an import checks
//! everything first and takes the managed tensor only when it succeeds; on failure the caller
//! still owns it (its deleter has not run). A successful import runs the deleter exactly once,
//! when the last reference to the tensor goes. An export holds one reference to the tensor
//! (`manager_ctx` is the object, as in tvm-ffi) that its deleter releases.
//!
//! Facts from the DLPack 1.x header: a consumer must not read past `version` when the major
//! version differs from 1; `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED` data is refused as
//! tvm-ffi does; the read-only flag is kept (see the `tensor` module docs).

use dlpark::ffi::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};

use super::layout::{self, check_dtype, check_shape, logical_size};
use super::{DataOwner, Meta, Tensor, TensorObj, FLAG_READ_ONLY};
use crate::abi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use crate::error::{Error, Result};

/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`.
const FLAG_SUBBYTE_PADDED: u64 = 4;

/// An imported legacy managed tensor; dropping it calls its deleter (once).
pub struct LegacyManaged(*mut DLManagedTensor);

/// An imported DLPack 1.x managed tensor; dropping it calls its deleter (once).
pub struct VersionedManaged(*mut DLManagedTensorVersioned);

impl Drop for LegacyManaged {
    fn drop(&mut self) {
        // SAFETY: the import took ownership of a live managed tensor; this is the one place its
        // deleter runs.
        unsafe {
            if let Some(deleter) = (*self.0).deleter {
                deleter(self.0);
            }
        }
    }
}

impl Drop for VersionedManaged {
    fn drop(&mut self) {
        // SAFETY: as for `LegacyManaged`.
        unsafe {
            if let Some(deleter) = (*self.0).deleter {
                deleter(self.0);
            }
        }
    }
}

/// What an import requires of the data.
#[derive(Clone, Copy, Debug, Default)]
pub struct ImportRequirements {
    /// `data + byte_offset` must be a multiple of this (0: no requirement).
    pub alignment: usize,
    /// The layout must be compact row-major.
    pub contiguous: bool,
}

/// The checked parts of a `DLTensor` about to be imported.
struct Checked<'a> {
    shape: &'a [i64],
    strides: Option<&'a [i64]>,
}

/// Checks a producer's `DLTensor` for import.
///
/// # Safety
/// `t.shape`/`t.strides` are null or readable for `ndim` entries while the managed tensor lives.
unsafe fn check_import<'a>(
    t: &DLTensor,
    req: ImportRequirements,
    who: &str,
) -> Result<Checked<'a>> {
    // Any device with a back end: its data pointer is that back end's to interpret.
    crate::device::api_of(t.device).map_err(|e| e.context(who))?;
    check_dtype(t.dtype)
        .map_err(|e| Error::new(e.kind.clone(), format!("{who}: {}", e.message)))?;
    // SAFETY: per the contract.
    let shape = unsafe { layout::dl_shape(t, who)? };
    let numel = check_shape(shape).map_err(|e| Error::value(format!("{who}: {}", e.message)))?;
    let nbytes = logical_size(numel, t.dtype)?;
    if t.data.is_null() && nbytes > 0 {
        return Err(Error::value(format!(
            "{who}: data is null but the tensor holds {nbytes} bytes"
        )));
    }
    if req.alignment != 0 && !layout::is_aligned(t, req.alignment) {
        return Err(Error::value(format!(
            "{who}: data is not aligned to {} bytes (data {:p} + byte_offset {})",
            req.alignment, t.data, t.byte_offset
        )));
    }
    // SAFETY: per the contract.
    let strides = unsafe { layout::dl_strides(t) };
    if req.contiguous && !layout::is_contiguous(shape, strides) {
        return Err(Error::value(format!(
            "{who}: tensor is not contiguous (shape {shape:?}, strides {:?})",
            strides.unwrap_or(&[])
        )));
    }
    Ok(Checked { shape, strides })
}

fn build(t: &DLTensor, checked: Checked<'_>, flags: u64, owner: DataOwner) -> Tensor {
    let meta = Meta {
        data: t.data,
        byte_offset: t.byte_offset,
        device: t.device,
        dtype: t.dtype,
        flags,
    };
    Tensor::from_payload(TensorObj::new(meta, checked.shape, checked.strides, owner))
}

impl Tensor {
    /// Imports a legacy `DLManagedTensor`, sharing its data. On success the tensor owns it;
    /// on error the caller still does.
    ///
    /// # Safety
    /// `managed` is null or a live managed tensor the caller owns, whose deleter may be called
    /// from any thread.
    pub unsafe fn from_dlpack(
        managed: *mut DLManagedTensor,
        req: ImportRequirements,
    ) -> Result<Tensor> {
        crate::error::non_null(managed, "DLManagedTensor")?;
        // SAFETY: live per the contract.
        let t = unsafe { &(*managed).dl_tensor };
        // SAFETY: the managed tensor keeps its shape and strides alive.
        let checked = unsafe { check_import(t, req, "DLPack import")? };
        Ok(build(
            t,
            checked,
            0,
            DataOwner::Legacy(LegacyManaged(managed)),
        ))
    }

    /// Imports a DLPack 1.x `DLManagedTensorVersioned`, keeping its read-only flag. On success
    /// the tensor owns it; on error the caller still does.
    ///
    /// # Safety
    /// As [`Tensor::from_dlpack`].
    pub unsafe fn from_dlpack_versioned(
        managed: *mut DLManagedTensorVersioned,
        req: ImportRequirements,
    ) -> Result<Tensor> {
        crate::error::non_null(managed, "DLManagedTensorVersioned")?;
        // SAFETY: live per the contract; `version` is the first field of every major version.
        let version = unsafe { (*managed).version };
        if version.major != DLPACK_MAJOR_VERSION {
            return Err(Error::value(format!(
                "DLPack import: unsupported DLPack major version {}.{} (tvmrt reads {}.x)",
                version.major, version.minor, DLPACK_MAJOR_VERSION
            )));
        }
        // SAFETY: a 1.x managed tensor, live per the contract.
        let (flags, t) = unsafe { ((*managed).flags.bits(), &(*managed).dl_tensor) };
        if flags & FLAG_SUBBYTE_PADDED != 0 {
            return Err(Error::value(
                "DLPack import: padded sub-byte data (DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) \
                 is not supported",
            ));
        }
        // SAFETY: the managed tensor keeps its shape and strides alive.
        let checked = unsafe { check_import(t, req, "DLPack import")? };
        Ok(build(
            t,
            checked,
            flags & FLAG_READ_ONLY,
            DataOwner::Versioned(VersionedManaged(managed)),
        ))
    }

    /// Exports as a legacy `DLManagedTensor` sharing this tensor's data; the receiver calls its
    /// deleter once. A read-only tensor is refused: the legacy struct cannot say so.
    pub fn to_dlpack(&self) -> Result<*mut DLManagedTensor> {
        if self.is_read_only() {
            return Err(Error::value(
                "cannot export a read-only tensor as a legacy DLManagedTensor (it has no \
                 read-only flag); use the versioned export",
            ));
        }
        let managed = Box::new(DLManagedTensor {
            dl_tensor: *self.dl(),
            manager_ctx: self.0.clone().into_raw(),
            deleter: Some(exported_legacy_deleter),
        });
        Ok(Box::into_raw(managed))
    }

    /// Exports as a DLPack 1.x `DLManagedTensorVersioned` sharing this tensor's data, with the
    /// read-only flag when the tensor has it; the receiver calls its deleter once.
    pub fn to_dlpack_versioned(&self) -> *mut DLManagedTensorVersioned {
        let managed = Box::new(DLManagedTensorVersioned {
            version: DLPackVersion {
                major: DLPACK_MAJOR_VERSION,
                minor: DLPACK_MINOR_VERSION,
            },
            manager_ctx: self.0.clone().into_raw(),
            deleter: Some(exported_versioned_deleter),
            flags: dlpark::DlpackFlags::from_bits_retain(self.flags() & FLAG_READ_ONLY),
            dl_tensor: *self.dl(),
        });
        Box::into_raw(managed)
    }
}

/// Releases what a tvmrt export holds: the box and the tensor reference.
///
/// # Safety
/// `managed` came from [`Tensor::to_dlpack`] and is released once.
pub unsafe fn release_exported_legacy(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: allocated by `Box::into_raw` in `to_dlpack`, released once per the contract.
    let boxed = unsafe { Box::from_raw(managed) };
    // SAFETY: `manager_ctx` holds the strong reference taken by the export.
    drop(unsafe { crate::object::ObjectRef::from_raw_owned(boxed.manager_ctx) });
}

/// Releases what a tvmrt versioned export holds.
///
/// # Safety
/// `managed` came from [`Tensor::to_dlpack_versioned`] and is released once.
pub unsafe fn release_exported_versioned(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: allocated by `Box::into_raw` in `to_dlpack_versioned`, released once.
    let boxed = unsafe { Box::from_raw(managed) };
    // SAFETY: `manager_ctx` holds the strong reference taken by the export.
    drop(unsafe { crate::object::ObjectRef::from_raw_owned(boxed.manager_ctx) });
}

/// Deleter of the `DLManagedTensor`s tvmrt exports: frees the struct and releases the tensor.
///
/// # Safety
/// `managed` came from a tvmrt legacy export and is deleted once.
pub unsafe extern "C" fn exported_legacy_deleter(managed: *mut DLManagedTensor) {
    crate::unwind_guard::run_or("DLManagedTensor deleter", (), || {
        // SAFETY: per the contract.
        unsafe { release_exported_legacy(managed) };
        Ok(())
    })
}

/// Deleter of the `DLManagedTensorVersioned`s tvmrt exports.
///
/// # Safety
/// `managed` came from a tvmrt versioned export and is deleted once.
pub unsafe extern "C" fn exported_versioned_deleter(managed: *mut DLManagedTensorVersioned) {
    crate::unwind_guard::run_or("DLManagedTensorVersioned deleter", (), || {
        // SAFETY: per the contract.
        unsafe { release_exported_versioned(managed) };
        Ok(())
    })
}
