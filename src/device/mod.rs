//! Devices: one interface ([`DeviceApi`], TVM's `DeviceAPI`) per device type, and the back ends
//! that implement it, each in its own folder.
//!
//! The rest of tvmrt (tensors, the Relax VM, the graph executor, the C API) asks [`api`] for the
//! device type at hand and never names a back end. A back end is a [`BackEnd`]: the device types
//! it serves with their APIs, the global functions it registers (its module loaders
//! `ffi.Module.load_from_bytes.<kind>` / `runtime.module.loadbinary_<kind>` and anything else),
//! and how `tvmrt inspect` describes its modules. [`BACK_ENDS`] lists the back ends built in;
//! adding one (CUDA, Vulkan, Metal) is a new folder here plus one line in that list.
//!
//! What every back end gets for free, registered here with TVM's names: `device_api.<name>`
//! for each of its device types, `__tvm_set_device` (which generated host code calls before
//! launching kernels), `runtime.GetDeviceAttr`, `runtime.Device_Stream*` and
//! `runtime.TVMSetStream`.
//!
//! - [`cpu`]: `kDLCPU`, host memory, always present.
//! - `opencl`: `kDLOpenCL` on any OpenCL 1.2+ driver, opened at run time (feature `opencl`,
//!   on by default).
//! - `cuda`: `kDLCUDA` and `kDLCUDAHost` on NVIDIA's driver, opened at run time, with NVRTC for
//!   source modules (feature `cuda`, on by default).
//! - `vulkan`: `kDLVulkan` on any Vulkan 1.1+ driver (TVM's SPIR-V modules), opened at run
//!   time (feature `vulkan`, on by default).
//!
//! Shared by the GPU back ends: [`descriptor`] (buffer descriptors and their registry, for
//! OpenCL and Vulkan), [`descriptor_api`] (the device API of such back ends over their driver's
//! calls), [`loaded`] (a driver opened on first use, with its devices), [`launch`] (function tables, launch extents, argument kinds),
//! [`payload`] (the `[fmt][table][code]` payload and its two loaders), [`pool`] (workspaces).

pub mod address;
pub mod api;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod descriptor;
pub mod descriptor_api;
mod globals;
pub mod launch;
pub mod loaded;
pub mod memory;
#[cfg(feature = "opencl")]
pub mod opencl;
pub mod payload;
pub mod pool;
pub mod stream;
#[cfg(feature = "vulkan")]
pub mod vulkan;

use once_cell::sync::Lazy;

pub use api::{DataRef, DeviceApi, DeviceAttr, StreamHandle};
pub use memory::DeviceBlock;

use crate::abi::{DLDevice, DLDeviceType, DLTensor};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::Module;

/// `kDLCPU`.
pub const CPU: u32 = 1;

/// The CPU device `{kDLCPU, 0}`.
pub const fn cpu() -> DLDevice {
    DLDevice {
        device_type: DLDeviceType(CPU),
        device_id: 0,
    }
}

/// A back end: device types with their APIs, its global functions, and how it describes its
/// device modules.
pub struct BackEnd {
    /// Its name in messages (`opencl`).
    pub name: &'static str,
    /// The DLPack device types it serves, each with its API.
    pub devices: &'static [(u32, &'static dyn DeviceApi)],
    /// Its global functions (module loaders and others), registered at start-up.
    pub globals: fn() -> Vec<(&'static str, Function)>,
    /// Describes a module of a kind it loads (`None` for other modules).
    pub describe_module: fn(&Module) -> Option<DeviceModuleInfo>,
}

/// The back ends built into tvmrt. A new back end is a folder beside `cpu.rs` and a line here.
pub static BACK_ENDS: &[&BackEnd] = &[
    &cpu::BACK_END,
    #[cfg(feature = "opencl")]
    &opencl::BACK_END,
    #[cfg(feature = "cuda")]
    &cuda::BACK_END,
    #[cfg(feature = "vulkan")]
    &vulkan::BACK_END,
];

/// A device module (kernels compiled for a device, imported by a host module), as `tvmrt
/// inspect` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceModuleInfo {
    /// The format of its code (`cl` for OpenCL C, `ptx`, ...).
    pub format: String,
    /// Its kernels, sorted by name.
    pub kernels: Vec<KernelInfo>,
}

