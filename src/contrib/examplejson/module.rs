//! The `examplejson` module kind: a parsed [`Graph`] whose subgraphs are the module's functions.
//!
//! Serialized form (`SaveToBinary` in TVM's guide, `stream->Write(graph_json_)` on a
//! `dmlc::Stream`): the text as one dmlc string, a little-endian `u64` byte count followed by
//! the bytes. The same bytes serve both blob layouts: in a classic blob they are written without
//! an outer length, so the loader needs the count to know where the next module starts; in a
//! tvm-ffi blob they are the payload of a length-prefixed entry.
//!
//! Loaders registered (see [`builtins`]):
//! - `module.examplejson_module_create(text)`: from the text itself (the guide's codegen hook);
//! - `runtime.module.loadfile_examplejson(path[, format])`: from a text file, so
//!   `TVMModLoadFromFile(path, "examplejson")` works;
//! - `runtime.module.loadbinary_examplejson(bytes[, int64_t* consumed])`: from the front of a
//!   classic blob stream (the module loader protocol of [`crate::module`]);
//! - `ffi.Module.load_from_bytes.examplejson(bytes)`: from exactly the saved bytes. Raw text
//!   without the count is accepted too, for writers that stored the string alone.

use std::sync::Arc;

use parking_lot::Mutex;

use super::graph::{Graph, Subgraph};
use crate::abi::DLTensor;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

/// The type key, as TVM's `ExampleJsonModule::type_key()`.
pub const KIND: &str = "examplejson";

/// Largest ExampleJSON file or payload accepted (the text of a graph, not its tensors).
pub const MAX_TEXT_BYTES: u64 = 64 << 20;

/// An ExampleJSON runtime module: the graph, parsed once and shared with its functions.
pub struct ExampleJsonModule {
    graph: Arc<Graph>,
}

impl std::fmt::Debug for ExampleJsonModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExampleJsonModule")
            .field("subgraphs", &self.graph.subgraph_names())
            .finish()
    }
}

impl ExampleJsonModule {
    /// Parses `text` (see [`Graph::parse`] for the grammar and the errors).
    pub fn new(text: &str) -> Result<ExampleJsonModule> {
        Ok(ExampleJsonModule {
            graph: Arc::new(Graph::parse(text)?),
        })
    }

    /// Reads and parses an ExampleJSON text file.
    pub fn from_file(path: &str) -> Result<ExampleJsonModule> {
        let text = read_text_file(path)?;
        ExampleJsonModule::new(&text)
            .map_err(|e| Error::new(e.kind.clone(), format!("`{path}`: {}", e.message)))
    }

    /// Restores a module from what [`ModuleKind::save_to_bytes`] wrote, which may be followed
    /// by other bytes (a classic blob stream). Returns the module and the bytes it consumed.
    pub fn from_stream(bytes: &[u8]) -> Result<(ExampleJsonModule, usize)> {
        let text = read_dmlc_string(bytes)?;
        Ok((ExampleJsonModule::new(text)?, 8 + text.len()))
    }

    /// Restores a module from exactly its saved bytes: the counted string, or the bare text.
    pub fn from_bytes(bytes: &[u8]) -> Result<ExampleJsonModule> {
        if let Ok(text) = read_dmlc_string(bytes) {
            if 8 + text.len() == bytes.len() {
                return ExampleJsonModule::new(text);
            }
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            Error::value(format!(
                "ExampleJSON payload is neither a counted string nor UTF-8 text ({e})"
            ))
        })?;
        ExampleJsonModule::new(text)
    }

    /// A new module object of this kind.
    pub fn into_module(self) -> Module {
        Module::new(self)
    }

    /// The parsed graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The text the module was created from (its saved form is this text, counted).
    pub fn text(&self) -> &str {
        self.graph.text()
    }
}

impl ModuleKind for ExampleJsonModule {
    fn kind(&self) -> &str {
        KIND
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let Some(index) = self.graph.subgraphs().iter().position(|s| s.name() == name) else {
            return Ok(None);
        };
        let graph = self.graph.clone();
        let keep = this.clone();
        let last_result = Mutex::new(None);
        Ok(Some(Function::from_fn(move |args| {
            // Holding the module keeps its imports and any library it came from alive.
            let _ = &keep;
            call_subgraph(&graph.subgraphs()[index], args, &last_result)
        })))
    }

    fn implements_function(&self, _this: &Module, name: &str) -> bool {
        self.graph.subgraph(name).is_some()
    }

    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        let text = self.graph.text().as_bytes();
        let mut out = Vec::with_capacity(8 + text.len());
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text);
        Ok(out)
    }

    /// Binary-serializable and runnable, as TVM's JSON runtimes.
    fn property_mask(&self) -> i32 {
        3
    }

    /// The subgraph text (the JSON runtimes' `InspectSource` returns their graph).
    fn inspect_source(&self, _format: &str) -> String {
        self.graph.text().to_string()
    }
}

