//! Owned device memory: a block from a back end's `alloc_data_space*`, freed through the same
//! back end when dropped. Tensors and the VM's storage hold their data this way, whatever the
//! device.

use std::ffi::c_void;

use super::api::DeviceApi;
use crate::abi::{DLDataType, DLDevice};
use crate::error::Result;

/// A block of memory on a device, freed on drop.
pub struct DeviceBlock {
    api: &'static dyn DeviceApi,
    device: DLDevice,
    data: *mut c_void,
    dtype: DLDataType,
    nbytes: usize,
}

// SAFETY: the block is memory owned by this value; device APIs are `Send + Sync` and their
// pointers may be used and freed from any thread (as in TVM). Access to the bytes is
// synchronized by the block's users.
unsafe impl Send for DeviceBlock {}
// SAFETY: as above.
unsafe impl Sync for DeviceBlock {}

impl DeviceBlock {
    /// Allocates a compact tensor's worth of memory for `shape` and `dtype` on `device`, in
    /// `mem_scope` (`None` for global memory). Host memory is zero-filled, so no uninitialized
    /// byte is ever read back through the host; device memory is left as the driver gives it
    /// (as TVM does).
    pub fn alloc_tensor(
        device: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        mem_scope: Option<&str>,
    ) -> Result<DeviceBlock> {
        let api = super::api_of(device)?;
        let nbytes = crate::tensor::layout::shape_bytes(shape, dtype)?;
        let data = api.alloc_tensor_data(device, shape, dtype, mem_scope, nbytes)?;
        Ok(DeviceBlock {
            api,
            device,
            data,
            dtype,
            nbytes,
        })
    }

    /// The block's data pointer, as its back end hands it out.
    pub fn data(&self) -> *mut c_void {
        self.data
    }

    /// Its size in bytes.
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The device it lives on.
    pub fn device(&self) -> DLDevice {
        self.device
    }

    /// The back end that owns it.
    pub fn api(&self) -> &'static dyn DeviceApi {
        self.api
    }
}

impl Drop for DeviceBlock {
    fn drop(&mut self) {
        // SAFETY: allocated by `api.alloc_tensor_data` on `device` for `dtype` and `nbytes` in
        // `alloc_tensor`, freed once here.
        if let Err(e) = unsafe {
            self.api
                .free_tensor_data(self.device, self.data, self.dtype, self.nbytes)
        } {
            log::warn!(
                "freeing {} bytes on {}: {e}",
                self.nbytes,
                super::device_name(self.device)
            );
        }
    }
}
