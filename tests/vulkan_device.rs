//! The Vulkan back end through the device interface and both C doors: arrays and data spaces
//! on a device, copies in every direction with byte offsets, the stream, workspaces,
//! attributes, kernels called through `TVMFuncCall` and `TVMFFIFunctionCall` on a module loaded
//! through each ABI's global lookup, and bad input (a host tensor given to a kernel, wrong
//! argument counts and launch values, a device id that does not exist, truncated payloads,
//! SPIR-V that is malformed or that the device cannot run, a machine without the loader or a
//! driver), each a clear error with no device memory left behind. The validation layer is on.

#![cfg(feature = "vulkan")]

mod vulkan_support;

use std::ffi::{c_void, CString};
use std::ptr::null_mut;

use tvmrt::abi::{type_code, type_index as ti, AnyPayload, DLTensor, TVMFFIAny, TVMFFIByteArray};
use tvmrt::abi::{TVMByteArray, TVMValue};
use tvmrt::capi::backend::{TVMBackendAllocWorkspace, TVMBackendFreeWorkspace};
use tvmrt::capi::classic_func::{TVMFuncCall, TVMFuncFree, TVMFuncGetGlobal};
use tvmrt::capi::ffi_core::{TVMFFIFunctionCall, TVMFFIFunctionGetGlobal, TVMFFIObjectDecRef};
use tvmrt::capi::module::{TVMModFree, TVMModGetFunction};
use tvmrt::capi::tensor::*;
use tvmrt::dtype::dtypes;
use tvmrt::function::registry;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;
use vulkan_support::*;

const VULKAN: i32 = 7;

#[test]
fn arrays_and_copies_in_every_direction() {
    let _s = serial();
    let before = live_buffers();
    let shape = [8i64];
    let (mut a, mut b) = (null_mut(), null_mut());
    // SAFETY: valid shape and out pointers.
    unsafe {
        assert_eq!(
            TVMArrayAlloc(shape.as_ptr(), 1, 2, 32, 1, VULKAN, 0, &mut a),
            0
        );
        assert_eq!(
            TVMArrayAlloc(shape.as_ptr(), 1, 2, 32, 1, VULKAN, 0, &mut b),
            0
        );
    }
    assert_eq!(live_buffers(), before + 2);
    let mut src = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    // SAFETY: `src` holds 32 bytes; the arrays are live.
    unsafe {
        assert_eq!(TVMArrayCopyFromBytes(a, src.as_mut_ptr().cast(), 32), 0);
        assert_eq!(TVMArrayCopyFromTo(a, b, null_mut()), 0);
        assert_eq!(TVMSynchronize(VULKAN, 0, null_mut()), 0);
    }
    let mut out = vec![0u8; 32];
    // SAFETY: `out` holds 32 bytes.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(b, out.as_mut_ptr().cast(), 32) },
        0
    );
    assert_eq!(out, src);
    // Device to device with byte offsets: a[4..8] -> b[0..4], then to the host, and host to
    // device at an offset: host -> b[6..8].
    let (mut s4a, mut s4b) = ([4i64], [4i64]);
    // SAFETY: live arrays.
    let (da, db) = unsafe { ((*a).data, (*b).data) };
    let mut from = desc(da, vulkan(0), &mut s4a, 16);
    let mut to = desc(db, vulkan(0), &mut s4b, 0);
    // SAFETY: both describe 16 bytes inside live 32-byte buffers.
    assert_eq!(
        unsafe { TVMDeviceCopyDataFromTo(&mut from, &mut to, null_mut()) },
        0
    );
    let mut host = [0f32; 4];
    let mut s4h = [4i64];
    let mut h = desc(host.as_mut_ptr().cast(), cpu(), &mut s4h, 0);
    // SAFETY: `h` describes `host`.
    assert_eq!(
        unsafe { TVMDeviceCopyDataFromTo(&mut to, &mut h, null_mut()) },
        0
    );
    assert_eq!(host, [5.0, 6.0, 7.0, 8.0]);
    let mut two = [-1f32, -2.0];
    let (mut s2h, mut s2d) = ([2i64], [2i64]);
    let mut h2 = desc(two.as_mut_ptr().cast(), cpu(), &mut s2h, 0);
    let mut d2 = desc(db, vulkan(0), &mut s2d, 24);
    // SAFETY: 8 bytes of host memory into bytes 24..32 of a live buffer.
    assert_eq!(
        unsafe { TVMDeviceCopyDataFromTo(&mut h2, &mut d2, null_mut()) },
        0
    );
    // SAFETY: as above.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(b, out.as_mut_ptr().cast(), 32) },
        0
    );
    assert_eq!(to_f32s(&out), [5.0, 6.0, 7.0, 8.0, 5.0, 6.0, -1.0, -2.0]);
    // Refusals: a range past the end, a descriptor naming another device, host memory.
    let mut past = desc(da, vulkan(0), &mut s4a, 20);
    copy_refused(&mut past, &mut h, "exceed the Vulkan buffer's 32 bytes");
    let mut liar = desc(da, vulkan(1), &mut s4a, 0);
    copy_refused(
        &mut liar,
        &mut h,
        "says vulkan:1 but its buffer was allocated on vulkan:0",
    );
    let mut fake = desc(host.as_mut_ptr().cast(), vulkan(0), &mut s4a, 0);
    copy_refused(&mut fake, &mut h, "is not a Vulkan buffer tvmrt allocated");
    // A copy larger than the staging buffer goes in pieces.
    let n = (20 << 20) / 4 + 3;
    let big: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let t = Tensor::empty(&[n as i64], dtypes::FLOAT32, vulkan(0)).unwrap();
    t.copy_from_bytes(&f32s(&big)).unwrap();
    assert!(to_f32s(&t.to_vec().unwrap()) == big);
    drop(t);
    // SAFETY: released once.
    unsafe {
        assert_eq!(TVMArrayFree(a), 0);
        assert_eq!(TVMArrayFree(b), 0);
    }
    assert_eq!(live_buffers(), before);
    assert_no_validation_errors();
}

