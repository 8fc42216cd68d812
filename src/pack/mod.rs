//! Packing a deployable library without Python: what TVM's `export_library` does.
//!
//! [`pack`] compiles C/C++ sources with the system compiler (found the way the `cc` crate finds
//! it: `CC`/`CXX`, then `cc`/`c++`), serializes the given modules with the library itself as
//! `_lib` into a blob, writes the blob as a C source defining the blob symbol, and links
//! everything into one shared library that [`crate::module::load_from_file`] (and TVM) loads.
//!
//! The module tree written: module 0 is `_lib` (the shared library, so every function of the
//! sources is found from the root) and imports each given module in order; each module's own
//! imports follow it (depth-first, a module reachable twice is written once). That is the tree
//! TVM builds for a BYOC model, where the host library imports the external modules.
//!
//! The blob source has the shape TVM 0.27's `ModulePackImportsToC` emits (checked against
//! `runtime.ModulePackImportsToC` of apache-tvm 0.27.0): an exported
//! `const unsigned char <symbol>[N]` array, no alignment attribute, the size prefix included.
//! For the tvm-ffi layout the source also defines a weak `__tvm_module_ctx`, because tvmrt only
//! searches a library for classic (backend-signature) functions when it carries a classic
//! marker, and BYOC C code exports classic functions; a definition in the user's code wins.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};
use crate::module::blob::{self, BlobLayout, BlobModule, DecodedBlob};
use crate::module::Module;

/// The environment variable naming tvmrt's header directory (the one holding
/// `tvm/runtime/packed_func.h`), consulted first by [`include_dir`].
pub const INCLUDE_DIR_ENV: &str = "TVMRT_INCLUDE_DIR";

/// A module to put in the blob: a live module (saved with its `save_to_bytes`) or bytes
/// already saved, with their type key.
#[derive(Clone, Debug)]
pub enum PackModule {
    /// A module object; its imports are written too.
    Module(Module),
    /// Saved bytes of a module of type `kind`, written as they are.
    Saved {
        /// The type key (`examplejson`, ...).
        kind: String,
        /// What the module's `SaveToBytes` / `SaveToBinary` wrote.
        bytes: Vec<u8>,
    },
}

/// What to pack.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// The shared library to write.
    pub output: PathBuf,
    /// C (`.c`) and C++ (`.cc`, `.cpp`, `.cxx`, `.C`) sources to compile.
    pub sources: Vec<PathBuf>,
    /// Object files (or static archives) to link as they are.
    pub objects: Vec<PathBuf>,
    /// Modules imported by the library, in order.
    pub modules: Vec<PackModule>,
    /// The blob layout: [`BlobLayout::TvmFfi`] (TVM 0.21+, the default) or a classic one.
    pub layout: BlobLayout,
    /// Extra include directories (tvmrt's own, from [`include_dir`], is always added).
    pub include_dirs: Vec<PathBuf>,
    /// Extra compiler flags, for every source.
    pub cflags: Vec<String>,
    /// Keep the intermediate files in this directory instead of a removed temporary one.
    pub keep_dir: Option<PathBuf>,
}

impl PackOptions {
    /// Options writing `output`, with nothing in it yet and the tvm-ffi layout.
    pub fn new(output: impl Into<PathBuf>) -> PackOptions {
        PackOptions {
            output: output.into(),
            sources: Vec::new(),
            objects: Vec::new(),
            modules: Vec::new(),
            layout: BlobLayout::TvmFfi,
            include_dirs: Vec::new(),
            cflags: Vec::new(),
            keep_dir: None,
        }
    }
}

/// What [`pack`] did.
#[derive(Clone, Debug)]
pub struct PackReport {
    /// The library written.
    pub output: PathBuf,
    /// The module tree in the blob (`None` when no module was given: no blob is written).
    pub tree: Option<DecodedBlob<'static>>,
    /// Size of the blob symbol in bytes, size prefix included (0 without a blob).
    pub blob_bytes: usize,
    /// The compiler commands run, for messages and `--verbose`.
    pub commands: Vec<String>,
}

