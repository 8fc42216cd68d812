//! CUDA modules without a GPU: every fixture format (TVM 0.27's CUDA source, and NVRTC's PTX,
//! cubin and fatbin of it) loaded and checked up to the point where the driver is needed,
//! TVM's source compiled by tvmrt with NVRTC from PyPI, bad payloads refused, and the errors a
//! machine without the driver or NVRTC gets (in child processes, whose environment names
//! libraries that do not exist).

mod cuda_support;

use cuda_support::*;
use tvmrt::device::cuda::image::{Image, ImageKind};
use tvmrt::device::cuda::module::CudaModule;
use tvmrt::function::registry;
use tvmrt::tensor::Tensor;
use tvmrt::value::Any;

fn module_of(file: &str) -> (tvmrt::module::Module, tvmrt::module::Module) {
    let lib = load(file);
    let m = cuda_module(&lib);
    (lib, m)
}

#[test]
fn every_fixture_format_loads_and_is_checked() {
    let manifest = manifest();
    let mut seen = 0;
    for (name, lib) in manifest["libraries"].as_object().unwrap() {
        let kernels = lib["kernels"].as_object().unwrap();
        for (fmt, file) in lib["files"].as_object().unwrap() {
            let (_lib, m) = module_of(file["file"].as_str().unwrap());
            let cm = m.downcast::<CudaModule>().unwrap();
            assert_eq!(cm.format(), fmt, "{name}");
            let table: Vec<(&str, Vec<String>)> = cm
                .functions()
                .iter()
                .map(|f| (f.name.as_str(), f.launch_param_tags.clone()))
                .collect();
            assert_eq!(table.len(), kernels.len(), "{name} {fmt}");
            for (k, tags) in &table {
                let want: Vec<String> = kernels[*k]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_string())
                    .collect();
                assert_eq!(tags, &want, "{name} {fmt} {k}");
            }
            let held: Vec<String> = match cm.image() {
                None => {
                    assert_eq!(fmt, "cuda");
                    let src = m
                        .implementation()
                        .expect("a tvmrt module")
                        .inspect_source("");
                    assert!(src.contains("extern \"C\" __global__"), "{name}");
                    vec![]
                }
                Some(img) => {
                    // nvfatbin compresses PTX: such entries are checked by architecture only.
                    let readable = img.entries.iter().filter(|e| e.kernels.is_some()).count();
                    assert!(readable >= 1, "{name} {fmt}");
                    for e in &img.entries {
                        let Some(names) = e.kernels.as_ref() else {
                            continue;
                        };
                        for (k, _) in &table {
                            assert!(names.iter().any(|n| n == k), "{name} {fmt}: {e} lacks {k}");
                        }
                    }
                    img.entries.iter().map(|e| e.to_string()).collect()
                }
            };
            let want: &[&str] = match fmt.as_str() {
                "cuda" => &[],
                "ptx" => &["PTX for compute_80"],
                "cubin" => &["cubin for sm_80"],
                "fatbin" => &["cubin for sm_75", "cubin for sm_80", "PTX for compute_80"],
                other => panic!("unexpected format {other}"),
            };
            assert_eq!(held, want, "{name} {fmt}");
            let info = tvmrt::device::describe_module(&m).unwrap();
            assert!(info.format.starts_with(fmt.as_str()), "{}", info.format);
            assert_eq!(info.kernels.len(), table.len());
            // What the module saves loads back as the same module.
            let bytes = m.save_to_bytes().unwrap();
            let again = registry::get_required("ffi.Module.load_from_bytes.cuda")
                .unwrap()
                .call_values(&[Any::bytes(&bytes)])
                .unwrap();
            let again = tvmrt::module::Module::from_view(&again.view(), "module").unwrap();
            assert_eq!(again.save_to_bytes().unwrap(), bytes);
            seen += 1;
        }
    }
    assert_eq!(seen, 10, "4 elementwise formats, 2 matmul, 2 mlp, 2 cnn");
}

