//! The CUDA back end end to end on a machine without a GPU: tvmrt opens a test double of the
//! NVIDIA driver (tests/cuda_double/fake_cuda.c) in place of libcuda.so.1. Its "device
//! memory" is host memory, it reads modules as the driver does (PTX, cubin, fatbin, with their
//! architectures) and records every launch; for the fixtures' elementwise kernels and the
//! matmul, a host implementation written from TVM's CUDA source runs on each launch, so the
//! values that come back are checked against TVM's CPU outputs. What is asserted is what tvmrt
//! hands the driver: allocations and frees (nothing leaks, errors included), copies in every
//! direction, streams and events, module loads per device and architecture, launch
//! dimensions, dynamic shared memory, and each kernel argument's bytes.
//!
//! The double is configured with two devices of compute capability 8.0; other configurations
//! (no device, another architecture) run in child processes.

mod cuda_support;

use cuda_support::*;
use std::ffi::c_void;
use tvmrt::device::cuda::live_blocks;
use tvmrt::function::registry;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

const F32: tvmrt::abi::DLDataType = tvmrt::abi::DLDataType {
    code: tvmrt::abi::DLDataTypeCode(2),
    bits: 32,
    lanes: 1,
};

/// The double, set up before anything touches CUDA: two devices unless the environment says
/// otherwise (child processes), NVRTC from the pinned venv for source modules.
fn setup() -> &'static FakeDriver {
    if std::env::var_os("FAKE_CUDA_DEVICES").is_none() {
        std::env::set_var("FAKE_CUDA_DEVICES", "2");
    }
    use_venv_nvrtc();
    fake_driver()
}

fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 + 1e-4 * w.abs(),
            "{what}: element {i} is {g}, TVM's CPU runtime gave {w}"
        );
    }
}

fn download(t: &Tensor) -> Vec<f32> {
    f32s(&t.to_vec().unwrap())
}

/// Live memory on both sides: tvmrt's blocks, the driver's device and page-locked blocks.
fn live(fake: &FakeDriver) -> (usize, i32, i32) {
    (
        live_blocks(),
        fake.live_allocations(false),
        fake.live_allocations(true),
    )
}

#[test]
fn memory_and_copies_in_every_direction() {
    let _s = serial();
    let fake = setup();
    let before = live(fake);
    let data: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    {
        // host -> cuda:0 -> host
        let d0 = Tensor::empty(&[1000], F32, cuda(0)).unwrap();
        assert_eq!(
            d0.data_ptr() as usize % 256,
            0,
            "CUDA memory is 256-byte aligned"
        );
        d0.copy_from_bytes(&bytes).unwrap();
        assert_eq!(download(&d0), data);
        // cuda:0 -> cuda:0, cuda:0 -> cuda:1 (peer), cuda:1 -> page-locked host -> cuda:0
        let d0b = d0.copy_to(cuda(0), None).unwrap();
        let d1 = d0.copy_to(cuda(1), None).unwrap();
        assert_eq!(fake.pointer_device(d1.data_ptr() as u64), 1);
        let pinned = d1.copy_to(cuda_host(0), None).unwrap();
        assert_eq!(
            fake.pointer_device(pinned.data_ptr() as u64),
            -2,
            "page-locked"
        );
        // Page-locked memory is host memory: readable in place.
        // SAFETY: a host-accessible tensor of 1000 floats, not written meanwhile.
        let in_place = unsafe { pinned.as_bytes() }.unwrap();
        assert_eq!(f32s(in_place), data);
        let back = pinned.copy_to(cuda(0), None).unwrap();
        assert_eq!(download(&d0b), data);
        assert_eq!(download(&back), data);
        let cpu = back.copy_to(tvmrt::device::cpu(), None).unwrap();
        assert_eq!(f32s(&cpu.to_vec().unwrap()), data);
        // A view's offset reaches the driver.
        let log = fake.log();
        for call in [
            "cuMemcpyHtoDAsync(4000)",
            "cuMemcpyDtoDAsync(4000)",
            "cuMemcpyPeerAsync(4000)",
            "cuMemcpyDtoHAsync(4000)",
            "cuMemAllocHost(4000)",
        ] {
            assert!(log.contains(call), "{call} in:\n{log}");
        }
        assert!(!log.contains("refused"), "{log}");
        // Copies of the wrong size are refused before the driver.
        let small = Tensor::empty(&[10], F32, cuda(0)).unwrap();
        assert!(small.copy_from(&d0).is_err());
    }
    assert_eq!(live(fake), before, "every block freed");
}

