//! The tvm-ffi environment context (`tvm/ffi/extra/c_env_api.h`): the DLPack allocator
//! `TVMFFIEnvTensorAlloc` uses. (The current stream per device, the other half of that context,
//! is [`crate::device::stream`].)
//!
//! Semantics from tvm-ffi `src/ffi/extra/env_context.cc`: the allocator is thread-local;
//! setting it with `write_to_global_context` also sets a process-wide default that threads
//! without their own allocator use; the "original" allocator reported by a set is the thread's
//! own (null when it had none).
//!
//! With no allocator installed, `TVMFFIEnvTensorAlloc` fails with tvm-ffi's `RuntimeError` and
//! message (tvm-ffi's Rust crate tests exactly that): the environment allocator is the host
//! framework's; tvmrt's own allocation is [`Tensor::empty`] (`TVMArrayAlloc` from C).

use std::cell::RefCell;
use std::ffi::c_void;

use dlpark::ffi::DLPackManagedTensorAllocator;
use parking_lot::Mutex;

use super::dlpack::ImportRequirements;
use super::layout;
use super::Tensor;
use crate::abi::{DLManagedTensorVersioned, DLTensor};
use crate::error::{Error, Result};

thread_local! {
    static LOCAL_ALLOCATOR: RefCell<DLPackManagedTensorAllocator> = const { RefCell::new(None) };
}

static GLOBAL_ALLOCATOR: Mutex<DLPackManagedTensorAllocator> = Mutex::new(None);

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

/// tvm-ffi's message when no allocator is installed (`src/ffi/extra/env_context.cc`).
pub const NO_ALLOCATOR: &str = "TVMFFIEnvTensorAlloc: allocator is nullptr, likely because \
                                TVMFFIEnvSetDLPackManagedTensorAllocator has not been called.";

/// Allocates a compact tensor of the prototype's shape, dtype and device
/// (`TVMFFIEnvTensorAlloc`) through the installed DLPack allocator; an error when none is.
///
/// # Safety
/// `prototype.shape` is null or readable for `ndim` entries.
pub unsafe fn env_tensor_alloc(prototype: &DLTensor) -> Result<Tensor> {
    // The allocator first, as tvm-ffi checks it.
    let Some(alloc) = allocator() else {
        return Err(Error::runtime(NO_ALLOCATOR));
    };
    // SAFETY: per the contract.
    unsafe { layout::dl_shape(prototype, "TVMFFIEnvTensorAlloc prototype")? };
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