impl DeviceModuleInfo {
    /// The view of a module whose code is in `format`, with this function table.
    pub fn new(format: String, table: &[launch::FunctionInfo]) -> DeviceModuleInfo {
        let mut kernels: Vec<KernelInfo> = table
            .iter()
            .map(|f| KernelInfo {
                name: f.name.clone(),
                arg_types: f.arg_type_names(),
                launch_params: f.launch_param_tags.clone(),
            })
            .collect();
        crate::cold_sort::sort_by(&mut kernels, |a, b| a.name.cmp(&b.name));
        DeviceModuleInfo { format, kernels }
    }
}

/// A kernel of a device module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    /// The name the host looks it up by.
    pub name: String,
    /// Its arguments' types (`handle` for buffers).
    pub arg_types: Vec<String>,
    /// Its launch parameters (`blockIdx.x`, `threadIdx.x`, `tirx.use_dyn_shared_memory`).
    pub launch_params: Vec<String>,
}

/// Device types below this are DLPack's and TVM's (`TVMDeviceExtType_End`).
pub(crate) const MAX_DEVICE_TYPE: usize = 36;

/// TVM's `kRPCSessMask`: device type `type + (i + 1) * 128` is device type `type` of remote
/// session `i`. Those devices have one API, plugged in by whoever opens sessions
/// ([`plug_session_devices`]).
pub const SESSION_MASK: u32 = 128;

static SESSION_DEVICES: once_cell::sync::OnceCell<&'static dyn DeviceApi> =
    once_cell::sync::OnceCell::new();

/// Plugs in the device API of remote sessions' devices (types from [`SESSION_MASK`] on); the
/// first call wins. The RPC client does, when its globals are registered.
pub fn plug_session_devices(api: &'static dyn DeviceApi) {
    let _ = SESSION_DEVICES.set(api);
}

/// The API of a remote session's device type, when one is plugged in.
fn session_api(device_type: u32) -> Option<&'static dyn DeviceApi> {
    if device_type >= SESSION_MASK {
        SESSION_DEVICES.get().copied()
    } else {
        None
    }
}

type ApiTable = [Option<&'static dyn DeviceApi>; MAX_DEVICE_TYPE];

static TABLE: Lazy<ApiTable> = Lazy::new(|| {
    let mut table: ApiTable = [None; MAX_DEVICE_TYPE];
    for be in BACK_ENDS {
        for &(device_type, api) in be.devices {
            table[device_type as usize] = Some(api);
        }
    }
    table
});

/// The device API of `device_type`, or an error naming the type and the back ends built in.
pub fn api(device_type: u32) -> Result<&'static dyn DeviceApi> {
    match TABLE.get(device_type as usize) {
        Some(Some(api)) => Ok(*api),
        _ => session_api(device_type).ok_or_else(|| {
            no_back_end(format!(
                "device type {device_type} ({})",
                device_type_name(device_type)
            ))
        }),
    }
}

/// The device API of `dev`, after checking its id is not negative.
#[inline]
pub fn api_of(dev: DLDevice) -> Result<&'static dyn DeviceApi> {
    match TABLE.get(dev.device_type.0 as usize) {
        Some(Some(api)) if dev.device_id >= 0 => Ok(*api),
        _ => api_of_other(dev),
    }
}

/// [`api_of`] past the table: a remote session's device, or the error.
#[cold]
fn api_of_other(dev: DLDevice) -> Result<&'static dyn DeviceApi> {
    if dev.device_id < 0 {
        return Err(Error::value(format!(
            "invalid device {}: the device id is negative",
            device_name(dev)
        )));
    }
    session_api(dev.device_type.0)
        .ok_or_else(|| no_back_end(format!("device {}", device_name(dev))))
}

fn no_back_end(what: String) -> Error {
    let have: Vec<&str> = BACK_ENDS.iter().map(|b| b.name).collect();
    Error::value(format!(
        "{what} has no back end in tvmrt (this build runs on: {})",
        have.join(", ")
    ))
}

/// The device API of `dev`, after checking that the device exists and can be used now
/// ([`DeviceApi::check_exists`]).
pub fn usable(dev: DLDevice) -> Result<&'static dyn DeviceApi> {
    let api = api_of(dev)?;
    api.check_exists(dev)?;
    Ok(api)
}