#[test]
fn data_spaces_streams_scopes_and_workspaces() {
    let _s = serial();
    let before = live_buffers();
    let dev = vulkan(0);
    let mut p = null_mut();
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { TVMDeviceAllocDataSpace(dev, 64, 64, dtypes::FLOAT32, &mut p) },
        0
    );
    assert_eq!(live_buffers(), before + 1);
    let shape = [2i64, 3];
    let mut q = null_mut();
    // SAFETY: valid pointers.
    let rc = unsafe {
        TVMDeviceAllocDataSpaceWithScope(
            dev,
            2,
            shape.as_ptr(),
            dtypes::INT32,
            c"texture".as_ptr(),
            &mut q,
        )
    };
    assert_eq!(rc, -1);
    assert!(last_error().contains("memory scope `texture` is not supported on vulkan:0"));
    // SAFETY: from the allocation above; the second free is refused.
    unsafe {
        assert_eq!(TVMDeviceFreeDataSpace(dev, p), 0);
        assert_eq!(TVMDeviceFreeDataSpace(dev, p), -1);
    }
    assert!(
        last_error().contains("not a Vulkan buffer"),
        "{}",
        last_error()
    );
    assert_eq!(live_buffers(), before);
    // One stream per device, as TVM's default.
    let mut s = std::ptr::dangling_mut::<c_void>();
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { TVMStreamCreate(VULKAN, 0, &mut s) }, 0);
    assert!(s.is_null());
    assert_eq!(TVMSynchronize(VULKAN, 0, 0x10 as *mut c_void), -1);
    assert!(
        last_error().contains("pass a null stream"),
        "{}",
        last_error()
    );
    // Workspaces: pooled, page-sized, reused, a second free refused.
    let a = TVMBackendAllocWorkspace(VULKAN, 0, 1000, 2, 32);
    assert!(!a.is_null());
    let b = tvmrt::device::vulkan::buffer::lookup(a, "workspace").unwrap();
    assert!(b.nbytes >= 1000 && b.nbytes.is_multiple_of(4096));
    // SAFETY: from TVMBackendAllocWorkspace on this device.
    unsafe {
        assert_eq!(TVMBackendFreeWorkspace(VULKAN, 0, a), 0);
        assert_eq!(TVMBackendFreeWorkspace(VULKAN, 0, a), -1);
    }
    let c = TVMBackendAllocWorkspace(VULKAN, 0, 500, 2, 32);
    assert_eq!(a, c, "the freed buffer is reused");
    // SAFETY: as above.
    assert_eq!(unsafe { TVMBackendFreeWorkspace(VULKAN, 0, c) }, 0);
    assert!(TVMBackendAllocWorkspace(VULKAN, 9, 16, 2, 32).is_null());
    assert!(
        last_error().contains("Vulkan device 9 does not exist"),
        "{}",
        last_error()
    );
    assert_no_validation_errors();
}

