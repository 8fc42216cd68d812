//! The OpenCL back end through the device interface and both C doors: tensors and data spaces
//! on a device, copies in every direction with byte offsets, the queue as TVM's only OpenCL
//! stream, workspaces, attributes, DLPack keeping the device, concurrent launches, and bad input
//! (a CPU tensor given to a kernel, wrong shapes and device ids, truncated or unbuildable
//! payloads, FPGA binaries, a machine without an OpenCL platform or library), each a clear error
//! with no device memory left behind.

#![cfg(feature = "opencl")]

mod opencl_support;

use std::ffi::c_void;
use std::ptr::null_mut;

use opencl_support::*;
use tvmrt::abi::{DLDataType, DLTensor};
use tvmrt::capi::backend::{TVMBackendAllocWorkspace, TVMBackendFreeWorkspace};
use tvmrt::capi::tensor::*;
use tvmrt::dtype::dtypes;
use tvmrt::function::registry;
use tvmrt::module::Module;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

const OPENCL: i32 = 4;

#[test]
fn arrays_on_opencl_through_the_classic_api() {
    let _serial = serial();
    let before = live_buffers();
    let shape = [8i64];
    let mut a = null_mut();
    let mut b = null_mut();
    // SAFETY: valid shape and out pointers.
    unsafe {
        assert_eq!(
            TVMArrayAlloc(shape.as_ptr(), 1, 2, 32, 1, OPENCL, 0, &mut a),
            0
        );
        assert_eq!(
            TVMArrayAlloc(shape.as_ptr(), 1, 2, 32, 1, OPENCL, 0, &mut b),
            0
        );
    }
    assert_eq!(live_buffers(), before + 2);
    // SAFETY: `a` is a live array; the data pointer is an OpenCL buffer descriptor.
    assert_eq!(unsafe { (*a).device.device_type.0 }, 4);
    let mut src = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    // SAFETY: `src` holds 32 bytes; the arrays are live.
    unsafe {
        assert_eq!(TVMArrayCopyFromBytes(a, src.as_mut_ptr().cast(), 32), 0);
        assert_eq!(TVMArrayCopyFromTo(a, b, null_mut()), 0);
        assert_eq!(TVMSynchronize(OPENCL, 0, null_mut()), 0);
    }
    let mut out = vec![0u8; 32];
    // SAFETY: `out` holds 32 bytes.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(b, out.as_mut_ptr().cast(), 32) },
        0
    );
    assert_eq!(out, src);
    // The wrong byte count is refused.
    // SAFETY: as above.
    assert_eq!(
        unsafe { TVMArrayCopyToBytes(b, out.as_mut_ptr().cast(), 8) },
        -1
    );
    assert!(
        last_error().contains("expected 32 bytes, got 8"),
        "{}",
        last_error()
    );
    // Device to device with byte offsets: a[4..8] -> b[0..4], then to the host.
    let (mut s4a, mut s4b) = ([4i64], [4i64]);
    // SAFETY: `a` and `b` are live arrays.
    let (da, db) = unsafe { ((*a).data, (*b).data) };
    let mut from = desc(da, opencl(0), &mut s4a, 16);
    let mut to = desc(db, opencl(0), &mut s4b, 0);
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
    // A range past the buffer's end is refused, not read.
    let mut past = desc(da, opencl(0), &mut s4a, 20);
    copy_refused(&mut past, &mut h, "exceed the OpenCL buffer's 32 bytes");
    // A descriptor that claims another device than its buffer's is refused.
    let mut liar = desc(da, opencl(1), &mut s4a, 0);
    copy_refused(
        &mut liar,
        &mut h,
        "says opencl:1 but its buffer was allocated on opencl:0",
    );
    // Host memory passed as an OpenCL pointer is refused, not read as a descriptor.
    let mut fake = desc(host.as_mut_ptr().cast(), opencl(0), &mut s4a, 0);
    copy_refused(&mut fake, &mut h, "is not an OpenCL buffer tvmrt allocated");
    // SAFETY: the arrays are released once.
    unsafe {
        assert_eq!(TVMArrayFree(a), 0);
        assert_eq!(TVMArrayFree(b), 0);
    }
    assert_eq!(live_buffers(), before);
}

