//! Safe wrappers over the Triton calls the backend makes: errors both ways, logging, the
//! configuration message, and a request's inputs and responses. Every `unsafe` call into
//! Triton is here or in `sys.rs`'s declarations.

use std::borrow::Cow;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;

use serde_json::Value;
use tvmrt_models::runner::one_line;
use tvmrt_models::{DataType, Input, OutputData, Pending};

use crate::sys::{self, Status};

/// An error the backend hands back to Triton: a code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendError {
    pub code: sys::ErrorCode,
    pub message: String,
}

/// A backend result.
pub type Result<T> = std::result::Result<T, BackendError>;

impl BackendError {
    /// `TRITONSERVER_ERROR_INVALID_ARG`: the request or the model is at fault.
    pub fn invalid(message: impl Into<String>) -> BackendError {
        BackendError {
            code: sys::ERROR_INVALID_ARG,
            message: message.into(),
        }
    }

    /// `TRITONSERVER_ERROR_INTERNAL`.
    pub fn internal(message: impl Into<String>) -> BackendError {
        BackendError {
            code: sys::ERROR_INTERNAL,
            message: message.into(),
        }
    }

    /// A new Triton error object, which the receiver owns.
    pub fn into_raw(self) -> Status {
        let msg = c_string(&self.message);
        // SAFETY: ErrorNew copies the NUL-terminated message.
        unsafe { sys::TRITONSERVER_ErrorNew(self.code, msg.as_ptr()) }
    }
}

impl From<tvmrt::Error> for BackendError {
    fn from(e: tvmrt::Error) -> BackendError {
        BackendError::invalid(one_line(&e.message))
    }
}

/// A C string of `text` (an interior NUL, which Triton cannot carry, cut there).
pub fn c_string(text: &str) -> CString {
    let cut = text.split('\0').next().unwrap_or("");
    CString::new(cut).unwrap_or_default()
}

/// Takes a Triton call's result: `Ok` for null, else its message (the error freed).
pub fn check(status: Status, what: &str) -> Result<()> {
    if status.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null status is an error object this call now owns; its message lives
    // until the delete below.
    let message = unsafe {
        let m = text(sys::TRITONSERVER_ErrorMessage(status));
        sys::TRITONSERVER_ErrorDelete(status);
        m
    };
    Err(BackendError::internal(format!("{what}: {message}")))
}

/// The text of a C string Triton owns (empty for null).
///
/// # Safety
/// `p` is null or a NUL-terminated string that outlives the call.
pub unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    CStr::from_ptr(p).to_string_lossy().into_owned()
}

/// Writes to Triton's log.
pub fn log(level: sys::LogLevel, message: &str) {
    let msg = c_string(message);
    let file = c_string(file!());
    // SAFETY: both strings are NUL-terminated and live through the call; a failure to log is
    // not worth more than dropping the line.
    let status =
        unsafe { sys::TRITONSERVER_LogMessage(level, file.as_ptr(), line!() as i32, msg.as_ptr()) };
    let _ = check(status, "logging");
}

/// A Triton message (a model configuration) as JSON.
///
/// # Safety
/// `message` is a live message; the caller keeps ownership.
pub unsafe fn message_json(message: *mut sys::TRITONSERVER_Message) -> Result<Value> {
    let mut base: *const c_char = ptr::null();
    let mut size = 0usize;
    check(
        sys::TRITONSERVER_MessageSerializeToJson(message, &mut base, &mut size),
        "reading the model configuration",
    )?;
    let bytes = if base.is_null() {
        &[][..]
    } else {
        std::slice::from_raw_parts(base.cast::<u8>(), size)
    };
    serde_json::from_slice(bytes)
        .map_err(|e| BackendError::internal(format!("the model configuration is not JSON: {e}")))
}

/// A new Triton message holding `value`; the caller owns it.
pub fn json_message(value: &Value) -> Result<*mut sys::TRITONSERVER_Message> {
    let text = value.to_string();
    let mut msg = ptr::null_mut();
    // SAFETY: the JSON text is read during the call only.
    check(
        unsafe {
            sys::TRITONSERVER_MessageNewFromSerializedJson(
                &mut msg,
                text.as_ptr().cast(),
                text.len(),
            )
        },
        "making the completed configuration",
    )?;
    Ok(msg)
}

