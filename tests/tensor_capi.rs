//! Tensors and devices through the classic C API (`TVMArray*`, `TVMDevice*`, streams) and
//! tvm-ffi's `TVMFFITensorCreateUnsafeView`, called from Rust as a C program would.

use std::ffi::c_void;
use std::ptr::{null, null_mut};

use tvmrt::abi::{DLDataType, DLDevice, DLDeviceType, DLTensor};
use tvmrt::capi::tensor::*;
use tvmrt::dtype::{dtype, dtypes};
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::{Any, Function};

const CPU: i32 = 1;
/// `kDLROCM`: a device type with no back end in tvmrt.
const ROCM: i32 = 10;

fn last_error() -> String {
    let e = tvmrt::raised::take_raised().expect("an error was raised");
    format!("{}: {}", e.kind, e.message)
}

/// `TVMArrayAlloc` with a dtype, on the CPU; panics on failure.
fn alloc(shape: &[i64], t: DLDataType) -> *mut DLTensor {
    let mut out = null_mut();
    // SAFETY: valid shape and out pointers.
    let rc = unsafe {
        TVMArrayAlloc(
            shape.as_ptr(),
            shape.len() as i32,
            t.code.0 as i32,
            t.bits as i32,
            t.lanes as i32,
            CPU,
            0,
            &mut out,
        )
    };
    assert_eq!(rc, 0, "{}", last_error());
    out
}