/// Fails unless the host can read `dev`'s memory directly; `what` names the caller.
pub fn require_host(dev: DLDevice, what: &str) -> Result<()> {
    if api_of(dev).map_err(|e| e.context(what))?.host_accessible() {
        Ok(())
    } else {
        Err(Error::value(format!(
            "{what}: the tensor is on {}, but this runs on the host: copy it to the CPU first",
            device_name(dev)
        )))
    }
}

/// Whether the host can read `dev`'s memory directly (false for unknown device types).
pub fn is_host_accessible(dev: DLDevice) -> bool {
    api(dev.device_type.0).is_ok_and(|a| a.host_accessible())
}

/// Copies `from` into `to` when at least one of them is not host memory: through the API of
/// the device side (as TVM's `Tensor::CopyFromTo`), both compact and of equal size. Copies
/// between two device types that are not host memory are refused, as in TVM.
///
/// # Safety
/// Both descriptors describe live memory of the size their shapes give (`to` writable).
pub unsafe fn copy_via_device(from: &DLTensor, to: &DLTensor, stream: StreamHandle) -> Result<()> {
    let (fa, ta) = (api_of(from.device)?, api_of(to.device)?);
    let api = if !fa.host_accessible() {
        if from.device.device_type != to.device.device_type && !ta.host_accessible() {
            return Err(Error::value(format!(
                "cannot copy from {} to {} directly: copy through the CPU",
                device_name(from.device),
                device_name(to.device)
            )));
        }
        fa
    } else {
        ta
    };
    // SAFETY: per the contract.
    unsafe { api.copy_data_from_to(from, to, stream) }
}

/// TVM's short name of a device type (tvm-ffi `DeviceTypeName`).
pub fn device_type_name(device_type: u32) -> &'static str {
    match device_type {
        1 => "cpu",
        2 => "cuda",
        3 => "cuda_host",
        4 => "opencl",
        7 => "vulkan",
        8 => "metal",
        9 => "vpi",
        10 => "rocm",
        11 => "rocm_host",
        12 => "ext_dev",
        13 => "cuda_managed",
        14 => "oneapi",
        15 => "webgpu",
        16 => "hexagon",
        17 => "maia",
        18 => "trn",
        _ => "unknown",
    }
}

/// The device type TVM names `name` (`"opencl"` -> 4).
pub fn device_type_from_name(name: &str) -> Option<u32> {
    (1..MAX_DEVICE_TYPE as u32).find(|&t| device_type_name(t) == name)
}

/// A device as TVM prints it: `cuda:0`, `remote[0]-cpu:0` for remote session 0's CPU, or
/// `device_type=99:0` for unknown types.
pub fn device_name(dev: DLDevice) -> String {
    let t = dev.device_type.0;
    if t >= SESSION_MASK {
        let local = DLDevice {
            device_type: DLDeviceType(t % SESSION_MASK),
            device_id: dev.device_id,
        };
        return format!("remote[{}]-{}", t / SESSION_MASK - 1, device_name(local));
    }
    match device_type_name(t) {
        "unknown" => format!("device_type={t}:{}", dev.device_id),
        name => format!("{name}:{}", dev.device_id),
    }
}

/// Parses a device as users write it: `cpu`, `opencl:1`, `cuda:0` (the id defaults to 0).
pub fn parse_device(text: &str) -> Result<DLDevice> {
    let (name, id) = match text.split_once(':') {
        Some((n, i)) => (
            n,
            i.parse::<i32>().ok().filter(|&i| i >= 0).ok_or_else(|| {
                Error::value(format!(
                    "bad device `{text}`: the id after `:` must be a number >= 0"
                ))
            })?,
        ),
        None => (text, 0),
    };
    let device_type = device_type_from_name(name).ok_or_else(|| {
        Error::value(format!(
            "unknown device `{name}` (expected cpu, opencl, cuda, ... optionally with :ID)"
        ))
    })?;
    Ok(DLDevice {
        device_type: DLDeviceType(device_type),
        device_id: id,
    })
}

/// The driver library an environment variable names (`TVMRT_CUDA_LIBRARY`, ...), if it names
/// one. Empty counts as unset: `dlopen("")` opens the program itself, whose missing driver
/// symbols would then be the error instead of the library search.
pub fn library_override(var: &str) -> Option<String> {
    named_library(std::env::var(var).ok())
}

