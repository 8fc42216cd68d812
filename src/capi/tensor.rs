//! Tensors and devices through both doors: the classic `TVMArray*`, `TVMDevice*` and stream
//! calls (TVM 0.19 `c_runtime_api.h`), and tvm-ffi's `TVMFFITensorCreateUnsafeView` and
//! environment calls (`tvm/ffi/extra/c_env_api.h`).
//!
//! A classic `TVMArrayHandle` is the `DLTensor*` inside a tensor object (object + 24), as in
//! TVM. The calls that own or share the array (`TVMArrayFree`, `TVMArrayToDLPack`) need such a
//! handle; the copy calls, like TVM's, accept any `DLTensor*`. Devices go through their back
//! end ([`crate::device`]); a device type with none is refused with a message naming it.
//! Streams are the back end's: the CPU has none (creating one gives null, synchronizing or
//! setting one does nothing), OpenCL has one queue per device (null).

use std::ffi::{c_char, c_int, c_void};

use dlpark::ffi::DLPackManagedTensorAllocator;

use crate::abi::{DLDataType, DLDevice, DLDeviceType, DLTensor};
use crate::capi::boundary::{c_str, non_null, run_or, write_out};
use crate::device;
use crate::dtype::{classic_bool, dtype};
use crate::error::{Error, Result};
use crate::tensor::{copy, env, layout, Tensor};

/// The device `(device_type, device_id)` names, checked to have a back end.
fn device_ids(device_type: c_int, device_id: c_int, what: &str) -> Result<DLDevice> {
    let t = u32::try_from(device_type)
        .map_err(|_| Error::value(format!("{what}: invalid device_type {device_type}")))?;
    let dev = DLDevice {
        device_type: DLDeviceType(t),
        device_id,
    };
    device::api_of(dev).map_err(|e| e.context(what))?;
    Ok(dev)
}

/// The back end of `dev`, with `what` in its error.
fn api_for(dev: DLDevice, what: &str) -> Result<&'static dyn device::DeviceApi> {
    device::api_of(dev).map_err(|e| e.context(what))
}

/// Builds a `DLDataType` from the classic `int` fields, checking their ranges.
fn dtype_from_ints(code: c_int, bits: c_int, lanes: c_int) -> Result<DLDataType> {
    let code = u8::try_from(code)
        .map_err(|_| Error::type_error(format!("unsupported dtype code {code}")))?;
    let bits = u8::try_from(bits)
        .map_err(|_| Error::type_error(format!("unsupported dtype bits {bits}")))?;
    let lanes = u16::try_from(lanes)
        .map_err(|_| Error::type_error(format!("unsupported dtype lanes {lanes}")))?;
    let t = dtype(code, bits, lanes);
    layout::check_dtype(t)?;
    Ok(t)
}

/// Reads a `(pointer, length)` shape argument.
///
/// # Safety
/// `shape` is null or readable for `ndim` values.
unsafe fn shape_arg<'a>(shape: *const i64, ndim: c_int) -> Result<&'a [i64]> {
    let n = layout::check_ndim(ndim as i64)?;
    if n == 0 {
        return Ok(&[]);
    }
    non_null(shape, "shape")?;
    // SAFETY: non-null and readable for `n` values per the contract.
    Ok(unsafe { std::slice::from_raw_parts(shape, n) })
}

/// Allocates a compact array on a device (release with `TVMArrayFree`); on the CPU it is
/// zero-filled and 64-byte aligned.
///
/// # Safety
/// `shape` is null or readable for `ndim` values; `out` is null or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the classic C signature
pub unsafe extern "C" fn TVMArrayAlloc(
    shape: *const i64,
    ndim: c_int,
    dtype_code: c_int,
    dtype_bits: c_int,
    dtype_lanes: c_int,
    device_type: c_int,
    device_id: c_int,
    out: *mut *mut DLTensor,
) -> c_int {
    ffi_try!("TVMArrayAlloc", {
        non_null(out, "out")?;
        let dev = device_ids(device_type, device_id, "TVMArrayAlloc")?;
        let t = dtype_from_ints(dtype_code, dtype_bits, dtype_lanes)?;
        // SAFETY: per the contract.
        let shape = unsafe { shape_arg(shape, ndim)? };
        // TVM 0.19's `uint1` bool takes one byte per element: allocated as `kDLBool`, handed
        // out as a `uint1` view.
        let tensor = Tensor::empty(shape, classic_bool::from_classic(t), dev)?.into_classic()?;
        // SAFETY: checked non-null; writable per the contract.
        unsafe { out.write(tensor.into_handle()) };
        Ok(())
    })
}