/// Runs `subgraph` on packed arguments: every argument a tensor (`DLTensor*` or tensor object),
/// the inputs then the output. Returns the result as a tensor of its own (classic type code 13,
/// tvm-ffi `ffi.Tensor`), as the BYOC guide's module does: it hands back its own copy of the
/// last node's result after copying that into the output argument. `last_result` is the
/// function's previous result (see [`result_copy`]).
fn call_subgraph(
    subgraph: &Subgraph,
    args: &[AnyView<'_>],
    last_result: &Mutex<Option<Tensor>>,
) -> Result<Any> {
    let mut tensors: Vec<&DLTensor> = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        let p = a.as_dltensor().filter(|p| !p.is_null()).ok_or_else(|| {
            Error::type_error(format!(
                "ExampleJSON subgraph '{}': argument {i} must be a tensor (DLTensor* or \
                 ffi.Tensor), got {}",
                subgraph.name(),
                a.type_name()
            ))
        })?;
        // SAFETY: a non-null DLTensor pointer or tensor object handed in by the caller is a
        // live DLTensor for the duration of the call (the packed-function contract).
        tensors.push(unsafe { &*p });
    }
    // SAFETY: same contract: each DLTensor describes memory its caller owns for this call;
    // `run` checks shapes, strides, dtype, device and pointers before touching data.
    unsafe { subgraph.run(&tensors)? };
    let out = *tensors.last().ok_or_else(|| {
        Error::value(format!(
            "ExampleJSON subgraph '{}' needs its output tensor as the last argument",
            subgraph.name()
        ))
    })?;
    // SAFETY: `out` is the caller's live output tensor that `run` just checked and wrote.
    let result = unsafe { result_copy(out, last_result)? };
    Ok(Any::from_object(result.into_object()))
}

/// The call's result: a copy of the output `out` in memory of the function's own. The previous
/// result (kept in `last_result`) is written again when nothing else holds it any more, as the
/// guide's module reuses its last data entry; a result someone still holds is never written,
/// so a new one is made. Without the reuse a large result was allocated and its pages faulted
/// in on every call, which cost more than the subgraph itself (BENCHMARKS.md, ExampleJSON).
/// The function thus holds one result's memory between calls, until it is released (the
/// guide's module holds every data entry).
///
/// # Safety
/// `out` is a live CPU tensor descriptor.
unsafe fn result_copy(out: &DLTensor, last_result: &Mutex<Option<Tensor>>) -> Result<Tensor> {
    // SAFETY: per the contract (the shape was checked by `run`).
    let shape = unsafe { crate::tensor::layout::dl_shape(out, "output")? };
    // Taken out of the slot, so the copy runs without the lock (other calls of the function
    // go on meanwhile, making results of their own).
    let reusable = last_result.lock().take_if(|kept| {
        let dl = kept.dl();
        dl.dtype == out.dtype
            && dl.device == out.device
            && kept.shape() == shape
            && kept.object().is_unique()
    });
    let result = match reusable {
        Some(kept) => {
            // SAFETY: `out` is live (contract) and `kept` is a compact tensor of the same shape,
            // dtype and device that only this call can reach.
            unsafe { crate::tensor::copy::copy_dltensor(out, kept.dl())? };
            kept
        }
        // SAFETY: per the contract.
        None => unsafe { Tensor::copy_of_dltensor(out)? },
    };
    *last_result.lock() = Some(result.clone());
    Ok(result)
}

/// Reads a dmlc string (`u64` little-endian count, then the bytes) from the front of `bytes`.
fn read_dmlc_string(bytes: &[u8]) -> Result<&str> {
    let Some(head) = bytes.get(..8) else {
        crate::bail_value!(
            "ExampleJSON payload is {} bytes, too short for its 8-byte length",
            bytes.len()
        );
    };
    let mut count = [0u8; 8];
    count.copy_from_slice(head);
    let n = u64::from_le_bytes(count);
    let rest = (bytes.len() - 8) as u64;
    if n > rest {
        crate::bail_value!(
            "ExampleJSON payload says its text is {n} bytes, but only {rest} bytes follow"
        );
    }
    if n > MAX_TEXT_BYTES {
        crate::bail_value!("ExampleJSON text of {n} bytes is larger than the limit of 64 MiB");
    }
    // n <= rest, which is a slice length.
    let text = &bytes[8..8 + n as usize];
    std::str::from_utf8(text)
        .map_err(|e| Error::value(format!("ExampleJSON text is not valid UTF-8 ({e})")))
}

