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
pub mod library;
pub mod loader;
pub mod pinned;
pub mod reflect;
pub mod runtime_scope;
pub mod system_lib;
pub mod tvm_ffi_alias;

use std::any::Any as StdAny;
use std::collections::{HashMap, HashSet};
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

pub use loader::{load_dso, load_from_file};

/// Upcast to `std::any::Any`, implemented for every type (lets [`Module::downcast`] find the
/// concrete kind behind a `dyn ModuleKind`).
pub trait AsAny {
    /// `self` as `dyn Any`.
    fn as_any(&self) -> &dyn StdAny;
}

impl<T: StdAny> AsAny for T {
    fn as_any(&self) -> &dyn StdAny {
        self
    }
}

/// What [`ModuleKind::function_info`] is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionInfo {
    /// tvm-ffi's metadata JSON (`__tvm_ffi__metadata_<name>` in a library).
    Metadata,
    /// The doc string (`__tvm_ffi__doc_<name>`).
    Doc,
}

/// What a kind of module implements. Kept small: imports and lookup through them are handled
/// by [`Module`] for every kind.
pub trait ModuleKind: AsAny + Send + Sync + 'static {
    /// The type key (`"library"`, `"examplejson"`, `"relax.VMExecutable"`).
    fn kind(&self) -> &str;

    /// This module's own function `name` (imports are searched by [`Module::get_function`]),
    /// or `None`. `this` is the module object that holds `self`: a function handed out must
    /// keep a clone of it, so the module lives as long as its functions.
    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>>;

    /// Whether [`ModuleKind::get_function`] would find `name` (override when a lookup is
    /// cheaper than creating the function).
    fn implements_function(&self, this: &Module, name: &str) -> bool {
        matches!(self.get_function(this, name), Ok(Some(_)))
    }

    /// The metadata (JSON text) or doc string an exported function `name` carries, when the
    /// module has one (tvm-ffi's `GetFunctionMetadata` / `GetFunctionDoc`).
    fn function_info(&self, _name: &str, _what: FunctionInfo) -> Result<Option<String>> {
        Ok(None)
    }

    /// The bytes the loader `ffi.Module.load_from_bytes.<kind>` restores this module from.
    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        Err(Error::runtime(format!(
            "module of kind `{}` cannot be saved to bytes",
            self.kind()
        )))
    }

    /// tvm-ffi's `ModulePropertyMask` bits: 1 binary-serializable, 2 runnable, 4
    /// compilation-exportable (none by default, as `ModuleObj::GetPropertyMask`).
    fn property_mask(&self) -> i32 {
        0
    }

    /// Writes the module to `path` in `format` (`ModuleObj::WriteToFile`).
    fn write_to_file(&self, _path: &str, _format: &str) -> Result<()> {
        Err(Error::runtime(format!(
            "Module[{}] does not support WriteToFile",
            self.kind()
        )))
    }

    /// The formats [`ModuleKind::write_to_file`] accepts, when it lists them.
    fn write_formats(&self) -> Vec<String> {
        Vec::new()
    }

    /// The module's source in `format`, when it has one (empty otherwise).
    fn inspect_source(&self, _format: &str) -> String {
        String::new()
    }
}

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

    /// Visits the imports depth-first (pre-order) until `visit` returns true. No lock is held
    /// while `visit` runs (it may call back into modules).
    fn walk_imports(&self, mut visit: impl FnMut(&Module) -> Result<bool>) -> Result<()> {
        let mut seen: HashSet<usize> = HashSet::new();
        seen.insert(self.as_ptr() as usize);
        let mut stack: Vec<Module> = self.imports();
        stack.reverse();
        while let Some(m) = stack.pop() {
            if !seen.insert(m.as_ptr() as usize) {
                continue;
            }
            if visit(&m)? {
                return Ok(());
            }
            let mut children = m.imports();
            children.reverse();
            stack.extend(children);
        }
        Ok(())
    }

    /// The `imports_` array (a new reference; an empty array if the slot is null).
    pub fn imports_array(&self) -> ObjectRef {
        let _guard = SLOTS_LOCK.lock();
        let p = self.slots().imports.load(Ordering::Acquire);
        // SAFETY: the slot holds a reference to a live array; the lock keeps it from being
        // replaced (and released) while a new reference is taken.
        unsafe { ObjectRef::from_raw_borrowed(p) }.unwrap_or_else(|| NO_IMPORTS.clone())
    }

    /// The modules this module imports, in order (an entry that is not a module, which only
    /// C++ code could put there, is left out).
    pub fn imports(&self) -> Vec<Module> {
        let array = self.imports_array();
        let Some(items) = array_items(&array) else {
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|v| v.as_object())
            .filter_map(|o| Module::from_object(o).ok())
            .collect()
    }

    /// Replaces the import list.
    fn set_imports(&self, modules: Vec<Module>) {
        let array = new_array(modules.into_iter().map(Any::from).collect());
        let old = {
            let _guard = SLOTS_LOCK.lock();
            self.slots()
                .imports
                .swap(array.into_raw(), Ordering::AcqRel)
        };
        // Released after the lock: dropping modules may run arbitrary code.
        if !old.is_null() {
            // SAFETY: the slot owned this reference.
            unsafe { crate::object::dec_ref_raw(old) };
        }
    }

    /// Imports `other`. Fails when that would make a cycle (tvm-ffi `ModuleObj::ImportModule`).
    /// A module made by C++ code imports through its own (virtual) `ImportModule`.
    pub fn import(&self, other: &Module) -> Result<()> {
        match self.imp() {
            Imp::Rust(_) => self.import_checked(other),
            Imp::Cxx => cxx::import_module(self, other),
        }
    }

    /// tvm-ffi's `ModuleObj::ImportModule` itself: the cycle check, then the append.
    pub(crate) fn import_checked(&self, other: &Module) -> Result<()> {
        let me = self.as_ptr() as usize;
        if other.as_ptr() as usize == me {
            return Err(Error::runtime(format!(
                "Cyclic dependency detected during import: module `{}` cannot import itself",
                self.kind()
            )));
        }
        let mut reaches_me = false;
        other.walk_imports(|m| {
            reaches_me = m.as_ptr() as usize == me;
            Ok(reaches_me)
        })?;
        if reaches_me {
            return Err(Error::runtime(format!(
                "Cyclic dependency detected during import: module `{}` already imports module \
                 `{}`",
                other.kind(),
                self.kind()
            )));
        }
        self.push_import_unchecked(other.clone());
        Ok(())
    }

    /// Appends an import without the cycle check (the blob decoder has already proved the tree
    /// acyclic).
    pub(crate) fn push_import_unchecked(&self, other: Module) {
        let mut all = self.imports();
        all.push(other);
        self.set_imports(all);
    }

    /// Removes every import (a module made by C++ code through its own `ClearImports`).
    pub fn clear_imports(&self) -> Result<()> {
        match self.imp() {
            Imp::Rust(_) => {
                self.clear_imports_direct();
                Ok(())
            }
            Imp::Cxx => cxx::clear_imports(self),
        }
    }

    /// tvm-ffi's `ModuleObj::ClearImports` itself.
    pub(crate) fn clear_imports_direct(&self) {
        self.set_imports(Vec::new());
    }

    /// What this module saves of itself (see [`ModuleKind::save_to_bytes`]).
    pub fn save_to_bytes(&self) -> Result<Vec<u8>> {
        match self.imp() {
            Imp::Rust(obj) => obj.imp.save_to_bytes(),
            Imp::Cxx => cxx::save_to_bytes(self),
        }
    }

    /// tvm-ffi's `ModulePropertyMask` bits (see [`ModuleKind::property_mask`]).
    pub fn property_mask(&self) -> Result<i32> {
        match self.imp() {
            Imp::Rust(obj) => Ok(obj.imp.property_mask()),
            Imp::Cxx => cxx::property_mask(self),
        }
    }

    /// Writes the module to `path` in `format` (see [`ModuleKind::write_to_file`]).
    pub fn write_to_file(&self, path: &str, format: &str) -> Result<()> {
        match self.imp() {
            Imp::Rust(obj) => obj.imp.write_to_file(path, format),
            Imp::Cxx => cxx::write_to_file(self, path, format),
        }
    }

    /// The formats [`Module::write_to_file`] accepts, when the module lists them.
    pub fn write_formats(&self) -> Result<Vec<String>> {
        match self.imp() {
            Imp::Rust(obj) => Ok(obj.imp.write_formats()),
            Imp::Cxx => cxx::write_formats(self),
        }
    }

    /// The module's source in `format`, when it has one (empty otherwise).
    pub fn inspect_source(&self, format: &str) -> Result<String> {
        match self.imp() {
            Imp::Rust(obj) => Ok(obj.imp.inspect_source(format)),
            Imp::Cxx => cxx::inspect_source(self, format),
        }
    }

    /// Finds `name` for compiled code that uses this module as its context: in the imports
    /// (depth-first), then in the global registry (TVM's `GetFuncFromEnv`, which does not look
    /// in the module itself). The result is cached in the module and returned borrowed.
    pub(crate) fn env_lookup(&self, name: &str) -> Result<*mut c_void> {
        let cache = self.env_cache();
        let cache = cache
            .downcast_ref::<EnvCache>()
            .expect("env_cache returns an EnvCache");
        if let Some(f) = cache.0.lock().get(name) {
            return Ok(f.object().as_ptr());
        }
        let f = lookup_in_imports_then_global(&self.imports(), name)?;
        let mut map = cache.0.lock();
        let ptr = map.entry(name.to_string()).or_insert(f).object().as_ptr();
        Ok(ptr)
    }

    /// The module's [`EnvCache`] (a new reference), put in its `import_lookup_cache_` slot on
    /// first use.
    fn env_cache(&self) -> ObjectRef {
        let slot = &self.slots().lookup_cache;
        let (fresh, replaced) = {
            let _guard = SLOTS_LOCK.lock();
            let p = slot.load(Ordering::Acquire);
            // SAFETY: the slot holds a live reference (or null); the lock keeps it there.
            if let Some(current) = unsafe { ObjectRef::from_raw_borrowed(p) } {
                if current.is::<EnvCache>() {
                    return current;
                }
            }
            let fresh = new_object(EnvCache(Mutex::new(HashMap::new())));
            let replaced = slot.swap(fresh.clone().into_raw(), Ordering::AcqRel);
            (fresh, replaced)
        };
        if !replaced.is_null() {
            // SAFETY: the slot owned this reference (the map a C++ module was made with).
            unsafe { crate::object::dec_ref_raw(replaced) };
        }
        fresh
    }
}

