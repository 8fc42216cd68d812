//! `device_api.opencl` (TVM `opencl_device_api.cc`): the OpenCL calls under the device API
//! that OpenCL shares with other back ends whose data pointers are buffer descriptors
//! ([`crate::device::descriptor_api`]: the current device, copies by direction, the one stream,
//! workspaces).
//!
//! As in TVM: a data pointer is a [`BufferDescriptor`]; each device has one in-order queue;
//! copies to and from the host block, device-to-device copies are queued. Only global memory:
//! TVM's image (texture) scopes are refused.

use super::buffer::{self, Buffer, BufferDescriptor};
use super::error::{cl_error, ClInt, CL_SUCCESS};
use super::platform::{self, info_scalar, info_string, platform, Platform};
use crate::abi::DLDevice;
use crate::device::api::DeviceAttr;
use crate::device::descriptor::Registry;
use crate::device::descriptor_api::{BufferBackEnd, BufferDeviceApi, BufferSide};
use crate::error::{Error, Result};
use crate::value::Any;

/// OpenCL's device API.
pub static API: OpenClDeviceApi = BufferDeviceApi::new();

/// The OpenCL device API.
pub type OpenClDeviceApi = BufferDeviceApi<OpenCl>;

/// OpenCL's calls under [`OpenClDeviceApi`].
pub struct OpenCl;

/// The calling thread's current OpenCL device id (0 until `__tvm_set_device` says otherwise).
pub fn current_device() -> i32 {
    API.current_device()
}

impl BufferBackEnd for OpenCl {
    const DEVICE_TYPE: u32 = super::DEVICE_TYPE;
    const NAME: &'static str = "OpenCL";
    const NO_STREAMS: &'static str =
        "OpenCL has one command queue per device and no other streams: pass a null stream";

    type Driver = Platform;
    type Descriptor = BufferDescriptor;
    type Buffer = Buffer;

