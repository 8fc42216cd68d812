//! DLPack exchange through the C API: legacy and versioned imports and exports, NumPy-shaped
//! strides, the read-only flag, deleter counts (exactly once, error paths included), and
//! `TVMFFIEnvTensorAlloc` with and without an installed allocator.

use std::ffi::{c_char, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dlpark::ffi::DLPackManagedTensorAllocator;
use tvmrt::abi::{
    DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
};
use tvmrt::capi::dlpack::*;
use tvmrt::capi::tensor::{
    TVMArrayCopyFromBytes, TVMArrayCopyFromTo, TVMArrayCopyToBytes, TVMArrayFree,
    TVMDeviceCopyDataFromTo, TVMFFIEnvGetDLPackManagedTensorAllocator,
    TVMFFIEnvSetDLPackManagedTensorAllocator, TVMFFIEnvTensorAlloc,
};
use tvmrt::dtype::dtypes;
use tvmrt::object::ObjectRef;
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;

fn last_error() -> String {
    let e = tvmrt::raised::take_raised().expect("an error was raised");
    format!("{}: {}", e.kind, e.message)
}

/// What a test producer keeps alive behind `manager_ctx`: the data and the shape/strides the
/// DLTensor points into, plus the count of deleter calls.
struct Producer {
    data: Vec<f32>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    deleted: Arc<AtomicUsize>,
}

/// A 64-byte-aligned f32 buffer (Vec<f32> is only 4-byte aligned).
fn aligned_f32(values: &[f32]) -> (Vec<f32>, usize) {
    let mut v = vec![0f32; values.len() + 16];
    let off = (64 - (v.as_ptr() as usize % 64)) % 64 / 4;
    v[off..off + values.len()].copy_from_slice(values);
    (v, off)
}

fn dl_for(p: &mut Producer, offset_elems: usize, device: DLDevice) -> DLTensor {
    DLTensor {
        data: p.data.as_mut_ptr().wrapping_add(offset_elems).cast(),
        device,
        ndim: p.shape.len() as i32,
        dtype: dtypes::FLOAT32,
        shape: p.shape.as_mut_ptr(),
        strides: p.strides.as_mut().map_or(null_mut(), |s| s.as_mut_ptr()),
        byte_offset: 0,
    }
}

unsafe extern "C" fn legacy_deleter(m: *mut DLManagedTensor) {
    // SAFETY: `m` and its context were made by `legacy` below and are deleted once.
    let m = unsafe { Box::from_raw(m) };
    let p = unsafe { Box::from_raw(m.manager_ctx.cast::<Producer>()) };
    p.deleted.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn versioned_deleter(m: *mut DLManagedTensorVersioned) {
    // SAFETY: as for `legacy_deleter`.
    let m = unsafe { Box::from_raw(m) };
    let p = unsafe { Box::from_raw(m.manager_ctx.cast::<Producer>()) };
    p.deleted.fetch_add(1, Ordering::SeqCst);
}

/// A legacy managed tensor over `values` (aligned to 64 plus `misalign` floats), with `shape`
/// and optional `strides`; returns it and its deleter counter.
/// A producer holding `values` (aligned), `shape` and `strides`: it, the offset of the values in
/// its data, and the count of its deleter's calls.
fn producer(
    values: &[f32],
    shape: &[i64],
    strides: Option<&[i64]>,
) -> (Box<Producer>, usize, Arc<AtomicUsize>) {
    let (data, off) = aligned_f32(values);
    let deleted = Arc::new(AtomicUsize::new(0));
    let p = Box::new(Producer {
        data,
        shape: shape.to_vec(),
        strides: strides.map(|s| s.to_vec()),
        deleted: deleted.clone(),
    });
    (p, off, deleted)
}

fn legacy(
    values: &[f32],
    shape: &[i64],
    strides: Option<&[i64]>,
    misalign: usize,
    device: DLDevice,
) -> (*mut DLManagedTensor, Arc<AtomicUsize>) {
    let (mut p, off, deleted) = producer(values, shape, strides);
    let dl = dl_for(&mut p, off + misalign, device);
    let m = Box::new(DLManagedTensor {
        dl_tensor: dl,
        manager_ctx: Box::into_raw(p).cast(),
        deleter: Some(legacy_deleter),
    });
    (Box::into_raw(m), deleted)
}

fn versioned(
    values: &[f32],
    shape: &[i64],
    strides: Option<&[i64]>,
    flags: u64,
    major: u32,
) -> (*mut DLManagedTensorVersioned, Arc<AtomicUsize>) {
    let (mut p, off, deleted) = producer(values, shape, strides);
    let dl = dl_for(&mut p, off, cpu());
    let m = Box::new(DLManagedTensorVersioned {
        version: DLPackVersion { major, minor: 1 },
        manager_ctx: Box::into_raw(p).cast(),
        deleter: Some(versioned_deleter),
        flags: dlpark::DlpackFlags::from_bits_retain(flags),
        dl_tensor: dl,
    });
    (Box::into_raw(m), deleted)
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn owned_tensor(handle: *mut c_void) -> Tensor {
    // SAFETY: a new reference returned by a tvmrt call.
    Tensor::from_object(unsafe { ObjectRef::from_raw_owned(handle) }.unwrap()).unwrap()
}

const SIX: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];

#[test]
fn legacy_import_shares_data_and_deletes_once() {
    let (m, deleted) = legacy(&SIX, &[2, 3], None, 0, cpu());
    // SAFETY: `m` is live.
    let producer_data = unsafe { (*m).dl_tensor.data };
    let mut out = null_mut();
    // SAFETY: `m` is live and ours to give.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPack(m, 64, 1, &mut out) },
        0,
        "{}",
        last_error()
    );
    let t = owned_tensor(out);
    assert_eq!(t.dl().data, producer_data, "zero-copy import");
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(
        t.strides(),
        Some(&[3i64, 1][..]),
        "null strides become compact"
    );
    assert_eq!(f32s(&t.to_vec().unwrap()), SIX);
    let t2 = t.clone();
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    drop(t2);
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        1,
        "deleter runs once, at the last release"
    );
}

