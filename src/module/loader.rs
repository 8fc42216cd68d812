//! Loader dispatch: files by format, shared libraries, and the modules serialized in a
//! library's blob (see the [module docs](super) for the loader protocol).

use std::cell::RefCell;
use std::sync::Arc;

use super::blob::{self, BlobModule, DecodedBlob};
use super::library::{self, LibraryModule, LibraryState};
use super::Module;
use crate::abi::{type_index, AnyPayload, TVMFFIAny, TVMFFIByteArray};
use crate::error::{Error, Result};
use crate::function::{registry, Function};
use crate::value::{Any, AnyView};

/// Loads a module from a file. `format` may be empty: the extension is used. `so`, `dll`,
/// `dylib` and `dso` load a shared library; anything else calls the global
/// `runtime.module.loadfile_<fmt>` or `ffi.Module.load_from_file.<fmt>` with `(path, format)`.
pub fn load_from_file(path: &str, format: &str) -> Result<Module> {
    crate::logging::init_from_env();
    let fmt = if format.is_empty() {
        file_format(path)?
    } else {
        format.trim_start_matches('.').to_string()
    };
    log::debug!("load `{path}`: format `{fmt}`");
    let fmt = match fmt.as_str() {
        "so" | "dll" | "dylib" | "dso" => return load_dso(path),
        _ => fmt,
    };
    let classic = format!("runtime.module.loadfile_{fmt}");
    let ffi = format!("ffi.Module.load_from_file.{fmt}");
    let (name, f) = match registry::get(&classic) {
        Some(f) => (classic, f),
        None => match registry::get(&ffi) {
            Some(f) => (ffi, f),
            None => {
                return Err(Error::value(format!(
                    "cannot load `{path}`: no loader for `.{fmt}` files: neither `{classic}` nor \
                     `{ffi}` is registered"
                )))
            }
        },
    };
    log::debug!("load `{path}`: calling the file loader `{name}`");
    let result = f.call_values(&[Any::from(path), Any::from(fmt.as_str())])?;
    module_result(&name, result)
}

/// The extension of `path`'s file name (TVM's `GetFileFormat`).
fn file_format(path: &str) -> Result<String> {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    match file.rfind('.') {
        Some(i) if i + 1 < file.len() => Ok(file[i + 1..].to_string()),
        _ => Err(Error::value(format!(
            "cannot deduce the format of `{path}`: it has no extension; pass a format"
        ))),
    }
}

/// Loads a shared library built by TVM (either ABI): fills its context symbols, restores the
/// modules of its blob and their import tree, and returns the root module.
pub fn load_dso(path: &str) -> Result<Module> {
    let state = library::open_dso(path)?;
    build_library_tree(state)
        .map_err(|e| Error::new(e.kind.clone(), format!("loading `{path}`: {}", e.message)))
}

/// Builds the module tree of a library: one library module, or the tree its blob describes.
pub(crate) fn build_library_tree(state: Arc<LibraryState>) -> Result<Module> {
    let lib_module = || Module::new(LibraryModule::new(state.clone()));
    let Some((body, is_ffi)) = state.blob()? else {
        log::debug!("no blob symbol: the library module is the root");
        let root = lib_module();
        state.register_roots(&root, std::slice::from_ref(&root));
        return Ok(root);
    };
    // The modules' loaders may keep the blob's bytes (a model's weights) where they lie: the
    // state keeps them mapped.
    let owner: crate::mapped::Owner = state.clone();
    let releasable = crate::mapped::in_read_only_segment(body);
    crate::mapped::lend(body, owner, releasable, || {
        let (decoded, mut loaded) = restore_blob(body, is_ffi)?;
        assemble(&state, &decoded, &mut loaded, lib_module)
    })
}

/// Decodes a blob and restores its serialized modules (not yet the `_lib` ones).
fn restore_blob(body: &[u8], is_ffi: bool) -> Result<(DecodedBlob<'_>, Vec<Module>)> {
    Ok(match (body, is_ffi) {
        (body, true) => {
            log::debug!(
                "blob `__tvm_ffi__library_bin`: {} bytes, tvm-ffi layout",
                body.len()
            );
            let decoded = blob::decode_ffi(body)?;
            let mut loaded = Vec::new();
            for m in decoded.modules.iter().filter(|m| !m.is_library()) {
                loaded.push(load_ffi_entry(m)?);
            }
            (decoded, loaded)
        }
        (body, false) => {
            log::debug!(
                "blob `__tvm_dev_mblob`: {} bytes, classic layout",
                body.len()
            );
            let loaded = RefCell::new(Vec::new());
            let decoded = blob::decode_classic(body, &|key, rest| {
                let (m, n) = load_classic_entry(key, rest)?;
                loaded.borrow_mut().push(m);
                Ok(n)
            })?;
            (decoded, loaded.into_inner())
        }
    })
}

/// Puts the loaded modules (and a library module per `_lib` entry) in blob order and restores
/// the imports. Module 0 is the root.
fn assemble(
    state: &LibraryState,
    decoded: &DecodedBlob,
    loaded: &mut Vec<Module>,
    lib_module: impl Fn() -> Module,
) -> Result<Module> {
    let mut serialized = std::mem::take(loaded).into_iter();
    let mut modules = Vec::with_capacity(decoded.modules.len());
    let mut libs = Vec::new();
    for m in &decoded.modules {
        if m.is_library() {
            let lib = lib_module();
            libs.push(lib.clone());
            modules.push(lib);
        } else {
            modules.push(serialized.next().ok_or_else(|| {
                Error::runtime(format!("internal: no loaded module for `{}`", m.kind))
            })?);
        }
    }
    // The decoder proved the tree in range and acyclic.
    for (i, row) in decoded.imports.iter().enumerate() {
        for &c in row {
            modules[i].push_import_unchecked(modules[c].clone());
        }
    }
    let root = modules
        .first()
        .cloned()
        .ok_or_else(|| Error::value("library blob has no modules"))?;
    state.register_roots(&root, &libs);
    log::debug!(
        "module tree: {} modules, root `{}`",
        modules.len(),
        root.kind()
    );
    Ok(root)
}

