//! Modules: named collections of functions with imports (tvm-ffi `ffi.Module`, type index 73).
//!
//! A module object has a kind (its type key: `library`, `examplejson`, `relax.VMExecutable`...),
//! looks functions up by name, imports other modules, and may save itself to bytes. What a kind
//! does is behind the small [`ModuleKind`] trait; everything else (imports, lookup through them,
//! the import-lookup cache compiled code relies on) is shared here.
//!
//! Lifetimes: a function handed out by a module keeps that module alive (every kind must put a
//! clone of the [`Module`] it is given into the functions it creates), and a library module keeps
//! its DSO loaded, so handles may be freed in any order.
//!
//! # Loading
//!
//! [`load_from_file`] picks a loader by format or extension (`so`, `dll`, `dylib`, `dso`: a
//! shared library, see [`library`]; anything else: the global `runtime.module.loadfile_<fmt>`
//! or `ffi.Module.load_from_file.<fmt>`, called with `(path, format)`). A shared library built
//! by TVM may embed a blob of serialized modules ([`blob`]); each is restored by a loader found in
//! the global registry by its kind, and the import tree is rebuilt (module 0 is the root).
//!
//! # How to register a module loader from C
//!
//! A loader is an ordinary packed function registered under a well-known name
//! (`TVMFuncRegisterGlobal` or `TVMFFIFunctionSetGlobal`); it returns a module. To build a
//! module from C callbacks, call the global `tvmrt.ModuleCreate(kind, get_function[,
//! save_to_bytes])`: `get_function(name)` returns a function or None, `save_to_bytes()` returns
//! bytes. The loaders:
//!
//! - `ffi.Module.load_from_bytes.<kind>` (TVM 0.21+ blobs): called with one argument, a bytes
//!   value holding exactly what the module saved.
//! - `runtime.module.loadbinary_<kind>` (TVM <= 0.20 blobs): TVM handed these a `dmlc::Stream*`
//!   to read from; tvmrt instead calls them with two arguments: a bytes value holding the rest of
//!   the blob from the start of this module's payload (later modules' bytes follow it), and an
//!   opaque pointer to an `int64_t` initialized to -1. The loader reads its payload from the
//!   front and writes the number of bytes it consumed through the pointer
//!   (`*(int64_t*)args[1].v_handle = n;`). If it leaves -1 there, tvmrt takes the length of the
//!   returned module's `save_to_bytes()` instead (right for any module whose save is the exact
//!   inverse of its load), and fails with a message naming the loader if the module cannot save.
//!   The same function also serves TVM 0.21+ blobs, where it gets exactly its payload.
//! - `runtime.module.loadfile_<fmt>` / `ffi.Module.load_from_file.<fmt>`: called with
//!   `(path, format)` by `TVMModLoadFromFile` for files that are not shared libraries.
//!
//! When a blob names a kind for which neither loader is registered, loading fails with
//! "library was built with module kind `X` but no loader `ffi.Module.load_from_bytes.X` is
//! registered".

pub mod blob;
pub mod callback;
// Not scanned for tvmrt.h: it declares C++ functions and exports no C ones.
/// cbindgen:ignore
pub mod cxx;
pub(crate) mod dynsym;
pub mod elf_check;
mod globals;
mod imports;
mod kind;
pub mod library;
pub mod loader;
pub mod pinned;
pub mod reflect;
pub mod runtime_scope;
pub mod system_lib;
pub mod tvm_ffi_alias;

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicPtr, Ordering};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::abi::type_index;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::{array_items, new_array};
use crate::object::{new_object, new_object_with_vptr, ObjectPayload, ObjectRef};
use crate::value::{Any, AnyView};

pub(crate) use globals::builtins;
pub(crate) use imports::lookup_in_imports_then_global;
pub use kind::{AsAny, FunctionInfo, ModuleKind};
pub use loader::{load_dso, load_from_file};

/// Payload of a module object made by tvmrt (type index 73), laid out as tvm-ffi's C++
/// `ModuleObj` is after its header (`extra/module.h`): `imports_` (an `ffi.Array` of the
/// imported modules) and `import_lookup_cache_`, both read by C++ code built against tvm-ffi's
/// headers, then tvmrt's own fields. The object starts with a vtable pointer 8 bytes before the
/// header (`crate::cxx`), so C++ code calls its virtual functions like any `ModuleObj`'s.
#[repr(C)]
pub struct ModuleObj {
    slots: ModuleSlots,
    imp: Box<dyn ModuleKind>,
    /// The kind, NUL-terminated: what the C++ `kind()` returns.
    kind_c: CString,
}

/// The fields every `ModuleObj` has after its header, whoever made it: owned references (or
/// null).
#[repr(C)]
pub(crate) struct ModuleSlots {
    /// `imports_`: an `ffi.Array` of modules. tvmrt replaces the whole array on change (under
    /// [`SLOTS_LOCK`]), so a reader holding a reference sees a consistent list.
    imports: AtomicPtr<c_void>,
    /// `import_lookup_cache_`: tvmrt keeps an [`EnvCache`] here (in a module made by C++ code it
    /// replaces the empty map found there).
    lookup_cache: AtomicPtr<c_void>,
}