#[test]
fn data_spaces_streams_and_scopes() {
    let _serial = serial();
    let before = live_buffers();
    let dev = opencl(0);
    let mut p = null_mut();
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { TVMDeviceAllocDataSpace(dev, 64, 64, dtypes::FLOAT32, &mut p) },
        0
    );
    assert!(!p.is_null());
    assert_eq!(live_buffers(), before + 1);
    let shape = [2i64, 3];
    let mut q = null_mut();
    let global = c"global";
    // SAFETY: valid pointers.
    assert_eq!(
        unsafe {
            TVMDeviceAllocDataSpaceWithScope(
                dev,
                2,
                shape.as_ptr(),
                dtypes::INT32,
                global.as_ptr(),
                &mut q,
            )
        },
        0
    );
    let texture = c"global.texture";
    // SAFETY: valid pointers.
    assert_eq!(
        unsafe {
            TVMDeviceAllocDataSpaceWithScope(
                dev,
                2,
                shape.as_ptr(),
                dtypes::INT32,
                texture.as_ptr(),
                &mut q,
            )
        },
        -1
    );
    assert!(
        last_error().contains("memory scope `global.texture` is not supported on opencl:0"),
        "{}",
        last_error()
    );
    // SAFETY: both came from the allocations above.
    unsafe {
        assert_eq!(TVMDeviceFreeDataSpace(dev, p), 0);
        assert_eq!(TVMDeviceFreeDataSpace(dev, q), 0);
        // A second free is refused, not a double release.
        assert_eq!(TVMDeviceFreeDataSpace(dev, p), -1);
    }
    assert!(
        last_error().contains("not an OpenCL buffer"),
        "{}",
        last_error()
    );
    assert_eq!(live_buffers(), before);
    // TVMFFIEnvTensorAlloc with no DLPack allocator installed: tvm-ffi's error, nothing
    // allocated on the device.
    let mut dims = [3i64, 2];
    let mut proto = DLTensor {
        data: null_mut(),
        device: dev,
        ndim: 2,
        dtype: dtypes::FLOAT32,
        shape: dims.as_mut_ptr(),
        strides: null_mut(),
        byte_offset: 0,
    };
    let mut obj = null_mut();
    // SAFETY: valid prototype and out pointer.
    assert_eq!(unsafe { TVMFFIEnvTensorAlloc(&mut proto, &mut obj) }, -1);
    assert!(
        last_error().contains("allocator is nullptr"),
        "{}",
        last_error()
    );
    assert_eq!(live_buffers(), before);
    // Streams: OpenCL has one queue per device, as in TVM.
    let mut s = std::ptr::dangling_mut::<c_void>();
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { TVMStreamCreate(OPENCL, 0, &mut s) }, 0);
    assert!(s.is_null());
    assert_eq!(TVMSetStream(OPENCL, 0, s), 0);
    assert_eq!(TVMStreamStreamSynchronize(OPENCL, 0, s, s), 0);
    assert_eq!(TVMSynchronize(OPENCL, 0, 0x10 as *mut c_void), -1);
    assert!(
        last_error().contains("pass a null stream"),
        "{}",
        last_error()
    );
    // SAFETY: the null stream TVMStreamCreate gave.
    assert_eq!(unsafe { TVMStreamFree(OPENCL, 0, s) }, 0);
}

#[test]
fn workspaces_come_from_a_pool() {
    let _serial = serial();
    let a = TVMBackendAllocWorkspace(OPENCL, 0, 1000, 2, 32);
    assert!(!a.is_null());
    let desc = tvmrt::device::opencl::buffer::lookup(a, "workspace").unwrap();
    assert!(desc.nbytes >= 1000 && desc.nbytes.is_multiple_of(4096));
    // SAFETY: `a` came from TVMBackendAllocWorkspace on this device.
    assert_eq!(unsafe { TVMBackendFreeWorkspace(OPENCL, 0, a) }, 0);
    // SAFETY: a second free is refused.
    assert_eq!(unsafe { TVMBackendFreeWorkspace(OPENCL, 0, a) }, -1);
    assert!(
        last_error().contains("is not a workspace in use"),
        "{}",
        last_error()
    );
    let b = TVMBackendAllocWorkspace(OPENCL, 0, 500, 2, 32);
    assert_eq!(a, b, "the freed buffer is reused");
    // SAFETY: as above.
    assert_eq!(unsafe { TVMBackendFreeWorkspace(OPENCL, 0, b) }, 0);
    assert!(TVMBackendAllocWorkspace(OPENCL, 9, 16, 2, 32).is_null());
    assert!(
        last_error().contains("OpenCL device 9 does not exist"),
        "{}",
        last_error()
    );
}

