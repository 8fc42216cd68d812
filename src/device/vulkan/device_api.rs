//! `device_api.vulkan` (TVM `vulkan_device_api.cc`): the Vulkan calls under the device API
//! that Vulkan shares with other back ends whose data pointers are buffer descriptors
//! ([`crate::device::descriptor_api`]: the current device, copies by direction, the one stream,
//! workspaces).
//!
//! As in TVM: a data pointer is a [`BufferDescriptor`]; each device has one stream; copies to
//! and from the host go through a host-visible staging buffer and have finished when they
//! return; device-to-device copies are recorded on the stream.

use ash::vk;

use super::buffer::{self, Buffer, BufferDescriptor};
use super::context::{self, context, Context, Device};
use super::stream::STAGING_CHUNK;
use crate::abi::DLDevice;
use crate::device::api::DeviceAttr;
use crate::device::descriptor::Registry;
use crate::device::descriptor_api::{BufferBackEnd, BufferDeviceApi, BufferSide};
use crate::error::Result;
use crate::value::Any;

/// Vulkan's device API.
pub static API: VulkanDeviceApi = BufferDeviceApi::new();

/// The Vulkan device API.
pub type VulkanDeviceApi = BufferDeviceApi<Vulkan>;

/// Vulkan's calls under [`VulkanDeviceApi`].
pub struct Vulkan;

/// The calling thread's current Vulkan device id (0 until `__tvm_set_device` says otherwise).
pub fn current_device() -> i32 {
    API.current_device()
}

fn version_string(v: u32) -> String {
    format!("{}.{}", vk::api_version_major(v), vk::api_version_minor(v))
}

impl BufferBackEnd for Vulkan {
    const DEVICE_TYPE: u32 = super::DEVICE_TYPE;
    const NAME: &'static str = "Vulkan";
    const NO_STREAMS: &'static str =
        "Vulkan has one stream per device in tvmrt and no others: pass a null stream";

    type Driver = Context;
    type Descriptor = BufferDescriptor;
    type Buffer = Buffer;

    fn driver() -> Result<&'static Context> {
        context()
    }

    fn known_device_count() -> Option<usize> {
        context::known_device_count()
    }

    fn live() -> &'static Registry<BufferDescriptor, Buffer> {
        &buffer::LIVE
    }

    fn alloc(device_id: i32, nbytes: usize) -> Result<*mut BufferDescriptor> {
        buffer::alloc(device_id, nbytes)
    }

    unsafe fn free(desc: *mut BufferDescriptor) -> Result<()> {
        // SAFETY: per the contract.
        unsafe { buffer::free(desc) }
    }

    fn attr(c: &Context, dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        let d = c.device(dev.device_id)?;
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

    unsafe fn copy_on_device(
        c: &Context,
        src: BufferSide<Buffer>,
        dst: BufferSide<Buffer>,
        nbytes: usize,
    ) -> Result<()> {
        let (sb, db) = (src.buffer, dst.buffer);
        if sb.device_id != db.device_id {
            crate::bail_value!(
                "cannot copy from vulkan:{} to vulkan:{} directly: copy through the CPU",
                sb.device_id,
                db.device_id
            );
        }
        let d = c.device(sb.device_id)?;
        let mut s = d.stream.lock();
        let cmd = s.cmd(d)?;
        let region = [vk::BufferCopy {
            src_offset: src.offset as u64,
            dst_offset: dst.offset as u64,
            size: nbytes as u64,
        }];
        // SAFETY: both buffers live, the regions inside them (checked).
        unsafe { d.device.cmd_copy_buffer(cmd, sb.buffer, db.buffer, &region) };
        s.barrier(d)
    }

    unsafe fn read(
        c: &Context,
        src: BufferSide<Buffer>,
        host: *mut u8,
        nbytes: usize,
    ) -> Result<()> {
        let d = c.device(src.buffer.device_id)?;
        // SAFETY: the range was checked; `host` holds `nbytes` writable bytes (contract).
        unsafe { copy_host(d, &src.buffer, src.offset, host, nbytes, true) }
    }

    unsafe fn write(
        c: &Context,
        dst: BufferSide<Buffer>,
        host: *const u8,
        nbytes: usize,
    ) -> Result<()> {
        let d = c.device(dst.buffer.device_id)?;
        // SAFETY: the range was checked; `host` holds `nbytes` readable bytes (contract); it
        // is only read when `to_host` is false.
        unsafe { copy_host(d, &dst.buffer, dst.offset, host.cast_mut(), nbytes, false) }
    }

    fn sync(c: &Context, id: i32) -> Result<()> {
        let d = c.device(id)?;
        let r = d.stream.lock().sync(d);
        r
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
