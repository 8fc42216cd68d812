//! The executor module's functions, as TVM 0.19 names them, over [`GraphExecutor`]'s methods.

use super::GraphExecutor;
use crate::abi::{DLDevice, DLTensor};
use crate::device;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::object::containers::array::new_array;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

fn arg<'a, 'b>(args: &'a [AnyView<'b>], i: usize, what: &str) -> Result<&'a AnyView<'b>> {
    args.get(i).ok_or_else(|| {
        Error::type_error(format!(
            "missing argument {i} (`{what}`): got {} arguments",
            args.len()
        ))
    })
}

fn tensor_arg(v: &AnyView<'_>, what: &str) -> Result<*mut DLTensor> {
    v.as_dltensor()
        .filter(|p| !p.is_null())
        .ok_or_else(|| v.type_mismatch(what, "DLTensor* or ffi.Tensor"))
}

fn index_arg(v: &AnyView<'_>, what: &str) -> Result<usize> {
    let i = v.expect_i64(what)?;
    usize::try_from(i).map_err(|_| Error::index(format!("{what} {i} is negative")))
}

impl ModuleKind for GraphExecutor {
    fn kind(&self) -> &str {
        "GraphExecutor"
    }

    /// Runnable, as TVM 0.19's `GraphExecutor`.
    fn property_mask(&self) -> i32 {
        2
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let with = |f| method(this, f);
        let f = match name {
            "set_input" => with(|e, args| {
                let t = tensor_arg(arg(args, 1, "value")?, "value")?;
                if let Some(i) = e.input_arg(arg(args, 0, "key")?, "key")? {
                    // SAFETY: a non-null DLTensor handed in for the call.
                    unsafe { e.set_input(i, &*t)? };
                }
                Ok(Any::none())
            }),
            "set_input_zero_copy" => with(|e, args| {
                let v = arg(args, 1, "value")?;
                let t = tensor_arg(v, "value")?;
                let keep = Tensor::from_any_view(v, "value").ok();
                if let Some(i) = e.input_arg(arg(args, 0, "key")?, "key")? {
                    // SAFETY: a non-null DLTensor handed in for the call.
                    unsafe { e.set_input_zero_copy(i, &*t, keep)? };
                }
                Ok(Any::none())
            }),
            "get_input" => with(|e, args| match e.input_arg(arg(args, 0, "key")?, "key")? {
                Some(i) => Ok(e.get_input(i)?.into()),
                None => Ok(Any::none()),
            }),
            "get_output" => with(|e, args| {
                let key = arg(args, 0, "index")?;
                let index = match key.as_str() {
                    Some(name) => e
                        .graph
                        .heads
                        .iter()
                        .rposition(|h| e.graph.nodes[h.node_id].name == name)
                        .ok_or_else(|| Error::value(format!("Invalid output node: {name}")))?,
                    None => index_arg(key, "index")?,
                };
                if args.len() == 2 {
                    let out = tensor_arg(&args[1], "out")?;
                    // SAFETY: a non-null DLTensor handed in for the call.
                    unsafe { e.copy_output_to(index, &*out)? };
                    return Ok(Any::none());
                }
                Ok(e.get_output(index)?.into())
            }),
            "get_input_index" => with(|e, args| {
                let name = arg(args, 0, "name")?.expect_str("name")?;
                Ok(Any::from(e.input_index(name).map_or(-1, |i| i as i64)))
            }),
            "get_num_inputs" => with(|e, _| Ok(Any::from(e.num_inputs() as i64))),
            "get_num_outputs" => with(|e, _| Ok(Any::from(e.num_outputs() as i64))),
            "run" => with(|e, _| e.run().map(|()| Any::none())),
            "run_from_inputs" => with(run_from_inputs),
            "load_params" => with(|e, args| {
                let v = arg(args, 0, "params")?;
                let bytes = v
                    .as_byte_slice()
                    .ok_or_else(|| v.type_mismatch("params", "bytes"))?;
                e.load_params(bytes).map(|()| Any::none())
            }),
            "share_params" => with(|e, args| {
                let v = arg(args, 0, "module")?;
                let other = Module::from_view(v, "module")?;
                let other = other.downcast::<GraphExecutor>().ok_or_else(|| {
                    Error::type_error(format!(
                        "share_params: expected a GraphExecutor module, got `{}`",
                        other.kind()
                    ))
                })?;
                let b = arg(args, 1, "params")?;
                let bytes = b
                    .as_byte_slice()
                    .ok_or_else(|| b.type_mismatch("params", "bytes"))?;
                e.share_params(other, bytes).map(|()| Any::none())
            }),
            "get_input_info" => with(|e, _| Ok(e.io_info(false))),
            "get_output_info" => with(|e, _| Ok(e.io_info(true))),
            _ if self.debug => return Ok(crate::graph::debug::get_function(this, name)),
            _ => return Ok(None),
        };
        Ok(Some(f))
    }
}

/// A function of the executor module `this` (which keeps it alive) running `f` on it.
pub(in crate::graph) fn method(
    this: &Module,
    f: fn(&GraphExecutor, &[AnyView<'_>]) -> Result<Any>,
) -> Function {
    let me = this.clone();
    Function::from_fn(move |args| {
        let exec = me
            .downcast::<GraphExecutor>()
            .expect("a GraphExecutor module holds a GraphExecutor");
        f(exec, args)
    })
}

/// `run_from_inputs(device_type, device_id, key, tensor, ...)`: sets the inputs, runs, and
/// returns copies of the outputs on the given (host) device.
fn run_from_inputs(e: &GraphExecutor, args: &[AnyView<'_>]) -> Result<Any> {
    if !args.len().is_multiple_of(2) || args.len() < 2 {
        crate::bail_value!(
            "run_from_inputs: expected device type, device id, then key/value pairs; got {} \
             arguments",
            args.len()
        );
    }
    let device = DLDevice {
        device_type: crate::abi::DLDeviceType(args[0].expect_i64("device_type")? as u32),
        device_id: args[1].expect_i64("device_id")? as i32,
    };
    device::api_of(device).map_err(|e| e.context("run_from_inputs host device"))?;
    for pair in args[2..].chunks(2) {
        let t = tensor_arg(&pair[1], "value")?;
        let index = match pair[0].as_str() {
            Some(name) => e
                .input_index(name)
                .ok_or_else(|| Error::value(format!("{name} is not a valid input name")))?,
            None => index_arg(&pair[0], "input index")?,
        };
        // SAFETY: a non-null DLTensor handed in for the call.
        unsafe { e.set_input(index, &*t)? };
    }
    e.run()?;
    let outputs = (0..e.num_outputs())
        .map(|i| {
            let out = e.get_output(i)?;
            let copy = Tensor::empty(out.shape(), out.dtype(), e.device)?;
            copy.copy_from(&out)?;
            Ok(Any::from(copy))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Any::from_object(new_array(outputs)))
}
