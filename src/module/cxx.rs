//! Modules and C++: modules made by C++ code (a `tvm::ffi::ModuleObj` subclass of another
//! library, as TVM 0.21+ writes its runtime modules), called through their own vtable; and the
//! hooks the C++ face of tvmrt's modules calls (`src/cxx/shim.cc`).
//!
//! Calls into a C++ module go through `shim.cc`, which makes the virtual call and catches every
//! exception (tvm-ffi's `TVM_FFI_SAFE_CALL_END` rules: a `tvm::ffi::Error` is raised as it is, a
//! `std::exception` as an `InternalError` with its `what()`), so no exception reaches a Rust
//! frame. The hooks run behind [`crate::unwind_guard`], so no panic reaches a C++ frame.

#[cfg(tvmrt_cxx)]
use std::ffi::{c_char, CStr};
use std::ffi::{c_int, c_void};

use super::{FunctionInfo, Module};
use crate::abi::TVMFFIAny;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::new_array;
#[cfg(tvmrt_cxx)]
use crate::object::ObjectRef;
use crate::unwind_guard::{run, run_or};
use crate::value::{Any, AnyView};

#[cfg(tvmrt_cxx)]
extern "C" {
    fn tvmrt_cxx_foreign_kind(module: *mut c_void, out: *mut *const c_char) -> c_int;
    fn tvmrt_cxx_foreign_property_mask(module: *mut c_void, out: *mut i32) -> c_int;
    fn tvmrt_cxx_foreign_get_function(
        module: *mut c_void,
        name: *const TVMFFIAny,
        out: *mut *mut c_void,
    ) -> c_int;
    fn tvmrt_cxx_foreign_implements_function(
        module: *mut c_void,
        name: *const TVMFFIAny,
        out: *mut i32,
    ) -> c_int;
    fn tvmrt_cxx_foreign_function_info(
        module: *mut c_void,
        name: *const TVMFFIAny,
        what: i32,
        out: *mut TVMFFIAny,
    ) -> c_int;
    fn tvmrt_cxx_foreign_write_to_file(
        module: *mut c_void,
        file_name: *const TVMFFIAny,
        format: *const TVMFFIAny,
    ) -> c_int;
    fn tvmrt_cxx_foreign_write_formats(module: *mut c_void, out: *mut TVMFFIAny) -> c_int;
    fn tvmrt_cxx_foreign_save_to_bytes(module: *mut c_void, out: *mut TVMFFIAny) -> c_int;
    fn tvmrt_cxx_foreign_inspect_source(
        module: *mut c_void,
        format: *const TVMFFIAny,
        out: *mut TVMFFIAny,
    ) -> c_int;
    fn tvmrt_cxx_foreign_import_module(module: *mut c_void, other: *mut c_void) -> c_int;
    fn tvmrt_cxx_foreign_clear_imports(module: *mut c_void) -> c_int;
}

#[cfg(tvmrt_cxx)]
/// The error a failed call into a C++ module raised.
fn raised(what: &str) -> Error {
    crate::raised::take_raised().unwrap_or_else(|| {
        Error::runtime(format!(
            "C++ module: {what} failed without raising an error"
        ))
    })
}

#[cfg(tvmrt_cxx)]
/// Runs one call into a C++ module (status 0 or -1, see `shim.cc`).
fn status(what: &str, status: c_int) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(raised(what))
    }
}

/// A C++ module's `kind()`. tvm-ffi's contract: a type key that stays valid as long as the module
/// (usually a literal), so it is borrowed for as long as `m` is.
#[cfg(tvmrt_cxx)]
pub(super) fn kind(m: &Module) -> &str {
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: `m` is a live C++ module; `p` is writable.
    if status("kind()", unsafe {
        tvmrt_cxx_foreign_kind(m.as_ptr(), &mut p)
    })
    .is_err()
        || p.is_null()
    {
        return "<C++ module with no kind>";
    }
    // SAFETY: a NUL-terminated string that lives as long as the module (see above).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .unwrap_or("<C++ module kind that is not UTF-8>")
}

/// A C++ module's own `GetFunction(name)`.
#[cfg(tvmrt_cxx)]
pub(super) fn get_function(m: &Module, name: &str) -> Result<Option<Function>> {
    let name = Any::from(name);
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: `m` is a live C++ module; `name` a string value for the call; `out` writable.
    let st = unsafe { tvmrt_cxx_foreign_get_function(m.as_ptr(), name.raw(), &mut out) };
    status("GetFunction", st)?;
    // SAFETY: on success `out` is null or an owned function reference.
    match unsafe { ObjectRef::from_raw_owned(out) } {
        None => Ok(None),
        Some(obj) => Function::from_object(obj).map(Some),
    }
}