#[test]
fn kernels_of_every_format_run_with_tvms_arguments() {
    let _s = serial();
    let fake = setup();
    let manifest = manifest();
    let formats = [
        "elementwise.so",
        "elementwise_ptx.so",
        "elementwise_cubin.so",
        "elementwise_fatbin.so",
    ];
    let before = live(fake);
    for file in formats {
        let lib = load(file);
        for case in manifest["cases"].as_array().unwrap() {
            if case["library"] != "elementwise" {
                continue;
            }
            let name = case["name"].as_str().unwrap();
            fake.reset();
            let want = npy_f32(case["outputs"][0].as_str().unwrap());
            let out = Tensor::empty(
                &read_npy(&dir().join(case["outputs"][0].as_str().unwrap())).shape,
                F32,
                cuda(0),
            )
            .unwrap();
            let mut args: Vec<Any> = Vec::new();
            let mut inputs = Vec::new();
            for a in case["args"].as_array().unwrap() {
                if let Some(t) = a.get("tensor") {
                    let t = upload(t.as_str().unwrap(), cuda(0));
                    inputs.push(t.clone());
                    args.push(t.into());
                } else if a.get("output").is_some() {
                    args.push(out.clone().into());
                } else if let Some(f) = a.get("float") {
                    args.push(Any::from(f.as_f64().unwrap()));
                } else {
                    args.push(Any::from(a["int"].as_i64().unwrap()));
                }
            }
            call(&func(&lib, case["function"].as_str().unwrap()), &args).unwrap();
            assert_close(&format!("{file} {name}"), &download(&out), &want);
            let launches = fake.launches();
            assert_eq!(launches.len(), 1, "{file} {name}");
            let l = launches[0];
            assert_eq!(l.device, 0);
            assert!(l.stream.is_null(), "the default stream");
            let n = want.len() as u32;
            match case["function"].as_str().unwrap() {
                "add" | "axpk" => {
                    assert_eq!(l.grid, [n.div_ceil(64).max(1), 1, 1], "{file} {name}");
                    assert_eq!(l.block, [64, 1, 1]);
                }
                _ => {
                    assert_eq!(l.grid, [70u32.div_ceil(32), 3, 1], "{file} {name}");
                    assert_eq!(l.block, [32, 1, 1]);
                }
            }
            assert_eq!(l.shared, 0);
            if file == "elementwise_ptx.so" {
                // The driver sees each argument as the kernel declares it: device pointers (8
                // bytes), int32 and float32 narrowed from the host's 64-bit values (4 bytes).
                let sizes = &l.param_size[..l.n_params as usize];
                match case["function"].as_str().unwrap() {
                    "add" => {
                        assert_eq!(sizes, [8, 8, 8, 4]);
                        assert_eq!(l.params[0], inputs[0].data_ptr() as u64);
                        assert_eq!(l.params[1], inputs[1].data_ptr() as u64);
                        assert_eq!(l.params[2], out.data_ptr() as u64);
                        assert_eq!(l.params[3] as u32, n);
                    }
                    "axpk" => {
                        assert_eq!(sizes, [8, 8, 4, 4, 4]);
                        assert_eq!(f32::from_bits(l.params[2] as u32), 2.5);
                        assert_eq!(l.params[3] as u32 as i32, -3);
                        assert_eq!(l.params[4] as u32, n);
                    }
                    _ => assert_eq!(sizes, [8, 8, 8, 4, 4]),
                }
            }
        }
        // One module load per device, whatever the number of launches.
        drop(lib);
    }
    assert_eq!(
        fake.live_modules(),
        0,
        "modules unloaded with their library"
    );
    assert_eq!(live(fake), before, "no device memory left");
}

