//! Looking inside a library compiled by TVM: which ABI generation built it, its functions and
//! their signatures, its entry function, what its blob holds, what it imports from the runtime,
//! and (once loaded) its module tree. This is the library behind `tvmrt inspect`.
//!
//! [`inspect_file`] reads the file without loading it (see [`elf`] for why); [`module_tree`]
//! describes a loaded module.

pub mod elf;
pub mod signature;

use crate::error::{Error, Result};
use crate::function::registry;
use crate::module::blob::{
    self, BlobLayout, DecodedBlob, CLASSIC_BLOB_SYMBOL, FFI_BLOB_SYMBOL, SIZE_PREFIX_LEN,
};
use crate::module::library::{
    Abi, CLASSIC_MAIN, CLASSIC_MODULE_CTX, FFI_LIBRARY_CTX, FFI_MAIN, FFI_SYMBOL_PREFIX,
};
use crate::module::Module;
use crate::value::Any;

use self::elf::{ElfLibrary, SymKind};
use self::signature::Signature;

/// Which of TVM's ABIs a library was built for, from the marker symbols it defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbiGeneration {
    /// tvm-ffi (TVM 0.21 and later): `__tvm_ffi_*` symbols.
    TvmFfi,
    /// Classic (TVM 0.7 to 0.20): `__tvm_module_ctx`, `__tvm_dev_mblob`, `__tvm_main__`.
    Classic,
    /// Markers of both (e.g. a library linking kernels of both generations).
    Both,
    /// No TVM marker: any exported function is taken as a classic packed function.
    Unknown,
}

impl AbiGeneration {
    /// A short label (`tvm-ffi`, `classic`, `tvm-ffi+classic`, `unknown`).
    pub fn label(self) -> &'static str {
        match self {
            AbiGeneration::TvmFfi => "tvm-ffi",
            AbiGeneration::Classic => "classic",
            AbiGeneration::Both => "tvm-ffi+classic",
            AbiGeneration::Unknown => "unknown",
        }
    }

    /// The TVM releases that produce it.
    pub fn tvm_versions(self) -> &'static str {
        match self {
            AbiGeneration::TvmFfi => "TVM 0.21 and later",
            AbiGeneration::Classic => "TVM 0.7 to 0.20",
            AbiGeneration::Both => "TVM 0.7 to 0.20 and 0.21+",
            AbiGeneration::Unknown => "no TVM marker symbols",
        }
    }
}

/// A function compiled into the library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledFunction {
    /// The name it is looked up by.
    pub name: String,
    /// Its calling convention.
    pub abi: Abi,
    /// The exported symbol (`__tvm_ffi_add` or `add`).
    pub symbol: String,
    /// Its signature as TVM's argument checks print it, when the library holds one.
    pub signature: Option<String>,
}

/// One module serialized in the blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobEntry {
    /// The module kind (`_lib` for the library itself).
    pub kind: String,
    /// Bytes of its payload (`None` for `_lib`).
    pub payload_bytes: Option<usize>,
    /// Indices of the entries it imports.
    pub imports: Vec<usize>,
}

/// What the blob symbol holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobInfo {
    /// `__tvm_ffi__library_bin` or `__tvm_dev_mblob`.
    pub symbol: String,
    /// The symbol's size (`st_size`; 0 when the file does not say).
    pub symbol_size: u64,
    /// What its 8-byte prefix says follows.
    pub declared_bytes: u64,
    /// The layout, when decoded.
    pub layout: Option<BlobLayout>,
    /// The modules, 0 being the root.
    pub entries: Vec<BlobEntry>,
    /// Why the blob could not be decoded, if it could not.
    pub error: Option<String>,
}

/// Everything `inspect` reports about a library file without loading it.
#[derive(Clone, Debug)]
pub struct LibraryInfo {
    /// The file.
    pub path: String,
    /// Its size in bytes.
    pub file_size: u64,
    /// `ELF64 X86_64`.
    pub format: String,
    /// The ABI generation.
    pub abi: AbiGeneration,
    /// Compiled functions, by name.
    pub functions: Vec<CompiledFunction>,
    /// The function `main` resolves to (tvm-ffi `__tvm_ffi_main` alias, classic `__tvm_main__`).
    pub entry: Option<String>,
    /// The blob, if any.
    pub blob: Option<BlobInfo>,
    /// Context variables the runtime fills at load time (`__TVMBackendParallelLaunch`, ...).
    pub context_symbols: Vec<String>,
    /// Runtime functions the library imports (`TVMFFIErrorSetRaisedFromCStrParts`, ...).
    pub runtime_imports: Vec<String>,
    /// Every other imported symbol (libc, C runtime).
    pub other_imports: Vec<String>,
    /// `DT_NEEDED` libraries.
    pub needed: Vec<String>,
}

