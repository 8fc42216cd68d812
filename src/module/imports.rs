//! A module's imports: the list (tvm-ffi `imports_`), lookup through it depth-first, and the
//! cache compiled code looks functions up in (`import_lookup_cache_`).

use std::collections::HashSet;
use std::ffi::c_void;

use crate::error::{Error, Result};
use crate::function::Function;

use super::*;

impl Module {
    /// Visits the imports depth-first (pre-order) until `visit` returns true. No lock is held
    /// while `visit` runs (it may call back into modules).
    pub(super) fn walk_imports(
        &self,
        mut visit: impl FnMut(&Module) -> Result<bool>,
    ) -> Result<()> {
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
