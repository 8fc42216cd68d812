//! CUDA devices as tvmrt uses them: each device's primary context (the one the CUDA runtime,
//! and so TVM, PyTorch and CuPy, use: memory and modules are shared with them), retained the
//! first time the device is used and kept for the process; its limits, read once; and the
//! calling thread's current device (`__tvm_set_device`, TVM's `cudaSetDevice`).
//!
//! Every call that needs a context binds the device's primary context to the calling thread
//! first (`cuCtxSetCurrent`, a thread-local store in the driver), so no other library's choice
//! of current context can send tvmrt's work to the wrong device.

use std::cell::Cell;
use std::ffi::c_int;

use once_cell::sync::OnceCell;

use super::driver::{attr, check, cu, Cu, CuDevice, Handle};
use crate::error::{Error, Result};

/// TVM's `kMaxNumGPUs`: the most devices tvmrt's per-device tables hold.
pub const MAX_DEVICES: usize = 32;

/// A CUDA device and its primary context.
pub struct Device {
    /// Its ordinal (`cuda:N`).
    pub ordinal: i32,
    /// The driver's handle.
    pub handle: CuDevice,
    /// Its primary context.
    pub context: Handle,
    /// Its name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// `major * 10 + minor`.
    pub sm: u32,
    /// Most threads in a block.
    pub max_threads_per_block: u32,
    /// Most threads per block dimension.
    pub max_block: [u32; 3],
    /// Most blocks per grid dimension.
    pub max_grid: [u32; 3],
    /// Shared memory a block may use without opting in (48 KiB).
    pub shared_default: u32,
    /// Shared memory a block may use after `cuFuncSetAttribute` (the device's limit).
    pub shared_optin: u32,
}

// SAFETY: the context handle is the device's primary context, usable from any thread once
// made current there (which `bind` does).
unsafe impl Send for Device {}
// SAFETY: as above; the fields are read-only after creation.
unsafe impl Sync for Device {}

impl Device {
    /// `cuda:N`.
    pub fn label(&self) -> String {
        format!("cuda:{} ({}, sm_{})", self.ordinal, self.name, self.sm)
    }
}

struct Devices {
    cu: &'static Cu,
    count: i32,
    slots: Vec<OnceCell<Device>>,
}

static DEVICES: OnceCell<std::result::Result<Devices, String>> = OnceCell::new();

fn devices() -> Result<&'static Devices> {
    DEVICES
        .get_or_try_init(|| -> Result<std::result::Result<Devices, String>> {
            let cu = match cu() {
                Ok(cu) => cu,
                Err(e) => return Ok(Err(e.message.clone())),
            };
            let mut count: c_int = 0;
            // SAFETY: a writable int; the driver is initialized.
            let rc = unsafe { (cu.device_get_count)(&mut count) };
            if let Err(e) = check(rc, "cuDeviceGetCount") {
                return Ok(Err(e.message.clone()));
            }
            let n = (count.max(0) as usize).min(MAX_DEVICES);
            Ok(Ok(Devices {
                cu,
                count: n as i32,
                slots: (0..n).map(|_| OnceCell::new()).collect(),
            }))
        })?
        .as_ref()
        .map_err(|m| Error::runtime(m.clone()))
}

/// How many CUDA devices the driver sees (0 without a driver).
pub fn count() -> i32 {
    devices().map_or(0, |d| d.count)
}

fn int_attr(cu: &Cu, dev: CuDevice, which: i32) -> Result<u32> {
    let mut v: c_int = 0;
    // SAFETY: a writable int and a device of the driver.
    check(
        unsafe { (cu.device_get_attribute)(&mut v, which, dev) },
        "cuDeviceGetAttribute",
    )?;
    Ok(v.max(0) as u32)
}

/// An attribute of device `ordinal` (`CUdevice_attribute`).
pub fn attribute(ordinal: i32, which: i32) -> Result<u32> {
    let d = device(ordinal)?;
    int_attr(devices()?.cu, d.handle, which)
}