fn free(h: *mut DLTensor) {
    // SAFETY: a handle from `alloc`, released once.
    assert_eq!(unsafe { TVMArrayFree(h) }, 0);
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_f32_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn alloc_gives_aligned_compact_array() {
    let h = alloc(&[2, 3, 5], dtypes::FLOAT32);
    // SAFETY: a live handle.
    let t = unsafe { &*h };
    assert_eq!(t.data as usize % 64, 0, "data must be 64-byte aligned");
    assert_eq!(t.ndim, 3);
    assert_eq!(t.dtype, dtypes::FLOAT32);
    assert_eq!(t.device.device_type.0, 1);
    assert_eq!(t.byte_offset, 0);
    // SAFETY: shape and strides hold ndim entries.
    unsafe {
        assert_eq!(std::slice::from_raw_parts(t.shape, 3), &[2, 3, 5]);
        assert_eq!(std::slice::from_raw_parts(t.strides, 3), &[15, 5, 1]);
    }
    // The handle is the DLTensor 24 bytes into a type-index-70 object.
    let header = (h as usize - 24) as *const tvmrt::object::ObjectHeader;
    // SAFETY: the object header precedes the handle.
    assert_eq!(unsafe { (*header).type_index }, 70);
    free(h);
}

#[test]
fn every_dtype_has_its_byte_size() {
    let cases: &[(DLDataType, usize)] = &[
        (dtype(0, 1, 1), 2), // 10 x int1, packed
        (dtype(0, 4, 1), 5), // 10 x int4, packed
        (dtypes::INT8, 10),
        (dtypes::INT16, 20),
        (dtypes::INT32, 40),
        (dtypes::INT64, 80),
        (dtype(1, 1, 1), 10), // TVM 0.19's bool (uint1): one byte per element
        (dtypes::UINT8, 10),
        (dtypes::UINT16, 20),
        (dtypes::UINT32, 40),
        (dtypes::UINT64, 80),
        (dtypes::FLOAT16, 20),
        (dtypes::FLOAT32, 40),
        (dtypes::FLOAT64, 80),
        (dtypes::BFLOAT16, 20),
        (dtypes::BOOL, 10),
        (dtype(10, 8, 1), 10),  // float8_e4m3fn
        (dtype(12, 8, 1), 10),  // float8_e5m2
        (dtype(17, 4, 1), 5),   // float4_e2m1fn
        (dtype(2, 32, 4), 160), // float32x4
        (dtype(0, 8, 4), 40),   // int8x4
        (dtype(2, 16, 2), 40),  // float16x2
        (dtype(5, 64, 1), 80),  // complex64
    ];
    for &(t, nbytes) in cases {
        let h = alloc(&[10], t);
        let mut buf = vec![0u8; nbytes];
        // SAFETY: buf holds nbytes.
        let rc = unsafe { TVMArrayCopyToBytes(h, buf.as_mut_ptr().cast(), nbytes) };
        assert_eq!(rc, 0, "{:?}: {}", t, last_error());
        // One byte more is refused with both sizes named.
        let mut big = vec![0u8; nbytes + 1];
        // SAFETY: big holds nbytes + 1.
        let rc = unsafe { TVMArrayCopyToBytes(h, big.as_mut_ptr().cast(), nbytes + 1) };
        assert_eq!(rc, -1);
        assert!(
            last_error().contains(&format!("expected {nbytes} bytes, got {}", nbytes + 1)),
            "{t:?}"
        );
        free(h);
    }
}

#[test]
fn alloc_errors_name_the_bad_input() {
    let shape = [2i64, 3];
    let mut out = null_mut();
    let call = |shape: *const i64, ndim, code, bits, lanes, dev, out: *mut *mut DLTensor| {
        // SAFETY: pointers are valid or deliberately null.
        unsafe { TVMArrayAlloc(shape, ndim, code, bits, lanes, dev, 0, out) }
    };
    assert_eq!(call(shape.as_ptr(), 2, 2, 32, 1, ROCM, &mut out), -1);
    let e = last_error();
    assert!(
        e.starts_with(
            "ValueError: TVMArrayAlloc: device rocm:0 has no back end in tvmrt (this build runs \
             on: cpu"
        ),
        "{e}"
    );
    assert_eq!(call(shape.as_ptr(), 2, 2, 32, 1, CPU, null_mut()), -1);
    assert!(last_error().contains("`out`"));
    assert_eq!(call(shape.as_ptr(), -1, 2, 32, 1, CPU, &mut out), -1);
    assert!(last_error().contains("ndim must be >= 0, got -1"));
    assert_eq!(call(shape.as_ptr(), 1 << 30, 2, 32, 1, CPU, &mut out), -1);
    assert!(last_error().contains("exceeds tvmrt's limit"));
    assert_eq!(call(null(), 2, 2, 32, 1, CPU, &mut out), -1);
    assert!(last_error().contains("`shape`"));
    let neg = [4i64, -2];
    assert_eq!(call(neg.as_ptr(), 2, 2, 32, 1, CPU, &mut out), -1);
    assert!(last_error().contains("shape[1] = -2 is negative"));
    assert_eq!(call(shape.as_ptr(), 2, 42, 32, 1, CPU, &mut out), -1);
    assert!(last_error().contains("unsupported dtype code 42"));
    assert_eq!(call(shape.as_ptr(), 2, 2, 12, 1, CPU, &mut out), -1);
    assert!(last_error().contains("12 bits are not valid"));
    assert_eq!(call(shape.as_ptr(), 2, 2, 32, 0, CPU, &mut out), -1);
    assert!(last_error().contains("lanes 0"));
    assert_eq!(call(shape.as_ptr(), 2, 2, 300, 1, CPU, &mut out), -1);
    assert!(last_error().contains("bits 300"));
    // A shape whose byte size overflows is an error, not an abort.
    let huge = [1i64 << 40, 1 << 40];
    assert_eq!(call(huge.as_ptr(), 2, 2, 32, 1, CPU, &mut out), -1);
    assert!(last_error().contains("too many elements"));
    let huge = [1i64 << 31, 1 << 31];
    assert_eq!(call(huge.as_ptr(), 2, 2, 64, 4, CPU, &mut out), -1);
    assert!(last_error().contains("more than can be allocated"));
    assert!(out.is_null(), "no handle written on failure");
}

#[test]
fn copies_round_trip_and_check_sizes() {
    let h = alloc(&[2, 3], dtypes::FLOAT32);
    let src = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // SAFETY: src holds 24 bytes.
    assert_eq!(
        unsafe { TVMArrayCopyFromBytes(h, src.as_ptr() as *mut c_void, 24) },
        0
    );
    let mut back = vec![0u8; 24];
    // SAFETY: back holds 24 bytes.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(h, back.as_mut_ptr().cast(), 24) },
        0
    );
    assert_eq!(back, src);

    // SAFETY: src holds at least 20 bytes.
    assert_eq!(
        unsafe { TVMArrayCopyFromBytes(h, src.as_ptr() as *mut c_void, 20) },
        -1
    );
    assert_eq!(
        last_error(),
        "ValueError: TVMArrayCopyFromBytes: expected 24 bytes, got 20"
    );
    // SAFETY: null data is refused before any read.
    assert_eq!(unsafe { TVMArrayCopyFromBytes(h, null_mut(), 24) }, -1);
    assert!(last_error().contains("`data`"));
    // SAFETY: null handles are refused.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(null_mut(), back.as_mut_ptr().cast(), 24) },
        -1
    );
    assert!(last_error().contains("`handle`"));

    // Array to array: same bytes, any shape; a size mismatch names both sizes.
    let flat = alloc(&[6], dtypes::FLOAT32);
    // SAFETY: live handles.
    assert_eq!(unsafe { TVMArrayCopyFromTo(h, flat, null_mut()) }, 0);
    let t = unsafe { Tensor::from_handle_borrowed(flat, "flat") }.unwrap();
    assert_eq!(
        from_f32_bytes(&t.to_vec().unwrap()),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let small = alloc(&[5], dtypes::FLOAT32);
    // SAFETY: live handles.
    assert_eq!(unsafe { TVMArrayCopyFromTo(h, small, null_mut()) }, -1);
    assert!(last_error().contains("destination expects 20 bytes, source has 24 bytes"));
    // SAFETY: null handles are refused.
    assert_eq!(unsafe { TVMArrayCopyFromTo(h, null_mut(), null_mut()) }, -1);
    assert!(last_error().contains("`to`"));
    drop(t);
    free(h);
    free(flat);
    free(small);
}

