//! `libtvm_ffi.so`, tvmrt's second name: libraries built against tvm-ffi (a tvm-ffi extension,
//! a C++ library of TVM 0.21+) record `DT_NEEDED libtvm_ffi.so`, and bind to tvmrt through the
//! alias installed beside `libtvmrt.so` (`cmake/tvm_ffi_alias.sh`: no code, `SONAME
//! libtvm_ffi.so`, `DT_NEEDED libtvmrt.so`).
//!
//! A library loaded through tvmrt that needs that name finds it even where the system's search
//! path does not list tvmrt's directory (tvmrt's Python package, a program linked with
//! `-ltvmrt` and an rpath): when the dynamic linker cannot find `libtvm_ffi.so`, tvmrt loads
//! the alias that sits beside its own file (the name it was loaded under, then its real path)
//! and tries once more. Once the alias is loaded, every later library that needs
//! `libtvm_ffi.so` binds to this tvmrt.

use std::path::{Path, PathBuf};

use libloading::os::unix::{Library, RTLD_LAZY, RTLD_LOCAL, RTLD_NOW};
use parking_lot::Mutex;

/// The file name of the alias.
pub const ALIAS: &str = "libtvm_ffi.so";

/// The alias once loaded (kept for the life of the process, as the libraries bound to it).
static LOADED: Mutex<Option<Library>> = Mutex::new(None);

/// Whether a dynamic linker error says `libtvm_ffi.so` was not found.
pub fn is_missing_alias(dlerror_text: &str) -> bool {
    dlerror_text.contains(&format!("{ALIAS}: cannot open shared object file"))
}

/// Whether an object named `libtvm_ffi.so` (by its SONAME) is loaded in the process.
fn alias_name_loaded() -> bool {
    // SAFETY: RTLD_NOLOAD loads nothing and runs no initializer; the handle, if any, is closed
    // again (it only counted a reference).
    match unsafe { Library::open(Some(ALIAS), RTLD_LAZY | libc::RTLD_NOLOAD) } {
        Ok(lib) => {
            drop(lib);
            true
        }
        Err(_) => false,
    }
}

/// The file tvmrt's own code was loaded from (the shared library, or the executable that links
/// tvmrt statically), as the dynamic linker names it.
fn own_file() -> Option<PathBuf> {
    super::runtime_scope::own_object().map(|o| o.path)
}

/// Loads the alias beside tvmrt's file unless one is loaded already; whether an object named
/// `libtvm_ffi.so` is loaded afterwards.
pub fn ensure_loaded() -> bool {
    let mut loaded = LOADED.lock();
    if loaded.is_some() || alias_name_loaded() {
        return true;
    }
    let Some(file) = own_file() else {
        return false;
    };
    let mut dirs: Vec<PathBuf> = file.parent().map(Path::to_path_buf).into_iter().collect();
    if let Some(real) = std::fs::canonicalize(&file)
        .ok()
        .and_then(|r| r.parent().map(Path::to_path_buf))
    {
        if !dirs.contains(&real) {
            dirs.push(real);
        }
    }
    for dir in dirs {
        let candidate = dir.join(ALIAS);
        if !candidate.is_file() {
            continue;
        }
        log::debug!("loading tvmrt's alias {}", candidate.display());
        // SAFETY: the alias has no code; loading it loads libtvmrt.so (this library) again,
        // which the dynamic linker recognizes as already loaded.
        let Ok(lib) = (unsafe { Library::open(Some(&candidate), RTLD_NOW | RTLD_LOCAL) }) else {
            continue;
        };
        // A file named libtvm_ffi.so beside tvmrt may be tvmrt itself under another name (a
        // symlink): only the alias makes the name known.
        if alias_name_loaded() {
            *loaded = Some(lib);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linker_message_for_a_missing_alias_is_recognized() {
        assert!(is_missing_alias(
            "dlopen failed: libtvm_ffi.so: cannot open shared object file: No such file or \
             directory"
        ));
        assert!(!is_missing_alias(
            "dlopen failed: libfoo.so: cannot open shared object file"
        ));
        assert!(!is_missing_alias("undefined symbol: TVMFFIFunctionCall"));
        // The test binary links tvmrt statically: no alias beside it, and none loaded.
        assert!(!alias_name_loaded());
        assert!(own_file().is_some());
    }
}
