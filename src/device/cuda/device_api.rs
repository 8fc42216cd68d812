//! `device_api.cuda` and `device_api.cuda_host` (TVM `cuda_device_api.cc`) on the driver API:
//! device memory (`cuMemAlloc`, 256-byte aligned), page-locked host memory (`kDLCUDAHost`,
//! `cuMemAllocHost`), copies in every direction on a stream, streams (non-blocking, as TVM
//! creates them) and events between them, device attributes, and a workspace pool.
//!
//! Every block tvmrt allocates is recorded with its size and device, so a free of something
//! that is not a live tvmrt block is refused instead of handed to the driver, copies are
//! range-checked, and a kernel argument can be checked to be device memory (`memory`).
//! Copies to or from the host have finished when they return (queued on the stream, then that
//! stream synchronized: work queued before them on it comes first); device-to-device copies are
//! queued.

use std::ffi::c_void;

use super::context::{self, bind};
use super::driver::{
    attr, check, check_release, cu, CuDevicePtr, Handle, EVENT_DISABLE_TIMING, STREAM_NON_BLOCKING,
};
use super::memory::{self, Block};
use crate::abi::{DLDataType, DLDevice};
use crate::device::api::{
    check_device_type, CopyDirection, DataRef, DeviceApi, DeviceAttr, StreamHandle,
};
use crate::device::device_name;
use crate::device::pool::WorkspacePool;
use crate::error::{Error, Result};
use crate::value::Any;

/// `kDLCUDA`'s API.
pub struct CudaDeviceApi;

/// `kDLCUDAHost`'s API: page-locked host memory, readable by the host and the devices.
pub struct CudaHostApi;

static WORKSPACES: WorkspacePool = WorkspacePool::new();

fn check_cuda_side(dev: DLDevice, expected: u32) -> Result<()> {
    check_device_type(dev, expected, crate::device::device_type_name(expected))
}

/// The device address of one side of a copy, range-checked when tvmrt allocated it.
fn device_side(side: &DataRef, nbytes: usize, what: &str) -> Result<CuDevicePtr> {
    let base = side.data as CuDevicePtr;
    let addr = base
        .checked_add(side.offset as u64)
        .ok_or_else(|| Error::value(format!("{what}: offset overflows")))?;
    if let Some(b) = memory::containing(base) {
        if b.device != side.device.device_id {
            return Err(Error::value(format!(
                "{what}: the tensor says {} but its memory was allocated on cuda:{}",
                device_name(side.device),
                b.device
            )));
        }
        if addr - b.start + nbytes as u64 > b.size as u64 {
            return Err(Error::value(format!(
                "{what}: {nbytes} bytes at offset {} exceed the CUDA allocation's {} bytes",
                addr - b.start,
                b.size
            )));
        }
    }
    Ok(addr)
}

/// Makes `dst` wait for what is queued on `src` now, through `event`.
fn record_and_wait(event: Handle, src: StreamHandle, dst: StreamHandle) -> Result<()> {
    let c = cu()?;
    // SAFETY: a live event; streams of the bound context (the caller's contract).
    check(unsafe { (c.event_record)(event, src) }, "cuEventRecord")?;
    // SAFETY: as above.
    check(
        unsafe { (c.stream_wait_event)(dst, event, 0) },
        "cuStreamWaitEvent",
    )
}

fn sync(stream: StreamHandle) -> Result<()> {
    // SAFETY: a stream of the bound context, or null (the default stream).
    check(
        unsafe { (cu()?.stream_synchronize)(stream) },
        "cuStreamSynchronize",
    )
}