#[test]
fn strided_views_copy_elementwise() {
    // A 2x3 array and its transpose as a strided view (NumPy's `a.T`: shape [3,2], strides
    // [1,3]), made with TVMFFITensorCreateUnsafeView.
    let h = alloc(&[2, 3], dtypes::FLOAT32);
    let src = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // SAFETY: src holds 24 bytes.
    assert_eq!(
        unsafe { TVMArrayCopyFromBytes(h, src.as_ptr() as *mut c_void, 24) },
        0
    );
    let a = unsafe { Tensor::from_handle_borrowed(h, "h") }.unwrap();
    let mut shape = [3i64, 2];
    let mut strides = [1i64, 3];
    let proto = DLTensor {
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        ..*a.dl()
    };
    let mut out = null_mut();
    // SAFETY: the prototype describes memory inside `a`.
    let rc = unsafe { TVMFFITensorCreateUnsafeView(a.object().as_ptr(), &proto, &mut out) };
    assert_eq!(rc, 0, "{}", last_error());
    let view =
        Tensor::from_object(unsafe { tvmrt::object::ObjectRef::from_raw_owned(out) }.unwrap())
            .unwrap();
    assert_eq!(view.shape(), &[3, 2]);
    assert_eq!(view.strides(), Some(&[1i64, 3][..]));
    assert_eq!(
        view.dl().data,
        a.dl().data,
        "the view shares the data pointer"
    );
    assert!(!view.is_contiguous());
    assert_eq!(
        from_f32_bytes(&view.to_vec().unwrap()),
        [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    // The view keeps the source alive.
    assert_eq!(a.object().strong_count(), 3); // handle, `a`, the view
    free(h);
    drop(a);
    assert_eq!(view.to_vec().unwrap().len(), 24);

    // Copying the strided view into a compact [3,2] array transposes.
    let dst = alloc(&[3, 2], dtypes::FLOAT32);
    let vh = view.clone().into_handle();
    // SAFETY: live handles.
    assert_eq!(
        unsafe { TVMArrayCopyFromTo(vh, dst, null_mut()) },
        0,
        "{}",
        last_error()
    );
    let mut back = vec![0u8; 24];
    // SAFETY: back holds 24 bytes.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(dst, back.as_mut_ptr().cast(), 24) },
        0
    );
    assert_eq!(from_f32_bytes(&back), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // And back into the view (writes through its strides).
    let zeros = f32_bytes(&[9.0, 8.0, 7.0, 6.0, 5.0, 4.0]);
    view.copy_from_bytes(&zeros).unwrap();
    assert_eq!(
        from_f32_bytes(&view.to_vec().unwrap()),
        [9.0, 8.0, 7.0, 6.0, 5.0, 4.0]
    );
    // A strided copy between different shapes of equal size is refused.
    let wrong = alloc(&[2, 3], dtypes::FLOAT32);
    // SAFETY: live handles.
    assert_eq!(unsafe { TVMArrayCopyFromTo(vh, wrong, null_mut()) }, -1);
    assert!(last_error().contains("strided copy needs equal shapes"));
    free(vh);
    free(dst);
    free(wrong);
}

#[test]
fn unsafe_view_checks_its_arguments() {
    let t = Tensor::empty(&[4], dtypes::FLOAT32, cpu()).unwrap();
    let mut out = null_mut();
    // SAFETY: null prototype is refused.
    let rc = unsafe { TVMFFITensorCreateUnsafeView(t.object().as_ptr(), null(), &mut out) };
    assert_eq!(rc, -1);
    assert!(last_error().contains("`prototype`"));
    let mut shape = [-1i64];
    let proto = DLTensor {
        shape: shape.as_mut_ptr(),
        strides: null_mut(),
        ..*t.dl()
    };
    // SAFETY: valid pointers; the negative dim is refused.
    let rc = unsafe { TVMFFITensorCreateUnsafeView(t.object().as_ptr(), &proto, &mut out) };
    assert_eq!(rc, -1);
    assert!(last_error().contains("negative"));
    // A non-tensor source is a type error.
    let f = Function::from_fn(|_| Ok(Any::none()));
    let mut shape = [2i64];
    let proto = DLTensor {
        shape: shape.as_mut_ptr(),
        ..*t.dl()
    };
    // SAFETY: valid pointers; the function object is refused.
    let rc = unsafe { TVMFFITensorCreateUnsafeView(f.object().as_ptr(), &proto, &mut out) };
    assert_eq!(rc, -1);
    assert!(last_error().contains("TypeError: expected ffi.Tensor"));
    // Null prototype strides become compact strides; the data pointer is kept as given.
    let mut shape = [2i64, 1];
    let proto = DLTensor {
        shape: shape.as_mut_ptr(),
        ndim: 2,
        strides: null_mut(),
        data: t.data_ptr().cast::<u8>().wrapping_add(8).cast(),
        ..*t.dl()
    };
    // SAFETY: the view lies inside `t`.
    let rc = unsafe { TVMFFITensorCreateUnsafeView(t.object().as_ptr(), &proto, &mut out) };
    assert_eq!(rc, 0, "{}", last_error());
    let v = Tensor::from_object(unsafe { tvmrt::object::ObjectRef::from_raw_owned(out) }.unwrap())
        .unwrap();
    assert_eq!(v.strides(), Some(&[1i64, 1][..]));
    assert_eq!(v.data_ptr() as usize, t.data_ptr() as usize + 8);
}

#[test]
fn device_data_space() {
    let mut p = null_mut();
    // SAFETY: valid out pointer.
    let rc = unsafe { TVMDeviceAllocDataSpace(cpu(), 1000, 128, dtypes::FLOAT32, &mut p) };
    assert_eq!(rc, 0);
    assert_eq!(p as usize % 128, 0);
    // SAFETY: p came from TVMDeviceAllocDataSpace.
    assert_eq!(unsafe { TVMDeviceFreeDataSpace(cpu(), p) }, 0);
    // SAFETY: valid out pointer; alignment 0 means the default 64.
    assert_eq!(
        unsafe { TVMDeviceAllocDataSpace(cpu(), 0, 0, dtypes::FLOAT32, &mut p) },
        0
    );
    assert_eq!(p as usize % 64, 0);
    assert!(!p.is_null());
    // SAFETY: p came from TVMDeviceAllocDataSpace.
    assert_eq!(unsafe { TVMDeviceFreeDataSpace(cpu(), p) }, 0);
    // SAFETY: null is a no-op.
    assert_eq!(unsafe { TVMDeviceFreeDataSpace(cpu(), null_mut()) }, 0);

    let rocm = DLDevice {
        device_type: DLDeviceType(10),
        device_id: 1,
    };
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { TVMDeviceAllocDataSpace(rocm, 16, 64, dtypes::FLOAT32, &mut p) },
        -1
    );
    assert!(last_error().contains("device rocm:1 has no back end in tvmrt"));
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { TVMDeviceAllocDataSpace(cpu(), 16, 48, dtypes::FLOAT32, &mut p) },
        -1
    );
    assert!(last_error().contains("alignment 48 is not a power of two"));
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { TVMDeviceAllocDataSpace(cpu(), usize::MAX, 64, dtypes::FLOAT32, &mut p) },
        -1
    );
    assert!(last_error().contains("cannot allocate"));

    let shape = [4i64, 4];
    let global = c"global";
    // SAFETY: valid pointers.
    let rc = unsafe {
        TVMDeviceAllocDataSpaceWithScope(
            cpu(),
            2,
            shape.as_ptr(),
            dtypes::FLOAT64,
            global.as_ptr(),
            &mut p,
        )
    };
    assert_eq!(rc, 0, "{}", last_error());
    assert_eq!(p as usize % 64, 0);
    // SAFETY: p came from the allocator.
    assert_eq!(unsafe { TVMDeviceFreeDataSpace(cpu(), p) }, 0);
    let texture = c"global.texture";
    // SAFETY: valid pointers.
    let rc = unsafe {
        TVMDeviceAllocDataSpaceWithScope(
            cpu(),
            2,
            shape.as_ptr(),
            dtypes::FLOAT64,
            texture.as_ptr(),
            &mut p,
        )
    };
    assert_eq!(rc, -1);
    assert!(last_error().contains("memory scope `global.texture` is not supported"));
}