fn named_library(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// Why a driver library could not be opened: libloading's error and its cause (`dlopen`'s own
/// text, "libcuda.so.1: cannot open shared object file: No such file or directory").
pub fn library_error(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// The address of the symbol `name` (NUL-terminated) in a driver library, or the message
/// `lacks(name without its NUL, libloading's error)`. The one copy of `Library::get` for every
/// driver function tvmrt looks up: `get::<F>` for each function type was a copy each, with its
/// own error closure (BENCHMARKS.md, "Library size"); [`function_from`] gives the pointer its
/// type.
pub fn library_symbol(
    library: &libloading::Library,
    name: &str,
    lacks: &dyn Fn(&str, String) -> String,
) -> std::result::Result<*mut std::ffi::c_void, String> {
    // SAFETY: reading a symbol's address as a data pointer calls nothing; what it points to is
    // used only through `function_from`, whose caller answers for the signature.
    unsafe { library.get::<*mut std::ffi::c_void>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| lacks(name.trim_end_matches('\0'), e.to_string()))
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
///
/// `p` is the address of a function whose C signature is `F`'s (a function pointer type).
pub unsafe fn function_from<F: Copy>(p: *mut std::ffi::c_void) -> F {
    assert_eq!(
        std::mem::size_of::<F>(),
        std::mem::size_of::<*mut std::ffi::c_void>()
    );
    // SAFETY: `F` is a function pointer type of a pointer's size (checked), and `p` points to
    // a function of that signature (the caller's promise).
    unsafe { std::mem::transmute_copy(&p) }
}

/// What `module` is as a device module, if a back end loaded it.
pub fn describe_module(module: &Module) -> Option<DeviceModuleInfo> {
    BACK_ENDS.iter().find_map(|b| (b.describe_module)(module))
}

/// The device layer's global functions and every back end's.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    let mut v = globals::builtins();
    for be in BACK_ENDS {
        v.extend((be.globals)());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_symbols_with_their_type_or_the_message() {
        // SAFETY: the C library is loaded in every process; opening it again runs nothing new.
        let libc = unsafe { libloading::Library::new("libc.so.6") }.unwrap();
        let lacks = |sym: &str, e: String| format!("libc lacks `{sym}` ({e})");
        let p = library_symbol(&libc, "strlen\0", &lacks).unwrap();
        // SAFETY: `strlen` has this C signature.
        let strlen: unsafe extern "C" fn(*const std::ffi::c_char) -> usize =
            unsafe { function_from(p) };
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { strlen(c"four".as_ptr()) }, 4);
        let e = library_symbol(&libc, "tvmrt_no_such_symbol\0", &lacks).unwrap_err();
        assert!(e.starts_with("libc lacks `tvmrt_no_such_symbol` ("), "{e}");
    }

    #[test]
    fn an_empty_library_variable_is_unset() {
        assert_eq!(named_library(None), None);
        assert_eq!(named_library(Some(String::new())), None);
        assert_eq!(named_library(Some("  ".into())), None);
        assert_eq!(
            named_library(Some("/opt/libcuda.so.1".into())).as_deref(),
            Some("/opt/libcuda.so.1")
        );
    }

    #[test]
    fn names_and_parsing() {
        assert_eq!(device_name(cpu()), "cpu:0");
        let d = parse_device("opencl:2").unwrap();
        assert_eq!((d.device_type.0, d.device_id), (4, 2));
        assert_eq!(parse_device("cpu").unwrap().device_type.0, 1);
        assert!(parse_device("gpu").is_err());
        assert!(parse_device("cpu:-1").is_err());
        assert!(parse_device("cpu:x").is_err());
        let unknown = DLDevice {
            device_type: DLDeviceType(99),
            device_id: 1,
        };
        assert_eq!(device_name(unknown), "device_type=99:1");
    }

    #[test]
    fn unregistered_types_are_named() {
        assert!(api(CPU).unwrap().host_accessible());
        let e = api(10).map(|_| ()).unwrap_err();
        assert!(
            e.message.contains("device type 10 (rocm) has no back end"),
            "{e}"
        );
        assert!(e.message.contains("cpu"), "{e}");
        // Past DLPack's and TVM's types, short of the remote sessions' (128 on).
        assert!(api(100).is_err());
        let neg = DLDevice {
            device_type: DLDeviceType(CPU),
            device_id: -1,
        };
        assert!(api_of(neg).is_err());
    }
}