#[test]
fn attributes_and_current_device() {
    let _serial = serial();
    let attr = registry::get_required("runtime.GetDeviceAttr").unwrap();
    let get = |id: i64, kind: i64| {
        attr.call_values(&[Any::from(4i64), Any::from(id), Any::from(kind)])
            .unwrap()
    };
    assert_eq!(get(0, 0).view().as_i64(), Some(1));
    assert_eq!(get(99, 0).view().as_i64(), Some(0));
    assert!(
        get(0, 1).view().as_i64().unwrap() > 0,
        "max threads per block"
    );
    assert_eq!(get(0, 2).view().as_i64(), Some(1), "TVM's OpenCL warp size");
    assert!(get(0, 3).view().as_i64().unwrap() > 0, "local memory");
    assert!(
        !get(0, 5).view().as_str().unwrap().is_empty(),
        "device name"
    );
    assert!(
        get(0, 4).view().as_str().unwrap().contains('.'),
        "OpenCL version"
    );
    assert!(get(0, 8).view().as_str().unwrap().starts_with('['));
    assert!(get(0, 14).view().as_i64().unwrap() > 0, "global memory");
    assert!(registry::get("device_api.opencl").is_some());
    let set = registry::get_required("__tvm_set_device").unwrap();
    set.call_values(&[Any::from(4i64), Any::from(0i64)])
        .unwrap();
    let e = set
        .call_values(&[Any::from(4i64), Any::from(7i64)])
        .unwrap_err();
    assert!(
        e.message.contains("OpenCL device 7 does not exist"),
        "{e:?}"
    );
    let e = Tensor::empty(&[4], dtypes::FLOAT32, opencl(7)).unwrap_err();
    assert!(
        e.message.contains("this machine has 1 OpenCL device") || e.message.contains("devices"),
        "{e:?}"
    );
}

#[test]
fn dlpack_keeps_device_tensors_on_their_device() {
    let _serial = serial();
    let before = live_buffers();
    let t = Tensor::empty(&[3], dtypes::FLOAT32, opencl(0)).unwrap();
    t.copy_from_bytes(&f32s(&[1.0, 2.0, 3.0])).unwrap();
    let exported = t.to_dlpack_versioned();
    // SAFETY: a live export.
    let dl = unsafe { (*exported).dl_tensor };
    assert_eq!(dl.device, opencl(0));
    assert_eq!(
        dl.data,
        t.dl().data,
        "the buffer descriptor, not a host copy"
    );
    // SAFETY: imports the export (ownership moves to the new tensor).
    let back = unsafe {
        Tensor::from_dlpack_versioned(
            exported,
            tvmrt::tensor::dlpack::ImportRequirements::default(),
        )
    }
    .unwrap();
    assert_eq!(back.device(), opencl(0));
    assert_eq!(values(&back), [1.0, 2.0, 3.0]);
    drop((t, back));
    assert_eq!(live_buffers(), before);
    // A host-only function refuses a device tensor by name.
    let t = Tensor::empty(&[3], dtypes::FLOAT32, opencl(0)).unwrap();
    // SAFETY: refused before any byte is read.
    let e = unsafe { t.as_bytes() }.unwrap_err();
    assert!(e.message.contains("the tensor is on opencl:0"), "{e:?}");
    let to_host = t.to_host().unwrap();
    assert_eq!(to_host.device(), cpu());
}

#[test]
fn concurrent_launches_from_many_threads() {
    let _serial = serial();
    let lib = load("elementwise.so");
    let add = func(&lib, "add");
    std::thread::scope(|s| {
        for k in 0..4 {
            let add = add.clone();
            s.spawn(move || {
                for round in 0..20 {
                    let n = 100 + k * 7 + round;
                    let a = Tensor::empty(&[n], dtypes::FLOAT32, opencl(0)).unwrap();
                    let b = Tensor::empty(&[n], dtypes::FLOAT32, opencl(0)).unwrap();
                    let c = Tensor::empty(&[n], dtypes::FLOAT32, opencl(0)).unwrap();
                    let av: Vec<f32> = (0..n).map(|i| i as f32).collect();
                    let bv: Vec<f32> = (0..n).map(|i| (k * 1000) as f32 - i as f32).collect();
                    a.copy_from_bytes(&f32s(&av)).unwrap();
                    b.copy_from_bytes(&f32s(&bv)).unwrap();
                    call(&add, &[Any::from(a), Any::from(b), Any::from(c.clone())]).unwrap();
                    assert!(values(&c).iter().all(|&v| v == (k * 1000) as f64));
                }
            });
        }
    });
}