/// Releases an array handle (from `TVMArrayAlloc`, `TVMArrayFromDLPack` or a call result).
///
/// # Safety
/// `handle` is null or an array handle whose reference the caller gives up.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayFree(handle: *mut DLTensor) -> c_int {
    ffi_try!("TVMArrayFree", {
        // SAFETY: per the contract; the borrowed reference plus the caller's are both dropped.
        let t = unsafe { Tensor::from_handle_borrowed(handle, "handle")? };
        let obj = t.into_object().into_raw();
        // SAFETY: one reference for the borrow above and one the caller gives up.
        unsafe {
            crate::object::dec_ref_raw(obj);
            crate::object::dec_ref_raw(obj);
        }
        Ok(())
    })
}

/// Checks a classic `DLTensor*` argument and copies its descriptor, with TVM 0.19's `uint1`
/// bool read as `kDLBool` (one byte per element, as TVM sizes it).
///
/// # Safety
/// `t` is null or a valid descriptor.
unsafe fn dl_arg(t: *const DLTensor, what: &str) -> Result<DLTensor> {
    non_null(t, what)?;
    // SAFETY: non-null and valid per the contract.
    let mut copy = unsafe { *t };
    copy.dtype = classic_bool::from_classic(copy.dtype);
    Ok(copy)
}

/// Copies `nbytes` from `data` (compact row-major) into the array; `nbytes` must equal the
/// array's size. Like TVM, any `DLTensor*` is accepted (strided ones too in host memory); the
/// copy has finished when the call returns.
///
/// # Safety
/// `handle` is null or a valid `DLTensor` describing live memory; `data` is null or readable
/// for `nbytes`.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyFromBytes(
    handle: *mut DLTensor,
    data: *mut c_void,
    nbytes: usize,
) -> c_int {
    ffi_try!("TVMArrayCopyFromBytes", {
        // SAFETY: per the contract.
        let t = unsafe { dl_arg(handle, "handle")? };
        // SAFETY: a valid descriptor per the contract.
        let expected = unsafe { layout::dl_bytes(&t, "handle")? };
        if expected != nbytes {
            return Err(Error::value(format!(
                "TVMArrayCopyFromBytes: expected {expected} bytes, got {nbytes}"
            )));
        }
        crate::tensor::check_dltensor_writable(handle, "TVMArrayCopyFromBytes")?;
        non_null(data, "data")?;
        // SAFETY: readable for `nbytes` per the contract.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), nbytes) };
        // SAFETY: a valid descriptor of live memory per the contract.
        unsafe { copy::copy_from_bytes(&t, bytes) }
    })
}

/// Copies the array into `data` (compact row-major); `nbytes` must equal the array's size.
///
/// # Safety
/// `handle` is null or a valid `DLTensor` describing live memory; `data` is null or writable
/// for `nbytes`.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyToBytes(
    handle: *mut DLTensor,
    data: *mut c_void,
    nbytes: usize,
) -> c_int {
    ffi_try!("TVMArrayCopyToBytes", {
        // SAFETY: per the contract.
        let t = unsafe { dl_arg(handle, "handle")? };
        // SAFETY: a valid descriptor per the contract.
        let expected = unsafe { layout::dl_bytes(&t, "handle")? };
        if expected != nbytes {
            return Err(Error::value(format!(
                "TVMArrayCopyToBytes: expected {expected} bytes, got {nbytes}"
            )));
        }
        non_null(data, "data")?;
        // SAFETY: writable for `nbytes` per the contract.
        let out = unsafe { std::slice::from_raw_parts_mut(data.cast::<u8>(), nbytes) };
        // SAFETY: a valid descriptor of live memory per the contract.
        unsafe { copy::copy_to_bytes(&t, out) }
    })
}

