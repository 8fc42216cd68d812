//! The backend C API that compiled kernels call (`tvm/runtime/c_backend_api.h`): workspace
//! memory, the parallel pool, run-once initialization and system-library registration.

use std::ffi::{c_char, c_int, c_void};

use once_cell::sync::Lazy;

use crate::abi::{DLDevice, DLDeviceType};
use crate::backend::thread_pool::{self, ParallelGroupEnv, ParallelLambda, RunOnceFn};
use crate::capi::boundary::{c_str, non_null, run_or};
use crate::error::{Error, Result};

/// The device `(device_type, device_id)` and its back end.
fn device_api(
    device_type: c_int,
    device_id: c_int,
    what: &str,
) -> Result<(DLDevice, &'static dyn crate::device::DeviceApi)> {
    let t = u32::try_from(device_type)
        .map_err(|_| Error::value(format!("{what}: invalid device_type {device_type}")))?;
    let dev = DLDevice {
        device_type: DLDeviceType(t),
        device_id,
    };
    let api = crate::device::api_of(dev).map_err(|e| e.context(what))?;
    Ok((dev, api))
}

/// Lets the pool report a failed task's own error: a task sets it on its worker thread
/// (`TVMFFIErrorSetRaised*` / `TVMAPISetLastError`), and the launcher raises it.
static TASK_ERRORS: Lazy<()> =
    Lazy::new(|| thread_pool::set_task_error_source(Some(crate::raised::take_raised)));

/// Allocates `nbytes` of scratch memory on a device for a kernel; NULL with the error raised on
/// failure. On the CPU it is 64-byte aligned and comes from this thread's pool (free it on the
/// same thread); elsewhere from the device's back end (an OpenCL buffer descriptor, say). Free
/// it with `TVMBackendFreeWorkspace`.
#[no_mangle]
pub extern "C" fn TVMBackendAllocWorkspace(
    device_type: c_int,
    device_id: c_int,
    nbytes: u64,
    dtype_code_hint: c_int,
    dtype_bits_hint: c_int,
) -> *mut c_void {
    run_or("TVMBackendAllocWorkspace", std::ptr::null_mut(), || {
        let (dev, api) = device_api(device_type, device_id, "TVMBackendAllocWorkspace")?;
        let nbytes = usize::try_from(nbytes).map_err(|_| {
            Error::value(format!(
                "TVMBackendAllocWorkspace: {nbytes} bytes is more than can be allocated"
            ))
        })?;
        // TVM's hint: the code and bits given, one lane (out-of-range values are only a hint).
        let hint = crate::dtype::dtype(dtype_code_hint as u8, dtype_bits_hint as u8, 1);
        api.alloc_workspace(dev, nbytes, hint)
    })
}

/// Returns workspace memory (to this thread's pool on the CPU).
///
/// # Safety
/// `ptr` came from `TVMBackendAllocWorkspace` on this device (on this thread for the CPU;
/// unknown pointers are refused there).
#[no_mangle]
pub unsafe extern "C" fn TVMBackendFreeWorkspace(
    device_type: c_int,
    device_id: c_int,
    ptr: *mut c_void,
) -> c_int {
    ffi_try!("TVMBackendFreeWorkspace", {
        let (dev, api) = device_api(device_type, device_id, "TVMBackendFreeWorkspace")?;
        // SAFETY: per the contract.
        unsafe { api.free_workspace(dev, ptr) }
    })
}

/// Runs `flambda(task_id, penv, cdata)` for every task on the persistent pool and waits for all;
/// `num_task` 0 uses the pool's size. A nested launch runs inline on the calling thread.
///
/// # Safety
/// `flambda` is callable from any pool thread with `cdata` until this call returns.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelLaunch(
    flambda: Option<ParallelLambda>,
    cdata: *mut c_void,
    num_task: c_int,
) -> c_int {
    ffi_try!("TVMBackendParallelLaunch", {
        Lazy::force(&TASK_ERRORS);
        let f = flambda.ok_or_else(|| Error::value("null pointer passed as `flambda`"))?;
        // SAFETY: per the contract.
        unsafe { thread_pool::parallel_launch(f, cdata, num_task) }
    })
}

/// Waits until every task of the current launch reaches the barrier.
///
/// # Safety
/// `penv` is the environment the running task received.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelBarrier(
    task_id: c_int,
    penv: *mut ParallelGroupEnv,
) -> c_int {
    ffi_try!("TVMBackendParallelBarrier", {
        non_null(penv, "penv")?;
        // SAFETY: per the contract.
        unsafe { thread_pool::parallel_barrier(task_id, penv) }
    })
}

/// Runs `f(cdata)` once per `*handle` (thread-safe), as TVM's `TVMBackendRunOnce`.
///
/// # Safety
/// `handle` points to a slot that lives as long as the process (a static in generated code).
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRunOnce(
    handle: *mut *mut c_void,
    f: Option<RunOnceFn>,
    cdata: *mut c_void,
    _nbytes: c_int,
) -> c_int {
    ffi_try!("TVMBackendRunOnce", {
        non_null(handle, "handle")?;
        let f = f.ok_or_else(|| Error::value("null pointer passed as `f`"))?;
        // SAFETY: per the contract.
        unsafe { thread_pool::run_once(handle, f, cdata) }
    })
}

fn register_system_symbol(name: *const c_char, ptr: *mut c_void) -> Result<()> {
    // SAFETY: callers pass a C string (checked for null).
    let name = unsafe { c_str(name, "name")? };
    non_null(ptr, "ptr")?;
    crate::module::system_lib::register_symbol(name, ptr);
    Ok(())
}

/// Registers a symbol of the system library (called by statically linked kernels at start-up).
///
/// # Safety
/// `name` is a C string; `ptr` stays valid for the life of the process.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendRegisterSystemLibSymbol(
    name: *const c_char,
    ptr: *mut c_void,
) -> c_int {
    ffi_try!("TVMBackendRegisterSystemLibSymbol", {
        register_system_symbol(name, ptr)
    })
}

/// The tvm-ffi spelling of [`TVMBackendRegisterSystemLibSymbol`].
///
/// # Safety
/// As [`TVMBackendRegisterSystemLibSymbol`].
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvModRegisterSystemLibSymbol(
    name: *const c_char,
    ptr: *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIEnvModRegisterSystemLibSymbol", {
        register_system_symbol(name, ptr)
    })
}
