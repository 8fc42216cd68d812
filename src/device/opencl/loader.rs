//! The OpenCL entry points tvmrt uses, opened at run time from the ICD loader
//! (`libOpenCL.so.1`, or the file `TVMRT_OPENCL_LIBRARY` names): no link-time dependency, and a
//! machine without OpenCL gets an error saying so when it first asks for an OpenCL device.
//!
//! 23 functions of OpenCL 1.2, the version TVM's runtime targets. They are typed here from
//! Khronos' `CL/cl.h`; handles are opaque pointers.

use std::ffi::{c_char, c_void};

use once_cell::sync::OnceCell;

use crate::error::{Error, Result};

use super::error::ClInt;

pub type ClUint = u32;
pub type ClBitfield = u64;
pub type Handle = *mut c_void;

/// The OpenCL functions, resolved once.
pub struct Cl {
    pub get_platform_ids: unsafe extern "C" fn(ClUint, *mut Handle, *mut ClUint) -> ClInt,
    pub get_platform_info:
        unsafe extern "C" fn(Handle, ClUint, usize, *mut c_void, *mut usize) -> ClInt,
    pub get_device_ids:
        unsafe extern "C" fn(Handle, ClBitfield, ClUint, *mut Handle, *mut ClUint) -> ClInt,
    pub get_device_info:
        unsafe extern "C" fn(Handle, ClUint, usize, *mut c_void, *mut usize) -> ClInt,
    pub create_context: unsafe extern "C" fn(
        *const isize,
        ClUint,
        *const Handle,
        Option<unsafe extern "C" fn(*const c_char, *const c_void, usize, *mut c_void)>,
        *mut c_void,
        *mut ClInt,
    ) -> Handle,
    pub release_context: unsafe extern "C" fn(Handle) -> ClInt,
    pub create_command_queue:
        unsafe extern "C" fn(Handle, Handle, ClBitfield, *mut ClInt) -> Handle,
    pub release_command_queue: unsafe extern "C" fn(Handle) -> ClInt,
    pub create_buffer:
        unsafe extern "C" fn(Handle, ClBitfield, usize, *mut c_void, *mut ClInt) -> Handle,
    pub release_mem_object: unsafe extern "C" fn(Handle) -> ClInt,
    pub enqueue_read_buffer: unsafe extern "C" fn(
        Handle,
        Handle,
        ClUint,
        usize,
        usize,
        *mut c_void,
        ClUint,
        *const Handle,
        *mut Handle,
    ) -> ClInt,
    pub enqueue_write_buffer: unsafe extern "C" fn(
        Handle,
        Handle,
        ClUint,
        usize,
        usize,
        *const c_void,
        ClUint,
        *const Handle,
        *mut Handle,
    ) -> ClInt,
    pub enqueue_copy_buffer: unsafe extern "C" fn(
        Handle,
        Handle,
        Handle,
        usize,
        usize,
        usize,
        ClUint,
        *const Handle,
        *mut Handle,
    ) -> ClInt,
    pub finish: unsafe extern "C" fn(Handle) -> ClInt,
    pub flush: unsafe extern "C" fn(Handle) -> ClInt,
    pub create_program_with_source: unsafe extern "C" fn(
        Handle,
        ClUint,
        *const *const c_char,
        *const usize,
        *mut ClInt,
    ) -> Handle,
    pub build_program: unsafe extern "C" fn(
        Handle,
        ClUint,
        *const Handle,
        *const c_char,
        Option<unsafe extern "C" fn(Handle, *mut c_void)>,
        *mut c_void,
    ) -> ClInt,
    pub get_program_build_info:
        unsafe extern "C" fn(Handle, Handle, ClUint, usize, *mut c_void, *mut usize) -> ClInt,
    pub release_program: unsafe extern "C" fn(Handle) -> ClInt,
    pub create_kernel: unsafe extern "C" fn(Handle, *const c_char, *mut ClInt) -> Handle,
    pub release_kernel: unsafe extern "C" fn(Handle) -> ClInt,
    pub set_kernel_arg: unsafe extern "C" fn(Handle, ClUint, usize, *const c_void) -> ClInt,
    pub enqueue_nd_range_kernel: unsafe extern "C" fn(
        Handle,
        Handle,
        ClUint,
        *const usize,
        *const usize,
        *const usize,
        ClUint,
        *const Handle,
        *mut Handle,
    ) -> ClInt,
    /// Keeps the library mapped while the pointers above are in use (for the process).
    _library: libloading::Library,
}

