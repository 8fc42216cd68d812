//! OpenCL buffers as TVM's runtime represents them: a tensor's `data` is a pointer to a buffer
//! descriptor whose first field is the `cl_mem` (TVM `opencl_common.h`, `cl::BufferDescriptor`:
//! "buffer should be the first element here"; its kernel launcher reads the `cl_mem` through
//! that pointer). So a tensor tvmrt allocates on OpenCL can be handed to code built against TVM's
//! headers and back.
//!
//! Every descriptor tvmrt hands out is recorded while it lives ([`crate::device::descriptor`]),
//! so a pointer that is not one is refused with a message instead of being read.

use super::error::{cl_error, ClInt, CL_SUCCESS};
use super::loader::Handle;
use super::platform::platform;
use crate::device::descriptor::{Recorded, Registry};
use crate::error::{Error, Result};

/// `CL_MEM_READ_WRITE`.
const CL_MEM_READ_WRITE: u64 = 1;

/// TVM's `cl::BufferDescriptor`, as far as anyone outside the runtime reads it: the `cl_mem`
/// first. 64-byte aligned, as generated host code assumes of every data pointer.
#[repr(C, align(64))]
pub struct BufferDescriptor {
    /// The OpenCL buffer (`cl_mem`).
    pub buffer: Handle,
}

/// What tvmrt knows of a live descriptor.
#[derive(Clone, Copy, Debug)]
pub struct Buffer {
    /// The `cl_mem`.
    pub mem: Handle,
    /// The OpenCL device (tvmrt's id) whose context owns it.
    pub device_id: i32,
    /// Its size in bytes.
    pub nbytes: usize,
}

// SAFETY: a `cl_mem` may be used from any thread (OpenCL 1.2, appendix A.2).
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

/// Live descriptors: lookups (`lock`, `copy_side`) and the not-a-buffer error go through it.
pub static LIVE: Registry<BufferDescriptor, Buffer> = Registry::new("OpenCL");

/// Allocates a buffer of `nbytes` (at least 1 byte, OpenCL refuses empty buffers) on device
/// `device_id`; returns its descriptor.
pub fn alloc(device_id: i32, nbytes: usize) -> Result<*mut BufferDescriptor> {
    let p = platform()?;
    let dev = p.device(device_id)?;
    if nbytes as u64 > dev.max_alloc {
        return Err(Error::value(format!(
            "cannot allocate {nbytes} bytes on opencl:{device_id} ({}): its largest buffer is \
             {} bytes (CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
            dev.name, dev.max_alloc
        )));
    }
    let mut rc: ClInt = 0;
    // SAFETY: a valid context; no host pointer.
    let mem = unsafe {
        (p.cl.create_buffer)(
            dev.context,
            CL_MEM_READ_WRITE,
            nbytes.max(1),
            std::ptr::null_mut(),
            &mut rc,
        )
    };
    if rc != CL_SUCCESS || mem.is_null() {
        return Err(cl_error(rc, &format!("clCreateBuffer ({nbytes} bytes)")));
    }
    Ok(LIVE.register(
        BufferDescriptor { buffer: mem },
        Buffer {
            mem,
            device_id,
            nbytes,
        },
    ))
}

/// Releases a descriptor from [`alloc`] and its buffer. A pointer that is not a live descriptor
/// is refused and left alone.
///
/// # Safety
/// Nothing uses the buffer afterwards (kernels queued on it still run: OpenCL keeps a released
/// buffer until they finish).
pub unsafe fn free(desc: *mut BufferDescriptor) -> Result<()> {
    // SAFETY: per the contract.
    let b = unsafe { LIVE.unregister(desc)? };
    let cl = platform()?.cl;
    // SAFETY: the buffer was created by `alloc` and released once, here.
    let rc = unsafe { (cl.release_mem_object)(b.mem) };
    if rc != CL_SUCCESS {
        return Err(cl_error(rc, "clReleaseMemObject"));
    }
    Ok(())
}

impl Recorded for Buffer {
    fn device_id(&self) -> i32 {
        self.device_id
    }

    fn nbytes(&self) -> usize {
        self.nbytes
    }
}

/// What `desc` is, or an error saying it is not a live descriptor.
pub fn lookup(desc: *const std::ffi::c_void, what: &str) -> Result<Buffer> {
    LIVE.lookup(desc, what)
}

/// How many OpenCL buffers tvmrt holds now (tensors, storage, workspaces): what a leak check
/// compares before and after.
pub fn live_count() -> usize {
    LIVE.len()
}