#[test]
fn attributes_current_device_and_missing_ids() {
    let _s = serial();
    let attr = registry::get_required("runtime.GetDeviceAttr").unwrap();
    let get = |id: i64, kind: i64| {
        attr.call_values(&[Any::from(7i64), Any::from(id), Any::from(kind)])
            .unwrap()
    };
    assert_eq!(get(0, 0).view().as_i64(), Some(1));
    assert_eq!(get(99, 0).view().as_i64(), Some(0));
    assert!(
        get(0, 1).view().as_i64().unwrap() >= 128,
        "max threads per block"
    );
    assert!(get(0, 3).view().as_i64().unwrap() >= 16384, "shared memory");
    assert!(
        !get(0, 5).view().as_str().unwrap().is_empty(),
        "device name"
    );
    assert!(
        get(0, 4).view().as_str().unwrap().starts_with("1."),
        "Vulkan version"
    );
    assert!(get(0, 8).view().as_str().unwrap().starts_with('['));
    assert!(registry::get("device_api.vulkan").is_some());
    let set = registry::get_required("__tvm_set_device").unwrap();
    set.call_values(&[Any::from(7i64), Any::from(0i64)])
        .unwrap();
    let e = set
        .call_values(&[Any::from(7i64), Any::from(7i64)])
        .unwrap_err();
    assert!(
        e.message.contains("Vulkan device 7 does not exist"),
        "{e:?}"
    );
    let e = Tensor::empty(&[4], dtypes::FLOAT32, vulkan(7)).unwrap_err();
    assert!(
        e.message.contains("Vulkan device 7 does not exist"),
        "{e:?}"
    );
    // A host-only function refuses a device tensor by name.
    let t = Tensor::empty(&[3], dtypes::FLOAT32, vulkan(0)).unwrap();
    // SAFETY: refused before any byte is read.
    let e = unsafe { t.as_bytes() }.unwrap_err();
    assert!(e.message.contains("the tensor is on vulkan:0"), "{e:?}");
    assert_no_validation_errors();
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

#[test]
fn kernels_through_the_classic_c_api() {
    let _s = serial();
    let before = live_buffers();
    let payload = payload();
    let mut loader = null_mut();
    // SAFETY: valid name and out pointer.
    let rc =
        unsafe { TVMFuncGetGlobal(c("ffi.Module.load_from_bytes.vulkan").as_ptr(), &mut loader) };
    assert_eq!(rc, 0, "{}", last_error());
    assert!(!loader.is_null());
    let bytes = TVMByteArray {
        data: payload.as_ptr().cast(),
        size: payload.len(),
    };
    let mut args = [TVMValue {
        v_handle: (&bytes as *const TVMByteArray).cast_mut().cast(),
    }];
    let mut codes = [type_code::BYTES];
    let mut ret = TVMValue::default();
    let mut ret_code = 0;
    // SAFETY: a live function handle; one argument.
    let rc = unsafe {
        TVMFuncCall(
            loader,
            args.as_mut_ptr(),
            codes.as_mut_ptr(),
            1,
            &mut ret,
            &mut ret_code,
        )
    };
    assert_eq!(rc, 0, "{}", last_error());
    assert_eq!(ret_code, type_code::MODULE_HANDLE);
    // SAFETY: a module result.
    let m = unsafe { ret.v_handle };
    let mut f = null_mut();
    // SAFETY: a live module handle.
    let rc = unsafe { TVMModGetFunction(m, c("add_scalar_kernel").as_ptr(), 0, &mut f) };
    assert_eq!(rc, 0, "{}", last_error());
    assert!(!f.is_null());
    let n = 100i64;
    let arrays: Vec<*mut DLTensor> = (0..3)
        .map(|_| {
            let mut t = null_mut();
            // SAFETY: valid pointers.
            assert_eq!(
                unsafe { TVMArrayAlloc(&n, 1, 2, 32, 1, VULKAN, 0, &mut t) },
                0
            );
            t
        })
        .collect();
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    for (t, v) in arrays[..2]
        .iter()
        .zip([f32s(&a), f32s(&vec![1.0; n as usize])])
    {
        // SAFETY: 400 bytes into a live 100-element array.
        assert_eq!(
            unsafe { TVMArrayCopyFromBytes(*t, v.as_ptr().cast_mut().cast(), 400) },
            0
        );
    }
    // SAFETY: live arrays.
    let data: Vec<*mut c_void> = arrays.iter().map(|&t| unsafe { (*t).data }).collect();
    let mut args = [
        TVMValue { v_handle: data[0] },
        TVMValue { v_handle: data[1] },
        TVMValue { v_handle: data[2] },
        TVMValue { v_int64: n },
        TVMValue { v_float64: 0.5 },
        TVMValue { v_int64: 2 },
        TVMValue { v_int64: 64 },
    ];
    let mut codes = [
        type_code::OPAQUE_HANDLE,
        type_code::OPAQUE_HANDLE,
        type_code::OPAQUE_HANDLE,
        type_code::INT,
        type_code::FLOAT,
        type_code::INT,
        type_code::INT,
    ];
    // SAFETY: a live function handle; seven arguments.
    let rc = unsafe {
        TVMFuncCall(
            f,
            args.as_mut_ptr(),
            codes.as_mut_ptr(),
            7,
            &mut ret,
            &mut ret_code,
        )
    };
    assert_eq!(rc, 0, "{}", last_error());
    assert_eq!(TVMSynchronize(VULKAN, 0, null_mut()), 0);
    let mut out = vec![0u8; 400];
    // SAFETY: 400 bytes.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(arrays[2], out.as_mut_ptr().cast(), 400) },
        0
    );
    assert_eq!(
        to_f32s(&out),
        a.iter().map(|x| 0.5 * x + 1.0).collect::<Vec<_>>()
    );
    // A host pointer is refused by the kernel: -1 and a message.
    let mut host = vec![0f32; 100];
    args[0] = TVMValue {
        v_handle: host.as_mut_ptr().cast(),
    };
    // SAFETY: as above.
    let rc = unsafe {
        TVMFuncCall(
            f,
            args.as_mut_ptr(),
            codes.as_mut_ptr(),
            7,
            &mut ret,
            &mut ret_code,
        )
    };
    assert_eq!(rc, -1);
    assert!(
        last_error().contains("is not a Vulkan buffer tvmrt allocated"),
        "{}",
        last_error()
    );
    // SAFETY: handles owned by this test, released once.
    unsafe {
        for t in arrays {
            assert_eq!(TVMArrayFree(t), 0);
        }
        assert_eq!(TVMFuncFree(f), 0);
        assert_eq!(TVMModFree(m), 0);
        assert_eq!(TVMFuncFree(loader), 0);
    }
    assert_eq!(live_buffers(), before);
    assert_no_validation_errors();
}