/// The ICD loader's file name (Debian's `ocl-icd-libopencl1`, and every other vendor's).
pub const DEFAULT_LIBRARY: &str = "libOpenCL.so.1";

/// The environment variable that names another OpenCL library to open.
pub const LIBRARY_ENV: &str = "TVMRT_OPENCL_LIBRARY";

static CL: OnceCell<std::result::Result<Cl, String>> = OnceCell::new();

/// The OpenCL functions, opening the library on first use; the same error every time when it
/// cannot be opened.
pub fn cl() -> Result<&'static Cl> {
    CL.get_or_init(open)
        .as_ref()
        .map_err(|m| Error::runtime(m.clone()))
}

fn open() -> std::result::Result<Cl, String> {
    let name =
        crate::device::library_override(LIBRARY_ENV).unwrap_or_else(|| DEFAULT_LIBRARY.to_string());
    // SAFETY: opening the ICD loader runs its initializers, which is what using OpenCL means;
    // the library stays loaded for the life of the process (kept in the static `CL`).
    let library = unsafe { libloading::Library::new(&name) }.map_err(|e| {
        format!(
            "OpenCL is not available: cannot open `{name}` ({}); install an OpenCL ICD loader \
             and a driver (Debian: ocl-icd-libopencl1 and, for the CPU, pocl-opencl-icd), or set \
             {LIBRARY_ENV} to the library's path",
            crate::device::library_error(&e)
        )
    })?;
    let lacks = |sym: &str, e: String| {
        format!("OpenCL library `{name}` lacks `{sym}` ({e}): tvmrt needs OpenCL 1.2")
    };
    macro_rules! sym {
        ($name:literal) => {{
            let p = crate::device::library_symbol(&library, concat!($name, "\0"), &lacks)?;
            // SAFETY: the symbol is the OpenCL 1.2 function of that name, whose C signature
            // (Khronos `CL/cl.h`) the field's type spells out.
            unsafe { crate::device::function_from(p) }
        }};
    }
    Ok(Cl {
        get_platform_ids: sym!("clGetPlatformIDs"),
        get_platform_info: sym!("clGetPlatformInfo"),
        get_device_ids: sym!("clGetDeviceIDs"),
        get_device_info: sym!("clGetDeviceInfo"),
        create_context: sym!("clCreateContext"),
        release_context: sym!("clReleaseContext"),
        create_command_queue: sym!("clCreateCommandQueue"),
        release_command_queue: sym!("clReleaseCommandQueue"),
        create_buffer: sym!("clCreateBuffer"),
        release_mem_object: sym!("clReleaseMemObject"),
        enqueue_read_buffer: sym!("clEnqueueReadBuffer"),
        enqueue_write_buffer: sym!("clEnqueueWriteBuffer"),
        enqueue_copy_buffer: sym!("clEnqueueCopyBuffer"),
        finish: sym!("clFinish"),
        flush: sym!("clFlush"),
        create_program_with_source: sym!("clCreateProgramWithSource"),
        build_program: sym!("clBuildProgram"),
        get_program_build_info: sym!("clGetProgramBuildInfo"),
        release_program: sym!("clReleaseProgram"),
        create_kernel: sym!("clCreateKernel"),
        release_kernel: sym!("clReleaseKernel"),
        set_kernel_arg: sym!("clSetKernelArg"),
        enqueue_nd_range_kernel: sym!("clEnqueueNDRangeKernel"),
        _library: library,
    })
}