impl LibraryInfo {
    /// The compiled function `name` (`main` resolves to the entry).
    pub fn function(&self, name: &str) -> Option<&CompiledFunction> {
        let name = match (name, &self.entry) {
            ("main", Some(entry)) if !self.functions.iter().any(|f| f.name == "main") => entry,
            _ => name,
        };
        self.functions.iter().find(|f| f.name == name)
    }

    /// The parsed signature of `name`, when the library holds one.
    pub fn signature(&self, name: &str) -> Option<Signature> {
        let text = self.function(name)?.signature.as_deref()?;
        signature::parse(text).ok()
    }

    /// The names of the compiled functions.
    pub fn function_names(&self) -> Vec<String> {
        self.functions.iter().map(|f| f.name.clone()).collect()
    }
}

/// Reads `path` and describes it (see [`inspect_bytes`]).
pub fn inspect_file(path: &str) -> Result<LibraryInfo> {
    let data =
        std::fs::read(path).map_err(|e| Error::value(format!("cannot read `{path}`: {e}")))?;
    inspect_bytes(&data, path)
}

fn is_context_symbol(name: &str) -> bool {
    // Every context pointer of both generations is named `__TVM...` (tvm-ffi
    // `library_module.cc` `InitContextFunctions`, TVM <= 0.20 `library_module.cc`), plus the
    // two module context variables.
    name.starts_with("__TVM") || name == FFI_LIBRARY_CTX || name == CLASSIC_MODULE_CTX
}

fn is_runtime_import(name: &str) -> bool {
    name.starts_with("TVM") || name.starts_with("__tvm") || name.starts_with("__TVM")
}

/// Describes a library from its file contents; `path` is only used in messages.
pub fn inspect_bytes(data: &[u8], path: &str) -> Result<LibraryInfo> {
    let lib = ElfLibrary::parse(data, path)?;
    let has = |n: &str| lib.symbol(n).is_some();
    let ffi_markers = has(FFI_LIBRARY_CTX) || has(FFI_BLOB_SYMBOL) || has(FFI_MAIN);
    let classic = has(CLASSIC_MODULE_CTX) || has(CLASSIC_BLOB_SYMBOL) || has(CLASSIC_MAIN);
    // A kernel-only tvm-ffi library (no entry, blob or context variable) is recognized by its
    // `__tvm_ffi_<name>` functions.
    let ffi = ffi_markers
        || lib
            .defined
            .iter()
            .any(|s| s.kind == SymKind::Function && s.name.starts_with(FFI_SYMBOL_PREFIX));
    let abi = match (ffi, classic) {
        (true, true) => AbiGeneration::Both,
        (true, false) => AbiGeneration::TvmFfi,
        (false, true) => AbiGeneration::Classic,
        (false, false) => AbiGeneration::Unknown,
    };
    let strings: Vec<&str> = lib.rodata_strings().collect();
    let signature_of = |name: &str| signature::find_in_strings(strings.iter().copied(), name);

    // The same lookup rules as the loader (`module::library`): tvm-ffi functions are
    // `__tvm_ffi_<name>`; classic ones are any other exported function whose name does not
    // start with `_`, searched only when the library is not tvm-ffi-only.
    let mut functions = Vec::new();
    let mut entry = None;
    let main_addr = lib
        .symbol(FFI_MAIN)
        .filter(|s| s.kind == SymKind::Function)
        .map(|s| s.address);
    for s in lib.defined.iter().filter(|s| s.kind == SymKind::Function) {
        if let Some(name) = s.name.strip_prefix(FFI_SYMBOL_PREFIX) {
            // `__tvm_ffi_main` is a weak alias of the entry function when TVM emits one.
            if s.name == FFI_MAIN || name.starts_with('_') {
                continue;
            }
            if main_addr == Some(s.address) {
                entry = Some(name.to_string());
            }
            functions.push(CompiledFunction {
                name: name.to_string(),
                abi: Abi::Ffi,
                symbol: s.name.clone(),
                signature: signature_of(name),
            });
        } else if (classic || !ffi_markers) && !s.name.starts_with('_') {
            functions.push(CompiledFunction {
                name: s.name.clone(),
                abi: Abi::Classic,
                symbol: s.name.clone(),
                signature: signature_of(&s.name),
            });
        }
    }
    if let (Some(addr), None) = (main_addr, &entry) {
        // TVM 0.27 emits `__tvm_ffi_main` as a jump to the entry function's symbol.
        entry = lib
            .jump_target(addr)
            .and_then(|t| t.strip_prefix(FFI_SYMBOL_PREFIX).map(str::to_string))
            .filter(|name| functions.iter().any(|f| &f.name == name));
    }
    if main_addr.is_some() && entry.is_none() {
        // An entry of its own, not an alias.
        entry = Some("main".to_string());
        functions.push(CompiledFunction {
            name: "main".into(),
            abi: Abi::Ffi,
            symbol: FFI_MAIN.into(),
            signature: signature_of("main"),
        });
    }
    if entry.is_none() {
        entry = lib
            .symbol(CLASSIC_MAIN)
            .filter(|s| s.kind != SymKind::Function)
            .and_then(|s| lib.symbol_bytes(s))
            .and_then(|b| b.split(|&c| c == 0).next())
            .and_then(|b| std::str::from_utf8(b).ok())
            .filter(|s| !s.is_empty())
            .map(str::to_string);
    }
    crate::cold_sort::sort_by(&mut functions, |a, b| a.name.cmp(&b.name));

    let blob = [FFI_BLOB_SYMBOL, CLASSIC_BLOB_SYMBOL]
        .into_iter()
        .find_map(|name| lib.symbol(name))
        .map(|s| blob_info(&lib, s));

    let context_symbols = lib
        .defined
        .iter()
        .filter(|s| s.kind != SymKind::Function && is_context_symbol(&s.name))
        .map(|s| s.name.clone())
        .collect();
    let (runtime, other): (Vec<_>, Vec<_>) = lib
        .imported
        .iter()
        .map(|s| s.name.clone())
        .partition(|n| is_runtime_import(n));
    Ok(LibraryInfo {
        path: path.to_string(),
        file_size: lib.file_size() as u64,
        format: lib.format.clone(),
        abi,
        functions,
        entry,
        blob,
        context_symbols,
        runtime_imports: runtime,
        other_imports: other,
        needed: lib.needed.clone(),
    })
}