    fn driver() -> Result<&'static Platform> {
        platform()
    }

    fn known_device_count() -> Option<usize> {
        platform::known_device_count()
    }

    fn live() -> &'static Registry<BufferDescriptor, Buffer> {
        &buffer::LIVE
    }

    fn alloc(device_id: i32, nbytes: usize) -> Result<*mut BufferDescriptor> {
        // OpenCL aligns buffers itself (CL_DEVICE_MEM_BASE_ADDR_ALIGN).
        buffer::alloc(device_id, nbytes)
    }

    unsafe fn free(desc: *mut BufferDescriptor) -> Result<()> {
        // SAFETY: per the contract.
        unsafe { buffer::free(desc) }
    }

    fn attr(p: &Platform, dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        let d = p.device(dev.device_id)?;
        let get = p.cl.get_device_info;
        const CALL: &str = "clGetDeviceInfo";
        Ok(match attr {
            DeviceAttr::Exist => Any::from(1i64),
            // SAFETY: a device of the platform; the query's result has the type named.
            DeviceAttr::MaxThreadsPerBlock => Any::from(unsafe {
                info_scalar::<usize>(get, d.id, platform::CL_DEVICE_MAX_WORK_GROUP_SIZE, CALL)?
            } as i64),
            DeviceAttr::WarpSize => {
                // TVM: OpenCL has no portable warp size; 1 unless TVM_OPENCL_WARP_SIZE says.
                let w = std::env::var("TVM_OPENCL_WARP_SIZE")
                    .ok()
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(1);
                Any::from(w)
            }
            // SAFETY: a device of the platform; the query's result has the type named.
            DeviceAttr::MaxSharedMemoryPerBlock => Any::from(unsafe {
                info_scalar::<u64>(get, d.id, platform::CL_DEVICE_LOCAL_MEM_SIZE, CALL)?
            } as i64),
            DeviceAttr::ComputeVersion => Any::from(d.version.as_str()),
            DeviceAttr::DeviceName => Any::from(d.name.as_str()),
            // OpenCL reports MHz; TVM converts to kHz like CUDA's.
            DeviceAttr::MaxClockRate => Any::from(
                // SAFETY: a device of the platform; the query's result has the type named.
                unsafe {
                    info_scalar::<u32>(get, d.id, platform::CL_DEVICE_MAX_CLOCK_FREQUENCY, CALL)?
                } as i64
                    * 1000,
            ),
            // SAFETY: a device of the platform; the query's result has the type named.
            DeviceAttr::MultiProcessorCount => Any::from(unsafe {
                info_scalar::<u32>(get, d.id, platform::CL_DEVICE_MAX_COMPUTE_UNITS, CALL)?
            } as i64),
            DeviceAttr::MaxThreadDimensions => {
                // SAFETY: a device of the platform; the query's result has the type named.
                let dims = unsafe {
                    info_scalar::<[usize; 3]>(
                        get,
                        d.id,
                        platform::CL_DEVICE_MAX_WORK_ITEM_SIZES,
                        CALL,
                    )?
                };
                Any::from(format!("[{}, {}, {}]", dims[0], dims[1], dims[2]))
            }
            // The OpenCL version tvmrt's calls target (TVM's CL_TARGET_OPENCL_VERSION form).
            DeviceAttr::ApiVersion => Any::from(120i64),
            DeviceAttr::DriverVersion => {
                // SAFETY: a device of the platform; the query's result has the type named.
                Any::from(unsafe { info_string(get, d.id, platform::CL_DRIVER_VERSION, CALL)? })
            }
            // SAFETY: a device of the platform; the query's result has the type named.
            DeviceAttr::L2CacheSizeBytes => Any::from(unsafe {
                info_scalar::<u64>(get, d.id, platform::CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, CALL)?
            } as i64),
            // SAFETY: a device of the platform; the query's result has the type named.
            DeviceAttr::TotalGlobalMemory => Any::from(unsafe {
                info_scalar::<u64>(get, d.id, platform::CL_DEVICE_GLOBAL_MEM_SIZE, CALL)?
            } as i64),
            DeviceAttr::ImagePitchAlignment => {
                // SAFETY: a device of the platform; the query's result has the type named.
                match unsafe {
                    info_scalar::<u32>(get, d.id, platform::CL_DEVICE_IMAGE_PITCH_ALIGNMENT, CALL)
                } {
                    Ok(v) => Any::from(v as i64),
                    Err(_) => Any::none(),
                }
            }
            DeviceAttr::MaxRegistersPerBlock
            | DeviceAttr::GcnArch
            | DeviceAttr::AvailableGlobalMemory => Any::none(),
        })
    }

    unsafe fn copy_on_device(
        p: &Platform,
        src: BufferSide<Buffer>,
        dst: BufferSide<Buffer>,
        nbytes: usize,
    ) -> Result<()> {
        let (s, d) = (src.buffer, dst.buffer);
        let (ds, dd) = (p.device(s.device_id)?, p.device(d.device_id)?);
        if ds.context != dd.context {
            return Err(Error::value(format!(
                "cannot copy from opencl:{} to opencl:{} directly: they are on different \
                 OpenCL platforms; copy through the CPU",
                s.device_id, d.device_id
            )));
        }
        // SAFETY: both buffers are live (checked) and the ranges inside them.
        let rc = unsafe {
            (p.cl.enqueue_copy_buffer)(
                dd.queue,
                s.mem,
                d.mem,
                src.offset,
                dst.offset,
                nbytes,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        check(rc, "clEnqueueCopyBuffer")
    }

    unsafe fn read(
        p: &Platform,
        src: BufferSide<Buffer>,
        host: *mut u8,
        nbytes: usize,
    ) -> Result<()> {
        // SAFETY: the buffer is live and the range inside it; `host` holds `nbytes` writable
        // bytes (the contract). Blocking: done when it returns.
        let rc = unsafe {
            (p.cl.enqueue_read_buffer)(
                p.device(src.buffer.device_id)?.queue,
                src.buffer.mem,
                1,
                src.offset,
                nbytes,
                host.cast(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        check(rc, "clEnqueueReadBuffer")
    }

    unsafe fn write(
        p: &Platform,
        dst: BufferSide<Buffer>,
        host: *const u8,
        nbytes: usize,
    ) -> Result<()> {
        // SAFETY: the buffer is live and the range inside it; `host` holds `nbytes` readable
        // bytes (the contract). Blocking: done when it returns.
        let rc = unsafe {
            (p.cl.enqueue_write_buffer)(
                p.device(dst.buffer.device_id)?.queue,
                dst.buffer.mem,
                1,
                dst.offset,
                nbytes,
                host.cast(),
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            )
        };
        check(rc, "clEnqueueWriteBuffer")
    }

    fn sync(p: &Platform, id: i32) -> Result<()> {
        // SAFETY: a queue of the platform.
        check(unsafe { (p.cl.finish)(p.device(id)?.queue) }, "clFinish")
    }
}

fn check(rc: ClInt, call: &str) -> Result<()> {
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, call));
    }
    Ok(())
}
