//! The graph executor factory (module kind `GraphExecutorFactory`): what `relay.build` puts at
//! the root of an exported library's blob in TVM 0.7 – 0.19 (`GraphRuntimeFactory` before 0.8),
//! importing the compiled kernels (`_lib`).
//!
//! Its payload, as TVM's `SaveToBinary` writes it: the graph JSON (a `u64` length and the text),
//! a `u64` parameter count, the parameter names (a `u64` count, then each name), the tensors in
//! TVM's tensor save format, and the module name (usually `default`).
//!
//! Functions: `<module name>(dev, ...)` creates an executor with the parameters set;
//! `get_graph_json`, `get_graph_params` (a `Map<str, Tensor>`), `remove_params` (the same
//! factory without parameters).

use std::sync::Arc;

use super::executor::{host_device, GraphExecutor};
use super::json::Graph;
use super::params::{read_count, read_named_tensors, read_names, write_named_tensors, Params};
use crate::abi::DLDevice;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::blob::{Reader, Writer};
use crate::module::{Module, ModuleKind};
use crate::object::containers::map::{new_map, Entry};
use crate::value::{Any, AnyView};

/// A graph executor factory module.
pub struct GraphExecutorFactory {
    graph_json: String,
    graph: Arc<Graph>,
    params: Params,
    module_name: String,
}

impl std::fmt::Debug for GraphExecutorFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GraphExecutorFactory(`{}`, {} nodes, {} params)",
            self.module_name,
            self.graph.nodes.len(),
            self.params.len()
        )
    }
}

fn bad(what: impl std::fmt::Display) -> Error {
    Error::value(format!("invalid GraphExecutorFactory payload: {what}"))
}

impl GraphExecutorFactory {
    /// A factory over `graph_json` (parsed and checked now) with `params`.
    pub fn new(graph_json: String, params: Params, module_name: String) -> Result<Self> {
        let graph = Arc::new(Graph::parse(&graph_json)?);
        Ok(GraphExecutorFactory {
            graph_json,
            graph,
            params,
            module_name,
        })
    }

    /// Decodes the payload from the front of `bytes`; returns the factory and the bytes used.
    pub fn from_stream(bytes: &[u8]) -> Result<(Self, usize)> {
        let mut r = Reader::new(bytes);
        let json = r
            .read_string()
            .map_err(|e| bad(format_args!("graph JSON: {}", e.message)))?
            .to_string();
        let count = read_count(&mut r, "parameter count").map_err(|e| bad(&e.message))?;
        let names = read_names(&mut r).map_err(|e| bad(&e.message))?;
        let params = read_named_tensors(&mut r, count, names).map_err(|e| bad(&e.message))?;
        let module_name = r
            .read_string()
            .map_err(|e| bad(format_args!("module name: {}", e.message)))?
            .to_string();
        let used = r.position();
        Ok((GraphExecutorFactory::new(json, params, module_name)?, used))
    }

    /// The payload `from_stream` reads.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut w = Writer::new();
        w.write_string(&self.graph_json);
        write_named_tensors(&mut w, &self.params)?;
        w.write_string(&self.module_name);
        Ok(w.into_inner())
    }

    /// The module name (the executor-creating function's name).
    pub fn module_name(&self) -> &str {
        &self.module_name
    }

    /// The parsed graph.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The parameters saved with the graph.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Creates an executor on `devices` over the kernels of `this`'s first import, with the
    /// parameters set (largest first, as TVM does).
    pub fn create_executor(&self, this: &Module, devices: &[DLDevice]) -> Result<Module> {
        self.create(this, devices, false)
    }

    /// [`GraphExecutorFactory::create_executor`], as the debug executor when `debug` (TVM's
    /// `debug_create`).
    pub fn create(&self, this: &Module, devices: &[DLDevice], debug: bool) -> Result<Module> {
        let lib = lib_of(this)?;
        let mut exec = GraphExecutor::new(self.graph.clone(), lib, host_device(devices)?)?;
        if debug {
            exec = exec.with_debug();
        }
        let mut order: Vec<&(String, crate::tensor::Tensor)> = self.params.iter().collect();
        crate::cold_sort::sort_by_key(&mut order, |(_, t)| std::cmp::Reverse(t.nbytes()));
        let params: Params = order.into_iter().cloned().collect();
        exec.set_params(&params, false)?;
        Ok(exec.into_module())
    }
}