fn blob_info(lib: &ElfLibrary<'_>, sym: &elf::DefinedSymbol) -> BlobInfo {
    let mut info = BlobInfo {
        symbol: sym.name.clone(),
        symbol_size: sym.size,
        declared_bytes: 0,
        layout: None,
        entries: Vec::new(),
        error: None,
    };
    let decoded = (|| -> Result<DecodedBlob> {
        let bytes = lib
            .symbol_bytes(sym)
            .ok_or_else(|| Error::value(format!("`{}` has no contents in the file", sym.name)))?;
        let prefix: [u8; SIZE_PREFIX_LEN] = bytes
            .get(..SIZE_PREFIX_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| {
                Error::value(format!(
                    "`{}` is {} bytes, too short for its 8-byte size prefix",
                    sym.name,
                    bytes.len()
                ))
            })?;
        info.declared_bytes = blob::blob_len_from_prefix(prefix);
        let body = blob::split_size_prefix(bytes)?;
        if sym.name == FFI_BLOB_SYMBOL {
            blob::decode_ffi(body)
        } else {
            blob::decode_classic(body, &classic_payload_len)
        }
    })();
    match decoded {
        Ok(d) => {
            info.layout = Some(d.layout);
            info.entries = d
                .modules
                .iter()
                .zip(d.imports.iter())
                .map(|(m, imports)| BlobEntry {
                    kind: m.kind.clone(),
                    payload_bytes: m.payload.as_ref().map(|p| p.len()),
                    imports: imports.clone(),
                })
                .collect();
        }
        Err(e) => info.error = Some(e.message.clone()),
    }
    info
}

