//! `device_api.opencl` (TVM `opencl_device_api.cc`): buffers, copies, the per-device queue,
//! device attributes, workspaces.
//!
//! As in TVM: a data pointer is a [`BufferDescriptor`]; the current device is per thread
//! (`__tvm_set_device`), and kernels launch on it; each device has one in-order queue and no
//! other streams (`create_stream` gives null, and syncing a non-null stream is refused); copies
//! to and from the host have finished when they return, device-to-device copies are queued;
//! workspaces come from a pool that keeps freed buffers for reuse (TVM's pooled allocator).
//! Only global memory: TVM's image (texture) scopes are refused.

use std::cell::Cell;
use std::ffi::c_void;

use super::buffer::{self, BufferDescriptor};
use super::error::{cl_error, CL_SUCCESS};
use super::platform::{self, info_scalar, info_string, platform};
use crate::abi::{DLDataType, DLDevice};
use crate::device::api::{DataRef, DeviceApi, DeviceAttr, StreamHandle};
use crate::device::pool::WorkspacePool;
use crate::device::{device_name, is_host_accessible};
use crate::error::{Error, Result};
use crate::value::Any;

thread_local! {
    /// The calling thread's current OpenCL device (TVM's `OpenCLThreadEntry::device`).
    static CURRENT: Cell<i32> = const { Cell::new(0) };
}

/// The calling thread's current OpenCL device id (0 until `__tvm_set_device` says otherwise).
pub fn current_device() -> i32 {
    CURRENT.with(Cell::get)
}

/// Kernel workspaces, kept for reuse (TVM's pooled allocator).
static WORKSPACES: WorkspacePool = WorkspacePool::new();

/// The OpenCL device API.
pub struct OpenClDeviceApi;

#[inline]
fn check_opencl_side(dev: DLDevice) -> Result<()> {
    if dev.device_type.0 != super::DEVICE_TYPE {
        return Err(not_opencl(dev));
    }
    Ok(())
}

#[cold]
fn not_opencl(dev: DLDevice) -> Error {
    Error::value(format!(
        "expected an OpenCL device, got {}",
        device_name(dev)
    ))
}

impl OpenClDeviceApi {
    fn attr(&self, dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        let p = platform()?;
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
}

impl DeviceApi for OpenClDeviceApi {
    fn set_device(&self, dev: DLDevice) -> Result<()> {
        check_opencl_side(dev)?;
        // Checked now when the devices are known (one load: host launchers call this before
        // every launch); otherwise at the first use of the device.
        if let Some(n) = platform::known_device_count() {
            if dev.device_id as usize >= n {
                platform()?.device(dev.device_id)?;
            }
        }
        CURRENT.with(|c| c.set(dev.device_id));
        Ok(())
    }

    fn check_exists(&self, dev: DLDevice) -> Result<()> {
        check_opencl_side(dev)?;
        platform()?.device(dev.device_id).map(drop)
    }

    fn get_attr(&self, dev: DLDevice, attr: DeviceAttr) -> Result<Any> {
        if attr == DeviceAttr::Exist {
            // Asking is not an error: no OpenCL, no platform or no such device is 0.
            let n = platform().map_or(0, |p| p.devices.len());
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
        check_opencl_side(dev)?;
        // OpenCL aligns buffers itself (CL_DEVICE_MEM_BASE_ADDR_ALIGN); the descriptor is
        // 64-byte aligned.
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
        let p = platform()?;
        let cl = p.cl;
        let from_cl = from.device.device_type.0 == super::DEVICE_TYPE;
        let to_cl = to.device.device_type.0 == super::DEVICE_TYPE;
        let rc;
        let call;
        if from_cl && to_cl {
            let (src, dst) = (
                buffer::LIVE.copy_side(&from, nbytes, "copy source")?,
                buffer::LIVE.copy_side(&to, nbytes, "copy destination")?,
            );
            let (ds, dd) = (p.device(src.device_id)?, p.device(dst.device_id)?);
            if ds.context != dd.context {
                return Err(Error::value(format!(
                    "cannot copy from opencl:{} to opencl:{} directly: they are on different \
                     OpenCL platforms; copy through the CPU",
                    src.device_id, dst.device_id
                )));
            }
            call = "clEnqueueCopyBuffer";
            // SAFETY: both buffers are live (checked) and the ranges inside them.
            rc = unsafe {
                (cl.enqueue_copy_buffer)(
                    dd.queue,
                    src.mem,
                    dst.mem,
                    from.offset,
                    to.offset,
                    nbytes,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                )
            };
        } else if from_cl && is_host_accessible(to.device) {
            let src = buffer::LIVE.copy_side(&from, nbytes, "copy source")?;
            let host = to.data.cast::<u8>().wrapping_add(to.offset);
            call = "clEnqueueReadBuffer";
            // SAFETY: the buffer is live and the range inside it; `host` holds `nbytes`
            // writable bytes (trait contract). Blocking: done when it returns.
            rc = unsafe {
                (cl.enqueue_read_buffer)(
                    p.device(src.device_id)?.queue,
                    src.mem,
                    1,
                    from.offset,
                    nbytes,
                    host.cast(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                )
            };
        } else if to_cl && is_host_accessible(from.device) {
            let dst = buffer::LIVE.copy_side(&to, nbytes, "copy destination")?;
            let host = from.data.cast::<u8>().wrapping_add(from.offset);
            call = "clEnqueueWriteBuffer";
            // SAFETY: the buffer is live and the range inside it; `host` holds `nbytes`
            // readable bytes (trait contract). Blocking: done when it returns.
            rc = unsafe {
                (cl.enqueue_write_buffer)(
                    p.device(dst.device_id)?.queue,
                    dst.mem,
                    1,
                    to.offset,
                    nbytes,
                    host.cast(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                )
            };
        } else {
            return Err(Error::value(format!(
                "OpenCL copies go between OpenCL and the CPU: cannot copy from {} to {}",
                device_name(from.device),
                device_name(to.device)
            )));
        }
        if rc != CL_SUCCESS {
            return Err(cl_error(rc, call));
        }
        Ok(())
    }

    fn stream_sync(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        check_opencl_side(dev)?;
        if !stream.is_null() {
            return Err(Error::value(
                "OpenCL has one command queue per device and no other streams: pass a null \
                 stream",
            ));
        }
        let p = platform()?;
        // SAFETY: a queue of the platform.
        let rc = unsafe { (p.cl.finish)(p.device(dev.device_id)?.queue) };
        if rc != CL_SUCCESS {
            return Err(cl_error(rc, "clFinish"));
        }
        Ok(())
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        check_opencl_side(dev)?;
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