#[test]
fn dynamic_shared_memory_as_the_launch_tags_say() {
    let _s = serial();
    let fake = setup();
    let manifest = manifest();
    let case = manifest_case(&manifest, "matmul.64");
    for file in ["matmul_dyn.so", "matmul_dyn_cubin.so"] {
        let lib = load(file);
        fake.reset();
        let x = upload(case["args"][0]["tensor"].as_str().unwrap(), cuda(0));
        let w = upload(case["args"][1]["tensor"].as_str().unwrap(), cuda(0));
        let y = Tensor::empty(&[64, 64], F32, cuda(0)).unwrap();
        call(
            &func(&lib, "matmul"),
            &[x.into(), w.into(), y.clone().into()],
        )
        .unwrap();
        assert_close(
            file,
            &download(&y),
            &npy_f32(case["outputs"][0].as_str().unwrap()),
        );
        let l = fake.launches()[0];
        assert_eq!((l.grid, l.block), ([4, 4, 1], [16, 16, 1]), "{file}");
        assert_eq!(l.shared, 2 * 16 * 16 * 4, "{file}: two 16x16 float tiles");
        assert!(
            !fake.log().contains("cuFuncSetAttribute"),
            "48 KiB or less needs no opt-in"
        );

        // The kernel called directly with more: above 48 KiB tvmrt raises the function's limit
        // (as TVM does) before launching; beyond the device's limit it refuses.
        let kernel = func(&lib, "matmul_kernel");
        let buf = Tensor::empty(&[64, 64], F32, cuda(0)).unwrap();
        let p = Any::opaque_ptr(buf.data_ptr());
        let launch = |shared: i64| {
            call(
                &kernel,
                &[
                    p.clone(),
                    p.clone(),
                    p.clone(),
                    Any::from(4i64),
                    Any::from(4i64),
                    Any::from(16i64),
                    Any::from(16i64),
                    Any::from(shared),
                ],
            )
        };
        fake.reset();
        launch(64 << 10).unwrap();
        assert!(
            fake.log()
                .contains("cuFuncSetAttribute(matmul_kernel, 8, 65536)"),
            "{}",
            fake.log()
        );
        assert_eq!(fake.launches()[0].shared, 64 << 10);
        let e = launch(200 << 10).unwrap_err();
        assert!(
            e.message
                .contains("asks for 204800 bytes of dynamic shared memory")
                && e.message
                    .contains("has 166912 bytes of shared memory per block"),
            "{e}"
        );
        assert_eq!(
            fake.launches().len(),
            1,
            "the refused launch never reached the driver"
        );
        let e = launch(-1).unwrap_err();
        assert!(e.message.contains("negative dynamic shared memory"), "{e}");
    }
}

