//! Opening a shared library with `dlopen` and reading its symbols (and, on glibc, describing
//! them from the ELF link map).

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

use super::state::{FileKey, DSOS, DSO_CLOSED};
use super::{LibraryState, SymbolInfo, SymbolSource};
use crate::error::{Error, Result};

/// A shared library opened with `dlopen`.
struct Dso {
    /// Owns the `dlopen` handle: dropping it closes the library.
    _lib: libloading::os::unix::Library,
    /// The `dlopen` handle of `lib` (as an address), for direct `dlsym` probes.
    handle: usize,
    /// The library's `link_map` (glibc), to tell its own symbols from its dependencies'.
    link_map: usize,
    /// Its own dynamic symbols, looked up without `dlsym` when it has a GNU hash table.
    symbols: Option<crate::module::dynsym::DynSymbols>,
    path: String,
}

impl Dso {
    fn open(path: &str) -> Result<Dso> {
        use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
        // SAFETY: opening runs the library's initializers; loading a library is what the
        // caller asked for (TVM does the same).
        let open = || unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) };
        // libloading keeps dlerror()'s text (e.g. "undefined symbol: ...") in the source.
        let text_of = |e: &libloading::Error| match std::error::Error::source(e) {
            Some(reason) => format!("{e}: {reason}"),
            None => e.to_string(),
        };
        let mut lib = match open() {
            // A library built against tvm-ffi: tvmrt's alias gives it the name it needs.
            Err(e) if crate::module::tvm_ffi_alias::is_missing_alias(&text_of(&e)) => {
                if crate::module::tvm_ffi_alias::ensure_loaded() {
                    open()
                } else {
                    Err(e)
                }
            }
            r => r,
        };
        // tvmrt was loaded in a local scope (or sits inside a plugin): make its symbols global
        // and try once more (see `runtime_scope`).
        let mut promotion_failed = None;
        if let Err(e) = &lib {
            if crate::module::runtime_scope::is_missing_runtime_symbol(&text_of(e)) {
                match crate::module::runtime_scope::ensure_global() {
                    Ok(true) => lib = open(),
                    Ok(false) => {}
                    Err(why) => promotion_failed = Some(why),
                }
            }
        }
        let lib = lib.map_err(|e| {
            let text = text_of(&e);
            let hint = if crate::module::runtime_scope::is_missing_runtime_symbol(&text) {
                match &promotion_failed {
                    Some(why) => format!(
                        " (the library needs the TVM runtime's C symbols, and tvmrt could not \
                         make its own global: {why})"
                    ),
                    None => " (the library needs the TVM runtime's C symbols: tvmrt's object \
                             does not export them; link the program against libtvmrt.so, or \
                             export tvmrt's symbols from the executable with -rdynamic)"
                        .to_string(),
                }
            } else if crate::module::tvm_ffi_alias::is_missing_alias(&text) {
                " (the library was built against tvm-ffi: install tvmrt's libtvm_ffi.so alias \
                 beside libtvmrt.so, see cmake/tvm_ffi_alias.sh)"
                    .to_string()
            } else {
                String::new()
            };
            Error::value(format!("cannot load library `{path}`: {text}{hint}"))
        })?;
        let raw = lib.into_raw();
        // SAFETY: `raw` is the handle just opened; ownership goes back to a `Library`.
        let lib = unsafe { Library::from_raw(raw) };
        let link_map = link_map_of(raw);
        Ok(Dso {
            _lib: lib,
            handle: raw as usize,
            link_map,
            // SAFETY: the link map of the library `lib` keeps loaded while this `Dso` lives.
            symbols: unsafe { crate::module::dynsym::DynSymbols::of(link_map) },
            path: path.to_string(),
        })
    }
}