/// A C++ module's own `GetFunctionMetadata(name)` / `GetFunctionDoc(name)`.
#[cfg(tvmrt_cxx)]
pub(super) fn function_info(m: &Module, name: &str, what: FunctionInfo) -> Result<Option<String>> {
    let name = Any::from(name);
    let mut out = TVMFFIAny::NONE;
    let what = match what {
        FunctionInfo::Metadata => 0,
        FunctionInfo::Doc => 1,
    };
    // SAFETY: as in `get_function`.
    let st = unsafe { tvmrt_cxx_foreign_function_info(m.as_ptr(), name.raw(), what, &mut out) };
    status("GetFunctionMetadata/Doc", st)?;
    // SAFETY: on success `out` holds an owned value.
    optional_string(unsafe { Any::from_raw(out) }, "function info")
}

/// A C++ module's own `ImplementsFunction(name)`.
#[cfg(tvmrt_cxx)]
pub(super) fn implements_function(m: &Module, name: &str) -> Result<bool> {
    let name = Any::from(name);
    let mut out = 0;
    // SAFETY: as in `get_function`.
    let st = unsafe { tvmrt_cxx_foreign_implements_function(m.as_ptr(), name.raw(), &mut out) };
    status("ImplementsFunction", st)?;
    Ok(out != 0)
}

/// A C++ module's `SaveToBytes()`.
#[cfg(tvmrt_cxx)]
pub(super) fn save_to_bytes(m: &Module) -> Result<Vec<u8>> {
    let mut out = TVMFFIAny::NONE;
    // SAFETY: `m` is a live C++ module; `out` writable.
    status("SaveToBytes", unsafe {
        tvmrt_cxx_foreign_save_to_bytes(m.as_ptr(), &mut out)
    })?;
    // SAFETY: on success `out` holds an owned value.
    let v = unsafe { Any::from_raw(out) };
    v.view().as_byte_slice().map(<[u8]>::to_vec).ok_or_else(|| {
        Error::type_error(format!(
            "SaveToBytes of module `{}` returned {}, not bytes",
            m.kind(),
            v.view().type_name()
        ))
    })
}

/// A C++ module's `GetPropertyMask()`.
#[cfg(tvmrt_cxx)]
pub(super) fn property_mask(m: &Module) -> Result<i32> {
    let mut out = 0;
    // SAFETY: `m` is a live C++ module; `out` writable.
    status("GetPropertyMask", unsafe {
        tvmrt_cxx_foreign_property_mask(m.as_ptr(), &mut out)
    })?;
    Ok(out)
}

/// A C++ module's `WriteToFile(path, format)`.
#[cfg(tvmrt_cxx)]
pub(super) fn write_to_file(m: &Module, path: &str, format: &str) -> Result<()> {
    let (path, format) = (Any::from(path), Any::from(format));
    // SAFETY: `m` is a live C++ module; both strings live for the call.
    status("WriteToFile", unsafe {
        tvmrt_cxx_foreign_write_to_file(m.as_ptr(), path.raw(), format.raw())
    })
}

/// A C++ module's `GetWriteFormats()`.
#[cfg(tvmrt_cxx)]
pub(super) fn write_formats(m: &Module) -> Result<Vec<String>> {
    let mut out = TVMFFIAny::NONE;
    // SAFETY: `m` is a live C++ module; `out` writable.
    status("GetWriteFormats", unsafe {
        tvmrt_cxx_foreign_write_formats(m.as_ptr(), &mut out)
    })?;
    // SAFETY: on success `out` holds an owned value.
    let v = unsafe { Any::from_raw(out) };
    let Some(obj) = v.view().as_object() else {
        return Ok(Vec::new());
    };
    let items = crate::object::containers::array::array_items(&obj)
        .ok_or_else(|| Error::type_error("GetWriteFormats did not return an array"))?;
    items
        .iter()
        .map(|s| s.expect_str("write format").map(str::to_string))
        .collect()
}

