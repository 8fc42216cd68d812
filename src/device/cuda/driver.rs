//! The CUDA driver API entry points tvmrt uses, opened at run time from `libcuda.so.1` (or the
//! file `TVMRT_CUDA_LIBRARY` names): no link-time dependency, and a machine without the driver
//! gets an error saying so when it first asks for a CUDA device.
//!
//! Typed from NVIDIA's `cuda.h` (the `_v2` names are what its macros select since CUDA 4.0);
//! handles are opaque pointers, device pointers `u64`. `cuLaunchKernelEx` (CUDA 12.0) is
//! optional: only cluster, cooperative and programmatic-dependent launches need it.

use std::ffi::{c_char, c_int, c_uint, c_void};

use once_cell::sync::OnceCell;

use crate::error::{Error, Result};

/// `CUresult`.
pub type CuResult = c_int;
/// `CUdevice`.
pub type CuDevice = c_int;
/// `CUdeviceptr`.
pub type CuDevicePtr = u64;
/// `CUcontext`, `CUmodule`, `CUfunction`, `CUstream`, `CUevent`.
pub type Handle = *mut c_void;

/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CuResult = 0;
/// `CUDA_ERROR_DEINITIALIZED`: the driver is shutting down (process exit).
pub const CUDA_ERROR_DEINITIALIZED: CuResult = 4;
/// `CUDA_ERROR_NO_DEVICE`.
pub const CUDA_ERROR_NO_DEVICE: CuResult = 100;
/// `CUDA_ERROR_NOT_FOUND` (a kernel the module lacks).
pub const CUDA_ERROR_NOT_FOUND: CuResult = 500;

/// `CUlaunchAttribute` (`cuda.h`: an 8-byte id slot, then a 64-byte value union).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LaunchAttribute {
    /// `CUlaunchAttributeID`.
    pub id: u32,
    pub pad: u32,
    /// The value union's bytes (`clusterDim` is three `u32`, flags one `i32`).
    pub value: [u32; 16],
}

/// `CUlaunchConfig`.
#[repr(C)]
pub struct LaunchConfig {
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared_mem_bytes: c_uint,
    pub stream: Handle,
    pub attrs: *mut LaunchAttribute,
    pub num_attrs: c_uint,
}

/// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`.
pub const LAUNCH_ATTRIBUTE_COOPERATIVE: u32 = 2;
/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
pub const LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: u32 = 4;
/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`.
pub const LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: u32 = 6;
/// `CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION`.
pub const LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: u32 = 11;

/// `CUdevice_attribute` values tvmrt reads.
pub mod attr {
    pub const MAX_THREADS_PER_BLOCK: i32 = 1;
    pub const MAX_BLOCK_DIM_X: i32 = 2;
    pub const MAX_BLOCK_DIM_Y: i32 = 3;
    pub const MAX_BLOCK_DIM_Z: i32 = 4;
    pub const MAX_GRID_DIM_X: i32 = 5;
    pub const MAX_GRID_DIM_Y: i32 = 6;
    pub const MAX_GRID_DIM_Z: i32 = 7;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 8;
    pub const WARP_SIZE: i32 = 10;
    pub const MAX_REGISTERS_PER_BLOCK: i32 = 12;
    pub const CLOCK_RATE: i32 = 13;
    pub const MULTIPROCESSOR_COUNT: i32 = 16;
    pub const L2_CACHE_SIZE: i32 = 38;
    pub const TEXTURE_PITCH_ALIGNMENT: i32 = 51;
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
    pub const MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: i32 = 97;
}

/// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`: a kernel's static shared memory.
pub const FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: c_int = 1;
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`.
pub const POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`.
pub const POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
/// `CU_MEMORYTYPE_HOST` (page-locked host memory the device can read).
pub const MEMORYTYPE_HOST: c_uint = 1;
/// `CU_MEMORYTYPE_DEVICE`.
pub const MEMORYTYPE_DEVICE: c_uint = 2;
/// `CU_MEMORYTYPE_UNIFIED` (managed memory).
pub const MEMORYTYPE_UNIFIED: c_uint = 4;
/// `CU_STREAM_NON_BLOCKING` (TVM creates its streams so: `cudaStreamNonBlocking`).
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// `CU_EVENT_DISABLE_TIMING`.
pub const EVENT_DISABLE_TIMING: c_uint = 2;
/// `CU_JIT_ERROR_LOG_BUFFER`.
pub const JIT_ERROR_LOG_BUFFER: c_int = 5;
/// `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
pub const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

