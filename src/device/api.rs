//! The interface every back end implements: TVM's `DeviceAPI` (`include/tvm/runtime/device_api.h`,
//! `src/runtime/device_api.cc`), one instance per device type, shared by all threads.
//!
//! Data pointers are whatever the back end makes them: host addresses on the CPU (and on pinned
//! host memory such as `kDLCUDAHost`), device addresses on CUDA, buffer descriptors on OpenCL.
//! Only the back end that allocated a pointer interprets it; the rest of tvmrt moves it around
//! and asks [`DeviceApi::host_accessible`] / [`DeviceApi::pointer_arithmetic`] before touching
//! it.

use std::ffi::c_void;

use crate::abi::{DLDataType, DLDevice, DLTensor};
use crate::error::{Error, Result};
use crate::value::Any;

/// A stream of work on a device (`TVMStreamHandle`); null is the device's default stream.
pub type StreamHandle = *mut c_void;

/// What [`DeviceApi::get_attr`] is asked (TVM's `DeviceAttrKind`, same numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceAttr {
    /// Whether the device exists (an int, 0 or 1).
    Exist = 0,
    /// Most threads (work items) in a block (work group).
    MaxThreadsPerBlock = 1,
    /// Threads that run in lockstep.
    WarpSize = 2,
    /// Bytes of shared (local) memory a block may use.
    MaxSharedMemoryPerBlock = 3,
    /// The compute capability or API version as a string (`"3.0"`).
    ComputeVersion = 4,
    /// The device's name.
    DeviceName = 5,
    /// Clock rate in kHz.
    MaxClockRate = 6,
    /// Number of compute units.
    MultiProcessorCount = 7,
    /// Most threads per block dimension, as a JSON list (`"[1024, 1024, 64]"`).
    MaxThreadDimensions = 8,
    /// Registers per block.
    MaxRegistersPerBlock = 9,
    /// AMD GCN architecture.
    GcnArch = 10,
    /// The API version the runtime was built against.
    ApiVersion = 11,
    /// The driver's version string.
    DriverVersion = 12,
    /// Bytes of L2 (global memory) cache.
    L2CacheSizeBytes = 13,
    /// Bytes of device memory.
    TotalGlobalMemory = 14,
    /// Bytes of device memory free now.
    AvailableGlobalMemory = 15,
    /// Row pitch alignment of images.
    ImagePitchAlignment = 16,
}

impl DeviceAttr {
    /// The attribute TVM numbers `code`, or a `ValueError`.
    pub fn from_code(code: i64) -> Result<DeviceAttr> {
        use DeviceAttr::*;
        const ALL: [DeviceAttr; 17] = [
            Exist,
            MaxThreadsPerBlock,
            WarpSize,
            MaxSharedMemoryPerBlock,
            ComputeVersion,
            DeviceName,
            MaxClockRate,
            MultiProcessorCount,
            MaxThreadDimensions,
            MaxRegistersPerBlock,
            GcnArch,
            ApiVersion,
            DriverVersion,
            L2CacheSizeBytes,
            TotalGlobalMemory,
            AvailableGlobalMemory,
            ImagePitchAlignment,
        ];
        usize::try_from(code)
            .ok()
            .and_then(|i| ALL.get(i).copied())
            .ok_or_else(|| Error::value(format!("unknown device attribute kind {code} (0..=16)")))
    }
}

/// One side of a flat copy: a data pointer of `device`, and a byte offset into it.
#[derive(Clone, Copy, Debug)]
pub struct DataRef {
    /// The pointer as the owning back end hands it out.
    pub data: *mut c_void,
    /// Bytes from `data` to the first byte copied.
    pub offset: usize,
    /// Where the data lives.
    pub device: DLDevice,
}

impl DataRef {
    /// The host address of the first byte copied, for a side in host-accessible memory.
    pub fn host_address(&self) -> *mut u8 {
        self.data.cast::<u8>().wrapping_add(self.offset)
    }
}

/// Which way a copy goes for a back end of one device type: the device-side checks and driver
/// call differ, the rest (host addresses, offsets) does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyDirection {
    /// Both sides on the back end's device type.
    OnDevice,
    /// From the back end's device type to host-accessible memory.
    ToHost,
    /// From host-accessible memory to the back end's device type.
    FromHost,
}

