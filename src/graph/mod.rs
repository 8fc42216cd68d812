//! Classic TVM models: the graph executor of TVM 0.7 – 0.19 (`relay.build` + `export_library`).
//!
//! Such a library's blob root is a [`factory::GraphExecutorFactory`] (graph JSON, parameters,
//! module name) importing the compiled kernels. `factory["default"](dev)` creates a
//! [`executor::GraphExecutor`]; so does the global `tvm.graph_executor.create(graph_json, lib,
//! device_type, device_id)`.
//!
//! - [`json`]: the graph JSON, read strictly (errors name the field).
//! - [`params`]: `save_param_dict` blobs.
//! - [`executor`]: storage planning, kernel calls, the executor module's functions.
//! - [`factory`]: the factory module and its blob loaders.
//! - [`debug`]: the debug executor's functions (per-node timing and outputs, `profile`).

pub mod debug;
pub mod executor;
pub mod factory;
pub mod json;
pub mod params;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::Module;
use crate::value::{Any, AnyView};

pub use executor::GraphExecutor;
pub use factory::GraphExecutorFactory;
pub use json::Graph;

fn arg<'a, 'b>(args: &'a [AnyView<'b>], i: usize, what: &str) -> Result<&'a AnyView<'b>> {
    args.get(i).ok_or_else(|| {
        Error::type_error(format!(
            "missing argument {i} (`{what}`): got {} arguments",
            args.len()
        ))
    })
}

/// `runtime.module.loadbinary_GraphExecutorFactory`: the payload at the front of the bytes;
/// the length used goes through the optional `int64_t*` (tvmrt's classic loader protocol).
fn load_binary(args: &[AnyView<'_>]) -> Result<Any> {
    let v = arg(args, 0, "bytes")?;
    let bytes = v
        .as_byte_slice()
        .ok_or_else(|| v.type_mismatch("bytes", "bytes"))?;
    let (factory, used) = GraphExecutorFactory::from_stream(bytes)?;
    if let Some(slot) = args.get(1).and_then(AnyView::as_opaque_ptr) {
        if !slot.is_null() {
            // SAFETY: the classic loader protocol passes a pointer to an `int64_t`
            // (src/module/mod.rs, "How to register a module loader").
            unsafe { *slot.cast::<i64>() = used as i64 };
        }
    }
    Ok(Module::new(factory).into())
}

/// `ffi.Module.load_from_bytes.GraphExecutorFactory`: exactly the payload.
fn load_bytes(args: &[AnyView<'_>]) -> Result<Any> {
    let v = arg(args, 0, "bytes")?;
    let bytes = v
        .as_byte_slice()
        .ok_or_else(|| v.type_mismatch("bytes", "bytes"))?;
    let (factory, used) = GraphExecutorFactory::from_stream(bytes)?;
    if used != bytes.len() {
        crate::bail_value!(
            "invalid GraphExecutorFactory payload: {} trailing bytes",
            bytes.len() - used
        );
    }
    Ok(Module::new(factory).into())
}

/// `tvm.graph_executor.create(graph_json, lib, device_type, device_id, ...)`.
fn create(args: &[AnyView<'_>]) -> Result<Any> {
    if args.len() < 4 {
        crate::bail_type!(
            "tvm.graph_executor.create expects at least 4 arguments (graph_json, lib, \
             device_type, device_id), got {}",
            args.len()
        );
    }
    let json = arg(args, 0, "graph_json")?.expect_str("graph_json")?;
    let lib = Module::from_view(arg(args, 1, "lib")?, "lib")?;
    if args[2].as_function().is_some() {
        crate::bail_value!(
            "tvm.graph_executor.create: a linked-parameter lookup function was given; tvmrt \
             does not support linked parameters (build without link-params)"
        );
    }
    let devices = factory::devices_from_args(&args[2..])?;
    let graph = Arc::new(Graph::parse(json)?);
    let exec = GraphExecutor::new(graph, lib, executor::host_device(&devices)?)?;
    Ok(exec.into_module().into())
}

/// `tvm.graph_executor_factory.create(graph_json, lib, module_name, name0, tensor0, ...)`.
fn create_factory(args: &[AnyView<'_>]) -> Result<Any> {
    if args.len() < 3 || !(args.len() - 3).is_multiple_of(2) {
        crate::bail_type!(
            "tvm.graph_executor_factory.create expects graph_json, lib, module_name, then \
             name/tensor pairs; got {} arguments",
            args.len()
        );
    }
    let json = args[0].expect_str("graph_json")?.to_string();
    let lib = Module::from_view(&args[1], "lib")?;
    let name = args[2].expect_str("module_name")?.to_string();
    let params = args[3..]
        .chunks(2)
        .map(|p| {
            let key = p[0].expect_str("param name")?.to_string();
            Ok((key, crate::tensor::Tensor::from_any_view(&p[1], "param")?))
        })
        .collect::<Result<Vec<_>>>()?;
    let m = Module::new(GraphExecutorFactory::new(json, params, name)?);
    m.import(&lib)?;
    Ok(m.into())
}

/// The graph executor's global functions and blob loaders.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "runtime.module.loadbinary_GraphExecutorFactory",
            Function::from_fn(load_binary),
        ),
        (
            "runtime.module.loadbinary_GraphRuntimeFactory",
            Function::from_fn(load_binary),
        ),
        (
            "ffi.Module.load_from_bytes.GraphExecutorFactory",
            Function::from_fn(load_bytes),
        ),
        ("tvm.graph_executor.create", Function::from_fn(create)),
        (
            "tvm.graph_executor_debug.create",
            Function::from_fn(debug::create),
        ),
        (
            "tvm.graph_executor_factory.create",
            Function::from_fn(create_factory),
        ),
    ]
}
