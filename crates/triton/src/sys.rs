//! The part of Triton's C API the backend calls, declared from `tritonbackend.h` (backend API
//! 1.19) and `tritonserver.h` (server API 1.34) of triton-inference-server/core r24.10. The
//! functions stay undefined in `libtriton_tvmrt.so`: Triton's core library defines them and
//! resolves them when it opens the backend.

#![allow(non_camel_case_types)]

use std::ffi::c_char;

/// The backend API version this backend was written against.
pub const BACKEND_API_MAJOR: u32 = 1;
/// See [`BACKEND_API_MAJOR`]: the server must offer this minor version or a later one.
pub const BACKEND_API_MINOR: u32 = 19;

macro_rules! opaque {
    ($($name:ident),*) => {$(
        /// An object owned by Triton, only ever handled through a pointer.
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}
opaque!(
    TRITONSERVER_Error,
    TRITONSERVER_Message,
    TRITONBACKEND_Backend,
    TRITONBACKEND_Model,
    TRITONBACKEND_ModelInstance,
    TRITONBACKEND_Request,
    TRITONBACKEND_Input,
    TRITONBACKEND_Response,
    TRITONBACKEND_Output
);

/// `TRITONSERVER_ErrorCode`.
pub type ErrorCode = u32;
pub const ERROR_INTERNAL: ErrorCode = 1;
pub const ERROR_NOT_FOUND: ErrorCode = 2;
pub const ERROR_INVALID_ARG: ErrorCode = 3;
pub const ERROR_UNSUPPORTED: ErrorCode = 5;

/// `TRITONSERVER_DataType`: its values are `tvmrt_models::DataType`'s (`DataType::code`).
pub type DataType = u32;

/// `TRITONSERVER_MemoryType`.
pub type MemoryType = u32;
pub const MEMORY_CPU: MemoryType = 0;
pub const MEMORY_CPU_PINNED: MemoryType = 1;
pub const MEMORY_GPU: MemoryType = 2;

/// `TRITONSERVER_InstanceGroupKind`.
pub type InstanceGroupKind = u32;
pub const INSTANCEGROUPKIND_GPU: InstanceGroupKind = 2;

/// `TRITONSERVER_LogLevel`.
pub type LogLevel = u32;
pub const LOG_INFO: LogLevel = 0;
pub const LOG_WARN: LogLevel = 1;
pub const LOG_ERROR: LogLevel = 2;

/// `TRITONBACKEND_ArtifactType`.
pub type ArtifactType = u32;

/// `TRITONSERVER_REQUEST_RELEASE_ALL`.
pub const REQUEST_RELEASE_ALL: u32 = 1;
/// `TRITONSERVER_RESPONSE_COMPLETE_FINAL`.
pub const RESPONSE_COMPLETE_FINAL: u32 = 1;

/// An error returned by a Triton function: null on success, else owned by the caller.
pub type Status = *mut TRITONSERVER_Error;

extern "C" {
    pub fn TRITONSERVER_ErrorNew(code: ErrorCode, msg: *const c_char) -> Status;
    pub fn TRITONSERVER_ErrorDelete(error: Status);
    pub fn TRITONSERVER_ErrorMessage(error: Status) -> *const c_char;

    pub fn TRITONSERVER_MessageNewFromSerializedJson(
        message: *mut *mut TRITONSERVER_Message,
        base: *const c_char,
        byte_size: usize,
    ) -> Status;
    pub fn TRITONSERVER_MessageDelete(message: *mut TRITONSERVER_Message) -> Status;
    pub fn TRITONSERVER_MessageSerializeToJson(
        message: *mut TRITONSERVER_Message,
        base: *mut *const c_char,
        byte_size: *mut usize,
    ) -> Status;

    pub fn TRITONSERVER_LogMessage(
        level: LogLevel,
        filename: *const c_char,
        line: i32,
        msg: *const c_char,
    ) -> Status;

    pub fn TRITONBACKEND_ApiVersion(major: *mut u32, minor: *mut u32) -> Status;

    pub fn TRITONBACKEND_ModelName(
        model: *mut TRITONBACKEND_Model,
        name: *mut *const c_char,
    ) -> Status;
    pub fn TRITONBACKEND_ModelVersion(model: *mut TRITONBACKEND_Model, version: *mut u64)
        -> Status;
    pub fn TRITONBACKEND_ModelRepository(
        model: *mut TRITONBACKEND_Model,
        artifact_type: *mut ArtifactType,
        location: *mut *const c_char,
    ) -> Status;
    pub fn TRITONBACKEND_ModelConfig(
        model: *mut TRITONBACKEND_Model,
        config_version: u32,
        config: *mut *mut TRITONSERVER_Message,
    ) -> Status;
    pub fn TRITONBACKEND_ModelAutoCompleteConfig(
        model: *mut TRITONBACKEND_Model,
        auto_complete: *mut bool,
    ) -> Status;
    pub fn TRITONBACKEND_ModelSetConfig(
        model: *mut TRITONBACKEND_Model,
        config_version: u32,
        config: *mut TRITONSERVER_Message,
    ) -> Status;
    pub fn TRITONBACKEND_ModelState(
        model: *mut TRITONBACKEND_Model,
        state: *mut *mut std::ffi::c_void,
    ) -> Status;
    pub fn TRITONBACKEND_ModelSetState(
        model: *mut TRITONBACKEND_Model,
        state: *mut std::ffi::c_void,
    ) -> Status;

    pub fn TRITONBACKEND_ModelInstanceName(
        instance: *mut TRITONBACKEND_ModelInstance,
        name: *mut *const c_char,
    ) -> Status;
    pub fn TRITONBACKEND_ModelInstanceKind(
        instance: *mut TRITONBACKEND_ModelInstance,
        kind: *mut InstanceGroupKind,
    ) -> Status;
    pub fn TRITONBACKEND_ModelInstanceDeviceId(
        instance: *mut TRITONBACKEND_ModelInstance,
        device_id: *mut i32,
    ) -> Status;
    pub fn TRITONBACKEND_ModelInstanceModel(
        instance: *mut TRITONBACKEND_ModelInstance,
        model: *mut *mut TRITONBACKEND_Model,
    ) -> Status;
    pub fn TRITONBACKEND_ModelInstanceState(
        instance: *mut TRITONBACKEND_ModelInstance,
        state: *mut *mut std::ffi::c_void,
    ) -> Status;
    pub fn TRITONBACKEND_ModelInstanceSetState(
        instance: *mut TRITONBACKEND_ModelInstance,
        state: *mut std::ffi::c_void,
    ) -> Status;
    pub fn TRITONBACKEND_ModelInstanceReportStatistics(
        instance: *mut TRITONBACKEND_ModelInstance,
        request: *mut TRITONBACKEND_Request,
        success: bool,
        exec_start_ns: u64,
        compute_start_ns: u64,
        compute_end_ns: u64,
        exec_end_ns: u64,
    ) -> Status;
    pub fn TRITONBACKEND_ModelInstanceReportBatchStatistics(
        instance: *mut TRITONBACKEND_ModelInstance,
        batch_size: u64,
        exec_start_ns: u64,
        compute_start_ns: u64,
        compute_end_ns: u64,
        exec_end_ns: u64,
    ) -> Status;

    pub fn TRITONBACKEND_RequestInput(
        request: *mut TRITONBACKEND_Request,
        name: *const c_char,
        input: *mut *mut TRITONBACKEND_Input,
    ) -> Status;
    pub fn TRITONBACKEND_RequestOutputCount(
        request: *mut TRITONBACKEND_Request,
        count: *mut u32,
    ) -> Status;
    pub fn TRITONBACKEND_RequestOutputName(
        request: *mut TRITONBACKEND_Request,
        index: u32,
        name: *mut *const c_char,
    ) -> Status;
    pub fn TRITONBACKEND_RequestRelease(
        request: *mut TRITONBACKEND_Request,
        release_flags: u32,
    ) -> Status;

    pub fn TRITONBACKEND_InputProperties(
        input: *mut TRITONBACKEND_Input,
        name: *mut *const c_char,
        datatype: *mut DataType,
        shape: *mut *const i64,
        dims_count: *mut u32,
        byte_size: *mut u64,
        buffer_count: *mut u32,
    ) -> Status;
    pub fn TRITONBACKEND_InputBuffer(
        input: *mut TRITONBACKEND_Input,
        index: u32,
        buffer: *mut *const std::ffi::c_void,
        buffer_byte_size: *mut u64,
        memory_type: *mut MemoryType,
        memory_type_id: *mut i64,
    ) -> Status;

    pub fn TRITONBACKEND_ResponseNew(
        response: *mut *mut TRITONBACKEND_Response,
        request: *mut TRITONBACKEND_Request,
    ) -> Status;
    pub fn TRITONBACKEND_ResponseOutput(
        response: *mut TRITONBACKEND_Response,
        output: *mut *mut TRITONBACKEND_Output,
        name: *const c_char,
        datatype: DataType,
        shape: *const i64,
        dims_count: u32,
    ) -> Status;
    pub fn TRITONBACKEND_OutputBuffer(
        output: *mut TRITONBACKEND_Output,
        buffer: *mut *mut std::ffi::c_void,
        buffer_byte_size: u64,
        memory_type: *mut MemoryType,
        memory_type_id: *mut i64,
    ) -> Status;
    pub fn TRITONBACKEND_ResponseSend(
        response: *mut TRITONBACKEND_Response,
        send_flags: u32,
        error: Status,
    ) -> Status;
}