/// Deletes a message this backend created or was given to own.
pub fn delete_message(message: *mut sys::TRITONSERVER_Message) {
    // SAFETY: the caller owns `message` and does not use it again.
    let _ = check(
        unsafe { sys::TRITONSERVER_MessageDelete(message) },
        "deleting a message",
    );
}

/// Copies `n` bytes between the host and memory of CUDA device `id` (one side each), through
/// tvmrt's CUDA back end; the copy has finished when this returns.
///
/// # Safety
/// `from` holds `n` readable bytes and `to` `n` writable ones, on the sides `to_gpu` says.
unsafe fn gpu_copy(
    from: *const c_void,
    to: *mut c_void,
    n: usize,
    id: i64,
    to_gpu: bool,
) -> std::result::Result<(), String> {
    let gpu = tvmrt::device::parse_device(&format!("cuda:{id}")).map_err(|e| e.message.clone())?;
    let api = tvmrt::device::api_of(gpu).map_err(|e| e.message.clone())?;
    let host = tvmrt::tensor::layout::cpu();
    let side = |data: *mut c_void, device| tvmrt::device::api::DataRef {
        data,
        offset: 0,
        device,
    };
    let (src, dst) = if to_gpu {
        (side(from.cast_mut(), host), side(to, gpu))
    } else {
        (side(from.cast_mut(), gpu), side(to, host))
    };
    // SAFETY: per the contract; copies to or from the host are synchronous.
    unsafe { api.copy_bytes(src, dst, n, tvmrt::dtype::dtypes::UINT8, ptr::null_mut()) }
        .map_err(|e| format!("copying {n} bytes with cuda:{id}: {}", e.message))
}

/// A request Triton handed to `ModelInstanceExecute`, until it is released.
#[derive(Clone, Copy)]
pub struct Request(pub *mut sys::TRITONBACKEND_Request);

impl Request {
    /// The input named `name`, or why it cannot be read.
    pub fn input(&self, name: &str) -> std::result::Result<Input<'_>, String> {
        let cname = c_string(name);
        let mut input = ptr::null_mut();
        // SAFETY: the request is live (not released) for the lifetime of `self`'s borrow; the
        // input, its shape and its buffers belong to it.
        unsafe {
            if check(
                sys::TRITONBACKEND_RequestInput(self.0, cname.as_ptr(), &mut input),
                "",
            )
            .is_err()
                || input.is_null()
            {
                return Err(format!("the request has no input `{name}`"));
            }
            let mut dtype = 0;
            let mut shape: *const i64 = ptr::null();
            let mut ndim = 0u32;
            let mut byte_size = 0u64;
            let mut count = 0u32;
            check(
                sys::TRITONBACKEND_InputProperties(
                    input,
                    ptr::null_mut(),
                    &mut dtype,
                    &mut shape,
                    &mut ndim,
                    &mut byte_size,
                    &mut count,
                ),
                "reading an input",
            )
            .map_err(|e| e.message)?;
            let shape = if shape.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(shape, ndim as usize).to_vec()
            };
            let mut buffers = Vec::with_capacity(count as usize);
            for i in 0..count {
                let mut data: *const std::ffi::c_void = ptr::null();
                let mut size = 0u64;
                let mut mem = sys::MEMORY_CPU;
                let mut mem_id = 0i64;
                check(
                    sys::TRITONBACKEND_InputBuffer(
                        input,
                        i,
                        &mut data,
                        &mut size,
                        &mut mem,
                        &mut mem_id,
                    ),
                    "reading an input buffer",
                )
                .map_err(|e| e.message)?;
                if size == 0 || data.is_null() {
                    continue;
                }
                match mem {
                    sys::MEMORY_CPU | sys::MEMORY_CPU_PINNED => buffers.push(Cow::Borrowed(
                        std::slice::from_raw_parts(data.cast::<u8>(), size as usize),
                    )),
                    sys::MEMORY_GPU => {
                        let mut host = vec![0u8; size as usize];
                        gpu_copy(data, host.as_mut_ptr().cast(), host.len(), mem_id, false)
                            .map_err(|e| format!("input `{name}` in GPU memory: {e}"))?;
                        buffers.push(Cow::Owned(host));
                    }
                    _ => return Err(format!("input `{name}` is in memory of type {mem}")),
                }
            }
            Ok(Input {
                dtype: DataType::from_code(dtype),
                shape,
                byte_size,
                buffers,
            })
        }
    }

    /// The outputs the request asks for (empty: all of them).
    pub fn requested_outputs(&self) -> std::result::Result<Vec<String>, String> {
        let mut n = 0u32;
        // SAFETY: the request is live; each name belongs to it and is copied at once.
        unsafe {
            check(
                sys::TRITONBACKEND_RequestOutputCount(self.0, &mut n),
                "reading the requested outputs",
            )
            .map_err(|e| e.message)?;
            (0..n)
                .map(|i| {
                    let mut name = ptr::null();
                    check(
                        sys::TRITONBACKEND_RequestOutputName(self.0, i, &mut name),
                        "reading a requested output",
                    )
                    .map_err(|e| e.message)?;
                    Ok(text(name))
                })
                .collect()
        }
    }

    /// Sends the request's one response: the outputs, or the error.
    pub fn respond(&self, outcome: std::result::Result<Vec<OutputData<'_>>, String>) {
        let mut response = ptr::null_mut();
        // SAFETY: the request is live; the response is handed to Triton by ResponseSend,
        // and every pointer handed over is valid for its call.
        unsafe {
            if let Err(e) = check(
                sys::TRITONBACKEND_ResponseNew(&mut response, self.0),
                "creating a response",
            ) {
                log(sys::LOG_ERROR, &e.message);
                return;
            }
            let error = match outcome.and_then(|outs| fill(response, &outs)) {
                Ok(()) => ptr::null_mut(),
                Err(m) => BackendError::invalid(m).into_raw(),
            };
            let sent = check(
                sys::TRITONBACKEND_ResponseSend(response, sys::RESPONSE_COMPLETE_FINAL, error),
                "sending a response",
            );
            if !error.is_null() {
                sys::TRITONSERVER_ErrorDelete(error);
            }
            // ResponseSend takes the response even when it fails: nothing to delete.
            if let Err(e) = sent {
                log(sys::LOG_ERROR, &e.message);
            }
        }
    }

    /// Hands the request back to Triton; it must not be used afterwards.
    pub fn release(self) {
        // SAFETY: called once per request, after its response was sent.
        let status = unsafe { sys::TRITONBACKEND_RequestRelease(self.0, sys::REQUEST_RELEASE_ALL) };
        if let Err(e) = check(status, "releasing a request") {
            log(sys::LOG_ERROR, &e.message);
        }
    }
}