/// A C++ module's `InspectSource(format)`.
#[cfg(tvmrt_cxx)]
pub(super) fn inspect_source(m: &Module, format: &str) -> Result<String> {
    let format = Any::from(format);
    let mut out = TVMFFIAny::NONE;
    // SAFETY: `m` is a live C++ module; `format` lives for the call; `out` writable.
    status("InspectSource", unsafe {
        tvmrt_cxx_foreign_inspect_source(m.as_ptr(), format.raw(), &mut out)
    })?;
    // SAFETY: on success `out` holds an owned value.
    Ok(optional_string(unsafe { Any::from_raw(out) }, "InspectSource")?.unwrap_or_default())
}

/// A C++ module's (virtual) `ImportModule(other)`.
#[cfg(tvmrt_cxx)]
pub(super) fn import_module(m: &Module, other: &Module) -> Result<()> {
    // SAFETY: both modules are live for the call.
    status("ImportModule", unsafe {
        tvmrt_cxx_foreign_import_module(m.as_ptr(), other.as_ptr())
    })
}

/// A C++ module's (virtual) `ClearImports()`.
#[cfg(tvmrt_cxx)]
pub(super) fn clear_imports(m: &Module) -> Result<()> {
    // SAFETY: `m` is live for the call.
    status("ClearImports", unsafe {
        tvmrt_cxx_foreign_clear_imports(m.as_ptr())
    })
}

/// Without the C++ part, `Module::from_object` refuses modules made by C++ code, so none of
/// these is ever called.
#[cfg(not(tvmrt_cxx))]
mod absent {
    use super::*;

    fn unsupported<T>() -> Result<T> {
        Err(Error::runtime(
            "modules made by C++ code need tvmrt's C++ part, absent from this build",
        ))
    }
    pub(in crate::module) fn kind(_: &Module) -> &str {
        "<C++ module>"
    }
    pub(in crate::module) fn get_function(_: &Module, _: &str) -> Result<Option<Function>> {
        unsupported()
    }
    pub(in crate::module) fn function_info(
        _: &Module,
        _: &str,
        _: FunctionInfo,
    ) -> Result<Option<String>> {
        unsupported()
    }
    pub(in crate::module) fn implements_function(_: &Module, _: &str) -> Result<bool> {
        unsupported()
    }
    pub(in crate::module) fn save_to_bytes(_: &Module) -> Result<Vec<u8>> {
        unsupported()
    }
    pub(in crate::module) fn property_mask(_: &Module) -> Result<i32> {
        unsupported()
    }
    pub(in crate::module) fn write_to_file(_: &Module, _: &str, _: &str) -> Result<()> {
        unsupported()
    }
    pub(in crate::module) fn write_formats(_: &Module) -> Result<Vec<String>> {
        unsupported()
    }
    pub(in crate::module) fn inspect_source(_: &Module, _: &str) -> Result<String> {
        unsupported()
    }
    pub(in crate::module) fn import_module(_: &Module, _: &Module) -> Result<()> {
        unsupported()
    }
    pub(in crate::module) fn clear_imports(_: &Module) -> Result<()> {
        unsupported()
    }
}
#[cfg(not(tvmrt_cxx))]
pub(super) use absent::*;

#[cfg(tvmrt_cxx)]
/// A string or None (`Optional<String>`).
fn optional_string(v: Any, what: &str) -> Result<Option<String>> {
    let view = v.view();
    if view.is_none() {
        return Ok(None);
    }
    view.as_str().map(|s| Some(s.to_string())).ok_or_else(|| {
        Error::type_error(format!(
            "{what}: expected a string, got {}",
            view.type_name()
        ))
    })
}

// ---- The hooks `shim.cc` calls -------------------------------------------------------------

/// What `shim.cc` calls on modules (its `struct Hooks`, field for field). `module` is a module's
/// header (tvmrt's or C++-made); status 0, or -1 with the error raised on the thread.
#[repr(C)]
pub struct CxxHooks {
    kind: unsafe extern "C" fn(*mut c_void) -> *const std::ffi::c_char,
    property_mask: unsafe extern "C" fn(*mut c_void, *mut i32) -> c_int,
    get_function:
        unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, i32, *mut *mut c_void) -> c_int,
    implements_function:
        unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, i32, *mut i32) -> c_int,
    function_info:
        unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, i32, i32, *mut TVMFFIAny) -> c_int,
    write_to_file: unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, *const TVMFFIAny) -> c_int,
    write_formats: unsafe extern "C" fn(*mut c_void, *mut TVMFFIAny) -> c_int,
    save_to_bytes: unsafe extern "C" fn(*mut c_void, *mut TVMFFIAny) -> c_int,
    inspect_source: unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, *mut TVMFFIAny) -> c_int,
    import_module: unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int,
    clear_imports: unsafe extern "C" fn(*mut c_void) -> c_int,
    context_symbols: unsafe extern "C" fn(*mut TVMFFIAny) -> c_int,
}