fn ffi_any(type_index: i32, payload: AnyPayload) -> TVMFFIAny {
    TVMFFIAny {
        type_index,
        small_str_len: 0,
        payload,
    }
}

fn ffi_global(name: &str) -> *mut c_void {
    let name = TVMFFIByteArray {
        data: name.as_ptr().cast(),
        size: name.len(),
    };
    let mut f = null_mut();
    // SAFETY: valid byte array and out pointer.
    assert_eq!(unsafe { TVMFFIFunctionGetGlobal(&name, &mut f) }, 0);
    assert!(!f.is_null());
    f
}

/// Calls `f` through `TVMFFIFunctionCall`; the result (owned) or the error code.
fn ffi_call(f: *mut c_void, args: &mut [TVMFFIAny]) -> Result<TVMFFIAny, i32> {
    let mut result = ffi_any(ti::NONE, AnyPayload::ZERO);
    // SAFETY: a live function; `args` holds `len` values.
    let rc = unsafe { TVMFFIFunctionCall(f, args.as_mut_ptr(), args.len() as i32, &mut result) };
    if rc == 0 {
        Ok(result)
    } else {
        Err(rc)
    }
}

#[test]
fn kernels_through_the_tvm_ffi_c_api() {
    let _s = serial();
    let payload = payload();
    let load = ffi_global("ffi.Module.load_from_bytes.vulkan");
    let bytes = TVMFFIByteArray {
        data: payload.as_ptr().cast(),
        size: payload.len(),
    };
    let m = ffi_call(
        load,
        &mut [ffi_any(
            ti::BYTE_ARRAY_PTR,
            AnyPayload {
                v_ptr: (&bytes as *const TVMFFIByteArray).cast_mut().cast(),
            },
        )],
    )
    .unwrap();
    assert_eq!(m.type_index, ti::MODULE);
    let get = ffi_global("ffi.ModuleGetFunction");
    let name = c("reduce_kernel");
    let f = ffi_call(
        get,
        &mut [
            m,
            ffi_any(
                ti::RAW_STR,
                AnyPayload {
                    v_c_str: name.as_ptr(),
                },
            ),
            ffi_any(ti::BOOL, AnyPayload { v_int64: 0 }),
        ],
    )
    .unwrap();
    assert_eq!(f.type_index, ti::FUNCTION);
    let n = 256usize;
    let a: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();
    let ta = Tensor::empty(&[n as i64], dtypes::FLOAT32, vulkan(0)).unwrap();
    ta.copy_from_bytes(&f32s(&a)).unwrap();
    let out = Tensor::empty(&[4], dtypes::FLOAT32, vulkan(0)).unwrap();
    let int = |v: i64| ffi_any(ti::INT, AnyPayload { v_int64: v });
    let mut args = [
        ffi_any(
            ti::OPAQUE_PTR,
            AnyPayload {
                v_ptr: ta.dl().data,
            },
        ),
        ffi_any(
            ti::OPAQUE_PTR,
            AnyPayload {
                v_ptr: out.dl().data,
            },
        ),
        int(n as i64),
        int(4),
        int(64),
    ];
    // SAFETY: `f.payload` is the function object just returned.
    let fobj = unsafe { f.payload.v_obj };
    let r = ffi_call(fobj, &mut args).unwrap();
    assert_eq!(r.type_index, ti::NONE);
    let got = to_f32s(&out.to_vec().unwrap());
    for g in 0..4 {
        assert_eq!(got[g], a[g * 64..(g + 1) * 64].iter().sum::<f32>());
    }
    // Wrong argument count: an error code, the message in the error slot.
    assert!(ffi_call(fobj, &mut args[..3]).is_err());
    // SAFETY: the references returned above, released once.
    unsafe {
        TVMFFIObjectDecRef(fobj);
        TVMFFIObjectDecRef(m.payload.v_obj);
        TVMFFIObjectDecRef(get);
        TVMFFIObjectDecRef(load);
    }
    assert_no_validation_errors();
}

