//! `device_api.vulkan` (TVM `vulkan_device_api.cc`): buffers, copies, the per-device stream,
//! device attributes, workspaces.
//!
//! As in TVM: a data pointer is a [`BufferDescriptor`]; the current device is per thread
//! (`__tvm_set_device`) and kernels launch on it; each device has one stream (`create_stream`
//! gives null, and syncing a non-null stream is refused); copies to and from the host go
//! through a host-visible staging buffer and have finished when they return; device-to-device
//! copies are recorded on the stream; workspaces come from a pool that keeps freed buffers.

use std::cell::Cell;
use std::ffi::c_void;

use ash::vk;

use super::buffer::{self, Buffer, BufferDescriptor};
use super::context::{self, context, Device};
use super::stream::STAGING_CHUNK;
use crate::abi::{DLDataType, DLDevice};
use crate::device::api::{DataRef, DeviceApi, DeviceAttr, StreamHandle};
use crate::device::pool::WorkspacePool;
use crate::device::{device_name, is_host_accessible};
use crate::error::{Error, Result};
use crate::value::Any;

thread_local! {
    /// The calling thread's current Vulkan device (TVM's `VulkanThreadEntry::device`).
    static CURRENT: Cell<i32> = const { Cell::new(0) };
}

/// The calling thread's current Vulkan device id (0 until `__tvm_set_device` says otherwise).
pub fn current_device() -> i32 {
    CURRENT.with(Cell::get)
}

/// Kernel workspaces, kept for reuse (TVM's pooled allocator).
static WORKSPACES: WorkspacePool = WorkspacePool::new();

/// The Vulkan device API.
pub struct VulkanDeviceApi;

#[inline]
fn check_vulkan_side(dev: DLDevice) -> Result<()> {
    if dev.device_type.0 != super::DEVICE_TYPE {
        return Err(Error::value(format!(
            "expected a Vulkan device, got {}",
            device_name(dev)
        )));
    }
    Ok(())
}

fn version_string(v: u32) -> String {
    format!("{}.{}", vk::api_version_major(v), vk::api_version_minor(v))
}

impl VulkanDeviceApi {
    fn attr(&self, dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        let d = context()?.device(dev.device_id)?;
        let limits = &d.props.limits;
        Ok(match attr {
            DeviceAttr::Exist => Any::from(1i64),
            DeviceAttr::MaxThreadsPerBlock => {
                Any::from(limits.max_compute_work_group_invocations as i64)
            }
            // TVM reports the subgroup size when the device has subgroups; 1 here, as TVM's
            // default without the subgroup query.
            DeviceAttr::WarpSize => Any::from(1i64),
            DeviceAttr::MaxSharedMemoryPerBlock => {
                Any::from(limits.max_compute_shared_memory_size as i64)
            }
            DeviceAttr::ComputeVersion | DeviceAttr::ApiVersion => {
                Any::from(version_string(d.props.api_version))
            }
            DeviceAttr::DeviceName => Any::from(d.name.as_str()),
            DeviceAttr::MaxThreadDimensions => {
                let s = limits.max_compute_work_group_size;
                Any::from(format!("[{}, {}, {}]", s[0], s[1], s[2]))
            }
            DeviceAttr::DriverVersion => Any::from(version_string(d.props.driver_version)),
            DeviceAttr::TotalGlobalMemory => {
                let heaps = &d.memory.memory_heaps[..d.memory.memory_heap_count as usize];
                let local = heaps
                    .iter()
                    .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
                    .map(|h| h.size)
                    .sum::<u64>();
                Any::from(local as i64)
            }
            DeviceAttr::MaxClockRate
            | DeviceAttr::MultiProcessorCount
            | DeviceAttr::MaxRegistersPerBlock
            | DeviceAttr::GcnArch
            | DeviceAttr::L2CacheSizeBytes
            | DeviceAttr::AvailableGlobalMemory
            | DeviceAttr::ImagePitchAlignment => Any::none(),
        })
    }
}

/// Copies between a device buffer and host memory through the staging buffer, in pieces of
/// at most [`STAGING_CHUNK`] bytes; done when it returns.
///
/// # Safety
/// `host` holds `nbytes` bytes (writable when `to_host`); the buffer range was checked.
unsafe fn copy_host(
    d: &Device,
    b: &Buffer,
    offset: usize,
    host: *mut u8,
    nbytes: usize,
    to_host: bool,
) -> Result<()> {
    let mut s = d.stream.lock();
    // Work recorded before this copy comes first (a kernel writing what is read back).
    s.sync(d)?;
    let mut done = 0;
    while done < nbytes {
        let n = (nbytes - done).min(STAGING_CHUNK);
        let staging = s.staging(d, n)?;
        if !to_host {
            // SAFETY: `host + done` holds `n` readable bytes; the staging buffer `n` mapped.
            unsafe { std::ptr::copy_nonoverlapping(host.add(done), staging.mapped, n) };
        }
        let region = [vk::BufferCopy {
            src_offset: if to_host { (offset + done) as u64 } else { 0 },
            dst_offset: if to_host { 0 } else { (offset + done) as u64 },
            size: n as u64,
        }];
        let cmd = s.cmd(d)?;
        let (src, dst) = if to_host {
            (b.buffer, staging.buffer)
        } else {
            (staging.buffer, b.buffer)
        };
        // SAFETY: both buffers live, the regions inside them (checked by the caller).
        unsafe { d.device.cmd_copy_buffer(cmd, src, dst, &region) };
        s.barrier(d)?;
        s.sync(d)?;
        if to_host {
            // SAFETY: as above, the other way.
            unsafe { std::ptr::copy_nonoverlapping(staging.mapped, host.add(done), n) };
        }
        done += n;
    }
    Ok(())
}