/// Copies one array into another: equal byte sizes for compact arrays; strided arrays (views,
/// host memory only) also need equal shapes and element sizes. A copy between two tensors of
/// one device is queued on `stream` (null: the default one); copies to or from the host have
/// finished when the call returns.
///
/// # Safety
/// `from` and `to` are null or valid `DLTensor`s describing live memory; `to` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMArrayCopyFromTo(
    from: *mut DLTensor,
    to: *mut DLTensor,
    stream: *mut c_void,
) -> c_int {
    ffi_try!("TVMArrayCopyFromTo", {
        // SAFETY: per the contract.
        let (src, dst) = unsafe { (dl_arg(from, "from")?, dl_arg(to, "to")?) };
        crate::tensor::check_dltensor_writable(to, "TVMArrayCopyFromTo")?;
        // SAFETY: valid descriptors of live memory per the contract.
        unsafe { copy::copy_dltensor_on(&src, &dst, stream) }
    })
}

/// Allocates `nbytes` on a device, aligned to `alignment` (0 or a power of two; at least 64
/// bytes on the CPU); free with `TVMDeviceFreeDataSpace`. The pointer is the back end's: a host
/// address on the CPU, a buffer descriptor on OpenCL.
///
/// # Safety
/// `out_data` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceAllocDataSpace(
    dev: DLDevice,
    nbytes: usize,
    alignment: usize,
    type_hint: DLDataType,
    out_data: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMDeviceAllocDataSpace", {
        non_null(out_data, "out_data")?;
        let api = api_for(dev, "TVMDeviceAllocDataSpace")?;
        if alignment != 0 && !alignment.is_power_of_two() {
            return Err(Error::value(format!(
                "TVMDeviceAllocDataSpace: alignment {alignment} is not a power of two"
            )));
        }
        let p = api.alloc_data_space(dev, nbytes, alignment, type_hint)?;
        // SAFETY: checked non-null; writable per the contract.
        unsafe { out_data.write(p) };
        Ok(())
    })
}

/// Allocates device memory for a compact tensor of `shape` and `dtype` in memory scope
/// `mem_scope` (null, `""` and `"global"` are plain memory; other scopes only where the back
/// end has them, as TVM's `DeviceAPI`).
///
/// # Safety
/// `shape` is null or readable for `ndim` values; `mem_scope` is null or a C string;
/// `out_data` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceAllocDataSpaceWithScope(
    dev: DLDevice,
    ndim: c_int,
    shape: *const i64,
    dtype: DLDataType,
    mem_scope: *const c_char,
    out_data: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMDeviceAllocDataSpaceWithScope", {
        non_null(out_data, "out_data")?;
        let api = api_for(dev, "TVMDeviceAllocDataSpaceWithScope")?;
        let scope = if mem_scope.is_null() {
            None
        } else {
            // SAFETY: a C string per the contract.
            Some(unsafe { c_str(mem_scope, "mem_scope")? })
        };
        layout::check_dtype(dtype)?;
        // SAFETY: per the contract.
        let shape = unsafe { shape_arg(shape, ndim)? };
        let p = api
            .alloc_data_space_scoped(dev, shape, dtype, scope)
            .map_err(|e| e.context("TVMDeviceAllocDataSpaceWithScope"))?;
        // SAFETY: checked non-null; writable per the contract.
        unsafe { out_data.write(p) };
        Ok(())
    })
}

