//! Helpers for the `vulkan_*` tests: compute shaders written in TVM's SPIR-V layout
//! (tests/fixtures/vulkan/*.comp: buffers at bindings 0.., scalars in 8-byte slots as push
//! constants or, with flag bit 0, in a uniform buffer at binding `num_buffers`), compiled by
//! glslang (`glslangValidator`, Debian `glslang-tools`) with the entry point named after the
//! kernel, and packed into a `vulkan` module payload by tvmrt's own writer, the bytes TVM's
//! `VulkanModuleNode::SaveToBytes` writes.
//!
//! The tests run with the Khronos validation layer on (`TVM_VULKAN_ENABLE_VALIDATION_LAYERS`,
//! set before the first Vulkan call) and check that it reported no error. CI installs lavapipe
//! (Vulkan on the CPU), the layer and glslang.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use tvmrt::abi::{DLDataType, DLDevice, DLDeviceType};
use tvmrt::device::launch::FunctionInfo;
use tvmrt::device::vulkan::module::{write_payload, Shader};
use tvmrt::dtype::dtype;
use tvmrt::function::registry;
use tvmrt::module::Module;
use tvmrt::value::{Any, AnyView};

#[path = "../device_support/mod.rs"]
mod device_support;
#[allow(unused_imports)] // used by some of the binaries that include this module
pub use device_support::*;
#[path = "../reliability_support/mod.rs"]
mod reliability_support;
pub use reliability_support::fixtures;
#[allow(unused_imports)] // used by some of the binaries that include this module
pub use reliability_support::module_support::{new_vm, read_npy, Npy};
#[allow(unused_imports)]
pub use reliability_support::{in_child, spawn_test, ChildOutcome};

/// `vulkan:<id>`.
pub fn vulkan(id: i32) -> DLDevice {
    DLDevice {
        device_type: DLDeviceType(7),
        device_id: id,
    }
}

/// The CPU.
pub fn cpu() -> DLDevice {
    tvmrt::device::cpu()
}

pub const HANDLE: DLDataType = dtype(3, 64, 1);
pub const I32: DLDataType = dtype(0, 32, 1);
pub const U32: DLDataType = dtype(1, 32, 1);
pub const I64: DLDataType = dtype(0, 64, 1);
pub const F32: DLDataType = dtype(2, 32, 1);
pub const F64: DLDataType = dtype(2, 64, 1);

/// A kernel of the fixtures: its shader file, TVM's function info, the shader flag.
pub struct KernelSpec {
    pub name: &'static str,
    pub file: &'static str,
    pub args: Vec<DLDataType>,
    pub tags: &'static [&'static str],
    pub flag: u32,
}

/// The fixture kernels.
pub fn kernels() -> Vec<KernelSpec> {
    let mut many = vec![HANDLE];
    many.extend([F32; 20]);
    many.push(I32);
    vec![
        KernelSpec {
            name: "add_scalar_kernel",
            file: "add_scalar.comp",
            args: vec![HANDLE, HANDLE, HANDLE, I32, F32],
            tags: &["blockIdx.x", "threadIdx.x"],
            flag: 0,
        },
        KernelSpec {
            name: "grid2d_kernel",
            file: "grid2d.comp",
            args: vec![HANDLE, HANDLE, I32, I32],
            tags: &["blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"],
            flag: 0,
        },
        KernelSpec {
            name: "reduce_kernel",
            file: "reduce.comp",
            args: vec![HANDLE, HANDLE, I32],
            tags: &["blockIdx.x", "threadIdx.x"],
            flag: 0,
        },
        KernelSpec {
            name: "int_f64_kernel",
            file: "int_f64.comp",
            args: vec![HANDLE, HANDLE, HANDLE, HANDLE, I32, F64, I64, U32, I32],
            tags: &["blockIdx.x", "threadIdx.x"],
            flag: 0,
        },
        KernelSpec {
            name: "many_scalars_kernel",
            file: "many_scalars.comp",
            args: many,
            tags: &["blockIdx.x", "threadIdx.x"],
            flag: 1,
        },
    ]
}