#[test]
fn device_copy_between_plain_dltensors() {
    // DLTensors that are not tvmrt objects (stack descriptors over Rust buffers).
    let mut a = [1i32, 2, 3, 4];
    let mut b = [0i32; 4];
    let mut shape = [4i64];
    let mk = |data: *mut i32, shape: *mut i64| DLTensor {
        data: data.cast(),
        device: cpu(),
        ndim: 1,
        dtype: dtypes::INT32,
        shape,
        strides: null_mut(),
        byte_offset: 0,
    };
    let mut from = mk(a.as_mut_ptr(), shape.as_mut_ptr());
    let mut to = mk(b.as_mut_ptr(), shape.as_mut_ptr());
    // SAFETY: both descriptors describe live buffers.
    assert_eq!(
        unsafe { TVMDeviceCopyDataFromTo(&mut from, &mut to, null_mut()) },
        0
    );
    assert_eq!(b, [1, 2, 3, 4]);
    // byte_offset is honoured: copy elements 2..4 of `a` into a 2-element tensor.
    let mut two = [2i64];
    let mut c = [0i32; 2];
    from.byte_offset = 8;
    from.shape = two.as_mut_ptr();
    let mut to2 = mk(c.as_mut_ptr(), two.as_mut_ptr());
    // SAFETY: both descriptors describe live buffers.
    assert_eq!(
        unsafe { TVMDeviceCopyDataFromTo(&mut from, &mut to2, null_mut()) },
        0
    );
    assert_eq!(c, [3, 4]);
    // A device without a back end is refused by name.
    to.device = DLDevice {
        device_type: DLDeviceType(8),
        device_id: 0,
    };
    // SAFETY: as above.
    assert_eq!(
        unsafe { TVMDeviceCopyDataFromTo(&mut from, &mut to, null_mut()) },
        -1
    );
    assert!(last_error().contains("device metal:0 has no back end"));
    // SAFETY: null is refused.
    assert_eq!(
        unsafe { TVMDeviceCopyDataFromTo(null_mut(), &mut to, null_mut()) },
        -1
    );
    assert!(last_error().contains("`from`"));
}

