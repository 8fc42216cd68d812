//! `tvmrt inspect`: what a compiled library holds and needs.

use serde_json::{json, Value};
use tvmrt::introspect::signature::{self, Dim, ParamType};
use tvmrt::introspect::{self, LibraryInfo, ModuleNode};
use tvmrt::module::blob::BlobLayout;
use tvmrt::module::library::Abi;
use tvmrt::Result;

/// Arguments of `tvmrt inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The library (`.so` exported by TVM) to inspect.
    pub library: String,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,

    /// Read the file only; do not load it (no module tree).
    #[arg(long)]
    pub no_load: bool,
}

fn layout_name(l: BlobLayout) -> &'static str {
    match l {
        BlobLayout::TvmFfi => "tvm-ffi",
        BlobLayout::ClassicImportTree => "classic with import tree",
        BlobLayout::ClassicLegacy => "classic legacy",
    }
}

fn abi_name(a: Abi) -> &'static str {
    match a {
        Abi::Ffi => "tvm-ffi",
        Abi::Classic => "classic",
    }
}

/// A signature with TVMScript's `T.int64(32)` shown as `32`.
fn pretty_signature(text: &str) -> String {
    let Ok(sig) = signature::parse(text) else {
        return text.to_string();
    };
    let params: Vec<String> = sig
        .params
        .iter()
        .map(|p| match &p.ty {
            ParamType::Tensor { shape, dtype } => {
                let dims: Vec<String> = shape
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(v) => v.to_string(),
                        Dim::Var(s) | Dim::Expr(s) => s.clone(),
                    })
                    .collect();
                format!("{}: Tensor([{}], {dtype})", p.name, dims.join(", "))
            }
            ParamType::Other(t) => format!("{}: {t}", p.name),
        })
        .collect();
    format!("{}({})", sig.name, params.join(", "))
}

fn tree_json(n: &ModuleNode) -> Value {
    json!({
        "kind": n.kind,
        "functions": n.functions,
        "functions_complete": n.functions_complete,
        "imports": n.imports.iter().map(tree_json).collect::<Vec<_>>(),
        "vm_functions": n.vm_functions.iter().map(|f| json!({
            "name": f.name,
            "params": f.params,
            "kernels": f.kernels,
            "builtins": f.builtins,
            "vm_calls": f.vm_calls,
            "planned_storage_bytes": f.planned_storage.0,
            "dynamic_storage_calls": f.planned_storage.1,
        })).collect::<Vec<_>>(),
        "constants": n.constants.map(|c| json!({
            "tensors": c.tensors,
            "bytes": c.bytes,
            "in_place": c.in_place,
            "in_place_bytes": c.in_place_bytes,
        })),
        "device_module": n.device.as_ref().map(|d| json!({
            "format": d.format,
            "kernels": d.kernels.iter().map(|k| json!({
                "name": k.name,
                "arg_types": k.arg_types,
                "launch_params": k.launch_params,
            })).collect::<Vec<_>>(),
        })),
        "graph": n.graph.as_ref().map(|g| {
            let tensors = |list: &[tvmrt::introspect::GraphTensor]| {
                list.iter()
                    .map(|t| json!({"name": t.name, "dtype": t.dtype, "shape": t.shape, "param": t.param}))
                    .collect::<Vec<_>>()
            };
            json!({
                "module_name": g.module_name,
                "nodes": g.nodes,
                "kernels": g.kernels,
                "inputs": tensors(&g.inputs),
                "outputs": tensors(&g.outputs),
            })
        }),
    })
}