#[test]
fn bad_launches_are_refused_before_the_driver() {
    let _s = serial();
    let fake = setup();
    let lib = load("elementwise_ptx.so");
    let kernel = func(&lib, "add_kernel");
    let a = Tensor::empty(&[64], F32, cuda(0)).unwrap();
    let on1 = Tensor::empty(&[64], F32, cuda(1)).unwrap();
    let host = Tensor::empty(&[64], F32, tvmrt::device::cpu()).unwrap();
    let ptr = |t: &Tensor| Any::opaque_ptr(t.data_ptr());
    let with = |first: Any, block: i64| {
        call(
            &kernel,
            &[
                first,
                ptr(&a),
                ptr(&a),
                Any::from(64i64),
                Any::from(1i64),
                Any::from(block),
            ],
        )
    };
    fake.reset();
    let before = live(fake);
    let e = with(ptr(&host), 64).unwrap_err();
    assert!(
        e.message.contains("argument 0") && e.message.contains("is not CUDA memory"),
        "{e}"
    );
    let e = with(Any::from(host.clone()), 64).unwrap_err();
    assert!(e.message.contains("the tensor is on cpu:0"), "{e}");
    let e = with(ptr(&on1), 64).unwrap_err();
    assert!(e.message.contains("its memory is on cuda:1"), "{e}");
    let e = with(ptr(&a), 2048).unwrap_err();
    assert!(e.message.contains("2048 threads exceeds"), "{e}");
    let e = call(&kernel, &[ptr(&a)]).unwrap_err();
    assert_eq!(e.kind, "TypeError");
    let e = with(Any::from(1.5f64), 64).unwrap_err();
    assert_eq!(e.kind, "TypeError", "{e}");
    assert!(fake.launches().is_empty(), "nothing reached the driver");
    // A device tensor of the launching device passes as a tensor too.
    with(Any::from(a.clone()), 64).unwrap();
    assert_eq!(fake.launches().len(), 1);
    drop((a, on1, host, kernel, lib));
    assert!(live(fake).0 < before.0 + 1);
}

#[test]
fn streams_events_and_the_current_stream() {
    let _s = serial();
    let fake = setup();
    let dev = Any::from(cuda(0));
    fake.reset();
    let create = registry::get_required("runtime.Device_StreamCreate").unwrap();
    let s = create.call_values(std::slice::from_ref(&dev)).unwrap();
    let s2 = create.call_values(std::slice::from_ref(&dev)).unwrap();
    assert_eq!(fake.live_streams(), 2);
    let sp = s.view().as_i64().unwrap();
    assert_ne!(sp, 0);
    assert_eq!(
        fake.log().matches("cuStreamCreate(flags=1)").count(),
        2,
        "non-blocking streams, as TVM creates them"
    );
    fake.reset();
    // TVM's SetStream makes it the thread's current stream: launches go there.
    registry::get_required("runtime.Device_SetStream")
        .unwrap()
        .call_values(&[dev.clone(), s.clone()])
        .unwrap();
    let lib = load("elementwise_cubin.so");
    let a = upload("data/add.n1000.in0.npy", cuda(0));
    let out = Tensor::empty(&[1000], F32, cuda(0)).unwrap();
    call(
        &func(&lib, "add"),
        &[a.clone().into(), a.clone().into(), out.clone().into()],
    )
    .unwrap();
    assert_eq!(
        fake.launches()[0].stream as i64,
        sp,
        "launched on the current stream"
    );
    let got = registry::get_required("runtime.get_cuda_stream")
        .unwrap()
        .call(&[])
        .unwrap();
    assert_eq!(got.view().as_opaque_ptr().unwrap() as i64, sp);
    registry::get_required("runtime.Device_StreamSyncFromTo")
        .unwrap()
        .call_values(&[dev.clone(), s.clone(), s2.clone()])
        .unwrap();
    registry::get_required("runtime.Device_StreamSync")
        .unwrap()
        .call_values(&[dev.clone(), s2.clone()])
        .unwrap();
    let log = fake.log();
    let order = [
        "cuEventCreate(flags=2)",
        "cuEventRecord",
        "cuStreamWaitEvent",
        "cuEventDestroy",
    ];
    let mut at = 0;
    for step in order {
        at = at
            + log[at..]
                .find(step)
                .unwrap_or_else(|| panic!("{step} in:\n{log}"));
    }
    registry::get_required("runtime.Device_SetStream")
        .unwrap()
        .call_values(&[dev.clone(), Any::from(0i64)])
        .unwrap();
    let free = registry::get_required("runtime.Device_StreamFree").unwrap();
    free.call_values(&[dev.clone(), s]).unwrap();
    free.call_values(&[dev, s2]).unwrap();
    assert_eq!(fake.live_streams(), 0);
}