impl Drop for ModuleSlots {
    fn drop(&mut self) {
        for slot in [&mut self.imports, &mut self.lookup_cache] {
            let p = *slot.get_mut();
            if !p.is_null() {
                // SAFETY: the slot owns one strong reference.
                unsafe { crate::object::dec_ref_raw(p) };
            }
        }
    }
}

/// Serializes the changes to modules' slots with tvmrt's reads of them (C++ code reading
/// `imports_` inline is not synchronized, as in tvm-ffi).
static SLOTS_LOCK: Mutex<()> = Mutex::new(());

// SAFETY: no public cell beyond tvm-ffi's `ModuleObj` fields (the slots, first); `ModuleKind` is
// `Send + Sync` and the slots change atomically under `SLOTS_LOCK`.
unsafe impl ObjectPayload for ModuleObj {
    const TYPE_INDEX: i32 = type_index::MODULE;
}

/// The cache of `TVMFFIEnvModLookupFromImports` / `TVMBackendGetFuncFromEnv` for compiled code
/// whose context is a module: compiled code keeps the handles returned, borrowed from here (as
/// TVM's `import_lookup_cache_`), so they live as long as the module.
struct EnvCache(Mutex<HashMap<String, Function>>);

// SAFETY: no public cell; the map is locked.
unsafe impl ObjectPayload for EnvCache {
    const TYPE_INDEX: i32 = type_index::OBJECT;
}

/// An empty import list shared by new modules (arrays are replaced, never changed, by tvmrt;
/// C++ code copies a shared one before changing it).
static NO_IMPORTS: Lazy<ObjectRef> = Lazy::new(|| new_array(Vec::new()));

/// A reference to a module object: one tvmrt made, or one made by C++ code built against
/// tvm-ffi's headers (a `tvm::ffi::ModuleObj` subclass), called through its own vtable.
#[derive(Clone)]
pub struct Module(ObjectRef);

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module({}, {:p})", self.kind(), self.0.as_ptr())
    }
}

/// Who implements a module.
enum Imp<'a> {
    /// tvmrt: a [`ModuleKind`].
    Rust(&'a ModuleObj),
    /// C++ code: virtual calls (`cxx`).
    Cxx,
}

impl Module {
    /// A new module of the given kind, with no imports.
    pub fn new<K: ModuleKind>(kind: K) -> Module {
        let kind_c = CString::new(kind.kind().replace('\0', "?")).unwrap_or_default();
        let payload = ModuleObj {
            slots: ModuleSlots {
                imports: AtomicPtr::new(NO_IMPORTS.clone().into_raw()),
                lookup_cache: AtomicPtr::new(std::ptr::null_mut()),
            },
            imp: Box::new(kind),
            kind_c,
        };
        Module(new_object_with_vptr(
            crate::cxx::rust_module_vptr(),
            payload,
        ))
    }

    /// Wraps an object, checking that it is a module (`ffi.Module`, type index 73): one tvmrt
    /// made, or a C++ `tvm::ffi::ModuleObj` (every object of that type index is one).
    pub fn from_object(obj: ObjectRef) -> Result<Module> {
        if obj.type_index() != type_index::MODULE {
            return Err(Error::type_error(format!(
                "expected ffi.Module, got {}",
                crate::value::type_name(obj.type_index())
            )));
        }
        if !obj.is::<ModuleObj>() && !crate::cxx::ENABLED {
            return Err(Error::type_error(
                "the module object was not created by tvmrt, and this build of tvmrt has no C++ \
                 part to call modules made by C++ code",
            ));
        }
        Ok(Module(obj))
    }

    /// The module held by an argument, or a `TypeError` naming `what`.
    pub fn from_view(v: &AnyView<'_>, what: &str) -> Result<Module> {
        let obj = v
            .as_object()
            .ok_or_else(|| v.type_mismatch(what, "ffi.Module"))?;
        Module::from_object(obj).map_err(|e| Error::type_error(format!("{what}: {}", e.message)))
    }

    /// Borrows a raw module handle (`TVMModuleHandle`) as a new reference.
    ///
    /// # Safety
    /// `handle` is null or a live object handle.
    pub unsafe fn from_handle_borrowed(handle: *mut c_void, what: &str) -> Result<Module> {
        // SAFETY: per the contract.
        let obj = unsafe { ObjectRef::from_raw_borrowed(handle) }
            .ok_or_else(|| Error::value(format!("null handle passed as `{what}`")))?;
        Module::from_object(obj).map_err(|e| Error::type_error(format!("`{what}`: {}", e.message)))
    }

