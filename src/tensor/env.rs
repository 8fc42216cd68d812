//! The tvm-ffi environment context (`tvm/ffi/extra/c_env_api.h`): the current stream per
//! device and the DLPack allocator `TVMFFIEnvTensorAlloc` uses.
//!
//! Semantics from tvm-ffi `src/ffi/extra/env_context.cc`: both are thread-local; setting the
//! allocator with `write_to_global_context` also sets a process-wide default that threads
//! without their own allocator use; the "original" allocator reported by a set is the thread's
//! own (null when it had none). The stream table stores any device's stream (it is a context
//! for kernels, not a device API), null when never set.
//!
//! One deliberate difference: with no allocator installed, tvm-ffi's `TVMFFIEnvTensorAlloc`
//! fails, whereas tvmrt, a deployment runtime with no host framework to ask, allocates the
//! tensor itself (CPU, 64-byte aligned).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;

use dlpark::ffi::DLPackManagedTensorAllocator;
use parking_lot::Mutex;

use super::dlpack::ImportRequirements;
use super::layout;
use super::Tensor;
use crate::abi::{DLManagedTensorVersioned, DLTensor};
use crate::error::{Error, Result};

thread_local! {
    static STREAMS: RefCell<HashMap<(i32, i32), usize>> = RefCell::new(HashMap::new());
    static LOCAL_ALLOCATOR: RefCell<DLPackManagedTensorAllocator> = const { RefCell::new(None) };
}

static GLOBAL_ALLOCATOR: Mutex<DLPackManagedTensorAllocator> = Mutex::new(None);

fn check_device_key(device_type: i32, device_id: i32) -> Result<()> {
    if device_type < 0 || device_id < 0 {
        return Err(Error::value(format!(
            "invalid device (device_type={device_type}, device_id={device_id}): both must be >= 0"
        )));
    }
    Ok(())
}

/// Sets this thread's stream for a device, returning the previous one (null if none).
pub fn set_stream(device_type: i32, device_id: i32, stream: *mut c_void) -> Result<*mut c_void> {
    check_device_key(device_type, device_id)?;
    let old = STREAMS.with(|s| {
        let mut s = s.borrow_mut();
        if stream.is_null() {
            s.remove(&(device_type, device_id))
        } else {
            s.insert((device_type, device_id), stream as usize)
        }
    });
    Ok(old.unwrap_or(0) as *mut c_void)
}

/// This thread's stream for a device (null when never set).
pub fn get_stream(device_type: i32, device_id: i32) -> *mut c_void {
    STREAMS.with(|s| {
        s.borrow()
            .get(&(device_type, device_id))
            .copied()
            .unwrap_or(0) as *mut c_void
    })
}

/// Installs `allocator` for this thread (and as the process default when `global`), returning
/// the thread's previous own allocator.
pub fn set_allocator(
    allocator: DLPackManagedTensorAllocator,
    global: bool,
) -> DLPackManagedTensorAllocator {
    if global {
        *GLOBAL_ALLOCATOR.lock() = allocator;
    }
    LOCAL_ALLOCATOR.with(|a| a.replace(allocator))
}

/// The allocator in effect on this thread: its own, else the process default, else none.
pub fn allocator() -> DLPackManagedTensorAllocator {
    LOCAL_ALLOCATOR
        .with(|a| *a.borrow())
        .or_else(|| *GLOBAL_ALLOCATOR.lock())
}

/// Allocates a compact tensor of the prototype's shape, dtype and device
/// (`TVMFFIEnvTensorAlloc`): through the installed DLPack allocator, or tvmrt's own.
///
/// # Safety
/// `prototype.shape` is null or readable for `ndim` entries.
pub unsafe fn env_tensor_alloc(prototype: &DLTensor) -> Result<Tensor> {
    // SAFETY: per the contract.
    let shape = unsafe { layout::dl_shape(prototype, "TVMFFIEnvTensorAlloc prototype")? };
    let Some(alloc) = allocator() else {
        return Tensor::empty(shape, prototype.dtype, prototype.device);
    };
    let mut out: *mut DLManagedTensorVersioned = std::ptr::null_mut();
    let mut error: Option<Error> = None;
    let mut proto = *prototype;
    // SAFETY: the allocator's contract (DLPack `DLPackManagedTensorAllocator`): it reads the
    // prototype, writes `out`, and reports failures through `set_error(error_ctx, ...)`, whose
    // context is our `error` slot, alive for the call.
    let rc = unsafe {
        alloc(
            &mut proto,
            &mut out,
            (&mut error as *mut Option<Error>).cast(),
            Some(env_alloc_set_error),
        )
    };
    if rc != 0 || out.is_null() {
        return Err(error.unwrap_or_else(|| {
            Error::runtime(format!(
                "TVMFFIEnvTensorAlloc: the DLPack allocator failed (returned {rc}) without an \
                 error message"
            ))
        }));
    }
    // SAFETY: the allocator handed us a live managed tensor we now own.
    match unsafe { Tensor::from_dlpack_versioned(out, ImportRequirements::default()) } {
        Ok(t) => Ok(t),
        Err(e) => {
            // The import refused it, so it is still ours: release it now.
            // SAFETY: `out` is live and released exactly once here.
            unsafe {
                if let Some(deleter) = (*out).deleter {
                    deleter(out);
                }
            }
            Err(Error::new(
                e.kind.clone(),
                format!(
                    "TVMFFIEnvTensorAlloc: allocator result refused: {}",
                    e.message
                ),
            ))
        }
    }
}

/// Stores an allocator's error report into the slot `env_tensor_alloc` passes as context.
///
/// # Safety
/// `ctx` is the `Option<Error>` slot of a running `env_tensor_alloc` call.
pub unsafe fn store_alloc_error(ctx: *mut c_void, kind: &str, message: &str) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: per the contract.
    unsafe { *ctx.cast::<Option<Error>>() = Some(Error::new(kind, message)) };
}

/// The `set_error` callback tvmrt passes to a DLPack allocator (`TVMFFIEnvTensorAlloc`).
///
/// # Safety
/// `error_ctx` is the context tvmrt passed with this callback; `kind` and `message` are null
/// or NUL-terminated strings.
pub unsafe extern "C" fn env_alloc_set_error(
    error_ctx: *mut c_void,
    kind: *const std::ffi::c_char,
    message: *const std::ffi::c_char,
) {
    crate::unwind_guard::run_or("DLPack allocator set_error", (), || {
        let text = |p: *const std::ffi::c_char, default: &str| -> String {
            if p.is_null() {
                default.to_string()
            } else {
                // SAFETY: NUL-terminated per the contract.
                unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_string_lossy()
                    .into_owned()
            }
        };
        let kind = text(kind, "RuntimeError");
        let message = text(message, "(no message)");
        // SAFETY: per the contract.
        unsafe { store_alloc_error(error_ctx, &kind, &message) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_table_is_per_thread() {
        let s = 0x1234usize as *mut c_void;
        assert!(get_stream(2, 0).is_null());
        assert!(set_stream(2, 0, s).unwrap().is_null());
        assert_eq!(get_stream(2, 0), s);
        std::thread::spawn(|| assert!(get_stream(2, 0).is_null()))
            .join()
            .unwrap();
        assert_eq!(set_stream(2, 0, std::ptr::null_mut()).unwrap(), s);
        assert!(get_stream(2, 0).is_null());
        assert!(set_stream(-1, 0, s).is_err());
    }
}
