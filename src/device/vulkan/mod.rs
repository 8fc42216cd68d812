//! The Vulkan back end (`kDLVulkan` = 7): TVM's `src/runtime/vulkan/` for tvmrt.
//!
//! - [`context`]\: `libvulkan.so.1` opened at run time, the instance (with the validation
//!   layer on request) and the devices, one compute queue each;
//! - [`buffer`]\: memory as TVM represents it (a descriptor whose first field is the
//!   `VkBuffer`), and the registry of live buffers;
//! - [`stream`]\: each device's command recording, submission and per-launch resources;
//! - [`device_api`]\: `device_api.vulkan`;
//! - [`module`]\: the `vulkan` module kind (SPIR-V shaders) and its kernel launches.
//!
//! Nothing touches Vulkan before it is needed: loading a library with a `vulkan` module, or
//! inspecting it, works on a machine without Vulkan; the first allocation or launch on a
//! Vulkan device reports what is missing (no `libvulkan.so.1`, no driver, no device).

pub mod buffer;
pub mod context;
pub mod device_api;
pub mod module;
pub mod stream;

use super::BackEnd;

/// `kDLVulkan`.
pub const DEVICE_TYPE: u32 = 7;

/// The Vulkan back end.
pub static BACK_END: BackEnd = BackEnd {
    name: "vulkan",
    devices: &[(DEVICE_TYPE, &device_api::API)],
    globals: module::loaders,
    describe_module: module::describe,
};

/// How many Vulkan buffers tvmrt holds now for tensors and storage (data spaces): what a leak
/// check compares. The workspace pool's buffers, kept for reuse, are not counted.
pub fn live_buffers() -> usize {
    device_api::API.live_buffers()
}

/// How many errors the validation layer reported (`TVM_VULKAN_ENABLE_VALIDATION_LAYERS=1`),
/// and the first messages.
pub fn validation_errors() -> (usize, Vec<String>) {
    context::validation_errors()
}