static HOOKS: CxxHooks = CxxHooks {
    kind: hook_kind,
    property_mask: hook_property_mask,
    get_function: hook_get_function,
    implements_function: hook_implements_function,
    function_info: hook_function_info,
    write_to_file: hook_write_to_file,
    write_formats: hook_write_formats,
    save_to_bytes: hook_save_to_bytes,
    inspect_source: hook_inspect_source,
    import_module: hook_import_module,
    clear_imports: hook_clear_imports,
    context_symbols: hook_context_symbols,
};

/// The module behind a header `shim.cc` passes.
///
/// # Safety
/// `module` is a live module object (C++ code holds a reference during the call).
unsafe fn module_at(module: *mut c_void) -> Result<Module> {
    // SAFETY: per the contract.
    unsafe { Module::from_handle_borrowed(module, "module") }
}

/// A string argument (`const String&`) `shim.cc` passes as its `TVMFFIAny`.
///
/// # Safety
/// `v` points to a live string value for the call.
unsafe fn str_arg<'a>(v: *const TVMFFIAny, what: &str) -> Result<&'a str> {
    crate::error::non_null(v, what)?;
    // SAFETY: per the contract; the view borrows the caller's value.
    let view: &AnyView<'a> = unsafe { &*v.cast::<AnyView<'a>>() };
    view.expect_str(what)
}

/// Writes an owned value to an out-pointer from C++.
///
/// # Safety
/// `out` is writable.
unsafe fn put(out: *mut TVMFFIAny, v: Any) {
    // SAFETY: per the contract.
    unsafe { *out = v.into_raw() };
}

/// `kind()` of tvmrt's modules: their NUL-terminated kind.
///
/// # Safety
/// `module` is one of tvmrt's live modules.
unsafe extern "C" fn hook_kind(module: *mut c_void) -> *const std::ffi::c_char {
    run_or("ModuleObj::kind", c"".as_ptr(), || {
        // SAFETY: per the contract.
        let m = unsafe { module_at(module)? };
        let p = m
            .kind_c()
            .ok_or_else(|| Error::runtime("kind(): not a module tvmrt made"))?
            .as_ptr();
        // The string lives in the module, which the caller keeps alive.
        Ok(p)
    })
}

/// # Safety
/// `module` is a live module; `out` writable.
unsafe extern "C" fn hook_property_mask(module: *mut c_void, out: *mut i32) -> c_int {
    run("ModuleObj::GetPropertyMask", || {
        // SAFETY: per the contract.
        let v = unsafe { module_at(module)? }.property_mask()?;
        // SAFETY: per the contract.
        unsafe { *out = v };
        Ok(())
    })
}

/// # Safety
/// `module` is a live module; `name` a string value; `out` writable.
unsafe extern "C" fn hook_get_function(
    module: *mut c_void,
    name: *const TVMFFIAny,
    query_imports: i32,
    out: *mut *mut c_void,
) -> c_int {
    run("ModuleObj::GetFunction", || {
        // SAFETY: per the contract.
        let (m, name) = unsafe { (module_at(module)?, str_arg(name, "name")?) };
        let f = m.get_function(name, query_imports != 0)?;
        let p = f.map_or(std::ptr::null_mut(), |f| f.into_object().into_raw());
        // SAFETY: per the contract.
        unsafe { *out = p };
        Ok(())
    })
}

/// # Safety
/// As [`hook_get_function`].
unsafe extern "C" fn hook_implements_function(
    module: *mut c_void,
    name: *const TVMFFIAny,
    query_imports: i32,
    out: *mut i32,
) -> c_int {
    run("ModuleObj::ImplementsFunction", || {
        // SAFETY: per the contract.
        let (m, name) = unsafe { (module_at(module)?, str_arg(name, "name")?) };
        let found = m.try_implements_function(name, query_imports != 0)?;
        // SAFETY: per the contract.
        unsafe { *out = i32::from(found) };
        Ok(())
    })
}