#[test]
fn streams_on_cpu_are_null_and_gpu_is_refused() {
    let mut s = std::ptr::dangling_mut::<c_void>();
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { TVMStreamCreate(CPU, 0, &mut s) }, 0);
    assert!(s.is_null());
    assert_eq!(TVMSetStream(CPU, 0, s), 0);
    assert_eq!(TVMSynchronize(CPU, 0, s), 0);
    assert_eq!(TVMStreamStreamSynchronize(CPU, 0, s, s), 0);
    // SAFETY: the stream TVMStreamCreate gave (null on the CPU).
    assert_eq!(unsafe { TVMStreamFree(CPU, 0, s) }, 0);
    assert_eq!(TVMSynchronize(ROCM, 0, null_mut()), -1);
    assert!(last_error().contains("TVMSynchronize: device rocm:0 has no back end"));
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { TVMStreamCreate(ROCM, 2, &mut s) }, -1);
    assert!(last_error().contains("rocm:2"));
    assert_eq!(TVMSetStream(-3, 0, null_mut()), -1);
    assert!(last_error().contains("invalid device_type -3"));
}

#[test]
fn env_streams_and_signals() {
    let s = 0xabc0 as *mut c_void;
    let mut old = std::ptr::dangling_mut::<c_void>();
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { TVMFFIEnvSetStream(2, 0, s, &mut old) }, 0);
    assert!(old.is_null());
    assert_eq!(TVMFFIEnvGetStream(2, 0), s);
    assert!(TVMFFIEnvGetStream(2, 1).is_null());
    // SAFETY: null out is allowed.
    assert_eq!(
        unsafe { TVMFFIEnvSetStream(2, 0, null_mut(), null_mut()) },
        0
    );
    assert!(TVMFFIEnvGetStream(2, 0).is_null());
    assert_eq!(TVMFFIEnvCheckSignals(), 0);
}

