//! The CUDA back end (`kDLCUDA` = 2, `kDLCUDAHost` = 3): TVM's `src/runtime/cuda/` for tvmrt,
//! on NVIDIA's driver API.
//!
//! - [`driver`]: the driver API, opened at run time from `libcuda.so.1` (`TVMRT_CUDA_LIBRARY`
//!   names another file);
//! - [`context`]: devices, their primary contexts and limits, the thread's current device;
//! - [`memory`]: the blocks tvmrt allocated, to check frees, copies and kernel arguments;
//! - [`device_api`]: `device_api.cuda` and `device_api.cuda_host`;
//! - [`image`]: what PTX, cubins and fatbins hold (architectures, kernels), read without the
//!   driver;
//! - [`nvrtc`]: NVRTC, opened at run time, for modules holding CUDA C source;
//! - [`module`]: the `cuda` module kind and its kernel launches.
//!
//! Nothing touches the driver before it is needed: loading a library with a `cuda` module,
//! inspecting it, and checking its code work on a machine without a GPU; the first allocation,
//! copy or launch on a CUDA device reports what is missing (no driver, no device, an
//! architecture the device cannot run).

pub mod context;
pub mod device_api;
pub mod driver;
pub mod image;
pub mod memory;
pub mod module;
pub mod nvrtc;

use super::BackEnd;
use crate::function::Function;
use crate::value::Any;

/// `kDLCUDA`.
pub const DEVICE_TYPE: u32 = 2;
/// `kDLCUDAHost`: page-locked host memory.
pub const HOST_DEVICE_TYPE: u32 = 3;

static API: device_api::CudaDeviceApi = device_api::CudaDeviceApi;
static HOST_API: device_api::CudaHostApi = device_api::CudaHostApi;

/// The CUDA back end.
pub static BACK_END: BackEnd = BackEnd {
    name: "cuda",
    devices: &[(DEVICE_TYPE, &API), (HOST_DEVICE_TYPE, &HOST_API)],
    globals,
    describe_module: module::describe,
};

/// The module loaders and TVM's CUDA globals (`runtime.GetCudaDeviceCount`,
/// `runtime.GetCudaFreeMemory`, `runtime.get_cuda_stream`).
fn globals() -> Vec<(&'static str, Function)> {
    let mut v = module::loaders();
    v.push((
        "runtime.GetCudaDeviceCount",
        Function::from_fn(|_| {
            // As TVM's cudaGetDeviceCount: no driver is an error, no device is 0.
            driver::cu()?;
            Ok(Any::from(context::count() as i64))
        }),
    ));
    v.push((
        "runtime.GetCudaFreeMemory",
        Function::from_fn(|_| {
            let id = context::current();
            context::bind(id)?;
            let (mut free, mut total) = (0usize, 0usize);
            // SAFETY: two writable sizes; the device's context is current.
            driver::check(
                unsafe { (driver::cu()?.mem_get_info)(&mut free, &mut total) },
                "cuMemGetInfo",
            )?;
            Ok(Any::from(format!(
                "Current CUDA memory is {free} bytes free out of {total} bytes on device"
            )))
        }),
    ));
    v.push((
        "runtime.get_cuda_stream",
        Function::from_fn(|_| {
            let s = super::stream::current(DEVICE_TYPE as i32, context::current());
            Ok(Any::opaque_ptr(s))
        }),
    ));
    v
}

/// How many CUDA blocks (device and page-locked) tvmrt holds now, after giving free workspace
/// blocks back to the driver; tests use it to check nothing leaks.
pub fn live_blocks() -> usize {
    device_api::release_workspaces();
    memory::live_count()
}