impl DeviceApi for VulkanDeviceApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        check_vulkan_side(dev)?;
        if let Some(n) = context::known_device_count() {
            if dev.device_id as usize >= n {
                context()?.device(dev.device_id)?;
            }
        }
        CURRENT.with(|c| c.set(dev.device_id));
        Ok(())
    }

    fn check_exists(&self, dev: DLDevice) -> Result<()> {
        check_vulkan_side(dev)?;
        context()?.device(dev.device_id).map(drop)
    }

    fn get_attr(&self, dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        if attr == DeviceAttr::Exist {
            // Asking is not an error: no loader, no driver or no such device is 0.
            let n = context().map_or(0, |c| c.devices.len());
            return Ok(Any::from(i64::from((dev.device_id as usize) < n)));
        }
        self.attr(dev, attr)
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        _alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        check_vulkan_side(dev)?;
        Ok(buffer::alloc(dev.device_id, nbytes)?.cast())
    }

    unsafe fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: per the trait's contract; `free` refuses anything but a live descriptor.
        unsafe { buffer::free(ptr.cast::<BufferDescriptor>()) }
    }

    unsafe fn copy_bytes(
        &self,
        from: DataRef,
        to: DataRef,
        nbytes: usize,
        _type_hint: DLDataType,
        _stream: StreamHandle,
    ) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        let ctx = context()?;
        let from_vk = from.device.device_type.0 == super::DEVICE_TYPE;
        let to_vk = to.device.device_type.0 == super::DEVICE_TYPE;
        if from_vk && to_vk {
            let src = buffer::LIVE.copy_side(&from, nbytes, "copy source")?;
            let dst = buffer::LIVE.copy_side(&to, nbytes, "copy destination")?;
            if src.device_id != dst.device_id {
                crate::bail_value!(
                    "cannot copy from vulkan:{} to vulkan:{} directly: copy through the CPU",
                    src.device_id,
                    dst.device_id
                );
            }
            let d = ctx.device(src.device_id)?;
            let mut s = d.stream.lock();
            let cmd = s.cmd(d)?;
            let region = [vk::BufferCopy {
                src_offset: from.offset as u64,
                dst_offset: to.offset as u64,
                size: nbytes as u64,
            }];
            // SAFETY: both buffers live, the regions inside them (checked).
            unsafe {
                d.device
                    .cmd_copy_buffer(cmd, src.buffer, dst.buffer, &region)
            };
            s.barrier(d)
        } else if from_vk && is_host_accessible(to.device) {
            let src = buffer::LIVE.copy_side(&from, nbytes, "copy source")?;
            let host = to.data.cast::<u8>().wrapping_add(to.offset);
            // SAFETY: the range was checked; `host` holds `nbytes` writable bytes (contract).
            unsafe {
                copy_host(
                    ctx.device(src.device_id)?,
                    &src,
                    from.offset,
                    host,
                    nbytes,
                    true,
                )
            }
        } else if to_vk && is_host_accessible(from.device) {
            let dst = buffer::LIVE.copy_side(&to, nbytes, "copy destination")?;
            let host = from.data.cast::<u8>().wrapping_add(from.offset);
            // SAFETY: the range was checked; `host` holds `nbytes` readable bytes (contract).
            unsafe {
                copy_host(
                    ctx.device(dst.device_id)?,
                    &dst,
                    to.offset,
                    host,
                    nbytes,
                    false,
                )
            }
        } else {
            Err(Error::value(format!(
                "Vulkan copies go between Vulkan and the CPU: cannot copy from {} to {}",
                device_name(from.device),
                device_name(to.device)
            )))
        }
    }

    fn stream_sync(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        check_vulkan_side(dev)?;
        if !stream.is_null() {
            crate::bail_value!(
                "Vulkan has one stream per device in tvmrt and no others: pass a null stream"
            );
        }
        let d = context()?.device(dev.device_id)?;
        let r = d.stream.lock().sync(d);
        r
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        check_vulkan_side(dev)?;
        WORKSPACES.alloc(self, dev, nbytes, type_hint)
    }

    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        WORKSPACES.free(dev, ptr)
    }
}

/// Workspace buffers the pool holds (in use and free).
pub fn pooled_workspaces() -> usize {
    WORKSPACES.held()
}