#[test]
fn image_selection_follows_the_driver_rules() {
    let (_lib, m) = module_of("elementwise_fatbin.so");
    let img = m.downcast::<CudaModule>().unwrap().image().unwrap().clone();
    assert_eq!(img.kind, ImageKind::Fatbin);
    let pick = |sm| {
        img.select(sm, &format!("cuda:0 (sm_{sm})"))
            .map(|e| e.to_string())
    };
    assert_eq!(pick(80).unwrap(), "cubin for sm_80");
    assert_eq!(pick(86).unwrap(), "cubin for sm_80");
    assert_eq!(pick(75).unwrap(), "cubin for sm_75");
    assert_eq!(
        pick(90).unwrap(),
        "PTX for compute_80",
        "no sm_9x cubin: the PTX"
    );
    let e = pick(70).unwrap_err();
    assert!(
        e.message.contains("cannot run on cuda:0 (sm_70): it holds")
            && e.message
                .contains("cubin for sm_75, cubin for sm_80, PTX for compute_80"),
        "{e}"
    );
    let (_lib, m) = module_of("elementwise_cubin.so");
    let img = m.downcast::<CudaModule>().unwrap().image().unwrap().clone();
    assert!(
        img.select(90, "cuda:0").is_err(),
        "sm_80 machine code on sm_90"
    );
    assert!(img.select(89, "cuda:0").is_ok());
}

#[test]
fn tvm_source_compiles_with_nvrtc() {
    use_venv_nvrtc();
    // Every source fixture for sm_80 (the fixtures' architecture); the elementwise one also for
    // older and newer ones. Each compile takes one to three seconds here.
    let mut builds = vec![
        ("elementwise.so", 75, ImageKind::Cubin, 75),
        ("elementwise.so", 90, ImageKind::Cubin, 90),
        // An architecture this NVRTC (12.9) does not know: PTX for the newest one below it,
        // which the driver compiles for the device.
        ("elementwise.so", 200, ImageKind::Ptx, 121),
    ];
    for file in ["elementwise.so", "matmul_dyn.so", "mlp.so"] {
        builds.push((file, 80, ImageKind::Cubin, 80));
    }
    for (file, sm, kind, arch) in builds {
        let (_lib, m) = module_of(file);
        let cm = m.downcast::<CudaModule>().unwrap();
        let code = cm.compile_for(sm).unwrap().unwrap();
        let img = Image::parse(&code).unwrap();
        assert_eq!(img.kind, kind, "{file} for sm_{sm}");
        assert_eq!(img.entries[0].arch.sm, arch, "{file} for sm_{sm}");
        for f in cm.functions() {
            img.check_kernel(&f.name).unwrap();
        }
        assert!(img.select(sm, "cuda:0").is_ok());
        // Compiled once per architecture.
        let again = cm.compile_for(sm).unwrap().unwrap();
        assert!(
            std::sync::Arc::ptr_eq(&code, &again),
            "{file}: cached for sm_{sm}"
        );
    }
    let (_lib, m) = module_of("elementwise_ptx.so");
    let cm = m.downcast::<CudaModule>().unwrap();
    assert!(
        cm.compile_for(80).unwrap().is_none(),
        "binary code is not compiled"
    );
}

/// The payload of a fixture's cuda module, split: fmt, the function table bytes, the code.
fn payload_of(file: &str) -> (String, Vec<u8>, Vec<u8>) {
    let (_lib, m) = module_of(file);
    let bytes = m.save_to_bytes().unwrap();
    let (p, n) = tvmrt::device::payload::DevicePayload::read(
        &bytes,
        tvmrt::device::launch::InfoFormat::WithExtraTags,
    )
    .unwrap();
    assert_eq!(n, bytes.len());
    let mut w = tvmrt::module::blob::Writer::new();
    tvmrt::device::launch::write_function_table(&mut w, &p.table);
    (p.fmt, w.into_inner(), p.code)
}