fn open_device(cu: &'static Cu, ordinal: i32) -> Result<Device> {
    let mut handle: CuDevice = 0;
    // SAFETY: a writable int; the ordinal is below the count.
    check(
        unsafe { (cu.device_get)(&mut handle, ordinal) },
        "cuDeviceGet",
    )?;
    let mut name = [0u8; 256];
    // SAFETY: the buffer holds the 256 bytes passed.
    check(
        unsafe { (cu.device_get_name)(name.as_mut_ptr().cast(), name.len() as c_int, handle) },
        "cuDeviceGetName",
    )?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let mut context: Handle = std::ptr::null_mut();
    // SAFETY: a writable handle; the primary context is retained for the process.
    check(
        unsafe { (cu.primary_ctx_retain)(&mut context, handle) },
        "cuDevicePrimaryCtxRetain",
    )?;
    let a = |which| int_attr(cu, handle, which);
    let shared_default = a(attr::MAX_SHARED_MEMORY_PER_BLOCK)?;
    Ok(Device {
        ordinal,
        handle,
        context,
        name: String::from_utf8_lossy(&name[..end]).into_owned(),
        sm: a(attr::COMPUTE_CAPABILITY_MAJOR)? * 10 + a(attr::COMPUTE_CAPABILITY_MINOR)?,
        max_threads_per_block: a(attr::MAX_THREADS_PER_BLOCK)?,
        max_block: [
            a(attr::MAX_BLOCK_DIM_X)?,
            a(attr::MAX_BLOCK_DIM_Y)?,
            a(attr::MAX_BLOCK_DIM_Z)?,
        ],
        max_grid: [
            a(attr::MAX_GRID_DIM_X)?,
            a(attr::MAX_GRID_DIM_Y)?,
            a(attr::MAX_GRID_DIM_Z)?,
        ],
        shared_default,
        shared_optin: a(attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .unwrap_or(shared_default)
            .max(shared_default),
    })
}

/// Device `ordinal`, opened (its primary context retained) on first use.
pub fn device(ordinal: i32) -> Result<&'static Device> {
    let ds = devices()?;
    if ds.count == 0 {
        return Err(Error::new(
            "CUDAError",
            format!(
                "no CUDA device: the driver ({}) sees none (check nvidia-smi and \
                 CUDA_VISIBLE_DEVICES)",
                ds.cu.path
            ),
        ));
    }
    let slot = usize::try_from(ordinal)
        .ok()
        .and_then(|i| ds.slots.get(i))
        .ok_or_else(|| {
            Error::value(format!(
                "cuda:{ordinal} does not exist: the driver sees {} CUDA device{}",
                ds.count,
                if ds.count == 1 { "" } else { "s" }
            ))
        })?;
    slot.get_or_try_init(|| open_device(ds.cu, ordinal))
}

/// Device `ordinal` with its primary context current on the calling thread.
pub fn bind(ordinal: i32) -> Result<&'static Device> {
    let d = device(ordinal)?;
    // SAFETY: a retained primary context.
    check(
        unsafe { (devices()?.cu.ctx_set_current)(d.context) },
        "cuCtxSetCurrent",
    )?;
    Ok(d)
}

thread_local! {
    /// The calling thread's current CUDA device (TVM's `cudaGetDevice`); 0 until set.
    static CURRENT: Cell<i32> = const { Cell::new(0) };
}

/// The calling thread's current device.
pub fn current() -> i32 {
    CURRENT.with(Cell::get)
}

/// Makes `ordinal` the calling thread's current device, after checking it exists (which opens
/// the driver, as TVM's `cudaSetDevice` initializes CUDA).
pub fn set_current(ordinal: i32) -> Result<()> {
    device(ordinal)?;
    CURRENT.with(|c| c.set(ordinal));
    Ok(())
}