#[test]
fn kernels_refuse_host_tensors_wrong_counts_and_bad_launches() {
    let _s = serial();
    let before = live_buffers();
    let m = module();
    let k = func(&m, "add_scalar_kernel");
    let t = Tensor::empty(&[4], dtypes::FLOAT32, vulkan(0)).unwrap();
    let host = Tensor::empty(&[4], dtypes::FLOAT32, cpu()).unwrap();
    let args = |a0: Any, tail: [Any; 2]| {
        let [g, b] = tail;
        vec![
            a0,
            Any::opaque_ptr(t.dl().data),
            Any::opaque_ptr(t.dl().data),
            Any::from(4i64),
            Any::from(1.0),
            g,
            b,
        ]
    };
    let e = call(
        &k,
        &args(
            Any::opaque_ptr(host.dl().data),
            [Any::from(1i64), Any::from(64i64)],
        ),
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("Vulkan kernel `add_scalar_kernel` argument 0")
            && e.message.contains("is not a Vulkan buffer tvmrt allocated"),
        "{e:?}"
    );
    let e = call(&k, &[Any::opaque_ptr(t.dl().data)]).unwrap_err();
    assert!(e.message.contains("expects 7 arguments"), "{e:?}");
    let e = call(
        &k,
        &args(
            Any::opaque_ptr(t.dl().data),
            [Any::from("one"), Any::from(64i64)],
        ),
    )
    .unwrap_err();
    assert!(e.message.contains("launch argument 5"), "{e:?}");
    let e = call(
        &k,
        &args(
            Any::opaque_ptr(t.dl().data),
            [Any::from(1i64 << 40), Any::from(64i64)],
        ),
    )
    .unwrap_err();
    assert!(
        e.message.contains("workgroups in dimension 0 exceeds"),
        "{e:?}"
    );
    let e = call(
        &k,
        &args(Any::from(3i64), [Any::from(1i64), Any::from(64i64)]),
    )
    .unwrap_err();
    assert!(e.message.contains("argument 0"), "{e:?}");
    // The current device is per thread; vulkan:0 stays usable after the refusals.
    set_device(0);
    drop((t, host));
    assert_eq!(live_buffers(), before);
    assert_no_validation_errors();
}

