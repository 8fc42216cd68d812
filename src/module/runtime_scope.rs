//! tvmrt's C symbols in the global scope, for the libraries it loads, whatever scope tvmrt
//! itself was loaded in.
//!
//! TVM 0.27 kernel libraries import runtime functions by name
//! (`TVMFFIErrorSetRaisedFromCStrParts`) without naming the runtime as a dependency
//! (`DT_NEEDED` is only libc), so the dynamic linker looks for them in the global scope only.
//! A program that links `libtvmrt.so` has tvmrt there; a host that `dlopen`s it with
//! `RTLD_LOCAL` (the JVM loading a JNI library, Python's ctypes by default, Triton's backend
//! loader, any plugin host) does not, and neither does one that links tvmrt statically into a
//! plugin (a Rust `cdylib` such as a Triton backend).
//!
//! TVM's own runtime relies on its hosts: tvm-ffi's Python package loads `libtvm_ffi.so` with
//! `RTLD_GLOBAL`, and tvm4j's JNI library `dlopen`s the runtime a second time with
//! `RTLD_LAZY | RTLD_GLOBAL`; its loader opens model libraries with `RTLD_LAZY`, so where the
//! runtime is not global a model loads and then dies at its first error report ("symbol lookup
//! error"). tvmrt does what tvm4j does, by itself and only when a library needs it: when a
//! library fails to load because a `TVM*` symbol is undefined, the object tvmrt's code lives in
//! (found with `dladdr` on one of its exports, so whatever file it is: `libtvmrt.so` under any
//! name, or a plugin that links tvmrt statically) is promoted to the global scope with
//! `dlopen(RTLD_NOLOAD | RTLD_GLOBAL)`, and the load is tried once more. The promotion is
//! permanent (the handle is kept), as the libraries bound to tvmrt's symbols need tvmrt mapped.
//!
//! Nothing is promoted when tvmrt is in the main program: its exported symbols are global
//! already, and if it exports none (no `-rdynamic`) promotion cannot help.

use std::ffi::{c_void, CStr, CString};
use std::path::PathBuf;

use parking_lot::Mutex;

// The export whose address locates tvmrt's object: the one TVM 0.27 kernels import. Only the
// address is taken; it is defined in `capi`.
/// cbindgen:ignore
mod exports {
    extern "C" {
        pub fn TVMFFIErrorSetRaisedFromCStrParts();
    }
}

/// The promotion's handle, once made (never closed), or why it could not be made.
static PROMOTED: Mutex<Option<std::result::Result<usize, String>>> = Mutex::new(None);

/// The object (shared library or executable) tvmrt's code was loaded from.
#[derive(Clone, Debug)]
pub struct OwnObject {
    /// Its file name as the dynamic linker recorded it (the name it was opened by).
    pub path: PathBuf,
    /// Whether it is the main program rather than a shared library.
    pub is_main_program: bool,
}

/// The address of an export of tvmrt's C API, inside tvmrt's own object.
fn own_export() -> *const c_void {
    exports::TVMFFIErrorSetRaisedFromCStrParts as *const () as *const c_void
}