fn read_text_file(path: &str) -> Result<String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::value(format!("cannot read ExampleJSON file `{path}`: {e}")))?;
    if meta.len() > MAX_TEXT_BYTES {
        crate::bail_value!(
            "ExampleJSON file `{path}` is {} bytes, larger than the limit of 64 MiB",
            meta.len()
        );
    }
    let bytes = std::fs::read(path)
        .map_err(|e| Error::value(format!("cannot read ExampleJSON file `{path}`: {e}")))?;
    String::from_utf8(bytes)
        .map_err(|e| Error::value(format!("ExampleJSON file `{path}` is not UTF-8 ({e})")))
}

/// The text or bytes of argument `i`.
fn text_arg<'a>(args: &'a [AnyView<'_>], i: usize, what: &str) -> Result<&'a [u8]> {
    let v = args.get(i).ok_or_else(|| {
        Error::type_error(format!(
            "missing argument {i} (`{what}`): got {} arguments",
            args.len()
        ))
    })?;
    v.as_byte_slice()
        .ok_or_else(|| v.type_mismatch(what, "str or bytes"))
}

/// The loaders and the constructor, with TVM's names.
pub fn builtins() -> Vec<(&'static str, Function)> {
    fn create(args: &[AnyView<'_>]) -> Result<Any> {
        let bytes = text_arg(args, 0, "code")?;
        let text = std::str::from_utf8(bytes)
            .map_err(|e| Error::value(format!("ExampleJSON text is not valid UTF-8 ({e})")))?;
        Ok(ExampleJsonModule::new(text)?.into_module().into())
    }
    fn load_file(args: &[AnyView<'_>]) -> Result<Any> {
        let path = args
            .first()
            .ok_or_else(|| Error::type_error("missing argument 0 (`file_name`)"))?
            .expect_str("file_name")?;
        Ok(ExampleJsonModule::from_file(path)?.into_module().into())
    }
    fn load_binary(args: &[AnyView<'_>]) -> Result<Any> {
        let bytes = text_arg(args, 0, "bytes")?;
        let (m, used) = ExampleJsonModule::from_stream(bytes)?;
        if let Some(slot) = args.get(1).and_then(|a| a.as_opaque_ptr()) {
            if !slot.is_null() {
                // SAFETY: tvmrt's classic loader protocol passes a pointer to an `int64_t`
                // (src/module/mod.rs, "How to register a module loader").
                unsafe { *slot.cast::<i64>() = used as i64 };
            }
        }
        Ok(m.into_module().into())
    }
    fn load_bytes(args: &[AnyView<'_>]) -> Result<Any> {
        let bytes = text_arg(args, 0, "bytes")?;
        Ok(ExampleJsonModule::from_bytes(bytes)?.into_module().into())
    }
    vec![
        (
            "module.examplejson_module_create",
            Function::from_fn(create),
        ),
        (
            "runtime.module.loadfile_examplejson",
            Function::from_fn(load_file),
        ),
        (
            "runtime.module.loadbinary_examplejson",
            Function::from_fn(load_binary),
        ),
        (
            "ffi.Module.load_from_bytes.examplejson",
            Function::from_fn(load_bytes),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::contrib::examplejson::graph::GUIDE_SEED as SEED;

    #[test]
    fn saved_bytes_are_a_counted_string_and_load_back() {
        let m = ExampleJsonModule::new(SEED).unwrap();
        let bytes = m.save_to_bytes().unwrap();
        assert_eq!(&bytes[..8], &(SEED.len() as u64).to_le_bytes());
        assert_eq!(&bytes[8..], SEED.as_bytes());
        let mut stream = bytes.clone();
        stream.extend_from_slice(b"next module");
        let (back, used) = ExampleJsonModule::from_stream(&stream).unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(back.text(), SEED);
        assert_eq!(ExampleJsonModule::from_bytes(&bytes).unwrap().text(), SEED);
        assert_eq!(
            ExampleJsonModule::from_bytes(SEED.as_bytes())
                .unwrap()
                .text(),
            SEED
        );
    }

    #[test]
    fn corrupt_payloads_are_errors() {
        let e = ExampleJsonModule::from_stream(&[1, 2, 3]).unwrap_err();
        assert!(e.message.contains("too short"), "{e}");
        let mut b = (1000u64).to_le_bytes().to_vec();
        b.extend_from_slice(b"abc");
        let e = ExampleJsonModule::from_stream(&b).unwrap_err();
        assert_eq!(
            e.message,
            "ExampleJSON payload says its text is 1000 bytes, but only 3 bytes follow"
        );
        let mut b = (u64::MAX).to_le_bytes().to_vec();
        b.push(0);
        assert!(ExampleJsonModule::from_stream(&b).is_err());
        let e = ExampleJsonModule::from_bytes(&[0xff, 0xfe]).unwrap_err();
        assert!(e.message.contains("neither a counted string"), "{e}");
    }
}
