//! The device layer's global functions, with TVM's names and arguments (`src/runtime/device_api.cc`):
//! `__tvm_set_device`, `runtime.GetDeviceAttr`, `runtime.Device_StreamCreate` / `StreamFree` /
//! `SetStream` / `StreamSync` / `StreamSyncFromTo`, `runtime.TVMSetStream`, and one
//! `device_api.<name>` per device type a back end serves.

use std::ffi::c_void;

use super::api::{DeviceApi, DeviceAttr, StreamHandle};
use super::{api_of, device_type_name, BACK_ENDS};
use crate::abi::{DLDevice, DLDeviceType};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::value::{Any, AnyView};

fn arg<'a, 'b>(args: &'a [AnyView<'b>], i: usize, what: &str) -> Result<&'a AnyView<'b>> {
    args.get(i).ok_or_else(|| {
        Error::type_error(format!(
            "missing argument {i} (`{what}`): got {} arguments",
            args.len()
        ))
    })
}

/// A device from `(device_type, device_id)` int arguments at `at`, `at + 1`.
fn device_from_ints(args: &[AnyView<'_>], at: usize) -> Result<DLDevice> {
    let t = arg(args, at, "device_type")?.expect_i64("device_type")?;
    let id = arg(args, at + 1, "device_id")?.expect_i64("device_id")?;
    let t = u32::try_from(t).map_err(|_| Error::value(format!("invalid device type {t}")))?;
    let id = i32::try_from(id).map_err(|_| Error::value(format!("invalid device id {id}")))?;
    Ok(DLDevice {
        device_type: DLDeviceType(t),
        device_id: id,
    })
}

/// A `DLDevice` argument.
fn device_arg(args: &[AnyView<'_>], i: usize) -> Result<DLDevice> {
    let v = arg(args, i, "device")?;
    v.as_device()
        .ok_or_else(|| v.type_mismatch("device", "Device"))
}

/// A stream argument, as TVM's globals pass it: an int (the handle's address) or a pointer.
fn stream_arg(args: &[AnyView<'_>], i: usize) -> Result<StreamHandle> {
    let v = arg(args, i, "stream")?;
    if let Some(p) = v.as_opaque_ptr() {
        return Ok(p);
    }
    v.as_i64()
        .map(|a| a as usize as StreamHandle)
        .ok_or_else(|| v.type_mismatch("stream", "int or opaque pointer"))
}

fn with_device(f: fn(&'static dyn DeviceApi, DLDevice, &[AnyView<'_>]) -> Result<Any>) -> Function {
    Function::from_fn(move |args| {
        let dev = device_arg(args, 0)?;
        f(api_of(dev)?, dev, &args[1..])
    })
}

fn get_device_attr(args: &[AnyView<'_>]) -> Result<Any> {
    let dev = device_from_ints(args, 0)?;
    let kind = DeviceAttr::from_code(arg(args, 2, "kind")?.expect_i64("kind")?)?;
    match api_of(dev) {
        Ok(api) => api.get_attr(dev, kind),
        // TVM answers "does it exist" with 0 for a device type it has no API for.
        Err(_) if kind == DeviceAttr::Exist => Ok(Any::from(0i64)),
        Err(e) => Err(e),
    }
}

/// `runtime.RuntimeEnabled(target)`: whether this runtime serves `target`, by TVM's mapping from
/// target names to the global that shows it (TVM `src/runtime/module.cc`, the same in v0.20 and
/// 0.27; tvm4j's and TVM's Python `enabled()` ask it). `llvm*` asks for a code generator, which
/// a runtime never has.
fn runtime_enabled(args: &[AnyView<'_>]) -> Result<Any> {
    let target = arg(args, 0, "target")?.expect_str("target")?;
    let global = match target {
        "cpu" => return Ok(Any::from(true)),
        "cuda" | "gpu" => "device_api.cuda",
        "cl" | "opencl" => "device_api.opencl",
        "mtl" | "metal" => "device_api.metal",
        "tflite" => "target.runtime.tflite",
        "vulkan" => "device_api.vulkan",
        "rpc" => "device_api.rpc",
        "hexagon" => "device_api.hexagon",
        t if t.starts_with("nvptx") => "device_api.cuda",
        t if t.starts_with("rocm") => "device_api.rocm",
        t if t.starts_with("llvm") => "codegen.llvm_target_enabled",
        other => {
            return Err(Error::new(
                "InternalError",
                format!("Unknown optional runtime {other}"),
            ))
        }
    };
    Ok(Any::from(crate::function::registry::get(global).is_some()))
}

/// The address handed out as `device_api.<name>`'s result: the back end's entry in its static
/// list. It is an opaque token saying the device type is served (tvmrt's API is Rust, not TVM's
/// C++ `DeviceAPI` class, so the pointer cannot be called through).
fn device_api_token(device_type: u32) -> Result<Any> {
    for be in BACK_ENDS {
        if let Some(entry) = be.devices.iter().find(|(t, _)| *t == device_type) {
            let p = (entry as *const (u32, &'static dyn DeviceApi)).cast_mut();
            return Ok(Any::opaque_ptr(p.cast::<c_void>()));
        }
    }
    Err(Error::value(format!(
        "no device API for device type {device_type}"
    )))
}

/// `__tvm_set_device(device_type, device_id)`.
fn set_device(args: &[AnyView<'_>]) -> Result<()> {
    // Two ints in range: the call every launch makes, read without building errors.
    if let [t, id] = args {
        if let (Some(t), Some(id)) = (t.as_i64(), id.as_i64()) {
            if let (Ok(t), Ok(id)) = (u32::try_from(t), i32::try_from(id)) {
                let dev = DLDevice {
                    device_type: DLDeviceType(t),
                    device_id: id,
                };
                return api_of(dev)?.set_device(dev);
            }
        }
    }
    set_device_refused(args)
}

/// What is wrong with a `__tvm_set_device` call the fast path did not take.
#[cold]
fn set_device_refused(args: &[AnyView<'_>]) -> Result<()> {
    if args.len() != 2 {
        crate::bail_type!(
            "__tvm_set_device expects 2 arguments (device_type, device_id), got {}",
            args.len()
        );
    }
    let dev = device_from_ints(args, 0)?;
    api_of(dev)?.set_device(dev)
}

/// The `safe_call` of `__tvm_set_device`, which every host launcher calls before each kernel
/// launch: its own entry, so that the hot path builds no closure result. It returns None.
///
/// # Safety
/// The tvm-ffi calling convention: `args` holds `num_args` values alive for the call and
/// `result` is null or writable.
unsafe extern "C" fn set_device_safe_call(
    _handle: *mut c_void,
    args: *const crate::abi::TVMFFIAny,
    num_args: i32,
    result: *mut crate::abi::TVMFFIAny,
) -> i32 {
    crate::unwind_guard::guard("__tvm_set_device", || {
        // SAFETY: per the calling convention.
        let args = unsafe { AnyView::slice_from_raw(args, num_args.max(0) as usize) };
        match set_device(args) {
            Ok(()) => {
                if !result.is_null() {
                    // SAFETY: per the calling convention; None owns nothing.
                    unsafe { result.write(Any::none().into_raw()) };
                }
                0
            }
            Err(e) => {
                crate::raised::set_raised(e);
                -1
            }
        }
    })
}

pub(super) fn builtins() -> Vec<(&'static str, Function)> {
    let mut v = vec![
        (
            "__tvm_set_device",
            Function::from_extern_c(std::ptr::null_mut(), set_device_safe_call, None),
        ),
        ("runtime.GetDeviceAttr", Function::from_fn(get_device_attr)),
        ("runtime.RuntimeEnabled", Function::from_fn(runtime_enabled)),
        (
            "runtime.Device_StreamCreate",
            with_device(|api, dev, _| Ok(Any::from(api.create_stream(dev)? as usize as i64))),
        ),
        (
            "runtime.Device_StreamFree",
            with_device(|api, dev, rest| {
                let s = stream_arg(rest, 0)?;
                // SAFETY: TVM's contract for this global: a stream this API created.
                unsafe { api.free_stream(dev, s)? };
                Ok(Any::none())
            }),
        ),
        (
            "runtime.Device_SetStream",
            with_device(|api, dev, rest| {
                api.set_stream(dev, stream_arg(rest, 0)?)?;
                Ok(Any::none())
            }),
        ),
        (
            "runtime.Device_StreamSync",
            with_device(|api, dev, rest| {
                api.stream_sync(dev, stream_arg(rest, 0)?)?;
                Ok(Any::none())
            }),
        ),
        (
            "runtime.Device_StreamSyncFromTo",
            with_device(|api, dev, rest| {
                api.sync_stream_from_to(dev, stream_arg(rest, 0)?, stream_arg(rest, 1)?)?;
                Ok(Any::none())
            }),
        ),
        (
            "runtime.TVMSetStream",
            Function::from_fn(|args| {
                let dev = device_from_ints(args, 0)?;
                api_of(dev)?.set_stream(dev, stream_arg(args, 2)?)?;
                Ok(Any::none())
            }),
        ),
    ];
    for be in BACK_ENDS {
        for &(device_type, _) in be.devices {
            let name: &'static str = match device_type_name(device_type) {
                "cpu" => "device_api.cpu",
                "cuda" => "device_api.cuda",
                "cuda_host" => "device_api.cuda_host",
                "opencl" => "device_api.opencl",
                "vulkan" => "device_api.vulkan",
                "metal" => "device_api.metal",
                "rocm" => "device_api.rocm",
                "rocm_host" => "device_api.rocm_host",
                "webgpu" => "device_api.webgpu",
                "hexagon" => "device_api.hexagon",
                other => Box::leak(format!("device_api.{other}").into_boxed_str()),
            };
            v.push((
                name,
                Function::from_fn(move |_| device_api_token(device_type)),
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use crate::function::registry;
    use crate::value::Any;

    #[test]
    fn runtime_enabled_maps_targets_as_tvm_does() {
        let enabled = registry::get_required("runtime.RuntimeEnabled").unwrap();
        let ask = |t: &str| enabled.call_values(&[Any::from(t)]);
        let yes = |t: &str| ask(t).unwrap().view().as_bool().unwrap();
        assert!(yes("cpu"));
        // The OpenCL and CUDA back ends, when built in (they open their drivers when used).
        assert_eq!(yes("opencl"), cfg!(feature = "opencl"));
        assert_eq!(yes("cl"), cfg!(feature = "opencl"));
        assert_eq!(yes("cuda"), cfg!(feature = "cuda"));
        assert_eq!(yes("nvptx64"), cfg!(feature = "cuda"));
        // The RPC client registers `device_api.rpc` when the `rpc` feature is built (tvm4j's
        // RPC tests run on this answer, and skip themselves without it); no Metal or code
        // generator.
        assert_eq!(yes("rpc"), cfg!(feature = "rpc"));
        assert!(!yes("metal") && !yes("llvm -mcpu=x"));
        let e = ask("abacus").unwrap_err();
        assert_eq!(e.kind, "InternalError");
        assert_eq!(e.message, "Unknown optional runtime abacus");
    }

    #[test]
    fn attributes_and_set_device() {
        let attr = registry::get_required("runtime.GetDeviceAttr").unwrap();
        let exist = |t: i64| {
            attr.call_values(&[Any::from(t), Any::from(0i64), Any::from(0i64)])
                .unwrap()
                .view()
                .as_i64()
        };
        assert_eq!(exist(1), Some(1));
        assert_eq!(
            exist(10),
            Some(0),
            "no ROCm back end: not there, not an error"
        );
        let e = attr
            .call_values(&[Any::from(10i64), Any::from(0i64), Any::from(1i64)])
            .unwrap_err();
        assert!(e.message.contains("has no back end"), "{e}");
        let set = registry::get_required("__tvm_set_device").unwrap();
        set.call_values(&[Any::from(1i64), Any::from(0i64)])
            .unwrap();
        let e = set
            .call_values(&[Any::from(10i64), Any::from(0i64)])
            .unwrap_err();
        assert!(e.message.contains("device rocm:0 has no back end"), "{e}");
        // What the fast path does not take is refused, each with its reason.
        let refused = |args: &[Any]| set.call_values(args).unwrap_err().message.clone();
        let m = refused(&[Any::from(1i64)]);
        assert!(
            m.contains("expects 2 arguments") && m.contains("got 1"),
            "{m}"
        );
        let m = refused(&[Any::from(1i64), Any::from(0i64), Any::from(0i64)]);
        assert!(m.contains("got 3"), "{m}");
        let m = refused(&[Any::from(1i64), Any::from(0.5f64)]);
        assert!(m.contains("device_id"), "{m}");
        let m = refused(&[Any::from(-1i64), Any::from(0i64)]);
        assert!(m.contains("invalid device type -1"), "{m}");
        let m = refused(&[Any::from(1i64), Any::from(1i64 << 40)]);
        assert!(m.contains("invalid device id"), "{m}");
        let m = refused(&[Any::from(1i64), Any::from(-2i64)]);
        assert!(m.contains("the device id is negative"), "{m}");
        let m = refused(&[Any::from(100i64), Any::from(0i64)]);
        assert!(m.contains("has no back end"), "{m}");
        // 1000 = 104 + 128 * 7: a device of RPC session 6, which is not open (with the RPC
        // client built in, whose globals plug the sessions' devices in).
        let m = refused(&[Any::from(1000i64), Any::from(0i64)]);
        if cfg!(feature = "rpc") {
            assert!(m.contains("no RPC session 6"), "{m}");
        } else {
            assert!(m.contains("has no back end"), "{m}");
        }
        let tok = registry::get_required("device_api.cpu")
            .unwrap()
            .call(&[])
            .unwrap();
        assert!(tok.view().as_opaque_ptr().is_some_and(|p| !p.is_null()));
    }

    #[test]
    fn cpu_streams_are_null() {
        let cpu = Any::from(crate::device::cpu());
        let create = registry::get_required("runtime.Device_StreamCreate").unwrap();
        let s = create.call_values(std::slice::from_ref(&cpu)).unwrap();
        assert_eq!(s.view().as_i64(), Some(0));
        let sync = registry::get_required("runtime.Device_StreamSync").unwrap();
        sync.call_values(&[cpu, Any::from(0i64)]).unwrap();
    }
}