impl CopyDirection {
    /// The direction of a copy from `from` to `to` for the back end of `device_type`, or
    /// `None` when it is none of the three (the back end refuses it, as TVM's do: another
    /// device type on either side, or no side on this one).
    pub fn of(from: &DataRef, to: &DataRef, device_type: u32) -> Option<CopyDirection> {
        let from_dev = from.device.device_type.0 == device_type;
        let to_dev = to.device.device_type.0 == device_type;
        if from_dev && to_dev {
            Some(CopyDirection::OnDevice)
        } else if from_dev && super::is_host_accessible(to.device) {
            Some(CopyDirection::ToHost)
        } else if to_dev && super::is_host_accessible(from.device) {
            Some(CopyDirection::FromHost)
        } else {
            None
        }
    }
}

/// Fails unless `dev` is of `device_type`, which messages call `name` ("OpenCL"): a back end's
/// API is asked only about its own devices, but the C API passes what the caller says.
#[inline]
pub fn check_device_type(dev: DLDevice, device_type: u32, name: &str) -> Result<()> {
    if dev.device_type.0 != device_type {
        return Err(wrong_device_type(dev, name));
    }
    Ok(())
}

#[cold]
fn wrong_device_type(dev: DLDevice, name: &str) -> Error {
    Error::value(format!(
        "expected {} {name} device, got {}",
        a_or_an(name),
        super::device_name(dev)
    ))
}