fn set_device(id: i64) {
    registry::get_required("__tvm_set_device")
        .unwrap()
        .call_values(&[Any::from(7i64), Any::from(id)])
        .unwrap();
}

#[test]
fn payloads_truncated_malformed_or_unrunnable_are_refused() {
    let _s = serial();
    let payload = payload();
    assert!(load_bytes(&payload).is_ok());
    for cut in (0..payload.len()).step_by(53).chain([payload.len() - 1]) {
        let e = load_bytes(&payload[..cut]).unwrap_err();
        assert!(
            e.message.contains("Vulkan module payload"),
            "cut {cut}: {e:?}"
        );
    }
    // TVM 0.22/0.23's layout, each shader without its byte length before it: the same kernels.
    let specs = kernels();
    let table: Vec<_> = specs.iter().map(info).collect();
    let bare: Vec<_> = specs
        .iter()
        .map(|k| {
            let words = compile(k.file, k.name);
            let shader = tvmrt::device::vulkan::module::Shader {
                flag: k.flag,
                words,
            };
            (k.name.to_string(), shader)
        })
        .collect();
    let write_in = tvmrt::device::vulkan::module::write_payload_in;
    let old = load_bytes(&write_in("vulkan", &table, &bare, false)).unwrap();
    let new = load_bytes(&payload).unwrap();
    assert_eq!(
        tvmrt::device::describe_module(&old).unwrap().kernels.len(),
        tvmrt::device::describe_module(&new).unwrap().kernels.len()
    );
    assert_eq!(old.save_to_bytes().unwrap().len(), payload.len());
    let mut longer = payload.clone();
    longer.push(0);
    let e = load_bytes(&longer).unwrap_err();
    assert!(e.message.contains("1 trailing bytes"), "{e:?}");
    // The classic loader takes the payload at the front of a longer stream; TVM <= 0.20's
    // function table has no extra tags.
    let classic = registry::get_required("runtime.module.loadbinary_vulkan").unwrap();
    assert!(classic.call_values(&[Any::bytes(&payload[..40])]).is_err());

    // A shader whose words are garbled after the header.
    let mut specs = kernels();
    specs.truncate(1);
    let table = vec![info(&specs[0])];
    let mut words = compile(specs[0].file, specs[0].name);
    let shader = |words: Vec<u32>| {
        vec![(
            specs[0].name.to_string(),
            tvmrt::device::vulkan::module::Shader { flag: 0, words },
        )]
    };
    let write = tvmrt::device::vulkan::module::write_payload;
    let mut garbled = words.clone();
    garbled[7] = 0xfff0_0001;
    let e = load_bytes(&write("vulkan", &table, &shader(garbled))).unwrap_err();
    assert!(e.message.contains("invalid SPIR-V"), "{e:?}");
    let e = load_bytes(&write("vulkan", &table, &shader(vec![0; 16]))).unwrap_err();
    assert!(e.message.contains("not the magic number"), "{e:?}");
    // A workgroup larger than the device runs: refused at the first launch, named.
    let at = (5..words.len())
        .find(|&i| words[i] == ((6 << 16) | 16) && words[i + 2] == 17)
        .expect("a LocalSize execution mode");
    words[at + 3] = 1 << 16;
    let m = load_bytes(&write("vulkan", &table, &shader(words))).unwrap();
    let t = Tensor::empty(&[4], dtypes::FLOAT32, vulkan(0)).unwrap();
    let p = || Any::opaque_ptr(t.dl().data);
    let e = call(
        &func(&m, "add_scalar_kernel"),
        &[
            p(),
            p(),
            p(),
            Any::from(4i64),
            Any::from(1.0),
            Any::from(1i64),
            Any::from(64i64),
        ],
    )
    .unwrap_err();
    assert!(
        e.message.contains("does not run on vulkan:0")
            && e.message.contains("exceeds the device's limits"),
        "{e:?}"
    );
    assert_no_validation_errors();
}

