//! OpenCL status codes as TVM errors: every failing call is reported with the API's code name
//! (`CL_OUT_OF_RESOURCES`), its number and the call that returned it, as TVM's `OPENCL_CALL`.

use crate::error::{Error, Result};

/// `cl_int`.
pub type ClInt = i32;

/// `CL_SUCCESS`.
pub const CL_SUCCESS: ClInt = 0;
/// `CL_BUILD_PROGRAM_FAILURE`.
pub const CL_BUILD_PROGRAM_FAILURE: ClInt = -11;
/// `CL_DEVICE_NOT_FOUND`.
pub const CL_DEVICE_NOT_FOUND: ClInt = -1;
/// `CL_PLATFORM_NOT_FOUND_KHR` (the ICD loader finding no driver).
pub const CL_PLATFORM_NOT_FOUND_KHR: ClInt = -1001;

/// The OpenCL name of a status code (`cl.h`, `cl_ext.h`).
pub fn code_name(code: ClInt) -> &'static str {
    match code {
        0 => "CL_SUCCESS",
        -1 => "CL_DEVICE_NOT_FOUND",
        -2 => "CL_DEVICE_NOT_AVAILABLE",
        -3 => "CL_COMPILER_NOT_AVAILABLE",
        -4 => "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        -5 => "CL_OUT_OF_RESOURCES",
        -6 => "CL_OUT_OF_HOST_MEMORY",
        -7 => "CL_PROFILING_INFO_NOT_AVAILABLE",
        -8 => "CL_MEM_COPY_OVERLAP",
        -9 => "CL_IMAGE_FORMAT_MISMATCH",
        -10 => "CL_IMAGE_FORMAT_NOT_SUPPORTED",
        -11 => "CL_BUILD_PROGRAM_FAILURE",
        -12 => "CL_MAP_FAILURE",
        -13 => "CL_MISALIGNED_SUB_BUFFER_OFFSET",
        -14 => "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
        -15 => "CL_COMPILE_PROGRAM_FAILURE",
        -16 => "CL_LINKER_NOT_AVAILABLE",
        -17 => "CL_LINK_PROGRAM_FAILURE",
        -18 => "CL_DEVICE_PARTITION_FAILED",
        -19 => "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
        -30 => "CL_INVALID_VALUE",
        -31 => "CL_INVALID_DEVICE_TYPE",
        -32 => "CL_INVALID_PLATFORM",
        -33 => "CL_INVALID_DEVICE",
        -34 => "CL_INVALID_CONTEXT",
        -35 => "CL_INVALID_QUEUE_PROPERTIES",
        -36 => "CL_INVALID_COMMAND_QUEUE",
        -37 => "CL_INVALID_HOST_PTR",
        -38 => "CL_INVALID_MEM_OBJECT",
        -39 => "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
        -40 => "CL_INVALID_IMAGE_SIZE",
        -41 => "CL_INVALID_SAMPLER",
        -42 => "CL_INVALID_BINARY",
        -43 => "CL_INVALID_BUILD_OPTIONS",
        -44 => "CL_INVALID_PROGRAM",
        -45 => "CL_INVALID_PROGRAM_EXECUTABLE",
        -46 => "CL_INVALID_KERNEL_NAME",
        -47 => "CL_INVALID_KERNEL_DEFINITION",
        -48 => "CL_INVALID_KERNEL",
        -49 => "CL_INVALID_ARG_INDEX",
        -50 => "CL_INVALID_ARG_VALUE",
        -51 => "CL_INVALID_ARG_SIZE",
        -52 => "CL_INVALID_KERNEL_ARGS",
        -53 => "CL_INVALID_WORK_DIMENSION",
        -54 => "CL_INVALID_WORK_GROUP_SIZE",
        -55 => "CL_INVALID_WORK_ITEM_SIZE",
        -56 => "CL_INVALID_GLOBAL_OFFSET",
        -57 => "CL_INVALID_EVENT_WAIT_LIST",
        -58 => "CL_INVALID_EVENT",
        -59 => "CL_INVALID_OPERATION",
        -60 => "CL_INVALID_GL_OBJECT",
        -61 => "CL_INVALID_BUFFER_SIZE",
        -62 => "CL_INVALID_MIP_LEVEL",
        -63 => "CL_INVALID_GLOBAL_WORK_SIZE",
        -64 => "CL_INVALID_PROPERTY",
        -65 => "CL_INVALID_IMAGE_DESCRIPTOR",
        -66 => "CL_INVALID_COMPILER_OPTIONS",
        -67 => "CL_INVALID_LINKER_OPTIONS",
        -68 => "CL_INVALID_DEVICE_PARTITION_COUNT",
        -69 => "CL_INVALID_PIPE_SIZE",
        -70 => "CL_INVALID_DEVICE_QUEUE",
        -71 => "CL_INVALID_SPEC_ID",
        -72 => "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        _ => "an unknown OpenCL error",
    }
}

/// The error of a failed call: `OpenCL error CL_INVALID_ARG_SIZE (-51) in clSetKernelArg`.
/// TVM raises these as `InternalError` (`OPENCL_CALL`); so does tvmrt.
pub fn cl_error(code: ClInt, call: &str) -> Error {
    Error::new(
        "InternalError",
        format!("OpenCL error {} ({code}) in {call}", code_name(code)),
    )
}

/// `Ok` for `CL_SUCCESS`, else the call's error.
pub fn check(code: ClInt, call: &str) -> Result<()> {
    if code == CL_SUCCESS {
        Ok(())
    } else {
        Err(cl_error(code, call))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_code_and_the_call() {
        assert!(check(0, "clFinish").is_ok());
        let e = check(-51, "clSetKernelArg").unwrap_err();
        assert_eq!(e.kind, "InternalError");
        assert_eq!(
            e.message,
            "OpenCL error CL_INVALID_ARG_SIZE (-51) in clSetKernelArg"
        );
        assert_eq!(code_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
        assert_eq!(code_name(-999), "an unknown OpenCL error");
    }
}