/// A borrowed `TVMFFIByteArray*` value over `bytes` (no copy; valid while both live).
fn byte_array_view<'a>(arr: &'a TVMFFIByteArray) -> AnyView<'a> {
    let raw = TVMFFIAny {
        type_index: type_index::BYTE_ARRAY_PTR,
        small_str_len: 0,
        payload: AnyPayload::ptr((arr as *const TVMFFIByteArray).cast_mut().cast()),
    };
    // SAFETY: `arr` (and the bytes it views) outlive the returned view.
    unsafe { AnyView::from_raw(raw) }
}

fn missing_loader(kind: &str, primary: &str, secondary: &str) -> Error {
    Error::value(format!(
        "library was built with module kind `{kind}` but no loader `{primary}` is registered \
         (nor `{secondary}`)"
    ))
}

fn module_result(loader: &str, result: Any) -> Result<Module> {
    Module::from_view(&result.view(), &format!("result of loader `{loader}`"))
}

fn loader_error(loader: &str, e: Error) -> Error {
    Error::new(e.kind.clone(), format!("loader `{loader}`: {}", e.message))
}

/// Restores a module of a tvm-ffi blob from exactly its payload.
fn load_ffi_entry(m: &BlobModule) -> Result<Module> {
    let kind = &m.kind;
    let payload = m.payload.as_deref().unwrap_or_default();
    let primary = format!("ffi.Module.load_from_bytes.{kind}");
    let secondary = format!("runtime.module.loadbinary_{kind}");
    let arr = TVMFFIByteArray::from_slice(payload);
    if let Some(f) = registry::get(&primary) {
        log::debug!(
            "module `{kind}` ({} bytes): loader `{primary}`",
            payload.len()
        );
        let out = f
            .call(&[byte_array_view(&arr)])
            .map_err(|e| loader_error(&primary, e))?;
        return module_result(&primary, out);
    }
    if let Some(f) = registry::get(&secondary) {
        log::debug!(
            "module `{kind}` ({} bytes): loader `{secondary}`",
            payload.len()
        );
        let (m, _) = call_classic_loader(&secondary, &f, &arr)?;
        return Ok(m);
    }
    Err(missing_loader(kind, &primary, &secondary))
}

/// Calls a `runtime.module.loadbinary_<kind>` loader: `(bytes, int64_t* consumed)`.
fn call_classic_loader(
    name: &str,
    f: &Function,
    arr: &TVMFFIByteArray,
) -> Result<(Module, Option<usize>)> {
    let mut consumed: i64 = -1;
    let slot = Any::opaque_ptr((&mut consumed as *mut i64).cast());
    let out = f
        .call(&[byte_array_view(arr), slot.view()])
        .map_err(|e| loader_error(name, e))?;
    let m = module_result(name, out)?;
    let n = if consumed >= 0 {
        // More than this process can address (a 32-bit one) is more than the blob holds.
        Some(usize::try_from(consumed).map_err(|_| {
            Error::value(format!(
                "loader `{name}` claims {consumed} bytes, more than the blob holds"
            ))
        })?)
    } else {
        None
    };
    Ok((m, n))
}

/// Restores a module of a classic blob from the rest of the blob; returns it and how many
/// bytes its payload took.
fn load_classic_entry(kind: &str, rest: &[u8]) -> Result<(Module, usize)> {
    let primary = format!("runtime.module.loadbinary_{kind}");
    let secondary = format!("ffi.Module.load_from_bytes.{kind}");
    let arr = TVMFFIByteArray::from_slice(rest);
    let (name, m, reported) = if let Some(f) = registry::get(&primary) {
        let (m, n) = call_classic_loader(&primary, &f, &arr)?;
        (primary, m, n)
    } else if let Some(f) = registry::get(&secondary) {
        let out = f
            .call(&[byte_array_view(&arr)])
            .map_err(|e| loader_error(&secondary, e))?;
        (secondary.clone(), module_result(&secondary, out)?, None)
    } else {
        return Err(missing_loader(kind, &primary, &secondary));
    };
    let n = match reported {
        Some(n) => n,
        None => m
            .save_to_bytes()
            .map_err(|e| {
                Error::value(format!(
                    "loader `{name}` did not report how many bytes it read (write the count \
                     through its second argument, an int64_t*), and the module it returned \
                     cannot save itself to tell: {}",
                    e.message
                ))
            })?
            .len(),
    };
    log::debug!("module `{kind}`: loader `{name}` read {n} bytes");
    Ok((m, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_from_extension() {
        assert_eq!(file_format("/a/b/model.so").unwrap(), "so");
        assert_eq!(file_format("x.tar.json").unwrap(), "json");
        assert!(file_format("/a.b/noext")
            .unwrap_err()
            .message
            .contains("no extension"));
        let e = load_from_file("/tmp/whatever.nosuchfmt", "").unwrap_err();
        assert!(
            e.message.contains("runtime.module.loadfile_nosuchfmt"),
            "{e}"
        );
    }

    #[test]
    fn missing_file_is_an_error() {
        let e = load_from_file("/nonexistent/dir/lib.so", "").unwrap_err();
        assert!(
            e.message
                .contains("cannot load library `/nonexistent/dir/lib.so`"),
            "{e}"
        );
    }
}