#[test]
fn numpy_transposed_strides_import() {
    // NumPy's `np.arange(1, 7, dtype=float32).reshape(2, 3).T`: shape (3, 2), strides (1, 3).
    let (m, deleted) = legacy(&SIX, &[3, 2], Some(&[1, 3]), 0, cpu());
    let mut out = null_mut();
    // Contiguity required: refused, and the caller still owns the tensor.
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, 0, 1, &mut out) }, -1);
    let msg = last_error();
    assert!(msg.contains("not contiguous"), "{msg}");
    assert!(msg.contains("strides [1, 3]"), "{msg}");
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        0,
        "a refused import does not delete"
    );
    assert!(out.is_null());
    // The classic door requires compact data too (TVM 0.19 NDArray::FromDLPack).
    let mut h = null_mut();
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMArrayFromDLPack(m, &mut h) }, -1);
    assert!(last_error().contains("not contiguous"));
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    // Without the requirement: a strided tensor reading in NumPy's order.
    // SAFETY: `m` is live.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPack(m, 0, 0, &mut out) },
        0,
        "{}",
        last_error()
    );
    let t = owned_tensor(out);
    assert!(!t.is_contiguous());
    assert_eq!(f32s(&t.to_vec().unwrap()), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // Exporting keeps the strides, so a consumer sees the same view.
    let mut e = null_mut();
    // SAFETY: valid handles.
    assert_eq!(
        unsafe { TVMFFITensorToDLPack(t.object().as_ptr(), &mut e) },
        0
    );
    // SAFETY: `e` is live until its deleter runs.
    unsafe {
        let dl = &(*e).dl_tensor;
        assert_eq!(std::slice::from_raw_parts(dl.shape, 2), &[3, 2]);
        assert_eq!(std::slice::from_raw_parts(dl.strides, 2), &[1, 3]);
        assert_eq!(dl.data, t.dl().data);
    }
    drop(t);
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        0,
        "the export keeps the tensor alive"
    );
    // SAFETY: `e` is ours; deleted once.
    unsafe { TVMDLManagedTensorCallDeleter(e) };
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn refused_imports_leave_ownership_with_the_caller() {
    // Misaligned data with an alignment requirement.
    let (m, deleted) = legacy(&SIX, &[6], None, 1, cpu());
    let mut out = null_mut();
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, 64, 0, &mut out) }, -1);
    assert!(last_error().contains("not aligned to 64 bytes"));
    // Classic TVMArrayFromDLPack requires 64-byte alignment (TVM's kAllocAlignment).
    let mut h = null_mut();
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMArrayFromDLPack(m, &mut h) }, -1);
    assert!(last_error().contains("not aligned to 64 bytes"));
    // A null `out` is refused before the import takes the tensor.
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, 0, 0, null_mut()) }, -1);
    assert!(last_error().contains("`out`"));
    // A negative alignment is refused.
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, -4, 0, &mut out) }, -1);
    assert!(last_error().contains("require_alignment must be >= 0"));
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    // 4-byte alignment is met: accepted.
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, 4, 0, &mut out) }, 0);
    drop(owned_tensor(out));
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    // A tensor of a device without a back end is refused by name, not deleted.
    let rocm = DLDevice {
        device_type: DLDeviceType(10),
        device_id: 0,
    };
    let (m, deleted) = legacy(&SIX, &[6], None, 0, rocm);
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, 0, 0, &mut out) }, -1);
    assert!(last_error().contains("device rocm:0 has no back end in tvmrt"));
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    // SAFETY: still ours.
    unsafe { TVMDLManagedTensorCallDeleter(m) };
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    // A negative dim and a bad dtype are refused.
    let (m, deleted) = legacy(&SIX, &[-6], None, 0, cpu());
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, 0, 0, &mut out) }, -1);
    assert!(last_error().contains("shape[0] = -6 is negative"));
    // SAFETY: `m` is live; patch the dtype to an unknown code.
    unsafe {
        (*m).dl_tensor.shape.write(6);
        (*m).dl_tensor.dtype.code = tvmrt::abi::DLDataTypeCode(77);
    }
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, 0, 0, &mut out) }, -1);
    assert!(last_error().contains("unsupported dtype code 77"));
    // SAFETY: `m` is live; a valid dtype again, but a corrupt ndim.
    unsafe {
        (*m).dl_tensor.dtype = dtypes::FLOAT32;
        (*m).dl_tensor.ndim = -3;
    }
    // SAFETY: `m` is live.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(m, 0, 0, &mut out) }, -1);
    assert!(last_error().contains("ndim must be >= 0, got -3"));
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    // SAFETY: still ours.
    unsafe { TVMDLManagedTensorCallDeleter(m) };
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    // Null tensors.
    // SAFETY: null is refused.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPack(null_mut(), 0, 0, &mut out) },
        -1
    );
    assert!(last_error().contains("DLManagedTensor"));
    // SAFETY: null is a no-op.
    unsafe { TVMDLManagedTensorCallDeleter(null_mut()) };
}