/// Adds `outputs` to `response`.
///
/// # Safety
/// `response` is a live response not yet sent.
unsafe fn fill(
    response: *mut sys::TRITONBACKEND_Response,
    outputs: &[OutputData<'_>],
) -> std::result::Result<(), String> {
    for o in outputs {
        let name = c_string(o.name);
        let mut output = ptr::null_mut();
        check(
            sys::TRITONBACKEND_ResponseOutput(
                response,
                &mut output,
                name.as_ptr(),
                o.dtype.code(),
                o.shape.as_ptr(),
                o.shape.len() as u32,
            ),
            "adding an output",
        )
        .map_err(|e| e.message)?;
        let mut buffer = ptr::null_mut();
        let mut mem = sys::MEMORY_CPU;
        let mut mem_id = 0i64;
        check(
            sys::TRITONBACKEND_OutputBuffer(
                output,
                &mut buffer,
                o.bytes.len() as u64,
                &mut mem,
                &mut mem_id,
            ),
            "allocating an output",
        )
        .map_err(|e| e.message)?;
        if o.bytes.is_empty() {
            continue;
        }
        match mem {
            sys::MEMORY_CPU | sys::MEMORY_CPU_PINNED => {
                ptr::copy_nonoverlapping(o.bytes.as_ptr(), buffer.cast::<u8>(), o.bytes.len())
            }
            // A client's CUDA shared memory region: the output goes there from the host.
            sys::MEMORY_GPU => {
                gpu_copy(o.bytes.as_ptr().cast(), buffer, o.bytes.len(), mem_id, true)
                    .map_err(|e| format!("output `{}` in GPU memory: {e}", o.name))?
            }
            _ => return Err(format!("output `{}` is in memory of type {mem}", o.name)),
        }
    }
    Ok(())
}

impl Pending for Request {
    fn input(&self, name: &str) -> std::result::Result<Input<'_>, String> {
        Request::input(self, name)
    }
    fn requested_outputs(&self) -> std::result::Result<Vec<String>, String> {
        Request::requested_outputs(self)
    }
    fn respond(&self, outcome: std::result::Result<Vec<OutputData<'_>>, String>) {
        Request::respond(self, outcome)
    }
    fn release(&self) {
        Request::release(*self)
    }
}
