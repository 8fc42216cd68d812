//! Kernel workspaces for device back ends (TVM's `WorkspacePool`, `src/runtime/workspace_pool.cc`):
//! blocks of device memory in page multiples, kept after they are freed and handed out again
//! to a later request they fit, so the short-lived scratch buffers a model's kernels ask for
//! (`TVMBackendAllocWorkspace`) cost one driver allocation each the first time only.
//!
//! One pool per back end, shared by all threads behind a lock (TVM keeps one per thread; a
//! shared pool returns memory to the driver never, and to other threads always). Blocks are
//! allocated and released through the back end's own [`DeviceApi`].

use std::ffi::c_void;

use parking_lot::Mutex;

use super::api::{DeviceApi, TEMP_ALLOC_ALIGNMENT};
use crate::abi::{DLDataType, DLDevice};
use crate::error::{Error, Result};

/// Workspace granularity: TVM's pooled allocator page (`kDefaultPageSize`).
const PAGE: usize = 4096;

/// A block: device id, size in bytes, data pointer.
type Block = (i32, usize, usize);

/// Free and in-use workspace blocks of one back end.
pub struct WorkspacePool {
    blocks: Mutex<(Vec<Block>, Vec<Block>)>,
}

impl WorkspacePool {
    /// An empty pool.
    pub const fn new() -> WorkspacePool {
        WorkspacePool {
            blocks: Mutex::new((Vec::new(), Vec::new())),
        }
    }

    /// A block of at least `nbytes` on `dev`: the smallest free one that fits, else a new one
    /// from `api`.
    pub fn alloc(
        &self,
        api: &dyn DeviceApi,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        let id = dev.device_id;
        let mut guard = self.blocks.lock();
        let (free, in_use) = &mut *guard;
        let fit = free
            .iter()
            .enumerate()
            .filter(|(_, (d, size, _))| *d == id && *size >= nbytes)
            .min_by_key(|(_, (_, size, _))| *size)
            .map(|(i, _)| i);
        let block = match fit {
            Some(i) => free.swap_remove(i),
            None => {
                let size = nbytes.max(1).div_ceil(PAGE) * PAGE;
                let p = api.alloc_data_space(dev, size, TEMP_ALLOC_ALIGNMENT, type_hint)?;
                (id, size, p as usize)
            }
        };
        in_use.push(block);
        Ok(block.2 as *mut c_void)
    }

    /// Returns a block from [`WorkspacePool::alloc`] to the pool.
    pub fn free(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        let mut guard = self.blocks.lock();
        let (free, in_use) = &mut *guard;
        let at = in_use
            .iter()
            .rposition(|&(d, _, p)| p == ptr as usize && d == dev.device_id)
            .ok_or_else(|| {
                Error::value(format!(
                    "TVMBackendFreeWorkspace: {ptr:p} is not a workspace in use on {}",
                    super::device_name(dev)
                ))
            })?;
        free.push(in_use.swap_remove(at));
        Ok(())
    }

    /// Blocks the pool holds, in use and free.
    pub fn held(&self) -> usize {
        let guard = self.blocks.lock();
        guard.0.len() + guard.1.len()
    }

    /// Blocks handed out and not yet returned.
    pub fn in_use(&self) -> usize {
        self.blocks.lock().1.len()
    }

    /// Gives every free block back to `api` (blocks in use stay); returns how many.
    pub fn release_free(&self, api: &dyn DeviceApi, device_type: u32) -> usize {
        let blocks: Vec<Block> = std::mem::take(&mut self.blocks.lock().0);
        for &(id, _, p) in &blocks {
            let dev = DLDevice {
                device_type: crate::abi::DLDeviceType(device_type),
                device_id: id,
            };
            // SAFETY: each free block came from `api.alloc_data_space` on `dev` and is no
            // longer handed out.
            if let Err(e) = unsafe { api.free_data_space(dev, p as *mut c_void) } {
                log::warn!("releasing a workspace block: {e}");
            }
        }
        blocks.len()
    }
}

impl Default for WorkspacePool {
    fn default() -> Self {
        Self::new()
    }
}