fn info_json(info: &LibraryInfo, tree: &Option<std::result::Result<ModuleNode, String>>) -> Value {
    let blob = info.blob.as_ref().map(|b| {
        json!({
            "symbol": b.symbol,
            "symbol_size": b.symbol_size,
            "declared_bytes": b.declared_bytes,
            "layout": b.layout.map(layout_name),
            "modules": b.entries.iter().map(|e| json!({
                "kind": e.kind,
                "payload_bytes": e.payload_bytes,
                "imports": e.imports,
            })).collect::<Vec<_>>(),
            "error": b.error,
        })
    });
    let (tree, load_error) = match tree {
        Some(Ok(t)) => (tree_json(t), Value::Null),
        Some(Err(e)) => (Value::Null, Value::from(e.as_str())),
        None => (Value::Null, Value::Null),
    };
    json!({
        "path": info.path,
        "file_size": info.file_size,
        "format": info.format,
        "abi": info.abi.label(),
        "abi_tvm_versions": info.abi.tvm_versions(),
        "entry": info.entry,
        "functions": info.functions.iter().map(|f| json!({
            "name": f.name,
            "abi": abi_name(f.abi),
            "symbol": f.symbol,
            "signature": f.signature,
        })).collect::<Vec<_>>(),
        "blob": blob,
        "module_tree": tree,
        "load_error": load_error,
        "runtime_imports": info.runtime_imports,
        "context_symbols": info.context_symbols,
        "other_imports": info.other_imports,
        "needed": info.needed,
    })
}