/// How many bytes a classic payload takes. A classic blob does not record it: only the kind's
/// loader knows, so this runs the loader (the protocol of `runtime.module.loadbinary_<kind>` in
/// the [module docs](crate::module)).
fn classic_payload_len(kind: &str, rest: &[u8]) -> Result<usize> {
    let name = format!("runtime.module.loadbinary_{kind}");
    let f = registry::get(&name).ok_or_else(|| {
        Error::value(format!(
            "the size of a `{kind}` module cannot be told without its loader `{name}`, which \
             is not registered"
        ))
    })?;
    let mut consumed: i64 = -1;
    let slot = Any::opaque_ptr((&mut consumed as *mut i64).cast());
    let out = f.call_values(&[Any::bytes(rest), slot])?;
    if consumed >= 0 {
        return usize::try_from(consumed)
            .map_err(|_| Error::value(format!("loader `{name}` reported {consumed} bytes")));
    }
    let m = Module::from_view(&out.view(), &format!("result of `{name}`"))?;
    Ok(m.save_to_bytes()?.len())
}

/// A module of a loaded tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleNode {
    /// Its kind (`library`, `relax.VMExecutable`, ...).
    pub kind: String,
    /// Its functions: all of them for a library module (from the file), otherwise the names it
    /// implements among [`PROBED_FUNCTIONS`] and the identifiers its saved bytes mention (a
    /// module's serialized form usually names its functions: ExampleJSON's subgraphs).
    pub functions: Vec<String>,
    /// Whether `functions` is the complete list.
    pub functions_complete: bool,
    /// The modules it imports.
    pub imports: Vec<ModuleNode>,
    /// For a Relax executable: its VM functions (empty for other kinds).
    pub vm_functions: Vec<VmFunctionNode>,
    /// For a Relax executable: its weights (the constant pool's tensors).
    #[cfg(feature = "vm")]
    pub constants: Option<crate::vm::exec::ConstantTotals>,
    /// For a graph executor factory (TVM <= 0.19 model): its graph.
    pub graph: Option<GraphSummary>,
    /// For a device module (`opencl`, ...): its code format and kernels.
    pub device: Option<crate::device::DeviceModuleInfo>,
}

/// A graph executor model, as `tvmrt inspect` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphSummary {
    /// The function that creates the executor (`default`).
    pub module_name: String,
    /// Number of graph nodes.
    pub nodes: usize,
    /// The compiled functions the graph calls, in order of first call.
    pub kernels: Vec<String>,
    /// The inputs, parameters included (`param` set for those saved with the model).
    pub inputs: Vec<GraphTensor>,
    /// The outputs, named by their nodes.
    pub outputs: Vec<GraphTensor>,
}

/// An input or output of a graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphTensor {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<i64>,
    /// A parameter saved with the model (inputs only).
    pub param: bool,
}

/// The graph of a graph executor factory module (`None` for others, and in builds without
/// the `graph` feature).
#[cfg(not(feature = "graph"))]
pub fn graph_summary(_m: &Module) -> Option<GraphSummary> {
    None
}

/// The graph of a graph executor factory module (`None` for others).
#[cfg(feature = "graph")]
pub fn graph_summary(m: &Module) -> Option<GraphSummary> {
    use crate::graph::json::NodeOp;
    let f = m.downcast::<crate::graph::GraphExecutorFactory>()?;
    let g = f.graph();
    let tensor = |name: &str, eid: usize, param: bool| GraphTensor {
        name: name.to_string(),
        dtype: g.dltype_names[eid].clone(),
        shape: g.shape[eid].clone(),
        param,
    };
    let mut kernels: Vec<String> = Vec::new();
    for n in &g.nodes {
        if let NodeOp::Call(p) = &n.op {
            if !kernels.contains(&p.func_name) {
                kernels.push(p.func_name.clone());
            }
        }
    }
    let inputs = g
        .arg_nodes
        .iter()
        .map(|&nid| {
            let name = &g.nodes[nid].name;
            let param = f.params().iter().any(|(p, _)| p == name);
            tensor(name, g.node_row_ptr[nid], param)
        })
        .collect();
    let outputs = g
        .heads
        .iter()
        .map(|h| tensor(&g.nodes[h.node_id].name, g.entry_id(*h), false))
        .collect();
    Some(GraphSummary {
        module_name: f.module_name().to_string(),
        nodes: g.nodes.len(),
        kernels,
        inputs,
        outputs,
    })
}

/// A function of a Relax VM executable, as `tvmrt inspect` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmFunctionNode {
    /// The function's global name (`main`, ...).
    pub name: String,
    /// Its parameter names.
    pub params: Vec<String>,
    /// Kernels and other packed functions it calls (imports or the global registry), in order
    /// of first call; VM builtins (`vm.builtin.*`) excluded.
    pub kernels: Vec<String>,
    /// The VM builtins it calls.
    pub builtins: Vec<String>,
    /// Other VM functions it calls.
    pub vm_calls: Vec<String>,
    /// Bytes its `vm.builtin.alloc_storage` calls of constant size allocate (the activation
    /// storage TVM's compiler planned), and the number of calls sized at run time.
    pub planned_storage: (u64, usize),
}

