//! Helpers for the `cuda_*` tests: the CUDA fixtures (tests/fixtures/cuda, made by its
//! generate.py with apache-tvm 0.27 and NVRTC), NVRTC from the pinned `cuda` venv, and the
//! test-double driver (tests/cuda_double/fake_cuda.c) that stands in for libcuda.so.1 on
//! machines without a GPU.
#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;
use tvmrt::abi::{DLDevice, DLDeviceType};
use tvmrt::module::{load_from_file, Module};
use tvmrt::tensor::Tensor;
use tvmrt::value::{Any, AnyView};

#[path = "../reliability_support/mod.rs"]
mod reliability_support;
pub use module_support::{compile_shared, dl_dtype, read_npy, scratch_in};
pub use reliability_support::fixtures;
use reliability_support::module_support;
#[allow(unused_imports)]
pub use reliability_support::{in_child, spawn_test, ChildOutcome};

/// `cuda:<id>`.
pub fn cuda(id: i32) -> DLDevice {
    DLDevice {
        device_type: DLDeviceType(2),
        device_id: id,
    }
}

/// `cuda_host:<id>` (page-locked host memory).
pub fn cuda_host(id: i32) -> DLDevice {
    DLDevice {
        device_type: DLDeviceType(3),
        device_id: id,
    }
}

/// `tests/fixtures/cuda`.
pub fn dir() -> PathBuf {
    fixtures().join("cuda")
}

/// Loads a library of `tests/fixtures/cuda`.
pub fn load(name: &str) -> Module {
    load_from_file(dir().join(name).to_str().unwrap(), "").unwrap()
}

/// `manifest.json`.
pub fn manifest() -> Value {
    let text = std::fs::read_to_string(dir().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The manifest's case called `name`.
pub fn manifest_case(manifest: &Value, name: &str) -> Value {
    manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case `{name}` in the CUDA manifest"))
        .clone()
}

/// The `cuda` module a library imports.
pub fn cuda_module(lib: &Module) -> Module {
    fn find(m: &Module) -> Option<Module> {
        if m.kind() == "cuda" {
            return Some(m.clone());
        }
        m.imports().iter().find_map(find)
    }
    find(lib).expect("the library imports a cuda module")
}

/// Points tvmrt at NVRTC from the pinned `cuda` venv (`.ci/venv.sh cuda`), unless
/// `TVMRT_NVRTC_LIBRARY` already names one. Panics when there is none: CI builds the venv
/// before the tests, and a test skipped for a missing dependency is a failure.
pub fn use_venv_nvrtc() -> PathBuf {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Ok(p) = std::env::var("TVMRT_NVRTC_LIBRARY") {
                return PathBuf::from(p);
            }
            let venv = module_support::repo_root().join(".venv/cuda/lib");
            let lib = std::fs::read_dir(&venv)
                .ok()
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| {
                    e.path()
                        .join("site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
                })
                .find(|p| p.exists())
                .unwrap_or_else(|| {
                    panic!(
                        "no NVRTC in {}: run `.ci/venv.sh cuda` (the pinned NVRTC from PyPI)",
                        venv.display()
                    )
                });
            std::env::set_var("TVMRT_NVRTC_LIBRARY", &lib);
            lib
        })
        .clone()
}

/// A launch the test-double driver recorded (`struct fake_launch` in fake_cuda.c).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    pub name: [u8; 128],
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
    pub stream: *mut c_void,
    pub device: c_int,
    pub n_params: c_int,
    pub param_size: [c_int; 32],
    pub params: [u64; 32],
}

impl Launch {
    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(128);
        std::str::from_utf8(&self.name[..end]).unwrap()
    }
}

/// A kernel the test-double driver runs on the host for each launch.
pub type KernelImpl = unsafe extern "C" fn(*mut *mut c_void, *const u32, *const u32);

/// The test-double driver's inspection functions.
pub struct FakeDriver {
    pub path: PathBuf,
    live_allocations: unsafe extern "C" fn(c_int) -> c_int,
    live_modules: unsafe extern "C" fn() -> c_int,
    live_streams: unsafe extern "C" fn() -> c_int,
    launch_count: unsafe extern "C" fn() -> c_int,
    launch: unsafe extern "C" fn(c_int, *mut Launch) -> c_int,
    log: unsafe extern "C" fn() -> *const c_char,
    reset: unsafe extern "C" fn(),
    set_kernel: unsafe extern "C" fn(*const c_char, Option<KernelImpl>),
    pointer_device: unsafe extern "C" fn(u64) -> c_int,
    /// The driver's own `cuMemAlloc_v2`, as another library (PyTorch) would call it.
    pub mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> c_int,
    /// The driver's own `cuMemFree_v2`.
    pub mem_free: unsafe extern "C" fn(u64) -> c_int,
    _lib: libloading::Library,
}

/// Builds the test double into the target folder (once per test process) and returns its path.
pub fn build_fake_driver() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = module_support::repo_root().join("tests/cuda_double/fake_cuda.c");
            let out = scratch_in("cuda_tests", "driver").join("libfake_cuda.so");
            compile_shared(&out, &[src], &[]);
            out
        })
        .clone()
}