fn print_tree(n: &ModuleNode, prefix: &str, last: bool, root: bool) {
    let (branch, child_prefix) = if root {
        ("", String::from("  "))
    } else if last {
        ("`- ", format!("{prefix}   "))
    } else {
        ("|- ", format!("{prefix}|  "))
    };
    let functions = if let Some(d) = &n.device {
        let count = d.kernels.len();
        format!(
            "device module, code format `{}`, {count} kernel{}",
            d.format,
            if count == 1 { "" } else { "s" }
        )
    } else if n.functions.is_empty() {
        String::from("no functions found")
    } else if n.functions_complete {
        format!("functions: {}", n.functions.join(", "))
    } else {
        format!("implements: {}", n.functions.join(", "))
    };
    println!("{prefix}{branch}{}  ({functions})", n.kind);
    let detail = if n.imports.is_empty() {
        format!("{child_prefix}   ")
    } else {
        format!("{child_prefix}|  ")
    };
    if let Some(c) = &n.constants {
        println!(
            "{detail}constants: {} tensors, {} bytes ({} tensors, {} bytes, used in place in the \
             library; the rest copied)",
            c.tensors, c.bytes, c.in_place, c.in_place_bytes
        );
    }
    for f in &n.vm_functions {
        println!("{detail}VM function {}({})", f.name, f.params.join(", "));
        let (bytes, dynamic) = f.planned_storage;
        if bytes > 0 || dynamic > 0 {
            println!(
                "{detail}  allocates storage: {bytes} bytes planned{}",
                if dynamic > 0 {
                    format!(", {dynamic} allocations sized at run time")
                } else {
                    String::new()
                }
            );
        }
        for (label, names) in [
            ("kernels", &f.kernels),
            ("VM functions", &f.vm_calls),
            ("builtins", &f.builtins),
        ] {
            if !names.is_empty() {
                println!("{detail}  calls {label}: {}", names.join(", "));
            }
        }
    }
    if let Some(d) = &n.device {
        for k in &d.kernels {
            println!(
                "{detail}kernel {}({})  launch: {}",
                k.name,
                k.arg_types.join(", "),
                k.launch_params.join(", ")
            );
        }
    }
    if let Some(g) = &n.graph {
        let show =
            |t: &tvmrt::introspect::GraphTensor| format!("{}: {}{:?}", t.name, t.dtype, t.shape);
        println!(
            "{detail}graph: {} nodes, {} kernels; create with `{}(device)`",
            g.nodes,
            g.kernels.len(),
            g.module_name
        );
        let (params, inputs): (Vec<_>, Vec<_>) = g.inputs.iter().partition(|t| t.param);
        let line = |list: Vec<String>| {
            if list.is_empty() {
                "none".to_string()
            } else {
                list.join(", ")
            }
        };
        println!(
            "{detail}  inputs: {}",
            line(inputs.into_iter().map(show).collect())
        );
        println!(
            "{detail}  parameters (saved): {}",
            line(params.into_iter().map(show).collect())
        );
        println!(
            "{detail}  outputs: {}",
            line(g.outputs.iter().map(show).collect())
        );
    }
    for (i, c) in n.imports.iter().enumerate() {
        print_tree(c, &child_prefix, i + 1 == n.imports.len(), false);
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn print_text(info: &LibraryInfo, tree: &Option<std::result::Result<ModuleNode, String>>) {
    println!("{}: {}, {} bytes", info.path, info.format, info.file_size);
    println!("ABI: {} ({})", info.abi.label(), info.abi.tvm_versions());
    match &info.entry {
        Some(e) if e != "main" => println!("entry: main -> {e}"),
        Some(e) => println!("entry: {e}"),
        None => println!("entry: none"),
    }
    println!("compiled functions ({}):", info.functions.len());
    let width = info
        .functions
        .iter()
        .map(|f| f.name.len())
        .max()
        .unwrap_or(0);
    for f in &info.functions {
        let sig = f
            .signature
            .as_deref()
            .map(pretty_signature)
            .unwrap_or_else(|| String::from("(signature not recorded)"));
        println!("  {:width$}  [{}] {sig}", f.name, abi_name(f.abi));
    }
    match &info.blob {
        None => println!("blob: none (the library is its only module)"),
        Some(b) => {
            let layout = b.layout.map(layout_name).unwrap_or("undecoded");
            println!(
                "blob: {}, {} bytes + 8-byte size prefix ({layout} layout)",
                b.symbol, b.declared_bytes
            );
            for (i, e) in b.entries.iter().enumerate() {
                let size = match e.payload_bytes {
                    Some(n) => format!("{n} bytes"),
                    None => String::from("the library itself"),
                };
                let imports = if e.imports.is_empty() {
                    String::new()
                } else {
                    let v: Vec<String> = e.imports.iter().map(|i| format!("[{i}]")).collect();
                    format!(", imports {}", v.join(" "))
                };
                println!("  [{i}] {}: {size}{imports}", e.kind);
            }
            if let Some(err) = &b.error {
                println!("  cannot decode: {err}");
            }
        }
    }
    match tree {
        Some(Ok(t)) => {
            println!("module tree (loaded):");
            print_tree(t, "  ", true, true);
        }
        Some(Err(e)) => println!("module tree: not loaded: {e}"),
        None => {}
    }
    println!("runtime imports: {}", list(&info.runtime_imports));
    println!(
        "context pointers set at load: {}",
        list(&info.context_symbols)
    );
    println!("other imports: {}", list(&info.other_imports));
    println!("needed libraries: {}", list(&info.needed));
}

/// Runs `tvmrt inspect`.
pub fn main(args: Args) -> Result<()> {
    let info = introspect::inspect_file(&args.library)?;
    let tree = if args.no_load {
        None
    } else {
        Some(
            tvmrt::module::load_from_file(&crate::invoke::loadable_path(&args.library), "")
                .map(|m| introspect::module_tree(&m, Some(&info)))
                .map_err(|e| crate::invoke::one_line(&e.to_string())),
        )
    };
    if args.json {
        println!("{:#}", info_json(&info, &tree));
    } else {
        print_text(&info, &tree);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::pretty_signature;

    #[test]
    fn signatures_read_like_shapes() {
        assert_eq!(
            pretty_signature("relu(lv1: Tensor([T.int64(1), T.int64(32)], float32), compute: Tensor([T.int64(1), T.int64(32)], float32))"),
            "relu(lv1: Tensor([1, 32], float32), compute: Tensor([1, 32], float32))"
        );
        assert_eq!(pretty_signature("not a signature"), "not a signature");
    }
}