#[test]
fn kernels_refuse_host_tensors_wrong_shapes_and_bad_launches() {
    let _serial = serial();
    let before = live_buffers();
    let lib = load("elementwise.so");
    let add = func(&lib, "add");
    let dev = |n| Tensor::empty(&[n], dtypes::FLOAT32, opencl(0)).unwrap();
    let host = Tensor::empty(&[4], dtypes::FLOAT32, cpu()).unwrap();
    // The host launcher's own checks (TVM's generated code).
    let e = call(
        &add,
        &[
            Any::from(host.clone()),
            Any::from(dev(4)),
            Any::from(dev(4)),
        ],
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("Mismatched A.device_type on argument #0")
            && e.message.contains("opencl"),
        "{e:?}"
    );
    let e = call(
        &add,
        &[Any::from(dev(4)), Any::from(dev(5)), Any::from(dev(4))],
    )
    .unwrap_err();
    assert!(
        e.message.contains("Mismatched B.shape[0] on argument #1"),
        "{e:?}"
    );
    // The kernel itself, called directly: a host pointer is not a buffer.
    let kernel = func(&lib, "add_kernel");
    let n = 4i64;
    let t = dev(4);
    let e = call(
        &kernel,
        &[
            Any::opaque_ptr(host.dl().data),
            Any::opaque_ptr(t.dl().data),
            Any::opaque_ptr(t.dl().data),
            Any::from(n),
            Any::from(1i64),
            Any::from(64i64),
        ],
    )
    .unwrap_err();
    assert!(
        e.message.contains("OpenCL kernel `add_kernel` argument 0")
            && e.message
                .contains("is not an OpenCL buffer tvmrt allocated"),
        "{e:?}"
    );
    let e = call(&kernel, &[Any::opaque_ptr(t.dl().data)]).unwrap_err();
    assert!(e.message.contains("expects 6 arguments"), "{e:?}");
    let e = call(
        &kernel,
        &[
            Any::opaque_ptr(t.dl().data),
            Any::opaque_ptr(t.dl().data),
            Any::opaque_ptr(t.dl().data),
            Any::from(n),
            Any::from("one"),
            Any::from(64i64),
        ],
    )
    .unwrap_err();
    assert!(e.message.contains("launch argument 4"), "{e:?}");
    // A work group larger than the device allows is the driver's error, named.
    let e = call(
        &kernel,
        &[
            Any::opaque_ptr(t.dl().data),
            Any::opaque_ptr(t.dl().data),
            Any::opaque_ptr(t.dl().data),
            Any::from(n),
            Any::from(1i64),
            Any::from(1i64 << 20),
        ],
    )
    .unwrap_err();
    assert!(e.message.contains("OpenCL error CL_INVALID_"), "{e:?}");
    drop((t, host));
    assert_eq!(live_buffers(), before);
}

/// The loaders of an `opencl` payload.
fn loader(name: &str) -> tvmrt::Function {
    registry::get_required(name).unwrap()
}

fn opencl_module_of(lib: &Module) -> Module {
    lib.imports()
        .into_iter()
        .find(|m| m.kind() == "opencl")
        .expect("an opencl import")
}

#[test]
fn payloads_truncated_unbuildable_or_binary_are_refused() {
    let _serial = serial();
    let lib = load("elementwise.so");
    let payload = opencl_module_of(&lib).save_to_bytes().unwrap();
    let load_bytes = loader("ffi.Module.load_from_bytes.opencl");
    assert!(load_bytes.call_values(&[Any::bytes(&payload)]).is_ok());
    for cut in (0..payload.len()).step_by(97).chain([payload.len() - 1]) {
        let e = load_bytes
            .call_values(&[Any::bytes(&payload[..cut])])
            .unwrap_err();
        assert!(
            e.message.starts_with("loader") || e.message.contains("OpenCL module payload"),
            "cut {cut}: {e:?}"
        );
    }
    let classic = loader("runtime.module.loadbinary_opencl");
    assert!(classic.call_values(&[Any::bytes(&payload[..40])]).is_err());

    // A source that does not build: the compiler's log comes back.
    let fp16 = load("float16.so");
    let a = Tensor::empty(&[8], dtypes::FLOAT16, opencl(0)).unwrap();
    let e = call(
        &func(&fp16, "add_float16"),
        &[Any::from(a.clone()), Any::from(a.clone()), Any::from(a)],
    )
    .unwrap_err();
    assert_eq!(e.kind, "InternalError");
    assert!(
        e.message
            .contains("OpenCL kernel `add_float16_kernel` does not build for opencl:0")
            && e.message.contains("CL_BUILD_PROGRAM_FAILURE")
            && e.message
                .contains("Half precision floating point not supported"),
        "{e:?}"
    );

    // Hand-made payloads: broken C, an FPGA binary, a table without source.
    let make = |fmt: &str, source: &str| {
        let mut w = tvmrt::module::blob::Writer::new();
        w.write_string(fmt);
        w.write_u64(1);
        w.write_string("k");
        w.write_string("k");
        w.write_u64(1);
        w.write_raw(&[3, 64, 1, 0]);
        w.write_string_vec(&["blockIdx.x", "threadIdx.x"]);
        w.write_u64(0);
        w.write_bytes(source.as_bytes());
        w.into_inner()
    };
    let broken = make(
        "cl",
        "// Function: k\n__kernel void k(__global float* a) { a[0] = ; }\n",
    );
    let m = load_bytes.call_values(&[Any::bytes(&broken)]).unwrap();
    let m = Module::from_view(&m.view(), "module").unwrap();
    let buf = Tensor::empty(&[1], dtypes::FLOAT32, opencl(0)).unwrap();
    let e = call(
        &func(&m, "k"),
        &[
            Any::opaque_ptr(buf.dl().data),
            Any::from(1i64),
            Any::from(1i64),
        ],
    )
    .unwrap_err();
    assert!(
        e.message.contains("does not build") && e.message.contains("error"),
        "{e:?}"
    );
    let e = load_bytes
        .call_values(&[Any::bytes(&make("xclbin", "\u{7f}ELF"))])
        .unwrap_err();
    assert!(e.message.contains("precompiled FPGA binary"), "{e:?}");
    let e = load_bytes
        .call_values(&[Any::bytes(&make("cl", "__kernel void k() {}"))])
        .unwrap_err();
    assert!(e.message.contains("holds 0 kernels"), "{e:?}");
}

