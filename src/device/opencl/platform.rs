//! The OpenCL devices tvmrt runs on, found once per process (TVM's `OpenCLWorkspace::Init`):
//! the GPUs of every platform, or when there are none, every other device (POCL's CPU device);
//! devices older than OpenCL 1.2 are skipped, as TVM does. Device ids count across platforms in
//! that order. Each platform gets one context holding its devices, each device one in-order
//! command queue (TVM's OpenCL streams are that queue). They live as long as the process.

use std::ffi::c_void;

use super::error::{cl_error, ClInt, CL_DEVICE_NOT_FOUND, CL_PLATFORM_NOT_FOUND_KHR, CL_SUCCESS};
use super::loader::{cl, Cl, ClBitfield, ClUint, Handle};
use crate::device::loaded::{device_by_id, Devices, LoadedDriver};
use crate::error::{Error, Result};

pub const CL_PLATFORM_VERSION: ClUint = 0x0901;
pub const CL_PLATFORM_NAME: ClUint = 0x0902;
pub const CL_DEVICE_TYPE_CPU: ClBitfield = 1 << 1;
pub const CL_DEVICE_TYPE_GPU: ClBitfield = 1 << 2;
pub const CL_DEVICE_TYPE_ALL: ClBitfield = 0xFFFF_FFFF;
pub const CL_DEVICE_MAX_COMPUTE_UNITS: ClUint = 0x1002;
pub const CL_DEVICE_MAX_WORK_GROUP_SIZE: ClUint = 0x1004;
pub const CL_DEVICE_MAX_WORK_ITEM_SIZES: ClUint = 0x1005;
pub const CL_DEVICE_MAX_CLOCK_FREQUENCY: ClUint = 0x100C;
pub const CL_DEVICE_MAX_MEM_ALLOC_SIZE: ClUint = 0x1010;
pub const CL_DEVICE_GLOBAL_MEM_CACHE_SIZE: ClUint = 0x101E;
pub const CL_DEVICE_GLOBAL_MEM_SIZE: ClUint = 0x101F;
pub const CL_DEVICE_LOCAL_MEM_SIZE: ClUint = 0x1023;
pub const CL_DEVICE_NAME: ClUint = 0x102B;
pub const CL_DRIVER_VERSION: ClUint = 0x102D;
pub const CL_DEVICE_VERSION: ClUint = 0x102F;
pub const CL_DEVICE_IMAGE_PITCH_ALIGNMENT: ClUint = 0x104A;

/// One OpenCL device and what tvmrt keeps of it.
pub struct Device {
    /// `cl_device_id`.
    pub id: Handle,
    /// The context of its platform.
    pub context: Handle,
    /// Its command queue (in order).
    pub queue: Handle,
    /// `CL_DEVICE_NAME`.
    pub name: String,
    /// `CL_DEVICE_VERSION` as `major.minor`.
    pub version: String,
    /// `CL_DEVICE_MAX_MEM_ALLOC_SIZE`: the largest buffer.
    pub max_alloc: u64,
}

/// Every device tvmrt uses, in device-id order.
pub struct Platform {
    /// The OpenCL functions.
    pub cl: &'static Cl,
    /// The devices.
    pub devices: Vec<Device>,
}

// SAFETY: OpenCL's contexts, devices and command queues may be used from any thread (the
// OpenCL 1.2 specification, appendix A.2: all API calls are thread-safe except
// clSetKernelArg on one kernel, which tvmrt serializes per kernel).
unsafe impl Send for Platform {}
// SAFETY: as above.
unsafe impl Sync for Platform {}

/// The platform's devices, found on first use.
static PLATFORM: LoadedDriver<Platform> = LoadedDriver::new();

/// The devices, found on first use; the same error every time when there are none (no
/// `libOpenCL.so.1`, no driver, no device).
pub fn platform() -> Result<&'static Platform> {
    PLATFORM.get_or_load(find)
}

/// The number of devices when they have been found already, without looking for them.
pub fn known_device_count() -> Option<usize> {
    PLATFORM.known_device_count()
}

impl Devices for Platform {
    type Device = Device;

    fn devices(&self) -> &[Device] {
        &self.devices
    }
}