impl SymbolSource for Dso {
    fn lookup(&self, name: &str) -> Option<SymbolInfo> {
        if name.contains('\0') {
            return None;
        }
        if let Some(table) = &self.symbols {
            match table.lookup(name) {
                crate::module::dynsym::Lookup::Found(info) => return Some(info),
                crate::module::dynsym::Lookup::Absent => return None,
                crate::module::dynsym::Lookup::Ask => {}
            }
        }
        let cname = std::ffi::CString::new(name).ok()?;
        // Plain dlsym: most probes (context pointers, ABI markers) miss, and libloading's
        // `get` formats a dlerror() message for every miss, which made loading 3x slower
        // than TVM's. A NULL address is all "absent" needs to mean here.
        // SAFETY: `handle` is the live dlopen handle owned by `self._lib`; only the address is
        // taken, nothing is called or read.
        let addr = unsafe { libc::dlsym(self.handle as *mut c_void, cname.as_ptr()) };
        describe_symbol(self.link_map, NonNull::new(addr)?)
    }

    fn describe(&self) -> String {
        self.path.clone()
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod elf {
    use std::ffi::c_void;
    use std::ptr::NonNull;

    use crate::module::dynsym::ElfSym;
    use crate::module::library::{SymbolInfo, SymbolKind};

    // glibc <dlfcn.h>.
    const RTLD_DL_SYMENT: i32 = 1;
    const RTLD_DL_LINKMAP: i32 = 2;
    const RTLD_DI_LINKMAP: i32 = 2;

    pub(super) fn link_map_of(handle: *mut c_void) -> usize {
        let mut lm: *mut c_void = std::ptr::null_mut();
        // SAFETY: `handle` is a live dlopen handle; dlinfo writes one pointer.
        let rc = unsafe {
            libc::dlinfo(
                handle,
                RTLD_DI_LINKMAP,
                (&mut lm as *mut *mut c_void).cast(),
            )
        };
        if rc == 0 {
            lm as usize
        } else {
            0
        }
    }

    pub(super) fn describe_symbol(link_map: usize, addr: NonNull<c_void>) -> Option<SymbolInfo> {
        // SAFETY: an all-zero Dl_info is valid (pointers may be null).
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        let mut extra: *mut c_void = std::ptr::null_mut();
        if link_map != 0 {
            // SAFETY: dladdr1 only inspects the address and writes the out-parameters.
            let ok =
                unsafe { libc::dladdr1(addr.as_ptr(), &mut info, &mut extra, RTLD_DL_LINKMAP) };
            if ok == 0 || extra as usize != link_map {
                // Defined by a dependency (dlsym on a handle searches those too), not here.
                return None;
            }
        }
        let mut sym: *mut c_void = std::ptr::null_mut();
        // SAFETY: as above.
        let ok = unsafe { libc::dladdr1(addr.as_ptr(), &mut info, &mut sym, RTLD_DL_SYMENT) };
        if ok == 0 || sym.is_null() || info.dli_saddr != addr.as_ptr() {
            return Some(SymbolInfo {
                addr,
                kind: SymbolKind::Unknown,
                size: None,
            });
        }
        // SAFETY: glibc returned a pointer to the symbol's entry in the library's dynamic
        // symbol table, mapped while the library is.
        let s = unsafe { &*sym.cast::<ElfSym>() };
        let kind = s.kind();
        Some(SymbolInfo {
            addr,
            kind,
            size: usize::try_from(s.st_size).ok(),
        })
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
use elf::{describe_symbol, link_map_of};

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn link_map_of(_handle: *mut c_void) -> usize {
    0
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn describe_symbol(_link_map: usize, addr: NonNull<c_void>) -> Option<SymbolInfo> {
    Some(SymbolInfo {
        addr,
        kind: SymbolKind::Unknown,
        size: None,
    })
}

/// The state of the shared library at `path`, shared with other live loads of the same file.
///
/// A bare file name (no `/`) is found as `dlopen` finds it, which is what TVM does with any
/// path (`LD_LIBRARY_PATH`, the runpath, the linker cache, the system directories); where that
/// finds nothing, a file of that name in the current directory is loaded, as tvmrt always did
/// (TVM would refuse it). A path is checked (`elf_check`) before it is mapped.
pub(crate) fn open_dso(path: &str) -> Result<Arc<LibraryState>> {
    if !path.is_empty() && !path.contains('/') {
        return match open_dso_searched(path) {
            Err(e)
                if e.message.contains("cannot open shared object file")
                    && std::path::Path::new(path).is_file() =>
            {
                open_dso(&format!("./{path}"))
            }
            r => r,
        };
    }
    let key = file_key(path)?;
    let mut table = DSOS.lock();
    if let Some(state) = live_state(&mut table, key) {
        return Ok(state);
    }
    crate::module::elf_check::check_elf_file(path)?;
    log::debug!("dlopen `{path}` (RTLD_NOW | RTLD_LOCAL)");
    let dso = Dso::open(path)?;
    let state = LibraryState::new(Box::new(dso), Some(key));
    table.insert(key, Arc::downgrade(&state));
    Ok(state)
}

/// A library named by a bare file name: `dlopen` searches for it, then the file it mapped is
/// shared with other loads of that file as a path load is.
fn open_dso_searched(name: &str) -> Result<Arc<LibraryState>> {
    log::debug!("dlopen `{name}` (RTLD_NOW | RTLD_LOCAL; the dynamic linker's search path)");
    let mut dso = Dso::open(name)?;
    let Some(file) = loaded_file_name(dso.link_map) else {
        crate::bail_value!("cannot load library `{name}`: the dynamic linker names no file for it");
    };
    let key = file_key(&file)?;
    dso.path = file;
    let mut table = DSOS.lock();
    // Already loaded: our handle only counted a reference, dropped here.
    if let Some(state) = live_state(&mut table, key) {
        return Ok(state);
    }
    let state = LibraryState::new(Box::new(dso), Some(key));
    table.insert(key, Arc::downgrade(&state));
    Ok(state)
}

/// The identity of the file at `path` (device and inode, as the dynamic linker tells files
/// apart); a missing file is reported in `dlopen`'s own words, as TVM reports it.
fn file_key(path: &str) -> Result<FileKey> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| {
        // io::Error's text without its " (os error N)" tail: dlopen's strerror wording.
        let text = e.to_string();
        let reason = text.split(" (os error").next().unwrap_or(&text);
        Error::value(format!(
            "cannot load library `{path}`: {path}: cannot open shared object file: {reason}"
        ))
    })?;
    if !meta.is_file() {
        crate::bail_value!("cannot load library `{path}`: not a regular file");
    }
    Ok((meta.dev(), meta.ino()))
}

/// The live state of the file `key`, if any; waits while its last module is being freed, so
/// the file is reopened fresh rather than shared with a dying state.
fn live_state(
    table: &mut parking_lot::MutexGuard<'_, HashMap<FileKey, Weak<LibraryState>>>,
    key: FileKey,
) -> Option<Arc<LibraryState>> {
    loop {
        match table.get(&key).map(Weak::upgrade) {
            Some(Some(state)) => return Some(state),
            Some(None) => DSO_CLOSED.wait(table),
            None => return None,
        }
    }
}

/// The file name the dynamic linker recorded for the library whose `link_map` this is (the
/// path it found a searched name at).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn loaded_file_name(link_map: usize) -> Option<String> {
    /// The start of glibc's `struct link_map` (<link.h>): the public fields come first.
    #[repr(C)]
    struct LinkMapHead {
        l_addr: usize,
        l_name: *const std::ffi::c_char,
    }
    if link_map == 0 {
        return None;
    }
    // SAFETY: `link_map` is the live link map dlinfo returned for a handle we hold; its public
    // head is two words, `l_name` a NUL-terminated string owned by the dynamic linker.
    let head = unsafe { &*(link_map as *const LinkMapHead) };
    if head.l_name.is_null() {
        return None;
    }
    // SAFETY: as above.
    let name = unsafe { std::ffi::CStr::from_ptr(head.l_name) }
        .to_str()
        .ok()?;
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn loaded_file_name(_link_map: usize) -> Option<String> {
    None
}