#[test]
fn classic_round_trip() {
    let (m, deleted) = legacy(&SIX, &[2, 3], None, 0, cpu());
    let mut h = null_mut();
    // SAFETY: `m` is live.
    assert_eq!(
        unsafe { TVMArrayFromDLPack(m, &mut h) },
        0,
        "{}",
        last_error()
    );
    let mut buf = [0u8; 24];
    // SAFETY: valid handle and buffer.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(h, buf.as_mut_ptr().cast(), 24) },
        0
    );
    assert_eq!(f32s(&buf), SIX);
    let mut e = null_mut();
    // SAFETY: valid handle.
    assert_eq!(unsafe { TVMArrayToDLPack(h, &mut e) }, 0);
    // SAFETY: `h` is ours; released once.
    assert_eq!(unsafe { TVMArrayFree(h) }, 0);
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        0,
        "the export still holds the tensor"
    );
    // Re-import our own export, as a framework round trip would.
    let mut out = null_mut();
    // SAFETY: `e` is live and ours to give.
    assert_eq!(unsafe { TVMFFITensorFromDLPack(e, 64, 1, &mut out) }, 0);
    let t = owned_tensor(out);
    assert_eq!(f32s(&t.to_vec().unwrap()), SIX);
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn export_holds_one_reference() {
    let t = Tensor::empty(&[4], dtypes::FLOAT32, cpu()).unwrap();
    assert_eq!(t.object().strong_count(), 1);
    let legacy = t.to_dlpack().unwrap();
    let versioned = t.to_dlpack_versioned();
    assert_eq!(t.object().strong_count(), 3);
    // SAFETY: both exports are live.
    unsafe {
        assert_eq!((*legacy).manager_ctx, t.object().as_ptr());
        assert_eq!((*versioned).version.major, 1);
        assert_eq!((*versioned).flags.bits(), 0);
        assert_eq!((*versioned).dl_tensor.data, t.dl().data);
        ((*legacy).deleter.unwrap())(legacy);
        ((*versioned).deleter.unwrap())(versioned);
    }
    assert_eq!(t.object().strong_count(), 1);
}