#[test]
fn workspaces_are_pooled() {
    use tvmrt::capi::backend::{TVMBackendAllocWorkspace, TVMBackendFreeWorkspace};
    let _s = serial();
    let fake = setup();
    fake.reset();
    let a = TVMBackendAllocWorkspace(2, 0, 1000, 2, 32);
    assert!(!a.is_null());
    assert_eq!(fake.pointer_device(a as u64), 0, "device memory of cuda:0");
    // SAFETY: `a` came from TVMBackendAllocWorkspace on this device.
    assert_eq!(unsafe { TVMBackendFreeWorkspace(2, 0, a) }, 0);
    let b = TVMBackendAllocWorkspace(2, 0, 500, 2, 32);
    assert_eq!(a, b, "the freed block is reused");
    assert_eq!(fake.log().matches("cuMemAlloc(").count(), 1);
    // SAFETY: as above.
    assert_eq!(unsafe { TVMBackendFreeWorkspace(2, 0, b) }, 0);
    // SAFETY: freeing twice is refused, not passed on.
    assert_eq!(unsafe { TVMBackendFreeWorkspace(2, 0, b) }, -1);
}

#[test]
fn device_attributes() {
    let _s = serial();
    setup();
    let attr = registry::get_required("runtime.GetDeviceAttr").unwrap();
    let get =
        |id: i64, kind: i64| attr.call_values(&[Any::from(2i64), Any::from(id), Any::from(kind)]);
    assert_eq!(get(0, 0).unwrap().view().as_i64(), Some(1));
    assert_eq!(get(1, 0).unwrap().view().as_i64(), Some(1));
    assert_eq!(
        get(5, 0).unwrap().view().as_i64(),
        Some(0),
        "cuda:5: not there, no error"
    );
    assert_eq!(get(0, 1).unwrap().view().as_i64(), Some(1024));
    assert_eq!(get(0, 2).unwrap().view().as_i64(), Some(32));
    assert_eq!(get(0, 4).unwrap().view().as_str(), Some("8.0"));
    assert_eq!(
        get(0, 5).unwrap().view().as_str(),
        Some("Fake CUDA Device 0")
    );
    assert_eq!(get(0, 8).unwrap().view().as_str(), Some("[1024, 1024, 64]"));
    assert_eq!(get(0, 14).unwrap().view().as_i64(), Some(40 << 30));
    assert_eq!(get(0, 12).unwrap().view().as_str(), Some("12.4"));
    let e = get(5, 1).unwrap_err();
    assert!(
        e.message
            .contains("cuda:5 does not exist: the driver sees 2 CUDA devices"),
        "{e}"
    );
    let count = registry::get_required("runtime.GetCudaDeviceCount")
        .unwrap()
        .call(&[])
        .unwrap();
    assert_eq!(count.view().as_i64(), Some(2));
}