#[test]
fn a_machine_without_the_vulkan_loader_gets_a_clear_error() {
    let out = in_child(
        "child_without_loader",
        &[(
            "TVMRT_VULKAN_LIBRARY",
            "/nonexistent/libvulkan.so.1".to_string(),
        )],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
#[ignore = "run by a_machine_without_the_vulkan_loader_gets_a_clear_error"]
fn child_without_loader() {
    let shape = [4i64];
    let mut out = null_mut();
    // SAFETY: valid pointers.
    assert_eq!(
        unsafe { TVMArrayAlloc(shape.as_ptr(), 1, 2, 32, 1, VULKAN, 0, &mut out) },
        -1
    );
    let e = last_error();
    assert!(
        e.contains("Vulkan is not available: cannot open `/nonexistent/libvulkan.so.1`")
            && e.contains("libvulkan1"),
        "{e}"
    );
    // Loading a module still works; asking whether the device exists is not an error.
    let m = module();
    assert!(m
        .get_function("add_scalar_kernel", false)
        .unwrap()
        .is_some());
    let attr = registry::get_required("runtime.GetDeviceAttr").unwrap();
    let exists = attr
        .call_values(&[Any::from(7i64), Any::from(0i64), Any::from(0i64)])
        .unwrap();
    assert_eq!(exists.view().as_i64(), Some(0));
    assert!(TVMBackendAllocWorkspace(VULKAN, 0, 16, 2, 32).is_null());
}

#[test]
fn a_machine_without_a_vulkan_driver_gets_a_clear_error() {
    let out = in_child(
        "child_without_driver",
        &[
            ("VK_DRIVER_FILES", "/nonexistent/icd.json".to_string()),
            ("VK_ICD_FILENAMES", "/nonexistent/icd.json".to_string()),
        ],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
#[ignore = "run by a_machine_without_a_vulkan_driver_gets_a_clear_error"]
fn child_without_driver() {
    let e = Tensor::empty(&[4], dtypes::FLOAT32, vulkan(0)).unwrap_err();
    assert!(
        e.message.contains("no Vulkan device found")
            && e.message
                .contains("VK_DRIVER_FILES is `/nonexistent/icd.json`"),
        "{e:?}"
    );
}