#[test]
fn versioned_round_trip_keeps_read_only() {
    let (m, deleted) = versioned(&SIX, &[2, 3], None, 1, 1);
    let mut out = null_mut();
    // SAFETY: `m` is live.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPackVersioned(m, 64, 1, &mut out) },
        0,
        "{}",
        last_error()
    );
    let t = owned_tensor(out);
    assert!(t.is_read_only());
    assert_eq!(f32s(&t.to_vec().unwrap()), SIX);
    // Writes through tvmrt are refused.
    let err = t.copy_from_bytes(&[0u8; 24]).unwrap_err();
    assert!(err.message.contains("read-only"), "{}", err.message);
    let src = Tensor::empty(&[2, 3], dtypes::FLOAT32, cpu()).unwrap();
    assert!(t.copy_from(&src).is_err());
    // The classic calls, which take bare DLTensor*s, refuse it as a destination too.
    let zeros = [0u8; 24];
    // SAFETY: valid descriptors and buffers.
    unsafe {
        assert_eq!(
            TVMArrayCopyFromBytes(t.dltensor(), zeros.as_ptr() as *mut c_void, 24),
            -1
        );
        assert!(last_error().contains("TVMArrayCopyFromBytes: the tensor is read-only"));
        assert_eq!(
            TVMArrayCopyFromTo(src.dltensor(), t.dltensor(), null_mut()),
            -1
        );
        assert!(last_error().contains("read-only"));
        assert_eq!(
            TVMDeviceCopyDataFromTo(src.dltensor(), t.dltensor(), null_mut()),
            -1
        );
        assert!(last_error().contains("read-only"));
        // Reading from it is fine.
        assert_eq!(
            TVMArrayCopyFromTo(t.dltensor(), src.dltensor(), null_mut()),
            0
        );
    }
    assert_eq!(f32s(&src.to_vec().unwrap()), SIX);
    // Views stay read-only.
    let v = t.view(&[3], dtypes::FLOAT32, 12).unwrap();
    assert!(v.is_read_only());
    assert_eq!(f32s(&v.to_vec().unwrap()), [4.0, 5.0, 6.0]);
    // A versioned export keeps the flag; a legacy export cannot carry it and is refused.
    let mut e = null_mut();
    // SAFETY: valid handles.
    assert_eq!(
        unsafe { TVMFFITensorToDLPackVersioned(t.object().as_ptr(), &mut e) },
        0
    );
    // SAFETY: `e` is live.
    assert_eq!(unsafe { (*e).flags.bits() } & 1, 1);
    let mut l = null_mut();
    // SAFETY: valid handles.
    assert_eq!(
        unsafe { TVMFFITensorToDLPack(t.object().as_ptr(), &mut l) },
        -1
    );
    assert!(last_error().contains("read-only"));
    drop((t, v));
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    // SAFETY: `e` is ours.
    unsafe { ((*e).deleter.unwrap())(e) };
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    // A writable versioned tensor exports without the flag and accepts writes.
    let (m, deleted) = versioned(&SIX, &[6], None, 0, 1);
    // SAFETY: `m` is live.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPackVersioned(m, 0, 0, &mut out) },
        0
    );
    let t = owned_tensor(out);
    assert!(!t.is_read_only());
    t.copy_from_bytes(&[0u8; 24]).unwrap();
    // SAFETY: the producer's buffer is still alive (the tensor holds it).
    assert_eq!(unsafe { *t.data_ptr().cast::<f32>() }, 0.0);
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn versioned_refusals() {
    let mut out = null_mut();
    let (m, deleted) = versioned(&SIX, &[6], None, 0, 2);
    // SAFETY: `m` is live.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPackVersioned(m, 0, 0, &mut out) },
        -1
    );
    assert!(last_error().contains("unsupported DLPack major version 2.1"));
    // SAFETY: still ours (the deleter is safe to call whatever the version).
    unsafe { ((*m).deleter.unwrap())(m) };
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    let (m, deleted) = versioned(&SIX, &[6], None, 4, 1);
    // SAFETY: `m` is live.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPackVersioned(m, 0, 0, &mut out) },
        -1
    );
    assert!(last_error().contains("IS_SUBBYTE_TYPE_PADDED"));
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    // SAFETY: still ours.
    unsafe { ((*m).deleter.unwrap())(m) };
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    let (m, deleted) = versioned(&SIX, &[3, 2], Some(&[1, 3]), 0, 1);
    // SAFETY: `m` is live.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPackVersioned(m, 0, 1, &mut out) },
        -1
    );
    assert!(last_error().contains("not contiguous"));
    // SAFETY: `m` is live.
    assert_eq!(
        unsafe { TVMFFITensorFromDLPackVersioned(m, 0, 0, &mut out) },
        0
    );
    let t = owned_tensor(out);
    assert_eq!(f32s(&t.to_vec().unwrap()), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

// ---- TVMFFIEnvTensorAlloc ----

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static ALLOC_DELETED: AtomicUsize = AtomicUsize::new(0);

/// A DLPack allocator that hands out tvmrt tensors (through the public export) and counts.
unsafe extern "C" fn counting_allocator(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    _ctx: *mut c_void,
    _set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> i32 {
    // SAFETY: the prototype is valid for the call.
    let p = unsafe { &*prototype };
    // SAFETY: shape holds ndim entries.
    let shape = unsafe { std::slice::from_raw_parts(p.shape, p.ndim as usize) };
    let t = Tensor::empty(shape, p.dtype, p.device).unwrap();
    let m = t.to_dlpack_versioned();
    // Wrap the deleter to count releases.
    // SAFETY: `m` is live.
    unsafe {
        (*m).deleter = Some(counting_deleter);
        out.write(m);
    }
    ALLOCATED.fetch_add(1, Ordering::SeqCst);
    0
}

unsafe extern "C" fn counting_deleter(m: *mut DLManagedTensorVersioned) {
    ALLOC_DELETED.fetch_add(1, Ordering::SeqCst);
    // SAFETY: release the tvmrt export as its own deleter would.
    unsafe { tvmrt::tensor::dlpack::release_exported_versioned(m) };
}

/// Hands out a tensor labelled as living on a ROCm GPU, a device type without a back end in
/// tvmrt (counted like `counting_allocator`).
unsafe extern "C" fn gpu_allocator(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    ctx: *mut c_void,
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> i32 {
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { counting_allocator(prototype, out, ctx, set_error) };
    // SAFETY: `*out` was just written.
    unsafe { (**out).dl_tensor.device.device_type = DLDeviceType(10) };
    rc
}

unsafe extern "C" fn failing_allocator(
    _prototype: *mut DLTensor,
    _out: *mut *mut DLManagedTensorVersioned,
    ctx: *mut c_void,
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> i32 {
    // SAFETY: calling the provided callback with its context and C strings.
    unsafe {
        (set_error.unwrap())(ctx, c"MemoryError".as_ptr(), c"pool exhausted".as_ptr());
    }
    -1
}

#[test]
fn env_tensor_alloc_with_and_without_allocator() {
    // All on one fresh thread: the allocator is thread-local.
    std::thread::spawn(|| {
        let mut shape = [2i64, 8];
        let proto = DLTensor {
            data: null_mut(),
            device: cpu(),
            ndim: 2,
            dtype: dtypes::FLOAT16,
            shape: shape.as_mut_ptr(),
            strides: null_mut(),
            byte_offset: 0,
        };
        let mut proto = proto;
        let mut out = null_mut();
        // No allocator installed: tvm-ffi's RuntimeError, word for word (tvm-ffi's Rust crate
        // tests `Tensor::from_env_alloc` for it), and nothing allocated.
        assert!(TVMFFIEnvGetDLPackManagedTensorAllocator().is_none());
        // SAFETY: valid pointers.
        assert_eq!(unsafe { TVMFFIEnvTensorAlloc(&mut proto, &mut out) }, -1);
        assert_eq!(
            last_error(),
            "RuntimeError: TVMFFIEnvTensorAlloc: allocator is nullptr, likely because \
             TVMFFIEnvSetDLPackManagedTensorAllocator has not been called."
        );
        assert!(out.is_null());

        // With an allocator: it is called and its tensor released exactly once.
        let mut old: DLPackManagedTensorAllocator = Some(counting_allocator);
        // SAFETY: valid pointers.
        assert_eq!(
            unsafe {
                TVMFFIEnvSetDLPackManagedTensorAllocator(Some(counting_allocator), 0, &mut old)
            },
            0
        );
        assert!(old.is_none());
        assert!(TVMFFIEnvGetDLPackManagedTensorAllocator().is_some());
        // SAFETY: valid pointers.
        assert_eq!(
            unsafe { TVMFFIEnvTensorAlloc(&mut proto, &mut out) },
            0,
            "{}",
            last_error()
        );
        assert_eq!(ALLOCATED.load(Ordering::SeqCst), 1);
        let t = owned_tensor(out);
        assert_eq!(t.shape(), &[2, 8]);
        assert_eq!(ALLOC_DELETED.load(Ordering::SeqCst), 0);
        drop(t);
        assert_eq!(ALLOC_DELETED.load(Ordering::SeqCst), 1);

        // A failing allocator's message comes back.
        // SAFETY: valid pointers.
        assert_eq!(
            unsafe {
                TVMFFIEnvSetDLPackManagedTensorAllocator(Some(failing_allocator), 0, null_mut())
            },
            0
        );
        // SAFETY: valid pointers.
        assert_eq!(unsafe { TVMFFIEnvTensorAlloc(&mut proto, &mut out) }, -1);
        assert_eq!(last_error(), "MemoryError: pool exhausted");

        // An allocator result tvmrt refuses (a device without a back end) is released, not
        // leaked.
        // SAFETY: valid pointers.
        unsafe { TVMFFIEnvSetDLPackManagedTensorAllocator(Some(gpu_allocator), 0, null_mut()) };
        // SAFETY: valid pointers.
        assert_eq!(unsafe { TVMFFIEnvTensorAlloc(&mut proto, &mut out) }, -1);
        assert!(last_error().contains("allocator result refused: DLPack import: device rocm:0"));
        assert_eq!(ALLOC_DELETED.load(Ordering::SeqCst), 2);

        // A bad prototype is refused before the allocator sees it.
        // SAFETY: null prototype is refused.
        assert_eq!(unsafe { TVMFFIEnvTensorAlloc(null_mut(), &mut out) }, -1);
        assert!(last_error().contains("`prototype`"));
    })
    .join()
    .unwrap();
    // Other threads never saw the thread-local allocator.
    assert!(TVMFFIEnvGetDLPackManagedTensorAllocator().is_none());
}