/// The VM functions of a Relax executable module (none in builds without the `vm` feature).
#[cfg(not(feature = "vm"))]
pub fn vm_functions(_m: &Module) -> Vec<VmFunctionNode> {
    Vec::new()
}

/// The VM functions of a Relax executable module, with what each calls.
#[cfg(feature = "vm")]
pub fn vm_functions(m: &Module) -> Vec<VmFunctionNode> {
    use crate::vm::exec::{ExecutableModule, FuncKind, Instr};
    let Some(em) = m.downcast::<ExecutableModule>() else {
        return Vec::new();
    };
    let exec = em.executable();
    let push = |list: &mut Vec<String>, name: &str| {
        if !list.iter().any(|n| n == name) {
            list.push(name.to_string());
        }
    };
    exec.funcs
        .iter()
        .filter(|f| f.kind == FuncKind::VMFunc)
        .map(|f| {
            let mut node = VmFunctionNode {
                name: f.name.clone(),
                params: f.param_names.clone(),
                kernels: Vec::new(),
                builtins: Vec::new(),
                vm_calls: Vec::new(),
                planned_storage: exec.planned_storage(f),
            };
            let end = f.end_instr.min(exec.instrs.len());
            for instr in &exec.instrs[f.start_instr.min(end)..end] {
                let Instr::Call { func, .. } = instr else {
                    continue;
                };
                let Some(callee) = exec.funcs.get(*func) else {
                    continue;
                };
                match callee.kind {
                    FuncKind::PackedFunc if callee.name.starts_with("vm.builtin.") => {
                        push(&mut node.builtins, &callee.name)
                    }
                    FuncKind::PackedFunc => push(&mut node.kernels, &callee.name),
                    _ => push(&mut node.vm_calls, &callee.name),
                }
            }
            node
        })
        .collect()
}

/// Conventional function names asked of modules that cannot list their functions: the Relax VM
/// executable's (TVM 0.27 `runtime/vm/executable.cc`), the VM's, and graph executors'.
pub const PROBED_FUNCTIONS: &[&str] = &[
    "main",
    "vm_load_executable",
    "vm_initialization",
    "stats",
    "as_text",
    "as_python",
    "has_function",
    "get_symbol",
    "get_const_vars",
    "get_graph_json",
    "run",
    "set_input",
    "get_output",
    "load_params",
];

/// Limit on the depth described (import trees are acyclic; this only bounds the output).
const MAX_TREE_DEPTH: usize = 64;

/// Bounds on the names taken from a module's saved bytes.
const MAX_SAVED_BYTES: usize = 1 << 20;
const MAX_CANDIDATES: usize = 4096;

/// Candidate function names of a module that cannot list its functions: the conventional ones,
/// then identifiers found in what the module saves of itself, in order of appearance.
fn candidate_names(m: &Module) -> Vec<String> {
    let mut names: Vec<String> = PROBED_FUNCTIONS.iter().map(|s| s.to_string()).collect();
    let Ok(bytes) = m.save_to_bytes() else {
        return names;
    };
    let bytes = &bytes[..bytes.len().min(MAX_SAVED_BYTES)];
    let is_word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.';
    let mut seen: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    for word in bytes.split(|b| !is_word(b)) {
        if names.len() >= MAX_CANDIDATES {
            break;
        }
        let starts_ok = word
            .first()
            .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_');
        if starts_ok && word.len() <= 128 && seen.insert(word) {
            // ASCII by construction.
            let w = String::from_utf8_lossy(word).into_owned();
            if !names.contains(&w) {
                names.push(w);
            }
        }
    }
    names
}

