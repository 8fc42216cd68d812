//! Triton opens backend libraries with `RTLD_LOCAL`, so the C symbols this library exports
//! (tvmrt's C API, compiled in) are not visible to the libraries opened after it: a model
//! library TVM 0.27 compiled imports `TVMFFIErrorSetRaisedFromCStrParts` and would fail to
//! load with "undefined symbol". Opening this library once more with `RTLD_NOLOAD |
//! RTLD_GLOBAL` moves the already-loaded copy into the global scope (dlopen(3)), so model
//! libraries bind to this copy of tvmrt, the one running them.

use std::ffi::CStr;

/// Promotes this library to the global symbol scope; returns its path, or why it could not.
pub fn export_runtime_symbols() -> Result<String, String> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = export_runtime_symbols as *const libc::c_void;
    // SAFETY: dladdr only reads the address and fills `info`; the path it returns belongs to
    // the loader and stays valid while the library is loaded (which is for good).
    let found = unsafe { libc::dladdr(here, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return Err("dladdr could not find the backend library".into());
    }
    // SAFETY: `dli_fname` is a NUL-terminated path (checked non-null above).
    let path = unsafe { CStr::from_ptr(info.dli_fname) };
    // SAFETY: RTLD_NOLOAD opens nothing new: it only changes the flags of the loaded library
    // and adds one reference, which is kept on purpose (the backend is never unloaded twice).
    let handle = unsafe {
        libc::dlopen(
            path.as_ptr(),
            libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL,
        )
    };
    if handle.is_null() {
        return Err(format!(
            "could not make `{}` global (dlopen RTLD_NOLOAD | RTLD_GLOBAL failed)",
            path.to_string_lossy()
        ));
    }
    Ok(path.to_string_lossy().into_owned())
}