/// `tests/fixtures/vulkan`.
pub fn dir() -> PathBuf {
    fixtures().join("vulkan")
}

/// A scratch path of this process.
pub fn scratch(name: &str) -> PathBuf {
    reliability_support::module_support::scratch_in("vulkan_tests", name)
}

/// The SPIR-V of `file` with its entry point named `entry`, compiled by glslang.
pub fn compile(file: &str, entry: &str) -> Vec<u32> {
    let out = scratch("spv").join(format!("{entry}.spv"));
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let run = Command::new("glslangValidator")
        .args(["-V", "--target-env", "vulkan1.1", "-e", entry])
        .args(["--source-entrypoint", "main", "-o"])
        .arg(&out)
        .arg(dir().join(file))
        .output()
        .expect("glslangValidator (Debian glslang-tools) must be installed");
    assert!(
        run.status.success(),
        "glslang failed on {file}: {}",
        String::from_utf8_lossy(&run.stdout)
    );
    std::fs::read(&out)
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// TVM's function info of a kernel.
pub fn info(k: &KernelSpec) -> FunctionInfo {
    FunctionInfo {
        name: k.name.to_string(),
        arg_types: k.args.clone(),
        launch_param_tags: k.tags.iter().map(|s| s.to_string()).collect(),
        arg_extra_tags: vec![0; k.args.len()],
    }
}

/// The payload of a `vulkan` module holding `specs` (TVM 0.21+ layout).
pub fn payload_of(specs: &[KernelSpec]) -> Vec<u8> {
    let table: Vec<FunctionInfo> = specs.iter().map(info).collect();
    // Shaders in the reverse order of the table: map order is not guaranteed.
    let shaders: Vec<(String, Shader)> = specs
        .iter()
        .rev()
        .map(|k| {
            (
                k.name.to_string(),
                Shader {
                    flag: k.flag,
                    words: compile(k.file, k.name),
                },
            )
        })
        .collect();
    write_payload("vulkan", &table, &shaders)
}

/// Every fixture kernel's payload, compiled once per process.
pub fn payload() -> Vec<u8> {
    static P: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    P.get_or_init(|| payload_of(&kernels())).clone()
}

/// A module loaded from `bytes` by `ffi.Module.load_from_bytes.vulkan`.
pub fn load_bytes(bytes: &[u8]) -> tvmrt::Result<Module> {
    let f = registry::get_required("ffi.Module.load_from_bytes.vulkan")?;
    let m = f.call_values(&[Any::bytes(bytes)])?;
    Module::from_view(&m.view(), "module")
}

/// The module of every fixture kernel.
pub fn module() -> Module {
    load_bytes(&payload()).unwrap()
}

/// A function of module `m` by name.
pub fn func(m: &Module, name: &str) -> tvmrt::Function {
    m.get_function(name, true)
        .unwrap()
        .unwrap_or_else(|| panic!("no function {name}"))
}

/// Calls `f` with these values.
pub fn call(f: &tvmrt::Function, args: &[Any]) -> tvmrt::Result<Any> {
    let views: Vec<AnyView<'_>> = args.iter().map(Any::view).collect();
    f.call(&views)
}

/// How many Vulkan buffers tvmrt holds for tensors and storage.
pub fn live_buffers() -> usize {
    tvmrt::device::vulkan::live_buffers()
}

/// Tests of a binary run one at a time (buffer counts, validation counts); the first also
/// turns the validation layer on before anything touches Vulkan.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("TVM_VULKAN_ENABLE_VALIDATION_LAYERS").is_none() {
            // Under the lock, before the first Vulkan call of this process.
            std::env::set_var("TVM_VULKAN_ENABLE_VALIDATION_LAYERS", "1");
        }
    });
    guard
}

/// Asserts the validation layer is on and reported no error so far.
pub fn assert_no_validation_errors() {
    let ctx = tvmrt::device::vulkan::context::context().unwrap();
    assert!(ctx.validating(), "the validation layer must be on");
    let (n, messages) = tvmrt::device::vulkan::validation_errors();
    assert_eq!(n, 0, "validation errors: {messages:#?}");
}