impl CudaDeviceApi {
    fn attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<Any> {
        let id = dev.device_id;
        let int = |which| -> Result<Any> { Ok(Any::from(context::attribute(id, which)? as i64)) };
        let d = context::device(id)?;
        Ok(match kind {
            DeviceAttr::Exist => Any::from(1i64),
            DeviceAttr::MaxThreadsPerBlock => int(attr::MAX_THREADS_PER_BLOCK)?,
            DeviceAttr::WarpSize => int(attr::WARP_SIZE)?,
            DeviceAttr::MaxSharedMemoryPerBlock => int(attr::MAX_SHARED_MEMORY_PER_BLOCK)?,
            DeviceAttr::ComputeVersion => Any::from(format!("{}.{}", d.sm / 10, d.sm % 10)),
            DeviceAttr::DeviceName => Any::from(d.name.as_str()),
            DeviceAttr::MaxClockRate => int(attr::CLOCK_RATE)?,
            DeviceAttr::MultiProcessorCount => int(attr::MULTIPROCESSOR_COUNT)?,
            DeviceAttr::MaxThreadDimensions => Any::from(format!(
                "[{}, {}, {}]",
                d.max_block[0], d.max_block[1], d.max_block[2]
            )),
            DeviceAttr::MaxRegistersPerBlock => int(attr::MAX_REGISTERS_PER_BLOCK)?,
            DeviceAttr::L2CacheSizeBytes => int(attr::L2_CACHE_SIZE)?,
            DeviceAttr::TotalGlobalMemory => {
                let mut total = 0usize;
                // SAFETY: a writable size and a device of the driver.
                check(
                    unsafe { (cu()?.device_total_mem)(&mut total, d.handle) },
                    "cuDeviceTotalMem",
                )?;
                Any::from(total as i64)
            }
            DeviceAttr::AvailableGlobalMemory => {
                bind(id)?;
                let (mut free, mut total) = (0usize, 0usize);
                // SAFETY: two writable sizes; the device's context is current.
                check(
                    unsafe { (cu()?.mem_get_info)(&mut free, &mut total) },
                    "cuMemGetInfo",
                )?;
                Any::from(free as i64)
            }
            // TVM reports the CUDA version it was built with; tvmrt is built with none, so it
            // reports the driver's (`cuDriverGetVersion`, e.g. 12040).
            DeviceAttr::ApiVersion | DeviceAttr::DriverVersion => {
                let mut v = 0;
                // SAFETY: a writable int.
                check(
                    unsafe { (cu()?.driver_get_version)(&mut v) },
                    "cuDriverGetVersion",
                )?;
                if kind == DeviceAttr::ApiVersion {
                    Any::from(v as i64)
                } else {
                    Any::from(format!("{}.{}", v / 1000, (v % 1000) / 10))
                }
            }
            DeviceAttr::ImagePitchAlignment => int(attr::TEXTURE_PITCH_ALIGNMENT)?,
            DeviceAttr::GcnArch => Any::none(),
        })
    }
}

impl DeviceApi for CudaDeviceApi {
    fn pointer_arithmetic(&self) -> bool {
        true
    }

    fn set_device(&self, dev: DLDevice) -> Result<()> {
        check_cuda_side(dev, super::DEVICE_TYPE)?;
        context::set_current(dev.device_id)
    }