/// TVM's lookup for compiled code: each import with `query_imports`, then the global registry.
pub(crate) fn lookup_in_imports_then_global(imports: &[Module], name: &str) -> Result<Function> {
    for m in imports {
        if let Some(f) = m.get_function(name, true)? {
            return Ok(f);
        }
    }
    crate::function::registry::get(name).ok_or_else(|| {
        Error::runtime(format!(
            "Cannot find function {name} in the imported modules or global registry."
        ))
    })
}

impl From<Module> for Any {
    fn from(m: Module) -> Any {
        Any::from_object(m.into_object())
    }
}

fn arg<'a, 'b>(args: &'a [AnyView<'b>], i: usize, what: &str) -> Result<&'a AnyView<'b>> {
    args.get(i).ok_or_else(|| {
        Error::type_error(format!(
            "missing argument {i} (`{what}`): got {} arguments",
            args.len()
        ))
    })
}

fn arg_bool(args: &[AnyView<'_>], i: usize, what: &str) -> Result<bool> {
    let v = arg(args, i, what)?;
    v.as_bool()
        .or_else(|| v.as_i64().map(|x| x != 0))
        .ok_or_else(|| v.type_mismatch(what, "bool"))
}

fn fn_or_none(f: Option<Function>) -> Any {
    f.map(Any::from).unwrap_or_default()
}

/// Global functions of the module subsystem, with TVM's names (tvm-ffi
/// `src/ffi/extra/module.cc`, TVM <= 0.20 `src/runtime/module.cc`).
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    fn load(args: &[AnyView<'_>]) -> Result<Any> {
        let path = arg(args, 0, "file_name")?.expect_str("file_name")?;
        let format = match args.get(1) {
            Some(v) if !v.is_none() => v.expect_str("format")?,
            _ => "",
        };
        Ok(load_from_file(path, format)?.into())
    }
    /// The `(mod, name, query_imports = false)` arguments of a function lookup.
    fn lookup_args<'a>(args: &'a [AnyView<'_>]) -> Result<(Module, &'a str, bool)> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let name = arg(args, 1, "name")?.expect_str("name")?;
        let q = if args.len() > 2 {
            arg_bool(args, 2, "query_imports")?
        } else {
            false
        };
        Ok((m, name, q))
    }
    fn get_function(args: &[AnyView<'_>]) -> Result<Any> {
        let (m, name, q) = lookup_args(args)?;
        Ok(fn_or_none(m.get_function(name, q)?))
    }
    fn implements(args: &[AnyView<'_>]) -> Result<Any> {
        let (m, name, q) = lookup_args(args)?;
        Ok(Any::from(m.try_implements_function(name, q)?))
    }
    fn info(args: &[AnyView<'_>], what: FunctionInfo) -> Result<Any> {
        let (m, name, q) = lookup_args(args)?;
        Ok(match m.function_info(name, what, q)? {
            Some(s) => Any::from(s),
            None => Any::none(),
        })
    }
    fn kind(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        Ok(Any::from(m.kind()))
    }
    fn import(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let other = Module::from_view(arg(args, 1, "other")?, "other")?;
        m.import(&other)?;
        Ok(Any::none())
    }
    fn clear(args: &[AnyView<'_>]) -> Result<Any> {
        Module::from_view(arg(args, 0, "mod")?, "mod")?.clear_imports()?;
        Ok(Any::none())
    }
    fn imports_size(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        Ok(Any::from(m.imports().len() as i64))
    }
    fn get_import(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let i = arg(args, 1, "index")?.expect_i64("index")?;
        let imports = m.imports();
        let n = imports.len();
        let idx = usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| {
            Error::index(format!(
                "import index {i} out of range: the module has {n} imports"
            ))
        })?;
        Ok(imports[idx].clone().into())
    }
    fn save_to_bytes(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        Ok(Any::bytes(&m.save_to_bytes()?))
    }
    fn property_mask(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        Ok(Any::from(i64::from(m.property_mask()?)))
    }
    fn write_formats(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let formats = m.write_formats()?;
        Ok(Any::from_object(
            crate::object::containers::array::new_array(
                formats.into_iter().map(Any::from).collect(),
            ),
        ))
    }
    fn inspect_source(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let format = match args.get(1) {
            Some(f) => f.expect_str("format")?,
            None => "",
        };
        Ok(Any::from(m.inspect_source(format)?))
    }
    fn write_to_file(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let path = arg(args, 1, "file_name")?.expect_str("file_name")?;
        let format = arg(args, 2, "format")?.expect_str("format")?;
        m.write_to_file(path, format)?;
        Ok(Any::none())
    }
    fn load_so(args: &[AnyView<'_>]) -> Result<Any> {
        let path = arg(args, 0, "library_path")?.expect_str("library_path")?;
        Ok(load_dso(path)?.into())
    }

    vec![
        ("ffi.ModuleLoadFromFile", Function::from_fn(load)),
        ("runtime.ModuleLoadFromFile", Function::from_fn(load)),
        ("ffi.ModuleGetFunction", Function::from_fn(get_function)),
        ("runtime.ModuleGetFunction", Function::from_fn(get_function)),
        (
            "ffi.ModuleImplementsFunction",
            Function::from_fn(implements),
        ),
        ("ffi.ModuleGetKind", Function::from_fn(kind)),
        (
            "ffi.ModuleGetFunctionMetadata",
            Function::from_fn(|a| info(a, FunctionInfo::Metadata)),
        ),
        (
            "ffi.ModuleGetFunctionDoc",
            Function::from_fn(|a| info(a, FunctionInfo::Doc)),
        ),
        ("runtime.ModuleGetTypeKey", Function::from_fn(kind)),
        ("ffi.ModuleImportModule", Function::from_fn(import)),
        ("runtime.ModuleImport", Function::from_fn(import)),
        ("ffi.ModuleClearImports", Function::from_fn(clear)),
        ("runtime.ModuleImportsSize", Function::from_fn(imports_size)),
        ("runtime.ModuleGetImport", Function::from_fn(get_import)),
        ("ffi.ModuleSaveToBytes", Function::from_fn(save_to_bytes)),
        (
            "ffi.ModuleGetPropertyMask",
            Function::from_fn(property_mask),
        ),
        (
            "ffi.ModuleGetWriteFormats",
            Function::from_fn(write_formats),
        ),
        ("ffi.ModuleInspectSource", Function::from_fn(inspect_source)),
        ("ffi.ModuleWriteToFile", Function::from_fn(write_to_file)),
        ("ffi.Module.load_from_file.so", Function::from_fn(load_so)),
        ("runtime.module.loadfile_so", Function::from_fn(load_so)),
        (
            "tvmrt.ModuleCreate",
            Function::from_fn(callback::create_from_args),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed {
        kind: &'static str,
        names: &'static [&'static str],
    }

    impl ModuleKind for Fixed {
        fn kind(&self) -> &str {
            self.kind
        }
        fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
            if !self.names.contains(&name) {
                return Ok(None);
            }
            let keep = this.clone();
            let tag = format!("{}:{name}", self.kind);
            Ok(Some(Function::from_fn(move |_| {
                let _ = &keep;
                Ok(Any::from(tag.as_str()))
            })))
        }
    }

    fn m(kind: &'static str, names: &'static [&'static str]) -> Module {
        Module::new(Fixed { kind, names })
    }

    fn call_tag(f: Option<Function>) -> String {
        f.unwrap()
            .call(&[])
            .unwrap()
            .view()
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn lookup_is_depth_first_and_pre_order() {
        let root = m("root", &["r"]);
        let a = m("a", &[]);
        let a1 = m("a1", &["x"]);
        let b = m("b", &["x"]);
        a.import(&a1).unwrap();
        root.import(&a).unwrap();
        root.import(&b).unwrap();
        assert_eq!(call_tag(root.get_function("r", false).unwrap()), "root:r");
        assert!(root.get_function("x", false).unwrap().is_none());
        // a1 (inside the first import) is found before b (the second import).
        assert_eq!(call_tag(root.get_function("x", true).unwrap()), "a1:x");
        assert!(root.implements_function("x", true));
        assert!(!root.implements_function("x", false));
        assert_eq!(root.imports().len(), 2);
        root.clear_imports().unwrap();
        assert!(root.get_function("x", true).unwrap().is_none());
    }

    #[test]
    fn imports_and_lookup_cache_live_where_cpp_has_them() {
        let root = m("root", &[]);
        let a = m("a", &["x"]);
        root.import(&a).unwrap();
        let header = root.as_ptr().cast::<u8>();
        // C++ reads `imports_` inline: an ffi.Array of the modules, right after the header.
        // SAFETY: a module's `imports_` slot holds a live array while the module lives.
        let imports =
            unsafe { ObjectRef::from_raw_borrowed(*header.add(24).cast::<*mut c_void>()).unwrap() };
        assert_eq!(imports.type_index(), type_index::ARRAY);
        let items = array_items(&imports).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].as_object().unwrap().as_ptr(), a.as_ptr());
        // The vtable pointer C++ calls through, before the header.
        // SAFETY: tvmrt's modules are allocated with a vtable pointer 8 bytes before the header.
        let vptr = unsafe { *header.sub(8).cast::<*const c_void>() };
        assert_eq!(vptr, crate::cxx::rust_module_vptr());
        // Compiled code's lookups are cached in the `import_lookup_cache_` slot.
        let f = root.env_lookup("x").unwrap();
        assert_eq!(root.env_lookup("x").unwrap(), f);
        // SAFETY: the cache slot follows `imports_`.
        let cache = unsafe { *header.add(32).cast::<*mut c_void>() };
        assert!(!cache.is_null());
        root.clear_imports().unwrap();
        assert!(root.imports().is_empty());
        // The old array stays valid for whoever holds it.
        assert_eq!(array_items(&imports).unwrap().len(), 1);
    }

    #[test]
    fn import_rejects_cycles() {
        let a = m("a", &[]);
        let b = m("b", &[]);
        a.import(&b).unwrap();
        let e = b.import(&a).unwrap_err();
        assert!(e.message.contains("Cyclic dependency"), "{e}");
        let e = a.import(&a).unwrap_err();
        assert!(e.message.contains("cannot import itself"), "{e}");
    }

    #[test]
    fn function_keeps_module_alive() {
        let root = m("root", &["r"]);
        let f = root.get_function("r", false).unwrap().unwrap();
        let weak_probe = root.object().strong_count();
        assert_eq!(weak_probe, 2, "the function holds one reference");
        drop(root);
        assert_eq!(f.call(&[]).unwrap().view().as_str(), Some("root:r"));
    }

    #[test]
    fn downcast_and_kind() {
        let a = m("a", &[]);
        assert_eq!(a.kind(), "a");
        assert!(a.downcast::<Fixed>().is_some());
        assert!(!a.save_to_bytes().unwrap_err().message.is_empty());
        let any = Any::from(a.clone());
        assert_eq!(any.view().type_index(), type_index::MODULE);
        let back = Module::from_view(&any.view(), "m").unwrap();
        assert_eq!(back.as_ptr(), a.as_ptr());
        let e = Module::from_view(&Any::from(1i64).view(), "m").unwrap_err();
        assert!(e.message.contains("m: expected ffi.Module, got int"), "{e}");
    }
}