/// Frees memory from `TVMDeviceAllocDataSpace*` (null is a no-op).
///
/// # Safety
/// `ptr` is null or came from `TVMDeviceAllocDataSpace*` and was not freed yet.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceFreeDataSpace(dev: DLDevice, ptr: *mut c_void) -> c_int {
    ffi_try!("TVMDeviceFreeDataSpace", {
        let api = api_for(dev, "TVMDeviceFreeDataSpace")?;
        // SAFETY: per the contract.
        unsafe { api.free_data_space(dev, ptr) }
    })
}

/// Copies between two `DLTensor`s (any producer; see `TVMArrayCopyFromTo`).
///
/// # Safety
/// `from` and `to` are null or valid `DLTensor`s describing live memory; `to` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMDeviceCopyDataFromTo(
    from: *mut DLTensor,
    to: *mut DLTensor,
    stream: *mut c_void,
) -> c_int {
    ffi_try!("TVMDeviceCopyDataFromTo", {
        // SAFETY: per the contract.
        let (src, dst) = unsafe { (dl_arg(from, "from")?, dl_arg(to, "to")?) };
        crate::tensor::check_dltensor_writable(to, "TVMDeviceCopyDataFromTo")?;
        // SAFETY: valid descriptors of live memory per the contract.
        unsafe { copy::copy_dltensor_on(&src, &dst, stream) }
    })
}

/// Waits until the work queued on `stream` (null: the device's default stream) has finished.
#[no_mangle]
pub extern "C" fn TVMSynchronize(
    device_type: c_int,
    device_id: c_int,
    stream: *mut c_void,
) -> c_int {
    ffi_try!("TVMSynchronize", {
        let dev = device_ids(device_type, device_id, "TVMSynchronize")?;
        api_for(dev, "TVMSynchronize")?.stream_sync(dev, stream)
    })
}

/// Creates a stream on a device (`*out` is null where the device has only its default stream:
/// the CPU, OpenCL). Free it with `TVMStreamFree`.
///
/// # Safety
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamCreate(
    device_type: c_int,
    device_id: c_int,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMStreamCreate", {
        non_null(out, "out")?;
        let dev = device_ids(device_type, device_id, "TVMStreamCreate")?;
        let s = api_for(dev, "TVMStreamCreate")?.create_stream(dev)?;
        // SAFETY: per the contract.
        unsafe { write_out(out, s, "out") }
    })
}

/// Frees a stream from `TVMStreamCreate`.
///
/// # Safety
/// `stream` came from `TVMStreamCreate` on this device and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TVMStreamFree(
    device_type: c_int,
    device_id: c_int,
    stream: *mut c_void,
) -> c_int {
    ffi_try!("TVMStreamFree", {
        let dev = device_ids(device_type, device_id, "TVMStreamFree")?;
        // SAFETY: per the contract.
        unsafe { api_for(dev, "TVMStreamFree")?.free_stream(dev, stream) }
    })
}

/// Makes `handle` the calling thread's current stream for the device.
#[no_mangle]
pub extern "C" fn TVMSetStream(device_type: c_int, device_id: c_int, handle: *mut c_void) -> c_int {
    ffi_try!("TVMSetStream", {
        let dev = device_ids(device_type, device_id, "TVMSetStream")?;
        api_for(dev, "TVMSetStream")?.set_stream(dev, handle)
    })
}

/// Makes stream `dst` wait for the work queued on `src` so far.
#[no_mangle]
pub extern "C" fn TVMStreamStreamSynchronize(
    device_type: c_int,
    device_id: c_int,
    src: *mut c_void,
    dst: *mut c_void,
) -> c_int {
    ffi_try!("TVMStreamStreamSynchronize", {
        let dev = device_ids(device_type, device_id, "TVMStreamStreamSynchronize")?;
        api_for(dev, "TVMStreamStreamSynchronize")?.sync_stream_from_to(dev, src, dst)
    })
}