/// Packs a library (see the [module docs](self)).
pub fn pack(opts: &PackOptions) -> Result<PackReport> {
    if opts.sources.is_empty() && opts.objects.is_empty() && opts.modules.is_empty() {
        crate::bail_value!("nothing to pack: give at least one C source, object or module");
    }
    for p in opts.sources.iter().chain(&opts.objects) {
        if !p.is_file() {
            crate::bail_value!("input `{}` does not exist or is not a file", p.display());
        }
    }
    let tree = if opts.modules.is_empty() {
        None
    } else {
        Some(module_tree(&opts.modules)?)
    };
    let blob = match &tree {
        Some(t) => encode(t, opts.layout)?,
        None => Vec::new(),
    };
    let work = WorkDir::new(opts.keep_dir.as_deref())?;
    let mut commands = Vec::new();
    let include = include_dir()?;
    let mut objects = Vec::new();
    let mut any_cpp = false;
    let mut all_sources: Vec<(PathBuf, bool)> = Vec::new();
    for s in &opts.sources {
        let cpp = is_cpp(s)?;
        any_cpp |= cpp;
        all_sources.push((s.clone(), cpp));
    }
    if !blob.is_empty() {
        let path = work.path.join("tvmrt_devc.c");
        std::fs::write(
            &path,
            blob_c_source(opts.layout.symbol(), &blob, opts.layout),
        )
        .map_err(|e| io_error("writing", &path, e))?;
        all_sources.push((path, false));
    }
    for (i, (src, cpp)) in all_sources.iter().enumerate() {
        let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("source");
        let obj = work.path.join(format!("{i}_{stem}.o"));
        let mut cmd = compiler(*cpp)?;
        cmd.arg("-I").arg(&include);
        for d in &opts.include_dirs {
            cmd.arg("-I").arg(d);
        }
        cmd.args(&opts.cflags);
        cmd.arg("-c").arg(src).arg("-o").arg(&obj);
        run(
            &mut cmd,
            &mut commands,
            &format!("compiling `{}`", src.display()),
        )?;
        objects.push(obj);
    }
    objects.extend(opts.objects.iter().cloned());
    // C++ objects need the C++ runtime: link with the C++ driver when there are any (objects
    // given as files may be C++ too; the C++ driver links C objects just as well).
    let mut link = compiler(any_cpp || (!opts.objects.is_empty() && cxx_available()))?;
    link.arg("-shared")
        .arg("-o")
        .arg(&opts.output)
        .args(&objects);
    run(
        &mut link,
        &mut commands,
        &format!("linking `{}`", opts.output.display()),
    )?;
    Ok(PackReport {
        output: opts.output.clone(),
        tree,
        blob_bytes: blob.len(),
        commands,
    })
}

/// The blob's module tree: `_lib` at 0 importing each module, each module's imports after it.
pub fn module_tree(modules: &[PackModule]) -> Result<DecodedBlob<'static>> {
    let mut out = DecodedBlob {
        layout: BlobLayout::TvmFfi,
        modules: vec![BlobModule::library()],
        imports: vec![Vec::new()],
    };
    let mut seen: Vec<(usize, usize)> = Vec::new();
    for m in modules {
        let index = match m {
            PackModule::Module(m) => add_module(&mut out, &mut seen, m, 0)?,
            PackModule::Saved { kind, bytes } => {
                check_kind(kind)?;
                out.modules
                    .push(BlobModule::serialized(kind.clone(), bytes.clone()));
                out.imports.push(Vec::new());
                out.modules.len() - 1
            }
        };
        out.imports[0].push(index);
    }
    out.validate()?;
    Ok(out)
}

/// Depth of module nesting accepted (a tree deeper than this is certainly a mistake).
const MAX_DEPTH: usize = 256;

fn add_module(
    out: &mut DecodedBlob,
    seen: &mut Vec<(usize, usize)>,
    m: &Module,
    depth: usize,
) -> Result<usize> {
    let key = m.as_ptr() as usize;
    if let Some(&(_, i)) = seen.iter().find(|(k, _)| *k == key) {
        return Ok(i);
    }
    if depth > MAX_DEPTH {
        crate::bail_value!("module tree deeper than {MAX_DEPTH} levels");
    }
    check_kind(m.kind())?;
    let bytes = m.save_to_bytes().map_err(|e| {
        Error::new(
            e.kind.clone(),
            format!("cannot pack module of kind `{}`: {}", m.kind(), e.message),
        )
    })?;
    out.modules.push(BlobModule::serialized(m.kind(), bytes));
    out.imports.push(Vec::new());
    let index = out.modules.len() - 1;
    seen.push((key, index));
    for child in m.imports() {
        let c = add_module(out, seen, &child, depth + 1)?;
        out.imports[index].push(c);
    }
    Ok(index)
}