/// Runs `inner` (an ignored test of this file) in a child process with `env`.
#[test]
fn a_machine_without_an_opencl_platform_gets_a_clear_error() {
    in_child(
        "child_without_platform",
        &[("OCL_ICD_VENDORS", "/nonexistent-vendors".to_string())],
    );
}

#[test]
#[ignore = "run by a_machine_without_an_opencl_platform_gets_a_clear_error"]
fn child_without_platform() {
    let e = Tensor::empty(&[4], dtypes::FLOAT32, opencl(0)).unwrap_err();
    assert!(
        e.message.contains("no OpenCL platform found")
            && e.message
                .contains("OCL_ICD_VENDORS is `/nonexistent-vendors`"),
        "{e:?}"
    );
    // Loading and inspecting still work; asking whether the device exists is not an error.
    let lib = load("elementwise.so");
    assert!(lib.get_function("add", true).unwrap().is_some());
    let attr = registry::get_required("runtime.GetDeviceAttr").unwrap();
    let exists = attr
        .call_values(&[Any::from(4i64), Any::from(0i64), Any::from(0i64)])
        .unwrap();
    assert_eq!(exists.view().as_i64(), Some(0));
    let e = opencl_vm_error();
    assert!(e.contains("no OpenCL platform found"), "{e}");
}

fn opencl_vm_error() -> String {
    let exec = load("mlp.so");
    let vm = opencl_support::func(&exec, "vm_load_executable")
        .call(&[])
        .unwrap();
    let vm = Module::from_view(&vm.view(), "vm").unwrap();
    func(&vm, "vm_initialization")
        .call_values(&[4i64, 0, 2, 1, 0, 2].map(Any::from))
        .unwrap_err()
        .message
        .clone()
}

#[test]
fn a_machine_without_libopencl_gets_a_clear_error() {
    in_child(
        "child_without_library",
        &[(
            "TVMRT_OPENCL_LIBRARY",
            "/nonexistent/libOpenCL.so.1".to_string(),
        )],
    );
}

#[test]
#[ignore = "run by a_machine_without_libopencl_gets_a_clear_error"]
fn child_without_library() {
    let shape = [4i64];
    let mut out = null_mut();
    // SAFETY: valid pointers.
    assert_eq!(
        unsafe { TVMArrayAlloc(shape.as_ptr(), 1, 2, 32, 1, OPENCL, 0, &mut out) },
        -1
    );
    let e = last_error();
    assert!(
        e.contains("OpenCL is not available: cannot open `/nonexistent/libOpenCL.so.1`")
            && e.contains("ocl-icd-libopencl1"),
        "{e}"
    );
    let dtype: DLDataType = dtypes::FLOAT32;
    let mut p = null_mut();
    // SAFETY: valid out pointer.
    assert_eq!(
        unsafe { TVMDeviceAllocDataSpace(opencl(0), 4, 64, dtype, &mut p) },
        -1
    );
    assert!(TVMBackendAllocWorkspace(OPENCL, 0, 16, 2, 32).is_null());
}
