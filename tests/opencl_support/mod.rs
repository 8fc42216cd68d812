//! Helpers for the `opencl_*` tests: the OpenCL fixtures (tests/fixtures/opencl, made by its
//! generate.py with apache-tvm 0.27, and gen_classic.py), device tensors from `.npy` files,
//! results compared with the expectations TVM's CPU runtime recorded.
//!
//! The tests run on whatever OpenCL driver the machine has; CI installs POCL (OpenCL on the
//! CPU), and `.cargo/config.toml` points POCL's kernel cache into `target/`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use tvmrt::abi::{DLDataType, DLDevice, DLDeviceType};
use tvmrt::module::{load_from_file, Module};
use tvmrt::tensor::Tensor;
use tvmrt::value::{Any, AnyView};

#[path = "../device_support/mod.rs"]
mod device_support;
#[allow(unused_imports)] // used by some of the binaries that include this module
pub use device_support::*;
#[path = "../reliability_support/mod.rs"]
mod reliability_support;
pub use module_support::{dl_dtype, read_npy, scratch_in};
pub use reliability_support::fixtures;
use reliability_support::module_support;
#[allow(unused_imports)] // used by some of the binaries that include this module
pub use reliability_support::{in_child, spawn_test, ChildOutcome};

/// `opencl:<id>`.
pub fn opencl(id: i32) -> DLDevice {
    DLDevice {
        device_type: DLDeviceType(4),
        device_id: id,
    }
}

/// The CPU.
pub fn cpu() -> DLDevice {
    tvmrt::device::cpu()
}

/// `tests/fixtures/opencl`.
pub fn dir() -> PathBuf {
    fixtures().join("opencl")
}

/// Loads a library of `tests/fixtures/opencl`.
pub fn load(name: &str) -> Module {
    load_from_file(dir().join(name).to_str().unwrap(), "").unwrap()
}

/// `manifest.json`.
pub fn manifest() -> Value {
    let text = std::fs::read_to_string(dir().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The dtype of a `.npy` descr (`<f4`, `<i4`, `<f8`).
pub fn npy_dtype(descr: &str) -> DLDataType {
    match descr {
        "<f4" => dl_dtype(2, 32, 1),
        "<f8" => dl_dtype(2, 64, 1),
        "<i4" => dl_dtype(0, 32, 1),
        "<i8" => dl_dtype(0, 64, 1),
        other => panic!("unexpected npy dtype {other}"),
    }
}

/// A tensor on `dev` holding the `.npy` file `rel` (relative to the fixture folder).
pub fn upload(rel: &str, dev: DLDevice) -> Tensor {
    let npy = read_npy(&dir().join(rel));
    let t = Tensor::empty(&npy.shape, npy_dtype(&npy.descr), dev).unwrap();
    t.copy_from_bytes(&npy.data).unwrap();
    t
}

/// An empty tensor on `dev` shaped and typed as the `.npy` file `rel`.
pub fn empty_like(rel: &str, dev: DLDevice) -> Tensor {
    let npy = read_npy(&dir().join(rel));
    Tensor::empty(&npy.shape, npy_dtype(&npy.descr), dev).unwrap()
}

/// Values of a tensor (any device) as f64s.
pub fn values(t: &Tensor) -> Vec<f64> {
    let bytes = t.to_vec().unwrap();
    decode(&bytes, t.dtype())
}

fn decode(bytes: &[u8], dtype: DLDataType) -> Vec<f64> {
    match (dtype.code.0, dtype.bits) {
        (2, 32) => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        (2, 64) => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        (0, 32) => bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        (0, 64) => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        other => panic!("unexpected dtype {other:?}"),
    }
}

/// Asserts `got` (any device) equals the `.npy` file `rel` within `rtol`/`atol` (exactly for
/// integers), with shape and dtype.
pub fn assert_matches(what: &str, got: &Tensor, rel: &str, rtol: f64, atol: f64) {
    let want = read_npy(&dir().join(rel));
    assert_eq!(got.shape(), &want.shape[..], "{what}: shape");
    assert_eq!(got.dtype(), npy_dtype(&want.descr), "{what}: dtype");
    let g = values(got);
    let w = decode(&want.data, npy_dtype(&want.descr));
    assert_eq!(g.len(), w.len(), "{what}: element count");
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let tol = if want.descr.contains('i') {
            0.0
        } else {
            atol + rtol * b.abs()
        };
        assert!(
            (a - b).abs() <= tol,
            "{what}: element {i} is {a}, TVM's CPU runtime gave {b}"
        );
    }
}

/// Calls `f` with tensors (as objects) and other values.
pub fn call(f: &tvmrt::Function, args: &[Any]) -> tvmrt::Result<Any> {
    let views: Vec<AnyView<'_>> = args.iter().map(Any::view).collect();
    f.call(&views)
}

/// A VM of an executable module, initialized as TVM 0.27 does for OpenCL device `id`:
/// `vm_initialization(4, id, 2, 1, 0, 2)` (the device, then the CPU host; pooled allocators).
pub fn opencl_vm(exec: &Module, id: i64) -> Module {
    let vm = module_support::new_vm(exec);
    let init = vm
        .get_function("vm_initialization", false)
        .unwrap()
        .unwrap();
    init.call_values(&[
        Any::from(4i64),
        Any::from(id),
        Any::from(2i64),
        Any::from(1i64),
        Any::from(0i64),
        Any::from(2i64),
    ])
    .unwrap();
    vm
}

/// A function of module `m` by name.
pub fn func(m: &Module, name: &str) -> tvmrt::Function {
    m.get_function(name, true)
        .unwrap()
        .unwrap_or_else(|| panic!("no function {name}"))
}

/// How many OpenCL buffers tvmrt holds for tensors and storage.
pub fn live_buffers() -> usize {
    tvmrt::device::opencl::live_buffers()
}

/// Tests that count device buffers run one at a time: each test of an `opencl_*` binary holds
/// this while it runs.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A path under `CARGO_TARGET_TMPDIR/opencl_tests` for this process.
pub fn scratch(name: &str) -> PathBuf {
    scratch_in("opencl_tests", name)
}

/// A file of the fixture folder.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(&dir()).join(name)
}