fn check_kind(kind: &str) -> Result<()> {
    if kind.is_empty() || kind == blob::LIB_KEY || kind == blob::IMPORT_TREE_KEY {
        crate::bail_value!("cannot pack a module of kind `{kind}` (reserved or empty type key)");
    }
    if kind == "library" {
        crate::bail_value!(
            "cannot pack a module of kind `library` (a loaded shared library): pass its \
             sources or objects instead"
        );
    }
    Ok(())
}

/// Encodes `tree` in `layout`, size prefix included.
pub fn encode(tree: &DecodedBlob, layout: BlobLayout) -> Result<Vec<u8>> {
    match layout {
        BlobLayout::TvmFfi => blob::encode_ffi(tree),
        BlobLayout::ClassicImportTree => blob::encode_classic(tree),
        BlobLayout::ClassicLegacy => blob::encode_classic_legacy(tree),
    }
}

/// A C source defining `symbol` as the exported byte array `bytes` (see the module docs).
pub fn blob_c_source(symbol: &str, bytes: &[u8], layout: BlobLayout) -> String {
    let mut s = String::with_capacity(bytes.len() * 5 + 512);
    s.push_str("/* Generated by tvmrt pack: the serialized module tree of this library. */\n");
    s.push_str("#ifdef _WIN32\n#define TVMRT_BLOB_EXPORT __declspec(dllexport)\n#else\n");
    s.push_str("#define TVMRT_BLOB_EXPORT __attribute__((visibility(\"default\")))\n#endif\n");
    s.push_str("#ifdef __cplusplus\nextern \"C\" {\n#endif\n");
    s.push_str(&format!(
        "TVMRT_BLOB_EXPORT extern const unsigned char {symbol}[];\n"
    ));
    s.push_str(&format!(
        "TVMRT_BLOB_EXPORT const unsigned char {symbol}[{}] = {{",
        bytes.len().max(1)
    ));
    for (i, b) in bytes.iter().enumerate() {
        if i % 20 == 0 {
            s.push_str("\n  ");
        }
        s.push_str(&format!("0x{b:02x},"));
    }
    if bytes.is_empty() {
        s.push('0');
    }
    s.push_str("\n};\n");
    if layout == BlobLayout::TvmFfi {
        s.push_str(
            "/* Classic marker: lets tvmrt find backend-signature functions in this library. */\n\
             #ifndef _WIN32\n__attribute__((weak)) TVMRT_BLOB_EXPORT void* __tvm_module_ctx = 0;\n\
             #endif\n",
        );
    }
    s.push_str("#ifdef __cplusplus\n}\n#endif\n");
    s
}

/// tvmrt's header directory (holding `tvm/runtime/packed_func.h`): `$TVMRT_INCLUDE_DIR`, then
/// `include/` next to the executable's directory or two levels up (an installed `bin/tvmrt`
/// with `include/`; `target/<profile>/tvmrt` in a checkout), then the crate's `include/` as
/// it was at build time.
pub fn include_dir() -> Result<PathBuf> {
    let has_header = |d: &Path| d.join("tvm/runtime/packed_func.h").is_file();
    if let Some(d) = std::env::var_os(INCLUDE_DIR_ENV) {
        let d = PathBuf::from(d);
        if has_header(&d) {
            return Ok(d);
        }
        crate::bail_value!(
            "{INCLUDE_DIR_ENV}=`{}` does not contain tvm/runtime/packed_func.h",
            d.display()
        );
    }
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        candidates.push(dir.join("../include"));
        candidates.push(dir.join("../../include"));
    }
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"));
    for c in &candidates {
        if has_header(c) {
            return Ok(c.canonicalize().unwrap_or_else(|_| c.clone()));
        }
    }
    let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    crate::bail_value!(
        "cannot find tvmrt's headers (tvm/runtime/packed_func.h); set {INCLUDE_DIR_ENV}. \
         Tried: {}",
        tried.join(", ")
    )
}