#[test]
fn dlpack_keeps_cuda_tensors_in_place() {
    use tvmrt::abi::{DLManagedTensor, DLTensor};
    let _s = serial();
    let fake = setup();
    let before = live(fake);
    let t = Tensor::empty(&[3], F32, cuda(1)).unwrap();
    t.copy_from_bytes(
        &[1f32, 2., 3.]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let exported = t.to_dlpack_versioned();
    // SAFETY: a live export.
    let dl = unsafe { (*exported).dl_tensor };
    assert_eq!((dl.device.device_type.0, dl.device.device_id), (2, 1));
    assert_eq!(dl.data, t.data_ptr(), "the device pointer itself, no copy");
    // SAFETY: imports the export (ownership moves to the new tensor).
    let back = unsafe {
        Tensor::from_dlpack_versioned(
            exported,
            tvmrt::tensor::dlpack::ImportRequirements::default(),
        )
    }
    .unwrap();
    assert_eq!(back.data_ptr(), t.data_ptr());
    assert_eq!(download(&back), [1., 2., 3.]);
    drop((t, back));

    // Memory another library allocated from the driver (as PyTorch does) comes in through
    // DLPack without a copy and is a valid kernel argument.
    let mut foreign = 0u64;
    // SAFETY: the driver's own allocation call, on the thread whose context tvmrt set.
    tvmrt::device::cuda::context::bind(0).unwrap();
    assert_eq!(unsafe { (fake.mem_alloc)(&mut foreign, 256) }, 0);
    let mut shape = [64i64];
    unsafe extern "C" fn deleter(_: *mut DLManagedTensor) {}
    let mut managed = DLManagedTensor {
        dl_tensor: DLTensor {
            data: foreign as usize as *mut c_void,
            device: cuda(0),
            ndim: 1,
            dtype: F32,
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(deleter),
    };
    // SAFETY: a live managed tensor whose deleter does nothing.
    let imported = unsafe {
        Tensor::from_dlpack(
            &mut managed,
            tvmrt::tensor::dlpack::ImportRequirements::default(),
        )
    }
    .unwrap();
    assert_eq!(imported.data_ptr() as u64, foreign);
    let lib = load("elementwise_ptx.so");
    let kernel = func(&lib, "add_kernel");
    fake.reset();
    call(
        &kernel,
        &[
            Any::from(imported.clone()),
            Any::from(imported.clone()),
            Any::opaque_ptr(foreign as usize as *mut c_void),
            Any::from(64i64),
            Any::from(1i64),
            Any::from(64i64),
        ],
    )
    .unwrap();
    assert_eq!(fake.launches()[0].params[0], foreign);
    drop((imported, kernel, lib));
    // SAFETY: the allocation made above.
    assert_eq!(unsafe { (fake.mem_free)(foreign) }, 0);
    assert_eq!(live(fake), before);
}

#[test]
fn relax_model_runs_on_cuda() {
    let _s = serial();
    let fake = setup();
    let manifest = manifest();
    let case = manifest_case(&manifest, "mlp.main");
    let kernels: Vec<String> = manifest["libraries"]["mlp"]["kernels"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let before = live(fake);
    for file in ["mlp_ptx.so", "mlp.so"] {
        fake.reset();
        let exec = load(file);
        let vm = cuda_vm(&exec, 0);
        let input = case["args"][0]["tensor"].as_str().unwrap();
        // Stateful: a host input is uploaded by set_input; the output stays on the device.
        let host = {
            let npy = read_npy(&dir().join(input));
            let t = Tensor::empty(&npy.shape, F32, tvmrt::device::cpu()).unwrap();
            t.copy_from_bytes(&npy.data).unwrap();
            t
        };
        call(
            &func(&vm, "set_input"),
            &[Any::from("main"), Any::from(host.clone())],
        )
        .unwrap();
        call(&func(&vm, "invoke_stateful"), &[Any::from("main")]).unwrap();
        let out = {
            let any = call(&func(&vm, "get_output"), &[Any::from("main")]).unwrap();
            Tensor::from_any_view(&any.view(), "output").unwrap()
        };
        assert_eq!(
            out.device(),
            cuda(0),
            "{file}: the output stays on the device"
        );
        assert_eq!(out.shape(), [1, 8]);
        // Direct: main takes a device tensor.
        let dev_in = upload(input, cuda(0));
        let out2 = {
            let any = call(&func(&vm, "main"), &[Any::from(dev_in.clone())]).unwrap();
            Tensor::from_any_view(&any.view(), "output").unwrap()
        };
        assert_eq!(out2.device(), cuda(0));
        // Each run launches the model's two kernels in order, every buffer argument inside a
        // live allocation of cuda:0.
        let launches = fake.launches();
        let names: Vec<&str> = launches.iter().map(|l| l.kernel()).collect();
        assert_eq!(
            names,
            [
                "fused_matmul_add_relu_kernel",
                "fused_matmul1_add1_kernel",
                "fused_matmul_add_relu_kernel",
                "fused_matmul1_add1_kernel"
            ],
            "{file}"
        );
        assert!(kernels.iter().all(|k| names.contains(&k.as_str())));
        if file == "mlp_ptx.so" {
            for l in &launches {
                for i in 0..l.n_params as usize {
                    if l.param_size[i] == 8 {
                        assert_eq!(
                            fake.pointer_device(l.params[i]),
                            0,
                            "{}: arg {i} = {:#x} of {:?}\n{}",
                            l.kernel(),
                            l.params[i],
                            &l.param_size[..l.n_params as usize],
                            fake.log()
                        );
                    }
                }
            }
        }
        // A host tensor given to main directly is refused by the model's own check.
        let e = call(&func(&vm, "main"), &[Any::from(host)]).unwrap_err();
        assert!(e.message.contains("device_type"), "{e}");
        drop((out, out2, dev_in, vm, exec));
        assert_eq!(
            live(fake),
            before,
            "{file}: weights, storage and outputs freed"
        );
        assert_eq!(fake.live_modules(), 0);
    }
}

#[test]
fn threads_launch_at_once() {
    // Four threads share one library and its kernel functions; each binds the device's context
    // and keeps its own current device and stream.
    let _s = serial();
    let fake = setup();
    let before = live(fake);
    let lib = load("elementwise_cubin.so");
    let want = npy_f32("data/add.n1000.out0.npy");
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (lib, want) = (&lib, &want);
            scope.spawn(move || {
                let dev = cuda(t % 2);
                let ta = upload("data/add.n1000.in0.npy", dev);
                let tb = upload("data/add.n1000.in1.npy", dev);
                for round in 0..20 {
                    let out = Tensor::empty(&[1000], F32, dev).unwrap();
                    call(
                        &func(lib, "add"),
                        &[ta.clone().into(), tb.clone().into(), out.clone().into()],
                    )
                    .unwrap();
                    assert_close(&format!("thread {t} round {round}"), &download(&out), want);
                }
            });
        }
    });
    drop(lib);
    assert_eq!(live(fake), before);
    assert_eq!(fake.live_modules(), 0);
}