/// Makes tvmrt open the test double as its CUDA driver (before anything in this process
/// touches CUDA) and returns its inspection functions. `FAKE_CUDA_*` variables set before the
/// first call configure it.
pub fn fake_driver() -> &'static FakeDriver {
    static FAKE: OnceLock<FakeDriver> = OnceLock::new();
    FAKE.get_or_init(|| {
        let path = build_fake_driver();
        std::env::set_var("TVMRT_CUDA_LIBRARY", &path);
        // SAFETY: the test double has no initializers; it stays loaded (the same handle tvmrt
        // gets when it opens the same path).
        let lib = unsafe { libloading::Library::new(&path) }.unwrap();
        macro_rules! sym {
            ($n:literal) => {
                // SAFETY: the test double's function of that name, with the signature given.
                *unsafe { lib.get(concat!($n, "\0").as_bytes()) }.unwrap()
            };
        }
        FakeDriver {
            live_allocations: sym!("fake_cuda_live_allocations"),
            live_modules: sym!("fake_cuda_live_modules"),
            live_streams: sym!("fake_cuda_live_streams"),
            launch_count: sym!("fake_cuda_launch_count"),
            launch: sym!("fake_cuda_launch"),
            log: sym!("fake_cuda_log"),
            reset: sym!("fake_cuda_reset"),
            set_kernel: sym!("fake_cuda_set_kernel"),
            pointer_device: sym!("fake_cuda_pointer_device"),
            mem_alloc: sym!("cuMemAlloc_v2"),
            mem_free: sym!("cuMemFree_v2"),
            path,
            _lib: lib,
        }
    })
}

impl FakeDriver {
    /// Live device allocations (`host`: page-locked ones) in the driver.
    pub fn live_allocations(&self, host: bool) -> i32 {
        // SAFETY: a plain query.
        unsafe { (self.live_allocations)(c_int::from(host)) }
    }

    /// Modules loaded and not unloaded.
    pub fn live_modules(&self) -> i32 {
        // SAFETY: a plain query.
        unsafe { (self.live_modules)() }
    }

    /// Streams created and not destroyed.
    pub fn live_streams(&self) -> i32 {
        // SAFETY: a plain query.
        unsafe { (self.live_streams)() }
    }

    /// The launches since the last reset.
    pub fn launches(&self) -> Vec<Launch> {
        // SAFETY: plain queries into a `Launch` the size of the C struct.
        let n = unsafe { (self.launch_count)() };
        (0..n)
            .map(|i| {
                let mut l: Launch = unsafe { std::mem::zeroed() };
                assert_eq!(unsafe { (self.launch)(i, &mut l) }, 0);
                l
            })
            .collect()
    }

    /// The calls logged since the last reset.
    pub fn log(&self) -> String {
        // SAFETY: a NUL-terminated buffer of the double.
        unsafe { CStr::from_ptr((self.log)()) }
            .to_string_lossy()
            .into_owned()
    }

    /// Forgets the launches and the log.
    pub fn reset(&self) {
        // SAFETY: a plain call.
        unsafe { (self.reset)() }
    }

    /// The device of the live allocation holding `addr` (-1: none, -2: page-locked memory).
    pub fn pointer_device(&self, addr: u64) -> i32 {
        // SAFETY: a plain query.
        unsafe { (self.pointer_device)(addr) }
    }

    /// Runs `f` on the host for each launch of `kernel`.
    pub fn set_kernel(&self, kernel: &str, f: KernelImpl) {
        let name = std::ffi::CString::new(kernel).unwrap();
        // SAFETY: a NUL-terminated name; `f` lives for the process.
        unsafe { (self.set_kernel)(name.as_ptr(), Some(f)) }
    }
}

/// Tests that count driver state run one at a time: each test of a `cuda_*` binary holds this.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A tensor on `dev` holding the `.npy` file `rel` of the fixture folder.
pub fn upload(rel: &str, dev: DLDevice) -> Tensor {
    let npy = read_npy(&dir().join(rel));
    assert_eq!(npy.descr, "<f4", "{rel}");
    let t = Tensor::empty(&npy.shape, dl_dtype(2, 32, 1), dev).unwrap();
    t.copy_from_bytes(&npy.data).unwrap();
    t
}

/// The float32 values of the `.npy` file `rel`.
pub fn npy_f32(rel: &str) -> Vec<f32> {
    let npy = read_npy(&dir().join(rel));
    assert_eq!(npy.descr, "<f4", "{rel}");
    f32s(&npy.data)
}

/// Little-endian float32s.
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Calls `f` with values.
pub fn call(f: &tvmrt::Function, args: &[Any]) -> tvmrt::Result<Any> {
    let views: Vec<AnyView<'_>> = args.iter().map(Any::view).collect();
    f.call(&views)
}

/// A function of module `m` by name.
pub fn func(m: &Module, name: &str) -> tvmrt::Function {
    m.get_function(name, true)
        .unwrap()
        .unwrap_or_else(|| panic!("no function {name}"))
}

/// A VM of an executable module on `cuda:id` with the CPU as host, as TVM 0.27 initializes
/// one: `vm_initialization(2, id, 2, 1, 0, 2)`.
pub fn cuda_vm(exec: &Module, id: i64) -> Module {
    let vm = module_support::new_vm(exec);
    let init = func(&vm, "vm_initialization");
    call(
        &init,
        &[
            Any::from(2i64),
            Any::from(id),
            Any::from(2i64),
            Any::from(1i64),
            Any::from(0i64),
            Any::from(2i64),
        ],
    )
    .unwrap();
    vm
}
