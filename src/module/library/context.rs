//! Where compiled code finds other functions: the context a library's `__tvm_ffi__library_ctx`
//! / `__tvm_module_ctx` points at, and the context symbols (tvmrt's exports and registered ones).

use std::collections::HashMap;
use std::ffi::c_void;

use once_cell::sync::Lazy;
use parking_lot::{Mutex, RwLock};

use super::{library_function_of, LibraryFunction};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::Module;
use crate::object::WeakObjectRef;

/// Where compiled code finds other functions: one per ABI per loaded library (the target of
/// `__tvm_ffi__library_ctx` / `__tvm_module_ctx`).
pub(crate) struct LibraryContext {
    state_id: usize,
    /// The modules of the loads whose imports are searched (the first live one is used), held
    /// weakly: the context must not keep a load alive.
    roots: Mutex<Vec<WeakObjectRef>>,
    /// Found functions; compiled code keeps borrowed handles to them.
    pub(super) cache: Mutex<HashMap<String, Function>>,
}

impl LibraryContext {
    pub(super) fn new(state_id: usize) -> Self {
        LibraryContext {
            state_id,
            roots: Mutex::new(Vec::new()),
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn register_root(&self, module: &Module) {
        let mut roots = self.roots.lock();
        roots.retain(|w| w.strong_count() > 0);
        roots.push(module.object().downgrade());
    }

    fn lookup(&self, name: &str) -> Result<*mut c_void> {
        if let Some(f) = self.cache.lock().get(name) {
            return Ok(f.object().as_ptr());
        }
        let root = self.roots.lock().iter().find_map(WeakObjectRef::upgrade);
        let imports = root
            .and_then(|r| Module::from_object(r).ok())
            .map(|m| m.imports())
            .unwrap_or_default();
        let found = crate::module::lookup_in_imports_then_global(&imports, name)?;
        // A function of this very library would keep the library alive from its own cache (a
        // reference cycle): cache a copy that does not own the module instead.
        let found = match library_function_of(&found) {
            Some(lf) if lf.state_id == self.state_id && lf.owner.is_some() => LibraryFunction {
                symbol: lf.symbol,
                abi: lf.abi,
                state_id: lf.state_id,
                owner: None,
                name: lf.name.clone(),
            }
            .into_function(),
            _ => found,
        };
        let mut cache = self.cache.lock();
        let (ptr, unused) = match cache.get(name) {
            // Another thread got there first: keep its entry (compiled code may hold it).
            Some(existing) => (existing.object().as_ptr(), Some(found)),
            None => {
                let ptr = found.object().as_ptr();
                cache.insert(name.to_string(), found);
                (ptr, None)
            }
        };
        drop(cache);
        drop(unused);
        Ok(ptr)
    }
}

/// Addresses of live library contexts, to tell them from module handles.
pub(super) static CONTEXTS: Lazy<Mutex<std::collections::HashSet<usize>>> =
    Lazy::new(Default::default);

/// Resolves `name` for compiled code given its context pointer: a library context of tvmrt, or
/// (as TVM allows) a module handle. Returns a borrowed function handle.
///
/// # Safety
/// `ctx` is a context pointer tvmrt stored in a loaded library, or a live module handle.
pub(crate) unsafe fn env_lookup(ctx: *mut c_void, name: &str) -> Result<*mut c_void> {
    if ctx.is_null() {
        return Err(Error::value(format!(
            "cannot look up `{name}`: the library context is NULL (was the library loaded by \
             tvmrt?)"
        )));
    }
    if CONTEXTS.lock().contains(&(ctx as usize)) {
        // SAFETY: a registered context lives until its library is closed, which cannot happen
        // while code of that library (the caller) runs.
        let c = unsafe { &*ctx.cast::<LibraryContext>() };
        return c.lookup(name);
    }
    // SAFETY: per the contract, otherwise a live module handle.
    let m = unsafe { Module::from_handle_borrowed(ctx, "library_ctx")? };
    m.env_lookup(name)
}

/// The context symbols: the runtime's own, then those registered with
/// `TVMFFIEnvModRegisterContextSymbol` (later entries win, as in tvm-ffi).
static EXTRA_CONTEXT_SYMBOLS: Lazy<RwLock<Vec<(String, usize)>>> = Lazy::new(Default::default);

/// Registers a pointer to store into the variable `name` of every library loaded from now on.
pub fn register_context_symbol(name: &str, value: *mut c_void) {
    EXTRA_CONTEXT_SYMBOLS
        .write()
        .push((name.to_string(), value as usize));
}

// The C functions whose addresses a loaded library's context variables receive: tvmrt's own
// exports, named as the C API names them (they are defined in `capi`; the linker resolves these
// declarations to them, as TVM's loader takes the addresses of its own exports). Only the
// addresses are taken here, so the declared signature does not matter and none is called.
// Kept out of tvmrt.h: these are the exports themselves, declared there from `capi`.
/// cbindgen:ignore
mod exports {
    extern "C" {
        pub fn TVMFFIFunctionCall();
        pub fn TVMFFIErrorSetRaisedFromCStr();
        pub fn TVMFFIEnvModLookupFromImports();
        pub fn TVMFFIHandleInitOnce();
        pub fn TVMFuncCall();
        pub fn TVMAPISetLastError();
        pub fn TVMBackendGetFuncFromEnv();
        pub fn TVMBackendAllocWorkspace();
        pub fn TVMBackendFreeWorkspace();
        pub fn TVMBackendParallelLaunch();
        pub fn TVMBackendParallelBarrier();
    }
}

pub(crate) fn context_symbols() -> Vec<(String, usize)> {
    // Sources: tvm-ffi's registrations in TVM 0.27 `src/runtime/module.cc`
    // (TVM_INIT_CONTEXT_FUNC) and TVM <= 0.20 `InitContextFunctions`.
    // Each entry is `__` + the export's name, pointing at that export.
    macro_rules! context_table {
        ($($func:ident,)*) => {
            [$((concat!("__", stringify!($func)), exports::$func as *const () as usize)),*]
        };
    }
    let builtin: [(&str, usize); 11] = context_table!(
        TVMFFIFunctionCall,
        TVMFFIErrorSetRaisedFromCStr,
        TVMFFIEnvModLookupFromImports,
        TVMFFIHandleInitOnce,
        TVMFuncCall,
        TVMAPISetLastError,
        TVMBackendGetFuncFromEnv,
        TVMBackendAllocWorkspace,
        TVMBackendFreeWorkspace,
        TVMBackendParallelLaunch,
        TVMBackendParallelBarrier,
    );
    let mut all: Vec<(String, usize)> = builtin.iter().map(|&(n, p)| (n.to_string(), p)).collect();
    all.extend(EXTRA_CONTEXT_SYMBOLS.read().iter().cloned());
    all
}