/// The driver functions, resolved once.
pub struct Cu {
    pub init: unsafe extern "C" fn(c_uint) -> CuResult,
    pub driver_get_version: unsafe extern "C" fn(*mut c_int) -> CuResult,
    pub get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    pub get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    pub device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    pub device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    pub device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    pub device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    pub device_total_mem: unsafe extern "C" fn(*mut usize, CuDevice) -> CuResult,
    pub primary_ctx_retain: unsafe extern "C" fn(*mut Handle, CuDevice) -> CuResult,
    pub ctx_set_current: unsafe extern "C" fn(Handle) -> CuResult,
    pub mem_get_info: unsafe extern "C" fn(*mut usize, *mut usize) -> CuResult,
    pub mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    pub mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    pub mem_alloc_host: unsafe extern "C" fn(*mut *mut c_void, usize) -> CuResult,
    pub mem_free_host: unsafe extern "C" fn(*mut c_void) -> CuResult,
    pub memcpy_htod_async:
        unsafe extern "C" fn(CuDevicePtr, *const c_void, usize, Handle) -> CuResult,
    pub memcpy_dtoh_async:
        unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize, Handle) -> CuResult,
    pub memcpy_dtod_async:
        unsafe extern "C" fn(CuDevicePtr, CuDevicePtr, usize, Handle) -> CuResult,
    pub memcpy_peer_async:
        unsafe extern "C" fn(CuDevicePtr, Handle, CuDevicePtr, Handle, usize, Handle) -> CuResult,
    pub pointer_get_attribute: unsafe extern "C" fn(*mut c_void, c_int, CuDevicePtr) -> CuResult,
    pub stream_create: unsafe extern "C" fn(*mut Handle, c_uint) -> CuResult,
    pub stream_destroy: unsafe extern "C" fn(Handle) -> CuResult,
    pub stream_synchronize: unsafe extern "C" fn(Handle) -> CuResult,
    pub stream_wait_event: unsafe extern "C" fn(Handle, Handle, c_uint) -> CuResult,
    pub event_create: unsafe extern "C" fn(*mut Handle, c_uint) -> CuResult,
    pub event_record: unsafe extern "C" fn(Handle, Handle) -> CuResult,
    pub event_destroy: unsafe extern "C" fn(Handle) -> CuResult,
    pub module_load_data_ex: unsafe extern "C" fn(
        *mut Handle,
        *const c_void,
        c_uint,
        *mut c_int,
        *mut *mut c_void,
    ) -> CuResult,
    pub module_unload: unsafe extern "C" fn(Handle) -> CuResult,
    pub module_get_function: unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> CuResult,
    pub func_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, Handle) -> CuResult,
    pub func_set_attribute: unsafe extern "C" fn(Handle, c_int, c_int) -> CuResult,
    #[allow(clippy::type_complexity)]
    pub launch_kernel: unsafe extern "C" fn(
        Handle,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        Handle,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CuResult,
    /// `cuLaunchKernelEx` (CUDA 12.0+), when the driver has it.
    pub launch_kernel_ex: Option<
        unsafe extern "C" fn(
            *const LaunchConfig,
            Handle,
            *mut *mut c_void,
            *mut *mut c_void,
        ) -> CuResult,
    >,
    /// Where the driver was opened from (for messages).
    pub path: String,
    /// Keeps the library mapped while the pointers above are in use (for the process).
    _library: libloading::Library,
}

/// The driver's file name (NVIDIA's driver package installs it in the loader's path).
pub const DEFAULT_LIBRARY: &str = "libcuda.so.1";

/// The environment variable that names another driver library to open (a test double, or a
/// driver outside the loader's path).
pub const LIBRARY_ENV: &str = "TVMRT_CUDA_LIBRARY";

static CU: OnceCell<std::result::Result<Cu, String>> = OnceCell::new();

/// The driver, opened and initialized (`cuInit`) on first use; the same error every time when
/// it cannot be.
pub fn cu() -> Result<&'static Cu> {
    CU.get_or_init(open)
        .as_ref()
        .map_err(|m| Error::runtime(m.clone()))
}

/// The driver if it was opened already (without opening it).
pub fn opened() -> Option<&'static Cu> {
    CU.get().and_then(|r| r.as_ref().ok())
}