/// The indefinite article before `word` in messages (by its first letter: "an OpenCL", "a
/// Vulkan").
pub fn a_or_an(word: &str) -> &'static str {
    if word.starts_with(['A', 'E', 'I', 'O', 'U', 'a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// TVM's `DeviceAPI`: memory, copies, streams and workspaces of one device type.
///
/// Methods taking raw pointers are `unsafe`: the pointers must come from this API (or, for the
/// host side of a copy, be valid host memory of the stated size).
pub trait DeviceApi: Send + Sync + 'static {
    /// Whether the host may read and write this device's data pointers directly (the CPU,
    /// pinned host memory). Host-side functions (copies to bytes, `.numpy()`, CPU kernels)
    /// require it or go through [`DeviceApi::copy_data_from_to`].
    fn host_accessible(&self) -> bool {
        false
    }

    /// Whether `data + k` addresses byte `k` of an allocation (TVM's
    /// `SupportsDevicePointerArithmeticsOnHost`). When it does not (OpenCL's buffer
    /// descriptors), views keep the allocation's pointer and carry the offset in `byte_offset`.
    fn pointer_arithmetic(&self) -> bool {
        false
    }

    /// Makes `dev` the calling thread's current device (the global `__tvm_set_device`, which
    /// generated host code calls before launching kernels).
    fn set_device(&self, dev: DLDevice) -> Result<()>;

    /// Fails, saying why, unless `dev` exists and can be used now (the driver is there, the id
    /// is in range). Callers that set up work for a device (a VM, a graph executor) check first
    /// so that the error names the device rather than a later allocation.
    fn check_exists(&self, _dev: DLDevice) -> Result<()> {
        Ok(())
    }

    /// An attribute of `dev`; `None` when the back end does not know it (as TVM leaves the
    /// result unset).
    fn get_attr(&self, dev: DLDevice, attr: DeviceAttr) -> Result<Any>;

    /// Allocates `nbytes` (0 allowed, still a unique pointer) aligned to `alignment` (a power of
    /// two) on `dev`.
    fn alloc_data_space(
        &self,
        dev: DLDevice,
        nbytes: usize,
        alignment: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void>;

    /// Allocates a compact tensor of `shape` and `dtype` in memory scope `mem_scope` (`None`,
    /// `""` and `"global"` are plain memory). The default serves only plain memory, aligned
    /// to the element size and at least 64 bytes (TVM's `GetDataAlignment`), as TVM's default.
    fn alloc_data_space_scoped(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        mem_scope: Option<&str>,
    ) -> Result<*mut c_void> {
        check_global_scope(dev, mem_scope)?;
        let nbytes = crate::tensor::layout::shape_bytes(shape, dtype)?;
        self.alloc_data_space(dev, nbytes, data_alignment(dtype), dtype)
    }

    /// Frees what an `alloc_data_space*` call returned (null is a no-op).
    ///
    /// # Safety
    /// `ptr` is null or came from this API's allocation on `dev` and is not used afterwards.
    unsafe fn free_data_space(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()>;

    /// A tensor's memory as [`DeviceApi::alloc_data_space_scoped`] gives it, zero-filled where
    /// the host can read it (so no uninitialized byte is ever read back through the host;
    /// device memory is left as the driver gives it, as TVM does). `nbytes` is the compact size
    /// of `shape` and `dtype`. Free it with [`DeviceApi::free_tensor_data`] with the same dtype
    /// and size.
    fn alloc_tensor_data(
        &self,
        dev: DLDevice,
        shape: &[i64],
        dtype: DLDataType,
        mem_scope: Option<&str>,
        nbytes: usize,
    ) -> Result<*mut c_void> {
        let data = self.alloc_data_space_scoped(dev, shape, dtype, mem_scope)?;
        if self.host_accessible() && nbytes > 0 {
            // SAFETY: a fresh host-accessible block of at least `nbytes` bytes.
            unsafe { std::ptr::write_bytes(data.cast::<u8>(), 0, nbytes) };
        }
        Ok(data)
    }

    /// Frees what [`DeviceApi::alloc_tensor_data`] returned for `dtype` and `nbytes`.
    ///
    /// # Safety
    /// `ptr` came from `alloc_tensor_data(dev, _, dtype, _, nbytes)` and is not used afterwards.
    unsafe fn free_tensor_data(
        &self,
        dev: DLDevice,
        ptr: *mut c_void,
        dtype: DLDataType,
        nbytes: usize,
    ) -> Result<()> {
        let _ = (dtype, nbytes);
        // SAFETY: per the contract, tensor data is data space by default.
        unsafe { self.free_data_space(dev, ptr) }
    }

    /// Copies a compact tensor into another of the same byte size, at least one of them on this
    /// API's device type, the other on the same type or on the host. The default checks both
    /// sides and calls [`DeviceApi::copy_bytes`]. Copies to or from the host have finished when
    /// this returns; device-to-device copies may still be queued on `stream`.
    ///
    /// # Safety
    /// Both descriptors describe live memory of the size their shapes give (`to` writable).
    unsafe fn copy_data_from_to(
        &self,
        from: &DLTensor,
        to: &DLTensor,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: per the contract.
        let nbytes = unsafe { flat_copy_size(from, to)? };
        let side = |t: &DLTensor| DataRef {
            data: t.data,
            offset: t.byte_offset as usize,
            device: t.device,
        };
        // SAFETY: both sides checked, live per the contract.
        unsafe { self.copy_bytes(side(from), side(to), nbytes, from.dtype, stream) }
    }

    /// Copies `nbytes` between two data pointers (TVM's protected `CopyDataFromTo` overload).
    ///
    /// # Safety
    /// As [`DeviceApi::copy_data_from_to`], for `nbytes` from each side's offset.
    unsafe fn copy_bytes(
        &self,
        from: DataRef,
        to: DataRef,
        nbytes: usize,
        type_hint: DLDataType,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Creates a stream on `dev` (null where the device has only its default one, as TVM's
    /// default).
    fn create_stream(&self, _dev: DLDevice) -> Result<StreamHandle> {
        Ok(std::ptr::null_mut())
    }

    /// Frees a stream from [`DeviceApi::create_stream`].
    ///
    /// # Safety
    /// `stream` came from this API's `create_stream` on `dev` and is not used afterwards.
    unsafe fn free_stream(&self, _dev: DLDevice, _stream: StreamHandle) -> Result<()> {
        Ok(())
    }

    /// Waits until the work queued on `stream` (null: the default stream) has finished.
    fn stream_sync(&self, dev: DLDevice, stream: StreamHandle) -> Result<()>;

    /// Makes `stream` the calling thread's current stream for `dev` (TVM's default: the
    /// tvm-ffi environment, `TVMFFIEnvSetStream`).
    fn set_stream(&self, dev: DLDevice, stream: StreamHandle) -> Result<()> {
        super::stream::set_current(dev.device_type.0 as i32, dev.device_id, stream).map(drop)
    }

    /// The calling thread's current stream for `dev` (null: the default one).
    fn current_stream(&self, dev: DLDevice) -> StreamHandle {
        super::stream::current(dev.device_type.0 as i32, dev.device_id)
    }

    /// Makes `dst` wait for the work queued on `src` so far (both on `dev`'s device type).
    fn sync_stream_from_to(
        &self,
        _dev: DLDevice,
        _src: StreamHandle,
        _dst: StreamHandle,
    ) -> Result<()> {
        Ok(())
    }

    /// Scratch memory for a kernel (`TVMBackendAllocWorkspace`): few, short-lived, usually
    /// freed in reverse order. The default allocates data space 64-byte aligned.
    fn alloc_workspace(
        &self,
        dev: DLDevice,
        nbytes: usize,
        type_hint: DLDataType,
    ) -> Result<*mut c_void> {
        self.alloc_data_space(dev, nbytes, TEMP_ALLOC_ALIGNMENT, type_hint)
    }

    /// Returns workspace memory.
    ///
    /// # Safety
    /// `ptr` came from [`DeviceApi::alloc_workspace`] on `dev` and is not used afterwards.
    unsafe fn free_workspace(&self, dev: DLDevice, ptr: *mut c_void) -> Result<()> {
        // SAFETY: per the contract, workspaces are data spaces by default.
        unsafe { self.free_data_space(dev, ptr) }
    }
}

/// TVM's `kAllocAlignment`: the least alignment of any allocation.
pub const ALLOC_ALIGNMENT: usize = 64;

/// TVM's `kTempAllocaAlignment`: the alignment of workspaces.
pub const TEMP_ALLOC_ALIGNMENT: usize = 64;

/// TVM's `GetDataAlignment`: the element size, at least [`ALLOC_ALIGNMENT`], as a power of two.
pub fn data_alignment(dtype: DLDataType) -> usize {
    (crate::dtype::element_bytes(dtype).next_power_of_two()).max(ALLOC_ALIGNMENT)
}

/// Accepts the plain memory scopes (`None`, `""`, `"global"`), refusing the others on `dev`
/// as TVM's default `DeviceAPI` does.
pub fn check_global_scope(dev: DLDevice, mem_scope: Option<&str>) -> Result<()> {
    match mem_scope {
        None | Some("") | Some("global") => Ok(()),
        Some(scope) => Err(Error::value(format!(
            "memory scope `{scope}` is not supported on {} (only global memory)",
            super::device_name(dev)
        ))),
    }
}

/// The byte count of a flat copy between `from` and `to`: both compact and of equal size, as
/// TVM's `DeviceAPI::CopyDataFromTo` requires.
///
/// # Safety
/// Both descriptors' shapes and strides are readable.
pub unsafe fn flat_copy_size(from: &DLTensor, to: &DLTensor) -> Result<usize> {
    use crate::tensor::layout::{dl_bytes, dl_is_contiguous};
    // SAFETY: per the contract.
    let (n_from, n_to) = unsafe {
        (
            dl_bytes(from, "source tensor")?,
            dl_bytes(to, "destination tensor")?,
        )
    };
    if n_from != n_to {
        return Err(Error::value(format!(
            "copy size mismatch: the source holds {n_from} bytes, the destination {n_to} bytes"
        )));
    }
    // SAFETY: per the contract.
    if unsafe { !dl_is_contiguous(from) || !dl_is_contiguous(to) } {
        return Err(Error::value(format!(
            "copy between {} and {}: only compact tensors can be copied to or from a device",
            super::device_name(from.device),
            super::device_name(to.device)
        )));
    }
    if (from.data.is_null() || to.data.is_null()) && n_from > 0 {
        return Err(Error::value(format!(
            "copy of {n_from} bytes from or to a null data pointer"
        )));
    }
    Ok(n_from)
}