impl Platform {
    /// Device `id`, or an error naming how many there are.
    pub fn device(&self, id: i32) -> Result<&Device> {
        device_by_id(&self.devices, id, super::DEVICE_TYPE, "OpenCL")
    }
}

/// Reads a `clGet*Info` value of type `T`.
///
/// # Safety
/// `param` is a query whose result is a `T` for `object`.
pub unsafe fn info_scalar<T: Copy + Default>(
    get: unsafe extern "C" fn(Handle, ClUint, usize, *mut c_void, *mut usize) -> ClInt,
    object: Handle,
    param: ClUint,
    call: &str,
) -> Result<T> {
    let mut v = T::default();
    // SAFETY: `v` holds size_of::<T>() writable bytes, the size of this query's result.
    let rc = unsafe {
        get(
            object,
            param,
            std::mem::size_of::<T>(),
            (&mut v as *mut T).cast(),
            std::ptr::null_mut(),
        )
    };
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, call));
    }
    Ok(v)
}

/// Reads a `clGet*Info` string.
///
/// # Safety
/// `object` is a live handle of the kind `get` queries, and `param` a query whose result is a
/// string.
pub unsafe fn info_string(
    get: unsafe extern "C" fn(Handle, ClUint, usize, *mut c_void, *mut usize) -> ClInt,
    object: Handle,
    param: ClUint,
    call: &str,
) -> Result<String> {
    let mut len = 0usize;
    // SAFETY: a size query (null value pointer) writes only `len`.
    let rc = unsafe { get(object, param, 0, std::ptr::null_mut(), &mut len) };
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, call));
    }
    let mut buf = vec![0u8; len.max(1)];
    // SAFETY: `buf` holds `len` writable bytes, the size the driver asked for.
    let rc = unsafe {
        get(
            object,
            param,
            buf.len(),
            buf.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, call));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// `OpenCL 3.0 PoCL ...` -> `3.0` (TVM's `GetOpenCLVersion`).
fn version_number(text: &str) -> String {
    text.strip_prefix("OpenCL ")
        .unwrap_or(text)
        .split(' ')
        .next()
        .unwrap_or("")
        .to_string()
}

fn at_least_1_2(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (1, 2)
}

fn platform_ids(cl: &Cl) -> Result<Vec<Handle>> {
    let no_platform = |rc: ClInt| {
        let vendors = match std::env::var("OCL_ICD_VENDORS") {
            Ok(v) => format!(" (OCL_ICD_VENDORS is `{v}`)"),
            Err(_) => String::new(),
        };
        Error::runtime(format!(
            "no OpenCL platform found: the OpenCL ICD loader found no driver{vendors} \
             (clGetPlatformIDs returned {}); install one (Debian: pocl-opencl-icd runs OpenCL on \
             the CPU)",
            super::error::code_name(rc)
        ))
    };
    let mut n: ClUint = 0;
    // SAFETY: a count query writes only `n`.
    let rc = unsafe { (cl.get_platform_ids)(0, std::ptr::null_mut(), &mut n) };
    if rc == CL_PLATFORM_NOT_FOUND_KHR || (rc == CL_SUCCESS && n == 0) {
        return Err(no_platform(if rc == CL_SUCCESS {
            CL_PLATFORM_NOT_FOUND_KHR
        } else {
            rc
        }));
    }
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, "clGetPlatformIDs"));
    }
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: `ids` holds `n` writable handles.
    let rc = unsafe { (cl.get_platform_ids)(n, ids.as_mut_ptr(), std::ptr::null_mut()) };
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, "clGetPlatformIDs"));
    }
    Ok(ids)
}

fn device_ids(cl: &Cl, platform: Handle, kind: ClBitfield) -> Result<Vec<Handle>> {
    let mut n: ClUint = 0;
    // SAFETY: a count query writes only `n`.
    let rc = unsafe { (cl.get_device_ids)(platform, kind, 0, std::ptr::null_mut(), &mut n) };
    if rc == CL_DEVICE_NOT_FOUND || n == 0 {
        return Ok(Vec::new());
    }
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, "clGetDeviceIDs"));
    }
    let mut ids = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: `ids` holds `n` writable handles.
    let rc =
        unsafe { (cl.get_device_ids)(platform, kind, n, ids.as_mut_ptr(), std::ptr::null_mut()) };
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, "clGetDeviceIDs"));
    }
    Ok(ids)
}