/// Describes a loaded module and its imports. `lib` (the file's [`LibraryInfo`]) supplies the
/// functions of library modules.
pub fn module_tree(root: &Module, lib: Option<&LibraryInfo>) -> ModuleNode {
    fn walk(m: &Module, lib: Option<&LibraryInfo>, depth: usize) -> ModuleNode {
        let device = crate::device::describe_module(m);
        let (functions, functions_complete) = match (m.kind(), lib, &device) {
            (_, _, Some(d)) => (d.kernels.iter().map(|k| k.name.clone()).collect(), true),
            ("library", Some(info), _) => (info.function_names(), true),
            _ => (
                candidate_names(m)
                    .into_iter()
                    .filter(|n| m.implements_function(n, false))
                    .collect(),
                false,
            ),
        };
        let imports = if depth < MAX_TREE_DEPTH {
            m.imports()
                .iter()
                .map(|c| walk(c, lib, depth + 1))
                .collect()
        } else {
            Vec::new()
        };
        ModuleNode {
            kind: m.kind().to_string(),
            functions,
            functions_complete,
            imports,
            vm_functions: vm_functions(m),
            #[cfg(feature = "vm")]
            constants: m
                .downcast::<crate::vm::exec::ExecutableModule>()
                .map(|em| em.executable().constant_totals()),
            graph: graph_summary(m),
            device,
        }
    }
    walk(root, lib, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn kernel_library() {
        let info = inspect_file(&fixture("add_dyn.so")).unwrap();
        assert_eq!(info.abi, AbiGeneration::TvmFfi);
        assert_eq!(info.function_names(), vec!["add".to_string()]);
        assert_eq!(info.entry.as_deref(), Some("add"));
        assert_eq!(info.functions[0].symbol, "__tvm_ffi_add");
        assert_eq!(
            info.functions[0].signature.as_deref(),
            Some("add(A: Tensor([n], float32), B: Tensor([n], float32), C: Tensor([n], float32))")
        );
        assert_eq!(info.function("main").unwrap().name, "add");
        assert_eq!(info.signature("add").unwrap().params.len(), 3);
        assert!(info.blob.is_none());
        assert_eq!(
            info.runtime_imports,
            vec!["TVMFFIErrorSetRaisedFromCStrParts"]
        );
        assert!(info.other_imports.contains(&"__cxa_finalize".to_string()));
        assert!(info.needed.is_empty());
        assert_eq!(info.file_size, 18816);
    }

    #[test]
    fn context_symbols_and_several_functions() {
        let info = inspect_file(&fixture("workspace.so")).unwrap();
        // No entry, blob or context variable of its own: known by its function symbols.
        assert_eq!(info.abi, AbiGeneration::TvmFfi);
        assert_eq!(
            info.function_names(),
            vec![
                "rows_reverse_parallel",
                "scale_reverse",
                "scale_reverse_dyn"
            ]
        );
        assert_eq!(info.entry, None);
        assert_eq!(
            info.context_symbols,
            vec![
                "__TVMBackendAllocWorkspace",
                "__TVMBackendFreeWorkspace",
                "__TVMBackendParallelLaunch"
            ]
        );
    }

    #[test]
    fn relax_model_blob() {
        let info = inspect_file(&fixture("mlp.so")).unwrap();
        let blob = info.blob.as_ref().unwrap();
        assert_eq!(blob.symbol, FFI_BLOB_SYMBOL);
        assert_eq!(blob.symbol_size, 5971);
        assert_eq!(blob.declared_bytes, 5963);
        assert_eq!(blob.layout, Some(BlobLayout::TvmFfi));
        assert_eq!(blob.error, None);
        assert_eq!(blob.entries.len(), 2);
        assert_eq!(blob.entries[0].kind, "relax.VMExecutable");
        assert_eq!(blob.entries[0].imports, vec![1]);
        assert_eq!(blob.entries[1].kind, "_lib");
        assert_eq!(blob.entries[1].payload_bytes, None);
        // indptr (8 + 3*8) + children (8 + 8) + key (8 + 18) + payload length (8) + `_lib` key.
        let payload = blob.entries[0].payload_bytes.unwrap();
        assert_eq!(payload, 5963 - 32 - 16 - 26 - 8 - 12);
        assert_eq!(
            info.function_names(),
            vec!["add", "add1", "matmul", "matmul1", "relu"]
        );
        assert!(info.signature("relu").is_some());
    }

    #[test]
    fn not_a_library() {
        let e = inspect_bytes(b"hello world, not ELF", "x.so").unwrap_err();
        assert!(e.message.contains("x.so: not a shared library"), "{e}");
        let e = inspect_file("/nonexistent/lib.so").unwrap_err();
        assert!(
            e.message.contains("cannot read `/nonexistent/lib.so`"),
            "{e}"
        );
        // A truncated ELF header.
        let data = std::fs::read(fixture("add_dyn.so")).unwrap();
        assert!(inspect_bytes(&data[..100], "t.so").is_err());
    }
}