fn is_cpp(path: &Path) -> Result<bool> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("c") => Ok(false),
        Some("cc" | "cpp" | "cxx" | "C" | "c++") => Ok(true),
        _ => crate::bail_value!(
            "cannot tell the language of `{}`: C sources end in .c, C++ sources in .cc, .cpp \
             or .cxx",
            path.display()
        ),
    }
}

/// The target triple this library was built for (build.rs), which `cc` needs outside a build
/// script.
fn host_triple() -> String {
    env!("TVMRT_TARGET_TRIPLE").to_string()
}

/// The C (or C++) compiler command with the flags `cc` picks (optimization, `-fPIC`, ...).
fn compiler(cpp: bool) -> Result<Command> {
    let triple = host_triple();
    let tool = cc::Build::new()
        .cpp(cpp)
        .target(&triple)
        .host(&triple)
        .opt_level(2)
        .debug(false)
        .pic(true)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .cargo_output(false)
        .emit_rerun_if_env_changed(false)
        .inherit_rustflags(false)
        .try_get_compiler()
        .map_err(|e| {
            Error::runtime(format!(
                "cannot find a {} compiler: {e}",
                if cpp { "C++" } else { "C" }
            ))
        })?;
    Ok(tool.to_command())
}

fn cxx_available() -> bool {
    compiler(true).is_ok()
}

fn run(cmd: &mut Command, log: &mut Vec<String>, what: &str) -> Result<()> {
    let mut line = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        line.push(' ');
        line.push_str(&a.to_string_lossy());
    }
    log.push(line.clone());
    let out = cmd
        .output()
        .map_err(|e| Error::runtime(format!("{what}: cannot run the compiler ({e}): {line}")))?;
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "{what} failed ({}):\n{line}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::runtime(format!("{what} `{}`: {e}", path.display()))
}

/// The directory intermediate files go to: a kept one, or a fresh temporary one removed on drop.
struct WorkDir {
    path: PathBuf,
    remove: bool,
}

impl WorkDir {
    fn new(keep: Option<&Path>) -> Result<WorkDir> {
        if let Some(k) = keep {
            std::fs::create_dir_all(k).map_err(|e| io_error("creating", k, e))?;
            return Ok(WorkDir {
                path: k.to_path_buf(),
                remove: false,
            });
        }
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "tvmrt-pack-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).map_err(|e| io_error("creating", &path, e))?;
        Ok(WorkDir { path, remove: true })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_source_has_the_exported_array() {
        let s = blob_c_source("__tvm_ffi__library_bin", &[1, 2, 0xff], BlobLayout::TvmFfi);
        assert!(s.contains("extern const unsigned char __tvm_ffi__library_bin[];"));
        assert!(s.contains("const unsigned char __tvm_ffi__library_bin[3] = {\n  0x01,0x02,0xff,"));
        assert!(s.contains("void* __tvm_module_ctx"));
        let c = blob_c_source("__tvm_dev_mblob", &[7], BlobLayout::ClassicImportTree);
        assert!(!c.contains("__tvm_module_ctx"));
    }

    #[test]
    fn tree_puts_lib_first_and_rejects_reserved_kinds() {
        let t = module_tree(&[
            PackModule::Saved {
                kind: "a".into(),
                bytes: vec![1],
            },
            PackModule::Saved {
                kind: "b".into(),
                bytes: vec![2],
            },
        ])
        .unwrap();
        assert!(t.modules[0].is_library());
        assert_eq!(t.imports, vec![vec![1, 2], vec![], vec![]]);
        let e = module_tree(&[PackModule::Saved {
            kind: "_lib".into(),
            bytes: vec![1],
        }])
        .unwrap_err();
        assert!(e.message.contains("reserved"), "{e}");
    }

    #[test]
    fn language_from_extension() {
        assert!(!is_cpp(Path::new("a.c")).unwrap());
        assert!(is_cpp(Path::new("a.cc")).unwrap());
        assert!(is_cpp(Path::new("a.f90")).is_err());
        assert!(include_dir().is_ok());
    }
}