#[test]
fn tensor_as_any_70_reads_the_same_dltensor_as_7() {
    let t = Tensor::empty(&[2, 2], dtypes::INT64, cpu()).unwrap();
    let f = Function::from_fn(|args| {
        let p = args[0]
            .as_dltensor()
            .ok_or_else(|| tvmrt::Error::type_error("not a tensor"))?;
        // SAFETY: the caller keeps the tensor alive during the call.
        let dl = unsafe { &*p };
        // SAFETY: shape holds ndim entries.
        let shape = unsafe { std::slice::from_raw_parts(dl.shape, dl.ndim as usize) };
        if shape != [2, 2] || dl.dtype != dtypes::INT64 {
            return Err(tvmrt::Error::value("wrong descriptor"));
        }
        Ok(Any::opaque_ptr(p.cast()))
    });
    let as_object = f.call_values(&[Any::from(t.clone())]).unwrap();
    let as_pointer = f.call_values(&[Any::dltensor_ptr(t.dltensor())]).unwrap();
    let expected = t.dltensor().cast::<c_void>();
    assert_eq!(as_object.view().as_opaque_ptr(), Some(expected));
    assert_eq!(as_pointer.view().as_opaque_ptr(), Some(expected));
    assert_eq!(expected as usize, t.object().as_ptr() as usize + 24);
    // The value holds index 70 and the object address; the DLTensor is 24 bytes further.
    let any = Any::from(t.clone());
    assert_eq!(any.view().type_index(), 70);
    let back = Tensor::from_any_view(&any.view(), "arg").unwrap();
    assert_eq!(back.dltensor(), t.dltensor());
    assert!(Tensor::from_any_view(&Any::dltensor_ptr(t.dltensor()).view(), "arg").is_err());
}

#[test]
fn classic_copies_accept_any_dltensor() {
    // As in TVM, the classic copy calls take any CPU DLTensor*, not only tvmrt arrays.
    let mut buf = [0u16; 6];
    let mut shape = [2i64, 3];
    let mut plain = DLTensor {
        data: buf.as_mut_ptr().cast(),
        device: cpu(),
        ndim: 2,
        dtype: dtypes::UINT16,
        shape: shape.as_mut_ptr(),
        strides: null_mut(),
        byte_offset: 0,
    };
    let src: Vec<u8> = (1u16..=6).flat_map(|v| v.to_le_bytes()).collect();
    // SAFETY: `plain` describes `buf`.
    unsafe {
        assert_eq!(
            TVMArrayCopyFromBytes(&mut plain, src.as_ptr() as *mut c_void, 12),
            0
        );
        assert_eq!(buf, [1, 2, 3, 4, 5, 6]);
        let arr = alloc(&[6], dtypes::UINT16);
        assert_eq!(TVMArrayCopyFromTo(&mut plain, arr, null_mut()), 0);
        let mut back = [0u8; 12];
        assert_eq!(TVMArrayCopyToBytes(arr, back.as_mut_ptr().cast(), 12), 0);
        assert_eq!(back.to_vec(), src);
        assert_eq!(
            TVMArrayCopyToBytes(&mut plain, back.as_mut_ptr().cast(), 11),
            -1
        );
        assert_eq!(
            last_error(),
            "ValueError: TVMArrayCopyToBytes: expected 12 bytes, got 11"
        );
        free(arr);
    }
}

#[test]
fn free_refuses_null() {
    // SAFETY: null is refused.
    assert_eq!(unsafe { TVMArrayFree(null_mut()) }, -1);
    assert!(last_error().contains("`handle`"));
}