fn open() -> std::result::Result<Cu, String> {
    let name =
        crate::device::library_override(LIBRARY_ENV).unwrap_or_else(|| DEFAULT_LIBRARY.to_string());
    // SAFETY: opening the driver runs its initializers, which is what using CUDA means; the
    // library stays loaded for the life of the process (kept in the static `CU`).
    let library = unsafe { libloading::Library::new(&name) }.map_err(|e| {
        format!(
            "CUDA is not available: cannot open the NVIDIA driver library `{name}` ({e}); install \
             the NVIDIA driver (it provides libcuda.so.1), or set {LIBRARY_ENV} to the library's \
             path",
            e = crate::device::library_error(&e)
        )
    })?;
    let lacks = |sym: &str, e: String| {
        format!(
            "CUDA driver `{name}` lacks `{sym}` ({e}): tvmrt needs a driver for CUDA 11 or later"
        )
    };
    macro_rules! sym {
        ($name:literal) => {{
            let p = crate::device::library_symbol(&library, concat!($name, "\0"), &lacks)?;
            // SAFETY: the symbol is the driver API function of that name, whose C signature
            // (`cuda.h`) the field's type spells out.
            unsafe { crate::device::function_from(p) }
        }};
    }
    // SAFETY: as in `sym!`; absent in drivers older than CUDA 12.0, which is allowed.
    let launch_kernel_ex = crate::device::library_symbol(&library, "cuLaunchKernelEx\0", &lacks)
        .ok()
        .map(|p| unsafe { crate::device::function_from(p) });
    let cu = Cu {
        init: sym!("cuInit"),
        driver_get_version: sym!("cuDriverGetVersion"),
        get_error_name: sym!("cuGetErrorName"),
        get_error_string: sym!("cuGetErrorString"),
        device_get_count: sym!("cuDeviceGetCount"),
        device_get: sym!("cuDeviceGet"),
        device_get_name: sym!("cuDeviceGetName"),
        device_get_attribute: sym!("cuDeviceGetAttribute"),
        device_total_mem: sym!("cuDeviceTotalMem_v2"),
        primary_ctx_retain: sym!("cuDevicePrimaryCtxRetain"),
        ctx_set_current: sym!("cuCtxSetCurrent"),
        mem_get_info: sym!("cuMemGetInfo_v2"),
        mem_alloc: sym!("cuMemAlloc_v2"),
        mem_free: sym!("cuMemFree_v2"),
        mem_alloc_host: sym!("cuMemAllocHost_v2"),
        mem_free_host: sym!("cuMemFreeHost"),
        memcpy_htod_async: sym!("cuMemcpyHtoDAsync_v2"),
        memcpy_dtoh_async: sym!("cuMemcpyDtoHAsync_v2"),
        memcpy_dtod_async: sym!("cuMemcpyDtoDAsync_v2"),
        memcpy_peer_async: sym!("cuMemcpyPeerAsync"),
        pointer_get_attribute: sym!("cuPointerGetAttribute"),
        stream_create: sym!("cuStreamCreate"),
        stream_destroy: sym!("cuStreamDestroy_v2"),
        stream_synchronize: sym!("cuStreamSynchronize"),
        stream_wait_event: sym!("cuStreamWaitEvent"),
        event_create: sym!("cuEventCreate"),
        event_record: sym!("cuEventRecord"),
        event_destroy: sym!("cuEventDestroy_v2"),
        module_load_data_ex: sym!("cuModuleLoadDataEx"),
        module_unload: sym!("cuModuleUnload"),
        module_get_function: sym!("cuModuleGetFunction"),
        func_get_attribute: sym!("cuFuncGetAttribute"),
        func_set_attribute: sym!("cuFuncSetAttribute"),
        launch_kernel: sym!("cuLaunchKernel"),
        launch_kernel_ex,
        path: name.clone(),
        _library: library,
    };
    // SAFETY: cuInit takes flags 0 and may be called more than once.
    let rc = unsafe { (cu.init)(0) };
    if rc != CUDA_SUCCESS {
        return Err(format!(
            "CUDA is not available: cuInit failed in `{name}`: {}",
            describe(&cu, rc)
        ));
    }
    Ok(cu)
}

/// `NAME (code): description`, from the driver's own tables.
pub fn describe(cu: &Cu, rc: CuResult) -> String {
    let text = |f: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult| {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: the driver writes a pointer to a static string, or fails for unknown codes.
        if unsafe { f(rc, &mut p) } == CUDA_SUCCESS && !p.is_null() {
            // SAFETY: a NUL-terminated static string of the driver.
            Some(
                unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_string_lossy()
                    .into_owned(),
            )
        } else {
            None
        }
    };
    let name = text(cu.get_error_name).unwrap_or_else(|| "CUDA_ERROR_UNKNOWN".to_string());
    match text(cu.get_error_string) {
        Some(s) => format!("{name} ({rc}): {s}"),
        None => format!("{name} ({rc})"),
    }
}

/// The error of a failed driver call: the call, the driver's name and text for the code, and
/// what usually causes it where tvmrt can tell.
pub fn cu_error(rc: CuResult, call: &str) -> Error {
    let what = match opened() {
        Some(cu) => describe(cu, rc),
        None => format!("CUresult {rc}"),
    };
    let hint = match rc {
        2 => "; the device is out of memory",
        100 => "; the driver sees no CUDA device (check nvidia-smi and CUDA_VISIBLE_DEVICES)",
        209 => "; the module holds no code this device's architecture can run",
        218 => "; the driver could not compile the module's PTX for this device",
        222 => {
            "; the PTX was made by a newer CUDA than this driver supports: update the driver \
                or compile for an older PTX ISA"
        }
        700 | 715 | 716 | 719 => {
            "; a kernel failed on the device; the CUDA context is unusable \
                                  until the process exits"
        }
        _ => "",
    };
    Error::new("CUDAError", format!("{call} failed: {what}{hint}"))
}

/// Turns the status of a release (a free, an unload, a destroy) into a result. As TVM's
/// `CUDA_DRIVER_CALL`, `CUDA_ERROR_DEINITIALIZED` is success: at process exit the driver may be
/// gone before the last tensors are released, and there is nothing left to free.
pub fn check_release(rc: CuResult, call: &str) -> Result<()> {
    if rc == CUDA_ERROR_DEINITIALIZED {
        return Ok(());
    }
    check(rc, call)
}

/// Turns a driver status into a result.
pub fn check(rc: CuResult, call: &str) -> Result<()> {
    if rc == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(cu_error(rc, call))
    }
}
