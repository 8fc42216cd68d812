//! The OpenCL back end (`kDLOpenCL` = 4): TVM's `src/runtime/opencl/` for tvmrt.
//!
//! - [`loader`]\: the OpenCL functions, opened at run time from `libOpenCL.so.1`;
//! - [`platform`]\: the devices (GPUs first, else CPUs such as POCL's), one context per
//!   platform, one queue per device;
//! - [`buffer`]\: memory as TVM represents it (a descriptor whose first field is the `cl_mem`);
//! - [`device_api`]\: `device_api.opencl`;
//! - [`module`]\: the `opencl` module kind and its kernel launches;
//! - [`error`]\: OpenCL status codes as errors.
//!
//! Nothing touches OpenCL before it is needed: loading a library with an `opencl` module, or
//! inspecting it, works on a machine without OpenCL; the first allocation or launch on an
//! OpenCL device reports what is missing (no `libOpenCL.so.1`, no platform, no device).

pub mod buffer;
pub mod device_api;
pub mod error;
pub mod loader;
pub mod module;
pub mod platform;

use super::BackEnd;

/// `kDLOpenCL`.
pub const DEVICE_TYPE: u32 = 4;

/// The OpenCL back end.
pub static BACK_END: BackEnd = BackEnd {
    name: "opencl",
    devices: &[(DEVICE_TYPE, &device_api::API)],
    globals: module::loaders,
    describe_module: module::describe,
};

/// How many OpenCL buffers tvmrt holds now for tensors and storage (data spaces): what a leak
/// check compares. The workspace pool's buffers, kept for reuse, are not counted.
pub fn live_buffers() -> usize {
    device_api::API.live_buffers()
}