fn payload(fmt: &str, table: &[u8], code: &[u8]) -> Vec<u8> {
    let mut w = tvmrt::module::blob::Writer::new();
    w.write_string(fmt);
    w.write_raw(table);
    w.write_bytes(code);
    w.into_inner()
}

fn load_payload(bytes: Vec<u8>) -> tvmrt::Result<Any> {
    registry::get_required("ffi.Module.load_from_bytes.cuda")
        .unwrap()
        .call_values(&[Any::bytes(&bytes)])
}

#[test]
fn bad_payloads_are_refused_with_a_message() {
    let (fmt, table, code) = payload_of("elementwise_ptx.so");
    let good = payload(&fmt, &table, &code);
    load_payload(good.clone()).unwrap();
    for cut in (0..good.len()).step_by(7) {
        let e = load_payload(good[..cut].to_vec()).unwrap_err();
        assert!(
            e.message.starts_with("CUDA module payload"),
            "cut {cut}: {e}"
        );
    }
    // A table naming a kernel the code lacks (same length, so the table stays well formed).
    let renamed = String::from_utf8_lossy(&table).replace("add_kernel", "sub_kernel");
    let mut bad_table = table.clone();
    for (i, b) in renamed.bytes().enumerate().take(bad_table.len()) {
        bad_table[i] = b;
    }
    for (f, c) in [
        ("ptx", &code),
        ("cubin", &payload_of("elementwise_cubin.so").2),
    ] {
        let e = load_payload(payload(f, &bad_table, c)).unwrap_err();
        assert!(
            e.message.contains("lists kernel `sub_kernel`")
                && e.message.contains("does not define it"),
            "{f}: {e}"
        );
    }
    let (_, _, source) = payload_of("elementwise.so");
    let e = load_payload(payload("cuda", &bad_table, &source)).unwrap_err();
    assert!(
        e.message
            .contains("CUDA source defines no `extern \"C\" __global__` function"),
        "{e}"
    );
    let e = load_payload(payload("hsaco", &table, &code)).unwrap_err();
    assert!(
        e.message.contains("unknown CUDA module format `hsaco`"),
        "{e}"
    );
    let e = load_payload(payload("cubin", &table, &code)).unwrap_err();
    assert!(
        e.message.contains("says its code is cubin but it is ptx"),
        "{e}"
    );
    let e = load_payload(payload("ptx", &table, b"not code")).unwrap_err();
    assert!(e.message.contains("neither PTX text, a cubin"), "{e}");
    let (_, _, fatbin) = payload_of("elementwise_fatbin.so");
    let e = load_payload(payload("fatbin", &table, &fatbin[..fatbin.len() / 2])).unwrap_err();
    assert!(e.message.contains("fatbin is truncated"), "{e}");
    // TVM 0.27 labels every binary JIT output `cubin`, fatbins included: accepted.
    load_payload(payload("cubin", &table, &fatbin)).unwrap();
    let mut trailing = good.clone();
    trailing.push(0);
    let e = load_payload(trailing).unwrap_err();
    assert!(e.message.contains("1 trailing bytes"), "{e}");
}