fn find() -> std::result::Result<Platform, Error> {
    let cl = cl()?;
    let platforms = platform_ids(cl)?;
    let supported = |kind: ClBitfield| -> Result<Vec<(Handle, Vec<Handle>)>> {
        let mut out = Vec::new();
        for &p in &platforms {
            let mut keep = Vec::new();
            for d in device_ids(cl, p, kind)? {
                // SAFETY: a device of the platform; CL_DEVICE_VERSION is a string.
                let v = unsafe {
                    info_string(cl.get_device_info, d, CL_DEVICE_VERSION, "clGetDeviceInfo")?
                };
                if at_least_1_2(&version_number(&v)) {
                    keep.push(d);
                } else {
                    log::warn!("OpenCL device with version `{v}` skipped: tvmrt needs 1.2");
                }
            }
            if !keep.is_empty() {
                out.push((p, keep));
            }
        }
        Ok(out)
    };
    let mut chosen = supported(CL_DEVICE_TYPE_GPU)?;
    if chosen.is_empty() {
        chosen = supported(CL_DEVICE_TYPE_ALL & !CL_DEVICE_TYPE_GPU)?;
    }
    if chosen.is_empty() {
        let names: Vec<String> = platforms
            .iter()
            .map(|&p| {
                // SAFETY: a platform the ICD loader listed; CL_PLATFORM_NAME is a string.
                let name = unsafe {
                    info_string(
                        cl.get_platform_info,
                        p,
                        CL_PLATFORM_NAME,
                        "clGetPlatformInfo",
                    )
                };
                name.unwrap_or_default()
            })
            .collect();
        return Err(Error::runtime(format!(
            "no OpenCL 1.2 device found on the OpenCL platforms ({})",
            names.join(", ")
        )));
    }
    let mut devices = Vec::new();
    for (_, ids) in chosen {
        let mut rc: ClInt = 0;
        // SAFETY: `ids` are devices of one platform; no properties, no callback.
        let context = unsafe {
            (cl.create_context)(
                std::ptr::null(),
                ids.len() as ClUint,
                ids.as_ptr(),
                None,
                std::ptr::null_mut(),
                &mut rc,
            )
        };
        if rc != CL_SUCCESS || context.is_null() {
            return Err(cl_error(rc, "clCreateContext"));
        }
        for id in ids {
            // SAFETY: `id` belongs to `context`; in-order queue (no properties).
            let queue = unsafe { (cl.create_command_queue)(context, id, 0, &mut rc) };
            if rc != CL_SUCCESS || queue.is_null() {
                return Err(cl_error(rc, "clCreateCommandQueue"));
            }
            // SAFETY: a device of the platform; both queries give strings.
            let (name, version) = unsafe {
                (
                    info_string(cl.get_device_info, id, CL_DEVICE_NAME, "clGetDeviceInfo")?,
                    info_string(cl.get_device_info, id, CL_DEVICE_VERSION, "clGetDeviceInfo")?,
                )
            };
            let version = version_number(&version);
            // SAFETY: CL_DEVICE_MAX_MEM_ALLOC_SIZE is a cl_ulong.
            let max_alloc = unsafe {
                info_scalar::<u64>(
                    cl.get_device_info,
                    id,
                    CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                    "clGetDeviceInfo",
                )?
            };
            log::debug!("opencl:{}: {name} (OpenCL {version})", devices.len());
            devices.push(Device {
                id,
                context,
                queue,
                name,
                version,
                max_alloc,
            });
        }
    }
    Ok(Platform { cl, devices })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(version_number("OpenCL 3.0 PoCL 3.1"), "3.0");
        assert_eq!(version_number("OpenCL 1.1 "), "1.1");
        assert!(at_least_1_2("3.0"));
        assert!(at_least_1_2("1.2"));
        assert!(!at_least_1_2("1.1"));
        assert!(!at_least_1_2(""));
    }
}