/// The object tvmrt's code lives in, as `dladdr` names it.
pub fn own_object() -> Option<OwnObject> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: the address is inside tvmrt's code; `info` is writable.
    if unsafe { libc::dladdr(own_export(), info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded and filled `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated path owned by the dynamic linker.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(OwnObject {
        path: PathBuf::from(name.to_str().ok()?),
        is_main_program: is_main_program(name),
    })
}

/// Whether tvmrt's object (the one holding `own_export`, named `fname`) is the main program.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn is_main_program(_fname: &CStr) -> bool {
    // glibc <dlfcn.h>.
    const RTLD_DL_LINKMAP: i32 = 2;
    const RTLD_DI_LINKMAP: i32 = 2;
    // SAFETY: an all-zero Dl_info is valid (pointers may be null).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut ours: *mut c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 only inspects the address and writes the out-parameters.
    if unsafe { libc::dladdr1(own_export(), &mut info, &mut ours, RTLD_DL_LINKMAP) } == 0 {
        return false;
    }
    // SAFETY: a NULL name with RTLD_NOLOAD only returns the main program's handle.
    let main = unsafe { libc::dlopen(std::ptr::null(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if main.is_null() {
        return false;
    }
    let mut theirs: *mut c_void = std::ptr::null_mut();
    // SAFETY: `main` is a live handle; dlinfo writes one pointer.
    let rc = unsafe {
        libc::dlinfo(
            main,
            RTLD_DI_LINKMAP,
            (&mut theirs as *mut *mut c_void).cast(),
        )
    };
    // SAFETY: `main` came from dlopen above; closing drops only that reference.
    unsafe { libc::dlclose(main) };
    rc == 0 && !ours.is_null() && ours == theirs
}

/// Whether tvmrt's object (named `fname`) is the main program: the same file as the
/// executable.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn is_main_program(fname: &CStr) -> bool {
    let (Ok(exe), Ok(name)) = (std::env::current_exe(), fname.to_str()) else {
        return false;
    };
    match (std::fs::canonicalize(exe), std::fs::canonicalize(name)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Whether a dynamic linker error says a `TVM*` runtime symbol is undefined.
pub fn is_missing_runtime_symbol(dlerror_text: &str) -> bool {
    dlerror_text.contains("undefined symbol: TVM")
}

/// Makes tvmrt's exported symbols visible in the global scope, once: `Ok(true)` when this call
/// or an earlier one promoted its object, `Ok(false)` when there is nothing to promote (tvmrt is
/// in the main program), or the dynamic linker's reason.
pub fn ensure_global() -> std::result::Result<bool, String> {
    let mut promoted = PROMOTED.lock();
    if let Some(done) = promoted.as_ref() {
        return done.clone().map(|_| true);
    }
    let Some(own) = own_object() else {
        return Err("dladdr does not know the object tvmrt's code is in".to_string());
    };
    if own.is_main_program {
        return Ok(false);
    }
    let result = promote(&own);
    *promoted = Some(result.clone());
    result.map(|_| true)
}

/// `dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL)`: the already loaded object becomes
/// global; nothing is loaded or initialized.
fn promote(own: &OwnObject) -> std::result::Result<usize, String> {
    let path = CString::new(own.path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("tvmrt's path {} holds a NUL byte", own.path.display()))?;
    log::debug!(
        "promoting {} to the global scope (a loaded library needs tvmrt's symbols)",
        own.path.display()
    );
    // SAFETY: RTLD_NOLOAD only finds the object already mapped (tvmrt's own), so no
    // initializer runs; the handle is kept for the life of the process.
    let handle = unsafe {
        libc::dlopen(
            path.as_ptr(),
            libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL,
        )
    };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local message or NULL.
        let reason = unsafe { libc::dlerror() };
        let text = if reason.is_null() {
            "dlopen failed".to_string()
        } else {
            // SAFETY: a NUL-terminated message owned by the dynamic linker.
            unsafe { CStr::from_ptr(reason) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(format!("cannot make {} global: {text}", own.path.display()));
    }
    Ok(handle as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runtime_symbol_is_recognized() {
        assert!(is_missing_runtime_symbol(
            "/m/add.so: undefined symbol: TVMFFIErrorSetRaisedFromCStrParts"
        ));
        assert!(!is_missing_runtime_symbol(
            "/m/add.so: undefined symbol: cblas_sgemm"
        ));
    }

    #[test]
    fn the_test_binary_is_the_main_program_and_needs_no_promotion() {
        // Unit tests link tvmrt statically into the test executable.
        let own = own_object().expect("dladdr knows tvmrt's object");
        assert!(own.is_main_program, "{own:?}");
        assert_eq!(ensure_global(), Ok(false));
    }
}
