//! The payload TVM's GPU modules save (`SaveToBytes`, and `SaveToBinary` before TVM 0.21):
//! `[String fmt][Map<String, FunctionInfo>][Bytes code]`, the same for CUDA, OpenCL and ROCm
//! (TVM `cuda_module.cc`, `opencl_module.cc`), and the two loaders every such module kind
//! registers with TVM's names.

use super::launch::{read_function_table, write_function_table, FunctionInfo, InfoFormat};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::blob::{Reader, Writer};
use crate::module::Module;
use crate::value::{Any, AnyView};

/// A device module's saved parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevicePayload {
    /// The format of `code` (`cuda`, `ptx`, `cubin`, `fatbin`, `cl`, ...).
    pub fmt: String,
    /// The kernels' function table, in the order written.
    pub table: Vec<FunctionInfo>,
    /// The kernels' code.
    pub code: Vec<u8>,
}

impl DevicePayload {
    /// Reads a payload from the front of `bytes`; returns it and the bytes it took.
    pub fn read(bytes: &[u8], format: InfoFormat) -> Result<(DevicePayload, usize)> {
        let mut r = Reader::new(bytes);
        let fmt = r.read_string()?.to_string();
        let table = read_function_table(&mut r, format)?;
        let code = r.read_bytes()?.to_vec();
        Ok((DevicePayload { fmt, table, code }, r.position()))
    }

    /// The payload as TVM 0.21+ saves it.
    pub fn to_bytes(&self) -> Vec<u8> {
        write_payload(&self.fmt, &self.table, &self.code)
    }
}

/// A payload from its parts, as TVM 0.21+ saves it.
pub fn write_payload(fmt: &str, table: &[FunctionInfo], code: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_string(fmt);
    write_function_table(&mut w, table);
    w.write_bytes(code);
    w.into_inner()
}

/// The loaders of a module kind made from a payload, with TVM's names (`names[0]` =
/// `ffi.Module.load_from_bytes.<kind>`: exactly one payload with TVM 0.21+'s function table;
/// `names[1]` = `runtime.module.loadbinary_<kind>`: the payload at the front of the rest of a
/// TVM <= 0.20 blob, whose byte count goes through the `int64_t*` second argument, tvmrt's
/// classic loader protocol). `what` names the payload in messages (`CUDA module payload`).
pub fn payload_loaders(
    names: [&'static str; 2],
    what: &'static str,
    build: fn(DevicePayload) -> Result<Module>,
) -> Vec<(&'static str, Function)> {
    module_loaders(names, what, move |bytes, format| {
        let (p, n) = DevicePayload::read(bytes, format)?;
        Ok((build(p)?, n))
    })
}

/// The two loaders of a module kind whose payload `read` parses (from the front of the bytes,
/// with the function table in `format`; it returns the module and the bytes it took), with
/// TVM's names as [`payload_loaders`] gives them. For kinds whose payload is not
/// `[fmt][table][code]` (Vulkan's shader map).
pub fn module_loaders(
    names: [&'static str; 2],
    what: &'static str,
    read: impl Fn(&[u8], InfoFormat) -> Result<(Module, usize)> + Copy + Send + Sync + 'static,
) -> Vec<(&'static str, Function)> {
    fn bytes_arg<'a>(args: &'a [AnyView<'_>], name: &str) -> Result<&'a [u8]> {
        let v = args
            .first()
            .ok_or_else(|| Error::type_error(format!("{name}: expected the payload (bytes)")))?;
        v.as_byte_slice()
            .ok_or_else(|| v.type_mismatch("payload", "bytes"))
    }
    let [current, classic] = names;
    vec![
        (
            current,
            Function::from_fn(move |args| {
                let bytes = bytes_arg(args, current)?;
                let (m, n) = read(bytes, InfoFormat::WithExtraTags).map_err(|e| e.context(what))?;
                if n != bytes.len() {
                    crate::bail_value!(
                        "{what}: {} trailing bytes after the module",
                        bytes.len() - n
                    );
                }
                Ok(m.into())
            }),
        ),
        (
            classic,
            Function::from_fn(move |args| {
                let bytes = bytes_arg(args, classic)?;
                let (m, n) = read(bytes, InfoFormat::Classic)
                    .map_err(|e| e.context(format!("{what} (TVM <= 0.20)")))?;
                if let Some(p) = args.get(1).and_then(|v| v.as_opaque_ptr()) {
                    if !p.is_null() {
                        // SAFETY: the loader protocol's second argument is an `int64_t*` the
                        // caller owns for the call.
                        unsafe { *p.cast::<i64>() = n as i64 };
                    }
                }
                Ok(Any::from(m))
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{dtype, dtypes};

    #[test]
    fn round_trip_and_truncation() {
        let p = DevicePayload {
            fmt: "ptx".into(),
            table: vec![FunctionInfo {
                name: "k".into(),
                arg_types: vec![dtype(3, 64, 1), dtypes::INT32],
                launch_param_tags: vec!["blockIdx.x".into()],
                arg_extra_tags: vec![0, 0],
            }],
            code: b"// ptx".to_vec(),
        };
        let bytes = p.to_bytes();
        let (back, n) = DevicePayload::read(&bytes, InfoFormat::WithExtraTags).unwrap();
        assert_eq!((back, n), (p, bytes.len()));
        for cut in 0..bytes.len() {
            assert!(DevicePayload::read(&bytes[..cut], InfoFormat::WithExtraTags).is_err());
        }
    }
}
