//! DLPack exchange through both doors: classic `TVMArrayFromDLPack`/`TVMArrayToDLPack`/
//! `TVMDLManagedTensorCallDeleter`, tvm-ffi `TVMFFITensorFromDLPack[Versioned]`/
//! `TVMFFITensorToDLPack[Versioned]` (the deleters of what they export live in `tensor::dlpack`).
//!
//! Ownership: an import that fails leaves the managed tensor with the caller, its deleter not
//! called (tvm-ffi `Tensor::FromDLPack` throws before taking it; TVM 0.19's
//! `NDArray::FromDLPack` likewise). The `out` pointer is checked before the import so a
//! successful import is never dropped for want of somewhere to put it.

use std::ffi::{c_int, c_void};

use crate::abi::{DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use crate::capi::boundary::{non_null, run_or};
use crate::device::api::ALLOC_ALIGNMENT;
use crate::error::{Error, Result};
use crate::tensor::dlpack::ImportRequirements;
use crate::tensor::Tensor;

fn requirements(require_alignment: i32, require_contiguous: i32) -> Result<ImportRequirements> {
    if require_alignment < 0 {
        return Err(Error::value(format!(
            "require_alignment must be >= 0, got {require_alignment}"
        )));
    }
    Ok(ImportRequirements {
        alignment: require_alignment as usize,
        contiguous: require_contiguous != 0,
    })
}

/// Imports a legacy DLPack tensor as a tensor object (`out`: a new reference, release with
/// `TVMFFIObjectDecRef`). On success the object owns `from` and calls its deleter once when
/// it dies; on failure the caller still owns `from`.
///
/// # Safety
/// `from` is null or a live managed tensor owned by the caller; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorFromDLPack(
    from: *mut DLManagedTensor,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFITensorFromDLPack", {
        non_null(out, "out")?;
        let req = requirements(require_alignment, require_contiguous)?;
        // SAFETY: per the contract.
        let t = unsafe { Tensor::from_dlpack(from, req)? };
        // SAFETY: checked non-null above; writable per the contract.
        unsafe { out.write(t.into_object().into_raw()) };
        Ok(())
    })
}

/// Imports a DLPack 1.x tensor as a tensor object, keeping its read-only flag. Ownership as
/// for `TVMFFITensorFromDLPack`.
///
/// # Safety
/// As `TVMFFITensorFromDLPack`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorFromDLPackVersioned(
    from: *mut DLManagedTensorVersioned,
    require_alignment: i32,
    require_contiguous: i32,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFITensorFromDLPackVersioned", {
        non_null(out, "out")?;
        let req = requirements(require_alignment, require_contiguous)?;
        // SAFETY: per the contract.
        let t = unsafe { Tensor::from_dlpack_versioned(from, req)? };
        // SAFETY: checked non-null above; writable per the contract.
        unsafe { out.write(t.into_object().into_raw()) };
        Ok(())
    })
}

/// Exports a tensor object as a legacy `DLManagedTensor` sharing its data. The receiver calls
/// its deleter once. Read-only tensors are refused (the legacy struct has no flag for it).
///
/// # Safety
/// `from` is null or a live tensor object; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorToDLPack(
    from: *mut c_void,
    out: *mut *mut DLManagedTensor,
) -> c_int {
    ffi_try!("TVMFFITensorToDLPack", {
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let t = Tensor::from_object(unsafe { crate::capi::boundary::object_arg(from, "from")? })?;
        let managed = t.to_dlpack()?;
        // SAFETY: checked non-null above.
        unsafe { out.write(managed) };
        Ok(())
    })
}

/// Exports a tensor object as a DLPack 1.x `DLManagedTensorVersioned` (read-only flag set when
/// the tensor is read-only). The receiver calls its deleter once.
///
/// # Safety
/// As `TVMFFITensorToDLPack`.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorToDLPackVersioned(
    from: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    ffi_try!("TVMFFITensorToDLPackVersioned", {
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let t = Tensor::from_object(unsafe { crate::capi::boundary::object_arg(from, "from")? })?;
        // SAFETY: checked non-null above.
        unsafe { out.write(t.to_dlpack_versioned()) };
        Ok(())
    })
}

/// Classic import: a new array handle sharing `from`'s data (release with `TVMArrayFree`).
/// As in TVM 0.19 (`NDArray::FromDLPack`), the data must be compact and 64-byte aligned.
/// Ownership as for `TVMFFITensorFromDLPack`.
///
/// # Safety
/// `from` is null or a live managed tensor owned by the caller; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayFromDLPack(
    from: *mut DLManagedTensor,
    out: *mut *mut DLTensor,
) -> c_int {
    ffi_try!("TVMArrayFromDLPack", {
        non_null(out, "out")?;
        let req = ImportRequirements {
            alignment: ALLOC_ALIGNMENT,
            contiguous: true,
        };
        // SAFETY: per the contract.
        let t = unsafe { Tensor::from_dlpack(from, req)? };
        // SAFETY: checked non-null above.
        unsafe { out.write(t.into_handle()) };
        Ok(())
    })
}

/// Classic export of an array handle as a legacy `DLManagedTensor` (see
/// `TVMFFITensorToDLPack`).
///
/// # Safety
/// `from` is null or a live array handle; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayToDLPack(
    from: *mut DLTensor,
    out: *mut *mut DLManagedTensor,
) -> c_int {
    ffi_try!("TVMArrayToDLPack", {
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let t = unsafe { Tensor::from_handle_borrowed(from, "from")? };
        let managed = t.to_dlpack()?;
        // SAFETY: checked non-null above.
        unsafe { out.write(managed) };
        Ok(())
    })
}

/// Calls a managed tensor's deleter (null tensor or deleter: nothing to do).
///
/// # Safety
/// `dltensor` is null or a live managed tensor the caller owns and gives up.
#[no_mangle]
pub unsafe extern "C" fn TVMDLManagedTensorCallDeleter(dltensor: *mut DLManagedTensor) {
    run_or("TVMDLManagedTensorCallDeleter", (), || {
        if dltensor.is_null() {
            return Ok(());
        }
        // SAFETY: live and owned per the contract; the deleter runs once here.
        unsafe {
            if let Some(deleter) = (*dltensor).deleter {
                deleter(dltensor);
            }
        }
        Ok(())
    })
}
