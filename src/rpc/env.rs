//! The server's file globals (TVM `rpc_server_env.cc` and `python/tvm/rpc/server.py`'s
//! `_server_env`): `tvm.rpc.server.workpath`, `upload`, `download`, `remove`, `load_module`
//! and `download_linked_module`, all inside the session's work directory.
//!
//! TVM joins any name to its work directory, so an absolute name or `..` reaches the whole
//! file system; tvmrt's refuses both. A `.tar` or `.o` is linked into a shared library with
//! the board's C compiler, as TVM's Python server does (`tvm.support.cc.create_shared`).

use std::path::{Component, Path, PathBuf};

use parking_lot::Mutex;

use super::link;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::loader::load_from_file;
use crate::value::{Any, AnyView};

static WORK_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Sets the directory the file globals work in (a server sets one per session).
pub fn set_work_dir(dir: &Path) {
    *WORK_DIR.lock() = Some(dir.to_path_buf());
}

/// The work directory: the one set, or `$TMPDIR/tvmrt-rpc-<pid>` made on first use.
pub fn work_dir() -> Result<PathBuf> {
    let mut guard = WORK_DIR.lock();
    if let Some(d) = guard.as_ref() {
        return Ok(d.clone());
    }
    let d = std::env::temp_dir().join(format!("tvmrt-rpc-{}", std::process::id()));
    std::fs::create_dir_all(&d)
        .map_err(|e| Error::runtime(format!("RPC: creating work dir {}: {e}", d.display())))?;
    *guard = Some(d.clone());
    Ok(d)
}

/// `name` inside the work directory (`""` is the directory itself); absolute names and `..`
/// are refused.
pub fn work_path(name: &str) -> Result<PathBuf> {
    let rel = Path::new(name);
    let plain = rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !plain {
        return Err(Error::value(format!(
            "RPC: file name {name:?} must be relative to the session's work directory, \
             without `..`"
        )));
    }
    Ok(work_dir()?.join(rel))
}

/// Where the file globals put `name`: what the `tvm.rpc.server.workpath` global answers, looked
/// up on every call as TVM's `RPCGetPath` does, so that a program registering its own (tvm4j's
/// server and TVM's Android app do, with their own directory) finds its uploads where its
/// `load_module` looks. tvmrt's own answers [`work_path`].
fn server_path(name: &str) -> Result<PathBuf> {
    let Some(f) = crate::function::registry::get("tvm.rpc.server.workpath") else {
        return work_path(name);
    };
    let p = f.call(&[Any::from(name).view()])?;
    let view = p.view();
    Ok(PathBuf::from(
        view.expect_str("tvm.rpc.server.workpath's result")?,
    ))
}

fn io(e: std::io::Error, what: &str, path: &Path) -> Error {
    Error::runtime(format!("RPC: {what} {}: {e}", path.display()))
}

fn name_arg<'a>(args: &'a [AnyView<'_>], what: &str) -> Result<&'a str> {
    args.first()
        .ok_or_else(|| Error::type_error(format!("{what}: missing the file name")))?
        .expect_str(what)
}

fn upload(args: &[AnyView<'_>]) -> Result<Any> {
    let path = server_path(name_arg(args, "tvm.rpc.server.upload")?)?;
    let data = args
        .get(1)
        .and_then(|v| v.as_byte_slice().or_else(|| v.as_str().map(str::as_bytes)))
        .ok_or_else(|| Error::type_error("tvm.rpc.server.upload: the data must be bytes"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io(e, "creating", dir))?;
    }
    std::fs::write(&path, data).map_err(|e| io(e, "writing", &path))?;
    Ok(Any::none())
}

fn download(args: &[AnyView<'_>]) -> Result<Any> {
    let path = server_path(name_arg(args, "tvm.rpc.server.download")?)?;
    let data = std::fs::read(&path).map_err(|e| io(e, "reading", &path))?;
    Ok(Any::bytes(&data))
}

/// Removes a file, or an empty directory, and says nothing when it cannot, as TVM's
/// `RemoveFile` (`std::remove`): MetaSchedule's cleanup removes files that may not exist and
/// then the work directory itself (`""`).
fn remove(args: &[AnyView<'_>]) -> Result<Any> {
    let path = server_path(name_arg(args, "tvm.rpc.server.remove")?)?;
    let _ = if path.is_dir() {
        std::fs::remove_dir(&path)
    } else {
        std::fs::remove_file(&path)
    };
    Ok(Any::none())
}

/// The library to load for `path`: itself, or a `.so` linked from a `.tar` / `.o`.
fn linked(path: &Path) -> Result<PathBuf> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "tar" | "o" => link::link_shared(path),
        _ => Ok(path.to_path_buf()),
    }
}

fn load_module(args: &[AnyView<'_>]) -> Result<Any> {
    let path = linked(&server_path(name_arg(args, "tvm.rpc.server.load_module")?)?)?;
    let text = path.to_string_lossy().into_owned();
    let format = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let m = load_from_file(&text, format)?;
    log::info!("RPC: load_module {text}");
    Ok(Any::from_object(m.into_object()))
}

fn download_linked_module(args: &[AnyView<'_>]) -> Result<Any> {
    let name = name_arg(args, "tvm.rpc.server.download_linked_module")?;
    let path = server_path(name)?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !matches!(ext, "tar" | "o" | "so" | "dylib") {
        return Err(Error::runtime(format!("Do not know how to link {name}")));
    }
    let path = linked(&path)?;
    let data = std::fs::read(&path).map_err(|e| io(e, "reading", &path))?;
    Ok(Any::bytes(&data))
}

fn workpath(args: &[AnyView<'_>]) -> Result<Any> {
    let p = work_path(name_arg(args, "tvm.rpc.server.workpath")?)?;
    Ok(Any::from(p.to_string_lossy().into_owned()))
}

/// The file globals.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        ("tvm.rpc.server.workpath", Function::from_fn(workpath)),
        ("tvm.rpc.server.upload", Function::from_fn(upload)),
        ("tvm.rpc.server.download", Function::from_fn(download)),
        ("tvm.rpc.server.remove", Function::from_fn(remove)),
        ("tvm.rpc.server.load_module", Function::from_fn(load_module)),
        (
            "tvm.rpc.server.download_linked_module",
            Function::from_fn(download_linked_module),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_inside_the_work_dir() {
        assert!(work_path("a/b.so").unwrap().ends_with("a/b.so"));
        assert_eq!(work_path("").unwrap(), work_dir().unwrap());
        for bad in ["/etc/passwd", "../x", "a/../../x"] {
            let e = work_path(bad).unwrap_err();
            assert!(e.message.contains("relative"), "{bad}: {e}");
        }
    }
}