    fn check_exists(&self, dev: DLDevice) -> Result<()> {
        check_cuda_side(dev, super::DEVICE_TYPE)?;
        context::device(dev.device_id).map(drop)
    }

    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<Any> {
        if kind == DeviceAttr::Exist {
            // Asking is not an error: no driver or no such device is 0, as TVM answers.
            return Ok(Any::from(i64::from(dev.device_id < context::count())));
        }
        self.attr(dev, kind)
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        check_cuda_side(dev, super::DEVICE_TYPE)?;
        if alignment > 256 || (alignment != 0 && 256 % alignment != 0) {
            return Err(Error::value(format!(
                "CUDA memory is aligned at 256 bytes: cannot allocate with alignment {alignment}"
            )));
        }
        bind(dev.device_id)?;
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: a writable pointer; the device's context is current. 0 bytes are allocated
        // as 1, so every allocation has a unique address.
        check(
            unsafe { (cu()?.mem_alloc)(&mut ptr, nbytes.max(1)) },
            &format!("cuMemAlloc ({nbytes} bytes on cuda:{})", dev.device_id),
        )?;
        memory::record(Block {
            start: ptr,
            size: nbytes,
            device: dev.device_id,
            host: false,
        });
        Ok(ptr as usize as *mut c_void)
    }

    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let b = memory::take(ptr as CuDevicePtr, false).ok_or_else(|| {
            Error::value(format!(
                "TVMDeviceFreeDataSpace: {ptr:p} is not a live CUDA allocation of tvmrt on {}",
                device_name(dev)
            ))
        })?;
        bind(b.device)?;
        // SAFETY: a live allocation of this device, freed once (removed from the table).
        check_release(unsafe { (cu()?.mem_free)(b.start) }, "cuMemFree")
    }

    unsafe fn copy_bytes(
        &self,
        from: DataRef,
        to: DataRef,
        nbytes: usize,
        _type_hint: DLDataType,
        stream: StreamHandle,
    ) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        let c = cu()?;
        let direction = CopyDirection::of(&from, &to, super::DEVICE_TYPE);
        if direction == Some(CopyDirection::OnDevice) {
            let src = device_side(&from, nbytes, "copy source")?;
            let dst = device_side(&to, nbytes, "copy destination")?;
            bind(from.device.device_id)?;
            if from.device.device_id == to.device.device_id {
                // SAFETY: both ranges are device memory of the bound context (checked when
                // tvmrt allocated them, the caller's contract otherwise).
                check(
                    unsafe { (c.memcpy_dtod_async)(dst, src, nbytes, stream) },
                    "cuMemcpyDtoDAsync",
                )
            } else {
                let (s, d) = (
                    context::device(from.device.device_id)?,
                    context::device(to.device.device_id)?,
                );
                // SAFETY: as above, each range in its own device's primary context.
                check(
                    unsafe {
                        (c.memcpy_peer_async)(dst, d.context, src, s.context, nbytes, stream)
                    },
                    "cuMemcpyPeerAsync",
                )
            }
        } else if direction == Some(CopyDirection::ToHost) {
            let src = device_side(&from, nbytes, "copy source")?;
            bind(from.device.device_id)?;
            let host = to.host_address();
            // SAFETY: `host` holds `nbytes` writable bytes (trait contract); the source range
            // is device memory of the bound context.
            check(
                unsafe { (c.memcpy_dtoh_async)(host.cast(), src, nbytes, stream) },
                "cuMemcpyDtoHAsync",
            )?;
            sync(stream)
        } else if direction == Some(CopyDirection::FromHost) {
            let dst = device_side(&to, nbytes, "copy destination")?;
            bind(to.device.device_id)?;
            let host = from.host_address();
            // SAFETY: `host` holds `nbytes` readable bytes (trait contract); the destination
            // range is device memory of the bound context.
            check(
                unsafe { (c.memcpy_htod_async)(dst, host.cast(), nbytes, stream) },
                "cuMemcpyHtoDAsync",
            )?;
            sync(stream)
        } else {
            Err(Error::value(format!(
                "CUDA copies go between CUDA devices and host memory: cannot copy from {} to {}",
                device_name(from.device),
                device_name(to.device)
            )))
        }
    }

    fn create_stream(&self, dev: DLDevice) -> Result<StreamHandle> {
        check_cuda_side(dev, super::DEVICE_TYPE)?;
        bind(dev.device_id)?;
        let mut s: Handle = std::ptr::null_mut();
        // SAFETY: a writable handle; the device's context is current.
        check(
            unsafe { (cu()?.stream_create)(&mut s, STREAM_NON_BLOCKING) },
            "cuStreamCreate",
        )?;
        Ok(s)
    }

    unsafe fn free_stream(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        if stream.is_null() {
            return Ok(());
        }
        bind(dev.device_id)?;
        // SAFETY: per the trait's contract, a stream this API created on `dev`.
        check_release(unsafe { (cu()?.stream_destroy)(stream) }, "cuStreamDestroy")
    }

    fn stream_sync(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        bind(dev.device_id)?;
        sync(stream)
    }

    fn sync_stream_from_to(
        &self,
        dev: DLDevice,
        src: StreamHandle,
        dst: StreamHandle,
    ) -> Result<()> {
        bind(dev.device_id)?;
        let c = cu()?;
        let mut event: Handle = std::ptr::null_mut();
        // SAFETY: a writable handle; the device's context is current.
        check(
            unsafe { (c.event_create)(&mut event, EVENT_DISABLE_TIMING) },
            "cuEventCreate",
        )?;
        let out = record_and_wait(event, src, dst);
        // SAFETY: the event created above, destroyed once, after the wait is queued (the
        // driver keeps it until then).
        let destroyed = check(unsafe { (c.event_destroy)(event) }, "cuEventDestroy");
        out.and(destroyed)
    }

    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        check_cuda_side(dev, super::DEVICE_TYPE)?;
        WORKSPACES.alloc(self, dev, nbytes, type_hint)
    }

    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        WORKSPACES.free(dev, ptr)
    }
}

