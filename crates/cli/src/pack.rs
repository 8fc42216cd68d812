//! `tvmrt pack`: compile C/C++ sources and serialize modules into one deployable shared
//! library, as TVM's `export_library` does (see `tvmrt::pack`).

use std::path::PathBuf;

use tvmrt::module::blob::BlobLayout;
use tvmrt::pack::{PackModule, PackOptions};
use tvmrt::{Error, Result};

/// Arguments of `tvmrt pack`.
#[derive(clap::Args)]
pub struct Args {
    /// The shared library to write.
    #[arg(short, long, value_name = "OUT.so")]
    output: PathBuf,
    /// A C or C++ source to compile into the library (.c, .cc, .cpp, .cxx); repeatable.
    #[arg(long = "c-source", value_name = "FILE")]
    c_sources: Vec<PathBuf>,
    /// An object file or static archive to link in; repeatable.
    #[arg(long = "object", value_name = "FILE")]
    objects: Vec<PathBuf>,
    /// A module for the blob, imported by the library: KIND=FILE. FILE is read by the loader
    /// `runtime.module.loadfile_KIND` when one is registered (e.g. examplejson), otherwise
    /// taken as the module's saved bytes. Repeatable; order is import order.
    #[arg(long = "module", value_name = "KIND=FILE")]
    modules: Vec<String>,
    /// Blob layout: `ffi` (TVM 0.21+, `__tvm_ffi__library_bin`) or `classic` (TVM <= 0.20,
    /// `__tvm_dev_mblob`).
    #[arg(long, value_name = "LAYOUT", default_value = "ffi")]
    blob_format: String,
    /// An extra include directory for the sources; repeatable.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    include_dirs: Vec<PathBuf>,
    /// An extra compiler flag (e.g. --cflag=-DNDEBUG); repeatable.
    #[arg(long = "cflag", value_name = "FLAG", allow_hyphen_values = true)]
    cflags: Vec<String>,
    /// Keep the intermediate files (blob source, objects) in this directory.
    #[arg(long, value_name = "DIR")]
    keep_temps: Option<PathBuf>,
    /// Do not load the result with tvmrt to check it.
    #[arg(long)]
    no_verify: bool,
    /// Print the compiler commands.
    #[arg(short, long)]
    verbose: bool,
}

/// Runs `tvmrt pack`.
pub fn main(args: Args) -> Result<()> {
    let mut opts = PackOptions::new(&args.output);
    opts.sources = args.c_sources;
    opts.objects = args.objects;
    opts.include_dirs = args.include_dirs;
    opts.cflags = args.cflags;
    opts.keep_dir = args.keep_temps;
    opts.layout = match args.blob_format.as_str() {
        "ffi" | "tvm-ffi" => BlobLayout::TvmFfi,
        "classic" => BlobLayout::ClassicImportTree,
        other => {
            return Err(Error::value(format!(
                "unknown --blob-format `{other}` (expected `ffi` or `classic`)"
            )))
        }
    };
    for spec in &args.modules {
        opts.modules.push(module_arg(spec)?);
    }
    let report = tvmrt::pack::pack(&opts)?;
    if args.verbose {
        for c in &report.commands {
            println!("{c}");
        }
    }
    let kinds: Vec<String> = report
        .tree
        .as_ref()
        .map(|t| t.modules.iter().map(|m| m.kind.clone()).collect())
        .unwrap_or_default();
    println!(
        "wrote {} ({} blob bytes; modules: {})",
        report.output.display(),
        report.blob_bytes,
        if kinds.is_empty() {
            "none".to_string()
        } else {
            kinds.join(", ")
        }
    );
    if !args.no_verify {
        // dlopen searches the library path for a bare file name: load by absolute path.
        let abs = std::fs::canonicalize(&report.output).unwrap_or(report.output.clone());
        let path = abs.to_string_lossy().into_owned();
        let root = tvmrt::module::load_from_file(&path, "so").map_err(|e| {
            Error::new(
                e.kind.clone(),
                format!(
                    "the packed library does not load (use --no-verify to skip this check): {}",
                    e.message
                ),
            )
        })?;
        println!(
            "verified: loads with tvmrt (root module `{}`, {} import(s))",
            root.kind(),
            root.imports().len()
        );
    }
    Ok(())
}

/// Parses `KIND=FILE` into a module for the blob.
fn module_arg(spec: &str) -> Result<PackModule> {
    let Some((kind, file)) = spec.split_once('=') else {
        return Err(Error::value(format!(
            "--module `{spec}`: expected KIND=FILE (e.g. examplejson=graph.txt)"
        )));
    };
    if kind.is_empty() || file.is_empty() {
        return Err(Error::value(format!(
            "--module `{spec}`: expected KIND=FILE with both parts non-empty"
        )));
    }
    let loader = format!("runtime.module.loadfile_{kind}");
    if tvmrt::function::registry::get(&loader).is_some()
        || tvmrt::function::registry::get(&format!("ffi.Module.load_from_file.{kind}")).is_some()
    {
        let m = tvmrt::module::load_from_file(file, kind)?;
        return Ok(PackModule::Module(m));
    }
    let bytes = std::fs::read(file)
        .map_err(|e| Error::value(format!("--module `{spec}`: cannot read `{file}`: {e}")))?;
    Ok(PackModule::Saved {
        kind: kind.to_string(),
        bytes,
    })
}