/// # Safety
/// As [`hook_get_function`].
unsafe extern "C" fn hook_function_info(
    module: *mut c_void,
    name: *const TVMFFIAny,
    what: i32,
    query_imports: i32,
    out: *mut TVMFFIAny,
) -> c_int {
    run("ModuleObj::GetFunctionMetadata/Doc", || {
        // SAFETY: per the contract.
        let (m, name) = unsafe { (module_at(module)?, str_arg(name, "name")?) };
        let what = if what == 0 {
            FunctionInfo::Metadata
        } else {
            FunctionInfo::Doc
        };
        let info = m.function_info(name, what, query_imports != 0)?;
        // SAFETY: per the contract.
        unsafe { put(out, info.map_or_else(Any::none, Any::from)) };
        Ok(())
    })
}

/// # Safety
/// `module` is a live module; both strings live for the call.
unsafe extern "C" fn hook_write_to_file(
    module: *mut c_void,
    file_name: *const TVMFFIAny,
    format: *const TVMFFIAny,
) -> c_int {
    run("ModuleObj::WriteToFile", || {
        // SAFETY: per the contract.
        let (m, file, format) = unsafe {
            (
                module_at(module)?,
                str_arg(file_name, "file_name")?,
                str_arg(format, "format")?,
            )
        };
        m.write_to_file(file, format)
    })
}

/// # Safety
/// `module` is a live module; `out` writable.
unsafe extern "C" fn hook_write_formats(module: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    run("ModuleObj::GetWriteFormats", || {
        // SAFETY: per the contract.
        let formats = unsafe { module_at(module)? }.write_formats()?;
        let array = new_array(formats.into_iter().map(Any::from).collect());
        // SAFETY: per the contract.
        unsafe { put(out, Any::from_object(array)) };
        Ok(())
    })
}

/// # Safety
/// `module` is a live module; `out` writable.
unsafe extern "C" fn hook_save_to_bytes(module: *mut c_void, out: *mut TVMFFIAny) -> c_int {
    run("ModuleObj::SaveToBytes", || {
        // SAFETY: per the contract.
        let bytes = unsafe { module_at(module)? }.save_to_bytes()?;
        // SAFETY: per the contract.
        unsafe { put(out, Any::bytes(&bytes)) };
        Ok(())
    })
}

/// # Safety
/// `module` is a live module; `format` a string value; `out` writable.
unsafe extern "C" fn hook_inspect_source(
    module: *mut c_void,
    format: *const TVMFFIAny,
    out: *mut TVMFFIAny,
) -> c_int {
    run("ModuleObj::InspectSource", || {
        // SAFETY: per the contract.
        let (m, format) = unsafe { (module_at(module)?, str_arg(format, "format")?) };
        let source = m.inspect_source(format)?;
        // SAFETY: per the contract.
        unsafe { put(out, Any::from(source)) };
        Ok(())
    })
}

/// tvm-ffi's `ModuleObj::ImportModule`, for any module (the base class's implementation).
///
/// # Safety
/// `module` is a live module; `other` null or a live object.
unsafe extern "C" fn hook_import_module(module: *mut c_void, other: *mut c_void) -> c_int {
    run("ModuleObj::ImportModule", || {
        // SAFETY: per the contract.
        let (m, other) = unsafe {
            (
                module_at(module)?,
                Module::from_handle_borrowed(other, "other")?,
            )
        };
        m.import_checked(&other)
    })
}

/// tvm-ffi's `ModuleObj::ClearImports`, for any module.
///
/// # Safety
/// `module` is a live module.
unsafe extern "C" fn hook_clear_imports(module: *mut c_void) -> c_int {
    run("ModuleObj::ClearImports", || {
        // SAFETY: per the contract.
        unsafe { module_at(module)? }.clear_imports_direct();
        Ok(())
    })
}

/// The context symbols (`Module::VisitContextSymbols`): an array of name, pointer, name, ...
///
/// # Safety
/// `out` is writable.
unsafe extern "C" fn hook_context_symbols(out: *mut TVMFFIAny) -> c_int {
    run("Module::VisitContextSymbols", || {
        let mut items = Vec::new();
        for (name, ptr) in super::library::context_symbols() {
            items.push(Any::from(name));
            items.push(Any::opaque_ptr(ptr as *mut c_void));
        }
        // SAFETY: per the contract.
        unsafe { put(out, Any::from_object(new_array(items))) };
        Ok(())
    })
}

/// Global functions of this file: `tvmrt.cxx.Hooks`, which `shim.cc` calls once to find the
/// hooks (an opaque pointer to [`CxxHooks`]).
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    let hooks = Function::from_fn(|_| {
        Ok(Any::opaque_ptr(
            std::ptr::addr_of!(HOOKS).cast_mut().cast::<c_void>(),
        ))
    });
    vec![("tvmrt.cxx.Hooks", hooks)]
}