#[test]
fn classic_graph_model_runs_on_cuda() {
    // TVM 0.19's layout: the factory imports the host library, which imports a `cuda` module
    // read through runtime.module.loadbinary_cuda (TVM 0.19's function table, PTX).
    let _s = serial();
    let fake = setup();
    let before = live(fake);
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir().join("graph_cuda.expected.json")).unwrap(),
    )
    .unwrap();
    {
        let factory = load("graph_cuda.so");
        let exec = call(&func(&factory, "default"), &[Any::from(cuda(0))]).unwrap();
        let exec = tvmrt::module::Module::from_view(&exec.view(), "executor").unwrap();
        let blob = std::fs::read(dir().join("graph_cuda.inputs.bin")).unwrap();
        let params = tvmrt::graph::params::load_params(&blob).unwrap();
        let (name, x) = &params[0];
        assert_eq!((name.as_str(), x.device()), ("x", tvmrt::device::cpu()));
        // set_input uploads the host input; the outputs live on the device.
        call(
            &func(&exec, "set_input"),
            &[Any::from("x"), Any::from(x.clone())],
        )
        .unwrap();
        fake.reset();
        call(&func(&exec, "run"), &[]).unwrap();
        let names: Vec<String> = fake
            .launches()
            .iter()
            .map(|l| l.kernel().to_string())
            .collect();
        assert_eq!(names, ["add_relu_kernel", "scale_kernel"]);
        assert!(
            fake.log().contains("cuMemcpyDtoDAsync(280)"),
            "__copy is a device copy"
        );
        for i in 0..2 {
            let out = call(&func(&exec, "get_output"), &[Any::from(i as i64)]).unwrap();
            let out = Tensor::from_any_view(&out.view(), "output").unwrap();
            assert_eq!(out.device(), cuda(0));
            let want: Vec<f32> = expected["outputs"][i]["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            assert_eq!(download(&out), want, "output {i}");
        }
    }
    assert_eq!(live(fake), before, "the executor's storage freed");
}