/// Creates a tensor described by `prototype` that shares `source`'s data and keeps it alive
/// (`out`: a new reference). Null prototype strides become compact strides.
///
/// # Safety
/// `source` is null or a live tensor object; `prototype` is null or a valid `DLTensor` whose
/// memory lies within `source`'s data; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITensorCreateUnsafeView(
    source: *mut c_void,
    prototype: *const DLTensor,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFITensorCreateUnsafeView", {
        non_null(out, "out")?;
        non_null(prototype, "prototype")?;
        // SAFETY: per the contract.
        let src =
            Tensor::from_object(unsafe { crate::capi::boundary::object_arg(source, "source")? })?;
        // SAFETY: a valid descriptor per the contract.
        let view = unsafe { src.create_unsafe_view(&*prototype)? };
        // SAFETY: checked non-null.
        unsafe { out.write(view.into_object().into_raw()) };
        Ok(())
    })
}

/// Allocates a compact tensor of the prototype's shape, dtype and device through the thread's
/// DLPack allocator, or, when none is installed, tvmrt's own allocation on that device through
/// its back end (`out`: a new reference).
///
/// # Safety
/// `prototype` is null or a valid `DLTensor` (only dtype, ndim, shape, device are read);
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvTensorAlloc(
    prototype: *mut DLTensor,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIEnvTensorAlloc", {
        non_null(out, "out")?;
        non_null(prototype, "prototype")?;
        // SAFETY: a valid descriptor per the contract.
        let t = unsafe { env::env_tensor_alloc(&*prototype)? };
        // SAFETY: checked non-null.
        unsafe { out.write(t.into_object().into_raw()) };
        Ok(())
    })
}

/// Sets this thread's current stream for a device; the previous one goes to
/// `opt_out_original_stream` when it is not null.
///
/// # Safety
/// `opt_out_original_stream` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvSetStream(
    device_type: i32,
    device_id: i32,
    stream: *mut c_void,
    opt_out_original_stream: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIEnvSetStream", {
        let old = device::stream::set_current(device_type, device_id, stream)?;
        if !opt_out_original_stream.is_null() {
            // SAFETY: writable per the contract.
            unsafe { opt_out_original_stream.write(old) };
        }
        Ok(())
    })
}

/// This thread's current stream for a device (null when none was set).
#[no_mangle]
pub extern "C" fn TVMFFIEnvGetStream(device_type: i32, device_id: i32) -> *mut c_void {
    run_or("TVMFFIEnvGetStream", std::ptr::null_mut(), || {
        Ok(device::stream::current(device_type, device_id))
    })
}

/// Installs the DLPack allocator `TVMFFIEnvTensorAlloc` uses on this thread (and as the
/// process default when `write_to_global_context` is non-zero). The thread's previous own
/// allocator goes to `opt_out_original_allocator` when it is not null.
///
/// # Safety
/// `allocator` is null or callable from this thread (any thread when global);
/// `opt_out_original_allocator` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvSetDLPackManagedTensorAllocator(
    allocator: DLPackManagedTensorAllocator,
    write_to_global_context: c_int,
    opt_out_original_allocator: *mut DLPackManagedTensorAllocator,
) -> c_int {
    ffi_try!("TVMFFIEnvSetDLPackManagedTensorAllocator", {
        let old = env::set_allocator(allocator, write_to_global_context != 0);
        if !opt_out_original_allocator.is_null() {
            // SAFETY: writable per the contract.
            unsafe { opt_out_original_allocator.write(old) };
        }
        Ok(())
    })
}

/// The DLPack allocator in effect on this thread (null when none is installed).
#[no_mangle]
pub extern "C" fn TVMFFIEnvGetDLPackManagedTensorAllocator() -> DLPackManagedTensorAllocator {
    run_or("TVMFFIEnvGetDLPackManagedTensorAllocator", None, || {
        Ok(env::allocator())
    })
}

/// Checks for pending signals in the host environment. tvm-ffi forwards this to Python's
/// `PyErr_CheckSignals` when Python registered it; tvmrt has no host interpreter, so there is
/// never a pending signal.
#[no_mangle]
pub extern "C" fn TVMFFIEnvCheckSignals() -> c_int {
    ffi_try!("TVMFFIEnvCheckSignals", { Ok(()) })
}