/// Returns the free workspace blocks to the driver (tests use it to count live memory).
pub fn release_workspaces() -> usize {
    WORKSPACES.release_free(&CudaDeviceApi, super::DEVICE_TYPE)
}

impl DeviceApi for CudaHostApi {
    fn host_accessible(&self) -> bool {
        true
    }

    fn pointer_arithmetic(&self) -> bool {
        true
    }

    fn set_device(&self, dev: DLDevice) -> Result<()> {
        check_cuda_side(dev, super::HOST_DEVICE_TYPE)
    }

    fn check_exists(&self, dev: DLDevice) -> Result<()> {
        check_cuda_side(dev, super::HOST_DEVICE_TYPE)?;
        // Page-locked memory needs the driver and a device to own it.
        context::device(0).map(drop)
    }

    fn get_attr(&self, dev: DLDevice, kind: DeviceAttr) -> Result<Any> {
        Ok(match kind {
            DeviceAttr::Exist => Any::from(i64::from(context::count() > 0 && dev.device_id == 0)),
            _ => Any::none(),
        })
    }

    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        _type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        check_cuda_side(dev, super::HOST_DEVICE_TYPE)?;
        if alignment > 4096 || (alignment != 0 && !alignment.is_power_of_two()) {
            return Err(Error::value(format!(
                "page-locked host memory is page-aligned: cannot allocate with alignment \
                 {alignment}"
            )));
        }
        // Page-locked memory belongs to a context: device 0's, as CUDA's runtime does.
        bind(0)?;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: a writable pointer; a context is current.
        check(
            unsafe { (cu()?.mem_alloc_host)(&mut p, nbytes.max(1)) },
            &format!("cuMemAllocHost ({nbytes} bytes)"),
        )?;
        memory::record(Block {
            start: p as u64,
            size: nbytes,
            device: dev.device_id,
            host: true,
        });
        Ok(p)
    }

    unsafe fn free_data_space(&self, _dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        memory::take(ptr as u64, true).ok_or_else(|| {
            Error::value(format!(
                "TVMDeviceFreeDataSpace: {ptr:p} is not live page-locked memory of tvmrt"
            ))
        })?;
        bind(0)?;
        // SAFETY: a live cuMemAllocHost block, freed once (removed from the table).
        check_release(unsafe { (cu()?.mem_free_host)(ptr) }, "cuMemFreeHost")
    }

    unsafe fn copy_bytes(
        &self,
        from: DataRef,
        to: DataRef,
        nbytes: usize,
        type_hint: DLDataType,
        stream: StreamHandle,
    ) -> Result<()> {
        if from.device.device_type.0 == super::DEVICE_TYPE
            || to.device.device_type.0 == super::DEVICE_TYPE
        {
            // SAFETY: per the contract.
            return unsafe { CudaDeviceApi.copy_bytes(from, to, nbytes, type_hint, stream) };
        }
        // Host memory on both sides: a plain memory copy, as the CPU's.
        // SAFETY: per the contract.
        unsafe { crate::device::cpu::CpuDeviceApi.copy_bytes(from, to, nbytes, type_hint, stream) }
    }

    fn stream_sync(&self, _dev: DLDevice, stream: StreamHandle) -> Result<()> {
        if stream.is_null() {
            return Ok(());
        }
        bind(0)?;
        sync(stream)
    }
}