    fn imp(&self) -> Imp<'_> {
        match self.0.downcast_ref::<ModuleObj>() {
            Some(obj) => Imp::Rust(obj),
            None => Imp::Cxx,
        }
    }

    /// The fields after the header, in a module of either maker.
    pub(crate) fn slots(&self) -> &ModuleSlots {
        // SAFETY: every module object (tvmrt's `ModuleObj`, or a C++ `ModuleObj`) has these two
        // pointer fields right after its header, alive while the object is.
        unsafe { &*self.0.cell_ptr().cast::<ModuleSlots>() }
    }

    /// The underlying object.
    pub fn object(&self) -> &ObjectRef {
        &self.0
    }

    /// Gives up the wrapper, keeping the reference.
    pub fn into_object(self) -> ObjectRef {
        self.0
    }

    /// The module handle (still owned by `self`).
    pub fn as_ptr(&self) -> *mut c_void {
        self.0.as_ptr()
    }

    /// Whether C++ code made this module (it is then called through its vtable).
    pub fn is_cxx(&self) -> bool {
        matches!(self.imp(), Imp::Cxx)
    }

    /// The type key.
    pub fn kind(&self) -> &str {
        match self.imp() {
            Imp::Rust(obj) => obj.imp.kind(),
            Imp::Cxx => cxx::kind(self),
        }
    }

    /// The kind, NUL-terminated, for a tvmrt module (what its C++ `kind()` returns).
    pub(crate) fn kind_c(&self) -> Option<&CString> {
        match self.imp() {
            Imp::Rust(obj) => Some(&obj.kind_c),
            Imp::Cxx => None,
        }
    }

    /// The kind's implementation, if it is a `T` (never for a module made by C++ code).
    pub fn downcast<T: ModuleKind>(&self) -> Option<&T> {
        match self.imp() {
            // Deref the box first: `Box<dyn ModuleKind>` is itself `AsAny`.
            Imp::Rust(obj) => (*obj.imp).as_any().downcast_ref::<T>(),
            Imp::Cxx => None,
        }
    }

    /// The kind's implementation, for a module tvmrt made.
    pub fn implementation(&self) -> Option<&dyn ModuleKind> {
        match self.imp() {
            Imp::Rust(obj) => Some(&*obj.imp),
            Imp::Cxx => None,
        }
    }

    /// This module's own function `name` (not its imports').
    fn own_function(&self, name: &str) -> Result<Option<Function>> {
        match self.imp() {
            Imp::Rust(obj) => obj.imp.get_function(self, name),
            Imp::Cxx => cxx::get_function(self, name),
        }
    }

    fn own_function_info(&self, name: &str, what: FunctionInfo) -> Result<Option<String>> {
        match self.imp() {
            Imp::Rust(obj) => obj.imp.function_info(name, what),
            Imp::Cxx => cxx::function_info(self, name, what),
        }
    }

    fn own_implements(&self, name: &str) -> Result<bool> {
        match self.imp() {
            Imp::Rust(obj) => Ok(obj.imp.implements_function(self, name)),
            Imp::Cxx => cxx::implements_function(self, name),
        }
    }

    /// Looks `name` up in this module, then (when `query_imports`) depth-first in its imports,
    /// each import before the next one's imports, as TVM does. Modules reachable twice are
    /// searched once.
    pub fn get_function(&self, name: &str, query_imports: bool) -> Result<Option<Function>> {
        if let Some(f) = self.own_function(name)? {
            return Ok(Some(f));
        }
        if !query_imports {
            return Ok(None);
        }
        let mut found = None;
        self.walk_imports(|m| {
            found = m.own_function(name)?;
            Ok(found.is_some())
        })?;
        Ok(found)
    }

    /// The metadata or doc of function `name` in this module (or, when `query_imports`, the
    /// first of its imports that has it).
    pub fn function_info(
        &self,
        name: &str,
        what: FunctionInfo,
        query_imports: bool,
    ) -> Result<Option<String>> {
        if let Some(s) = self.own_function_info(name, what)? {
            return Ok(Some(s));
        }
        if !query_imports {
            return Ok(None);
        }
        let mut found = None;
        self.walk_imports(|m| {
            found = m.own_function_info(name, what)?;
            Ok(found.is_some())
        })?;
        Ok(found)
    }

    /// Whether `name` is found in this module (or, when `query_imports`, in its imports). A
    /// module made by C++ code that fails to answer counts as not having it; see
    /// [`Module::try_implements_function`].
    pub fn implements_function(&self, name: &str, query_imports: bool) -> bool {
        self.try_implements_function(name, query_imports)
            .unwrap_or(false)
    }

    /// [`Module::implements_function`], with the error of a module that failed to answer.
    pub fn try_implements_function(&self, name: &str, query_imports: bool) -> Result<bool> {
        if self.own_implements(name)? {
            return Ok(true);
        }
        if !query_imports {
            return Ok(false);
        }
        let mut found = false;
        self.walk_imports(|m| {
            found = m.own_implements(name)?;
            Ok(found)
        })?;
        Ok(found)
    }
}

impl From<Module> for Any {
    fn from(m: Module) -> Any {
        Any::from_object(m.into_object())
    }
}

#[cfg(test)]
mod tests;