/// The kernel library a factory imports.
fn lib_of(this: &Module) -> Result<Module> {
    this.imports().into_iter().next().ok_or_else(|| {
        Error::value(
            "GraphExecutorFactory has no imported library: the kernels (`_lib`) are missing",
        )
    })
}

/// Devices from arguments: `DLDevice` values, or (type, id) integer pairs.
pub fn devices_from_args(args: &[AnyView<'_>]) -> Result<Vec<DLDevice>> {
    if args.iter().all(|a| a.as_device().is_some()) {
        return Ok(args.iter().filter_map(AnyView::as_device).collect());
    }
    if !args.len().is_multiple_of(2) {
        crate::bail_type!(
            "expected devices, or device type and id pairs; got {} arguments",
            args.len()
        );
    }
    args.chunks(2)
        .map(|p| {
            let ty = p[0].expect_i64("device_type")?;
            let id = p[1].expect_i64("device_id")?;
            Ok(DLDevice {
                device_type: crate::abi::DLDeviceType(ty as u32),
                device_id: id as i32,
            })
        })
        .collect()
}

impl ModuleKind for GraphExecutorFactory {
    fn kind(&self) -> &str {
        "GraphExecutorFactory"
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let me = this.clone();
        let factory = move || {
            me.downcast::<GraphExecutorFactory>()
                .expect("a GraphExecutorFactory module holds a factory")
                .clone_parts()
        };
        let this = this.clone();
        let f = if name == self.module_name {
            Function::from_fn(move |args| {
                let f = this
                    .downcast::<GraphExecutorFactory>()
                    .expect("a GraphExecutorFactory module holds a factory");
                Ok(f.create_executor(&this, &devices_from_args(args)?)?.into())
            })
        } else {
            match name {
                "debug_create" => Function::from_fn(move |args| {
                    let f = this
                        .downcast::<GraphExecutorFactory>()
                        .expect("a GraphExecutorFactory module holds a factory");
                    let name = args
                        .first()
                        .ok_or_else(|| {
                            Error::type_error("debug_create expects (module_name, dev)")
                        })?
                        .expect_str("module_name")?;
                    if name != f.module_name {
                        crate::bail_value!(
                            "debug_create: this factory's model is `{}`, not `{name}`",
                            f.module_name
                        );
                    }
                    Ok(f.create(&this, &devices_from_args(&args[1..])?, true)?
                        .into())
                }),
                "get_graph_json" => {
                    let json = self.graph_json.clone();
                    Function::from_fn(move |_| Ok(Any::from(json.as_str())))
                }
                "get_graph_params" => Function::from_fn(move |_| {
                    let (_, params, _) = factory();
                    let entries = params
                        .into_iter()
                        .map(|(k, t)| Entry {
                            key: Any::from(k),
                            value: Any::from(t),
                        })
                        .collect();
                    Ok(Any::from_object(new_map(entries)))
                }),
                "remove_params" => Function::from_fn(move |_| {
                    let f = this
                        .downcast::<GraphExecutorFactory>()
                        .expect("a GraphExecutorFactory module holds a factory");
                    let bare = GraphExecutorFactory {
                        graph_json: f.graph_json.clone(),
                        graph: f.graph.clone(),
                        params: Vec::new(),
                        module_name: f.module_name.clone(),
                    };
                    let m = Module::new(bare);
                    m.import(&lib_of(&this)?)?;
                    Ok(m.into())
                }),
                _ => return Ok(None),
            }
        };
        Ok(Some(f))
    }

    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        self.to_bytes()
    }

    /// Binary-serializable and runnable, as TVM's `GraphExecutorFactory`.
    fn property_mask(&self) -> i32 {
        3
    }
}

impl GraphExecutorFactory {
    fn clone_parts(&self) -> (String, Params, String) {
        (
            self.graph_json.clone(),
            self.params.clone(),
            self.module_name.clone(),
        )
    }
}