#[test]
fn classic_loader_reads_tvm_0_20_payloads() {
    // TVM <= 0.20 wrote FunctionInfo without arg_extra_tags, in a blob where the payload is
    // followed by the next module's bytes.
    let (_lib, m) = module_of("elementwise_cubin.so");
    let cm = m.downcast::<CudaModule>().unwrap();
    let mut w = tvmrt::module::blob::Writer::new();
    w.write_string("cubin");
    w.write_u64(cm.functions().len() as u64);
    for f in cm.functions() {
        w.write_string(&f.name);
        w.write_string(&f.name);
        w.write_u64(f.arg_types.len() as u64);
        for t in &f.arg_types {
            w.write_raw(&[t.code.0, t.bits]);
            w.write_raw(&t.lanes.to_le_bytes());
        }
        w.write_string_vec(&f.launch_param_tags);
    }
    let (_, _, code) = payload_of("elementwise_cubin.so");
    w.write_bytes(&code);
    let mut bytes = w.into_inner();
    let n = bytes.len();
    bytes.extend_from_slice(b"next module");
    let mut consumed = 0i64;
    let out = registry::get_required("runtime.module.loadbinary_cuda")
        .unwrap()
        .call_values(&[
            Any::bytes(&bytes),
            Any::opaque_ptr((&mut consumed as *mut i64).cast()),
        ])
        .unwrap();
    assert_eq!(consumed as usize, n);
    let m = tvmrt::module::Module::from_view(&out.view(), "module").unwrap();
    assert!(m.implements_function("mul_2d_kernel", false));
}

#[test]
fn without_a_driver() {
    in_child(
        "child_without_driver",
        &[("TVMRT_CUDA_LIBRARY", "/nonexistent/libcuda.so.1".into())],
    );
}

#[test]
#[ignore = "run by without_a_driver in a child process"]
fn child_without_driver() {
    let e = Tensor::empty(&[4], dl_dtype(2, 32, 1), cuda(0)).unwrap_err();
    assert!(
        e.message.contains(
            "CUDA is not available: cannot open the NVIDIA driver library \
             `/nonexistent/libcuda.so.1`"
        ),
        "{e:?}"
    );
    // Loading and inspecting work; asking whether the device exists is not an error.
    let lib = load("elementwise_cubin.so");
    let attr = registry::get_required("runtime.GetDeviceAttr").unwrap();
    let exists = attr
        .call_values(&[Any::from(2i64), Any::from(0i64), Any::from(0i64)])
        .unwrap();
    assert_eq!(exists.view().as_i64(), Some(0));
    // A host tensor to the library's launcher: TVM's generated check refuses it.
    let a = Tensor::empty(&[4], dl_dtype(2, 32, 1), tvmrt::device::cpu()).unwrap();
    let e = call(
        &func(&lib, "add"),
        &[a.clone().into(), a.clone().into(), a.clone().into()],
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("Mismatched A.device_type on argument #0"),
        "{e}"
    );
    let e = call(
        &func(&lib, "add_kernel"),
        &[
            Any::opaque_ptr(std::ptr::null_mut()),
            Any::opaque_ptr(std::ptr::null_mut()),
            Any::opaque_ptr(std::ptr::null_mut()),
            Any::from(4i64),
            Any::from(1i64),
            Any::from(64i64),
        ],
    )
    .unwrap_err();
    assert!(e.message.contains("CUDA is not available"), "{e}");
    let set = registry::get_required("__tvm_set_device").unwrap();
    let e = set
        .call_values(&[Any::from(2i64), Any::from(0i64)])
        .unwrap_err();
    assert!(e.message.contains("CUDA is not available"), "{e}");
}

#[test]
fn without_nvrtc() {
    in_child(
        "child_without_nvrtc",
        &[("TVMRT_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.12".into())],
    );
}

#[test]
#[ignore = "run by without_nvrtc in a child process"]
fn child_without_nvrtc() {
    let (_lib, m) = module_of("elementwise.so");
    let e = m
        .downcast::<CudaModule>()
        .unwrap()
        .compile_for(80)
        .unwrap_err();
    assert!(
        e.message.contains("NVRTC is not available")
            && e.message.contains("holds CUDA C source")
            && e.message.contains("nvidia-cuda-nvrtc-cu12")
            && e.message.contains("/nonexistent/libnvrtc.so.12"),
        "{e}"
    );
    // Binary modules need no NVRTC.
    let (_lib, m) = module_of("elementwise_ptx.so");
    assert!(m
        .downcast::<CudaModule>()
        .unwrap()
        .compile_for(80)
        .unwrap()
        .is_none());
}