#[test]
fn architectures_the_device_cannot_run() {
    in_child("child_on_sm75", &[("FAKE_CUDA_SM", "75".into())]);
    in_child("child_on_sm90", &[("FAKE_CUDA_SM", "90".into())]);
}

fn run_add(file: &str) -> tvmrt::Result<Vec<f32>> {
    let lib = load(file);
    let a = upload("data/add.n1000.in0.npy", cuda(0));
    let out = Tensor::empty(&[1000], F32, cuda(0)).unwrap();
    call(
        &func(&lib, "add"),
        &[a.clone().into(), a.into(), out.clone().into()],
    )?;
    Ok(download(&out))
}

#[test]
#[ignore = "run by architectures_the_device_cannot_run in a child process"]
fn child_on_sm75() {
    let fake = setup();
    let e = run_add("elementwise_cubin.so").unwrap_err();
    assert!(
        e.message
            .contains("cannot run on cuda:0 (Fake CUDA Device 0, sm_75)")
            && e.message.contains("it holds cubin for sm_80"),
        "{e}"
    );
    let e = run_add("elementwise_ptx.so").unwrap_err();
    assert!(e.message.contains("it holds PTX for compute_80"), "{e}");
    // The fatbin has an sm_75 cubin; the source is compiled for sm_75 by NVRTC.
    let want: Vec<f32> = npy_f32("data/add.n1000.in0.npy")
        .iter()
        .map(|v| v + v)
        .collect();
    assert_close("fatbin", &run_add("elementwise_fatbin.so").unwrap(), &want);
    assert_close("source", &run_add("elementwise.so").unwrap(), &want);
    assert_eq!(fake.live_allocations(false) as usize, live_blocks());
}

#[test]
#[ignore = "run by architectures_the_device_cannot_run in a child process"]
fn child_on_sm90() {
    setup();
    let e = run_add("elementwise_cubin.so").unwrap_err();
    assert!(
        e.message.contains("sm_90") && e.message.contains("cubin for sm_80"),
        "{e}"
    );
    // PTX is compiled by the driver for a newer device; the fatbin falls back to its PTX.
    let want: Vec<f32> = npy_f32("data/add.n1000.in0.npy")
        .iter()
        .map(|v| v + v)
        .collect();
    for f in [
        "elementwise_ptx.so",
        "elementwise_fatbin.so",
        "elementwise.so",
    ] {
        assert_close(f, &run_add(f).unwrap(), &want);
    }
}

#[test]
fn machines_without_a_device() {
    in_child(
        "child_without_devices",
        &[("FAKE_CUDA_DEVICES", "0".into())],
    );
}

#[test]
#[ignore = "run by machines_without_a_device in a child process"]
fn child_without_devices() {
    setup();
    let e = Tensor::empty(&[4], F32, cuda(0)).unwrap_err();
    assert!(e.message.contains("no CUDA device: the driver"), "{e}");
    let attr = registry::get_required("runtime.GetDeviceAttr").unwrap();
    let exists = attr
        .call_values(&[Any::from(2i64), Any::from(0i64), Any::from(0i64)])
        .unwrap();
    assert_eq!(exists.view().as_i64(), Some(0));
    let count = registry::get_required("runtime.GetCudaDeviceCount")
        .unwrap()
        .call(&[])
        .unwrap();
    assert_eq!(count.view().as_i64(), Some(0));
}
