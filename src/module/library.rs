//! The library module: functions compiled by TVM into a shared library (or registered as a
//! system library), found by symbol, for both of TVM's ABIs.
//!
//! Per function name `f` (TVM 0.27 tvm-ffi `src/ffi/extra/library_module.cc`; TVM <= 0.20
//! `src/runtime/library_module.cc`):
//! - `__tvm_ffi_f` is a tvm-ffi function `int(void* self, const TVMFFIAny* args, int32_t n,
//!   TVMFFIAny* result)`. It is called with a NULL `self`, as tvm-ffi does.
//! - otherwise `f` is a classic function with the backend signature
//!   `int(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource)`,
//!   called with a NULL resource handle and its return value moved to the caller, as TVM did.
//! - `__tvm_main__` names the classic entry: the symbol `__tvm_main__` holds the entry
//!   function's name as a C string. The tvm-ffi entry `main` is simply `__tvm_ffi_main`.
//!
//! Safety checks TVM does not make: on glibc every symbol is checked (with `dladdr1`) to be
//! defined by the library itself (`dlsym` on a handle also searches the library's dependencies,
//! so `malloc` would otherwise be "found"), functions must be function symbols and context
//! pointers data symbols, and the blob may not extend past its symbol's size. Classic lookups
//! skip names starting with `__` (runtime helpers like `__truncsfhf2`, and the `__tvm*`
//! variables), and a library that carries only one ABI's markers is only searched for that ABI.
//!
//! # Opening
//!
//! Shared libraries are opened with `RTLD_NOW | RTLD_LOCAL`: NOW so a missing runtime symbol is
//! a load error with the linker's message instead of a crash at the first call (TVM uses LAZY);
//! LOCAL so the kernels of two libraries never interpose on each other. Kernels import a few
//! plain runtime symbols (TVM 0.27: `TVMFFIErrorSetRaisedFromCStrParts`), which must be visible
//! globally: they are when the program links `libtvmrt.so`, or links tvmrt statically and exports
//! its symbols (`-rdynamic`); when tvmrt was itself loaded with `RTLD_LOCAL` (or lives inside a
//! plugin), the first library that misses them makes tvmrt's object global
//! ([`super::runtime_scope`]) and is opened again.
//!
//! # Context pointers and sharing
//!
//! At the first load of a file, every context function-pointer variable the library defines is
//! filled (tvm-ffi: `__TVMFFIFunctionCall`, `__TVMFFIErrorSetRaisedFromCStr`,
//! `__TVMFFIEnvModLookupFromImports`, `__TVMFFIHandleInitOnce`; classic: `__TVMFuncCall`,
//! `__TVMAPISetLastError`, `__TVMBackendGetFuncFromEnv`; both: `__TVMBackendAllocWorkspace`,
//! `__TVMBackendFreeWorkspace`, `__TVMBackendParallelLaunch`, `__TVMBackendParallelBarrier`;
//! plus any registered with `TVMFFIEnvModRegisterContextSymbol`), and the context variables
//! `__tvm_ffi__library_ctx` / `__tvm_module_ctx` are set.
//!
//! TVM points the context variable at a module object, which dangles when the same file is
//! loaded twice and the later load is freed first (the variable lives in the one mapped copy).
//! tvmrt instead points it at a context owned by the loaded file's state, which every load of
//! the same file (same device and inode, as the dynamic linker identifies it) shares and which
//! lives exactly as long as the library stays mapped. Lookups through it search the imports of
//! a live load's module (the `_lib` module for tvm-ffi, the root for classic, as TVM) and then
//! the global registry, and cache the result there, so the borrowed handles compiled code keeps
//! in its static variables stay valid while the library is loaded. When the last module of a
//! file is freed, the file is closed under the table lock, so a concurrent load either shares
//! the state or reopens the file after it is unmapped.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex, RwLock};

use super::{Module, ModuleKind};
use crate::abi::{type_code, type_index, TVMBackendPackedCFunc, TVMFFIAny, TVMValue};
use crate::error::{Error, Result};
use crate::function::{Function, FunctionImpl, FunctionObj};
use crate::object::WeakObjectRef;
use crate::value::classic::{classic_to_raw, ClassicArgs};
use crate::value::{Any, AnyView};

/// The tvm-ffi function symbol prefix (`symbol::tvm_ffi_symbol_prefix`).
pub const FFI_SYMBOL_PREFIX: &str = "__tvm_ffi_";
/// tvm-ffi: the library context variable (`symbol::tvm_ffi_library_ctx`).
pub const FFI_LIBRARY_CTX: &str = "__tvm_ffi__library_ctx";
/// tvm-ffi: the entry function (`symbol::tvm_ffi_main`).
pub const FFI_MAIN: &str = "__tvm_ffi_main";
/// Classic: the module context variable (`runtime::symbol::tvm_module_ctx`).
pub const CLASSIC_MODULE_CTX: &str = "__tvm_module_ctx";
/// Classic: the variable holding the entry function's name (`runtime::symbol::tvm_module_main`).
pub const CLASSIC_MAIN: &str = "__tvm_main__";

/// What kind of symbol an address is, when the platform can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymbolKind {
    /// A function (code).
    Function,
    /// A data object.
    Data,
    /// The platform cannot tell.
    Unknown,
}

/// A symbol found in a [`SymbolSource`].
#[derive(Clone, Copy, Debug)]
pub struct SymbolInfo {
    /// Its address.
    pub addr: NonNull<c_void>,
    /// Function or data, when known.
    pub kind: SymbolKind,
    /// Its size in bytes, when known (ELF `st_size`).
    pub size: Option<usize>,
}

/// Where a library module finds its symbols: a loaded shared library, or the system library's
/// table (TVM's `Library` class).
pub trait SymbolSource: Send + Sync + 'static {
    /// The symbol `name` defined by this source, if any.
    fn lookup(&self, name: &str) -> Option<SymbolInfo>;
    /// A short description for messages (the file path).
    fn describe(&self) -> String;
}

/// The ABI a compiled function uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abi {
    /// `__tvm_ffi_<name>`, `TVMFFISafeCallType`.
    Ffi,
    /// `<name>`, `TVMBackendPackedCFunc`.
    Classic,
}

/// A compiled function handed out as a function object (the `self` handle of its cell; see
/// [`library_ffi_safe_call`] and [`library_classic_safe_call`], the trampolines that call it).
pub struct LibraryFunction {
    /// The function's address.
    pub symbol: NonNull<c_void>,
    /// How to call it.
    pub abi: Abi,
    /// Identity of the [`LibraryState`] it comes from.
    pub(crate) state_id: usize,
    /// Keeps the module (and so the library) alive. `None` only for the entries of a library's
    /// own lookup cache, which the library outlives by construction.
    pub(crate) owner: Option<Module>,
    /// The name it was looked up by, for messages.
    pub name: Box<str>,
}

// SAFETY: the symbol is code in a library kept loaded by `owner` (or by the state that owns the
// cache holding this function); compiled functions are callable from any thread.
unsafe impl Send for LibraryFunction {}
// SAFETY: as above; nothing is mutated.
unsafe impl Sync for LibraryFunction {}

impl LibraryFunction {
    fn into_function(self) -> Function {
        let safe_call = match self.abi {
            Abi::Ffi => library_ffi_safe_call,
            Abi::Classic => library_classic_safe_call,
        };
        Function::from_extern_c(
            Box::into_raw(Box::new(self)).cast(),
            safe_call,
            Some(library_function_free),
        )
    }

    /// Calls a classic function with tvm-ffi arguments (TVM's `WrapPackedFunc`).
    pub(crate) fn call_classic(&self, args: &[AnyView<'_>]) -> Result<Any> {
        let mut c = ClassicArgs::from_views(args)?;
        let f = self
            .classic_symbol()
            .ok_or_else(|| Error::runtime(format!("`{}` is not a classic function", self.name)))?;
        let mut ret = TVMValue::default();
        let mut code = type_code::NULLPTR;
        // SAFETY: the arrays hold `args.len()` entries and outlive the call; the return slots
        // are ours.
        let status = unsafe {
            f(
                c.values_mut().as_mut_ptr(),
                c.codes_mut().as_mut_ptr(),
                args.len() as i32,
                &mut ret,
                &mut code,
                std::ptr::null_mut(),
            )
        };
        if status != 0 {
            return Err(crate::raised::take_raised().unwrap_or_else(|| {
                Error::runtime(format!(
                    "compiled function `{}` returned {status} without setting an error",
                    self.name
                ))
            }));
        }
        // SAFETY: the callee wrote this value and code for us.
        unsafe { take_classic_result(ret, code) }
    }

    /// The symbol as a classic backend function, when this is one: what `TVMFuncCall` calls
    /// with its caller's arrays unchanged, as TVM does.
    pub(crate) fn classic_symbol(&self) -> Option<TVMBackendPackedCFunc> {
        match self.abi {
            // SAFETY: the symbol was found as the classic function `name`; TVM's backend
            // signature.
            Abi::Classic => Some(unsafe {
                std::mem::transmute::<*mut c_void, TVMBackendPackedCFunc>(self.symbol.as_ptr())
            }),
            Abi::Ffi => None,
        }
    }
}

/// Takes the value a classic compiled function returned: objects move to the caller (TVM's
/// `TVMRetValue::MoveFromCHost`), plain values and strings are copied right away.
///
/// # Safety
/// `ret` and `code` are what the callee wrote, handing over any object.
pub(crate) unsafe fn take_classic_result(ret: TVMValue, code: i32) -> Result<Any> {
    if code == type_code::NULLPTR {
        return Ok(Any::none());
    }
    // SAFETY: per the contract.
    let raw = unsafe { classic_to_raw(ret, code)? };
    if raw.type_index >= type_index::STATIC_OBJECT_BEGIN {
        // SAFETY: the callee gave up its reference.
        crate::value::classic::owned_from_classic(unsafe { Any::from_raw(raw) })
    } else {
        // SAFETY: plain values and strings are copied before the callee's storage changes.
        Ok(unsafe { AnyView::from_raw(raw) }.to_owned_any())
    }
}

/// `safe_call` of a tvm-ffi compiled function: calls it with a NULL `self`, as tvm-ffi's
/// library module does.
///
/// # Safety
/// The tvm-ffi calling convention; `handle` is a `LibraryFunction` of a live function object.
pub(crate) unsafe extern "C" fn library_ffi_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    // SAFETY: per the contract.
    let lf = unsafe { &*handle.cast::<LibraryFunction>() };
    // SAFETY: the symbol is a tvm-ffi function of a library kept loaded by `lf`.
    let f: crate::abi::TVMFFISafeCallType = unsafe { std::mem::transmute(lf.symbol.as_ptr()) };
    // SAFETY: forwarding the caller's arguments; compiled code reports its own errors.
    unsafe { f(std::ptr::null_mut(), args, num_args, result) }
}

/// `safe_call` of a classic compiled function: converts to `TVMValue` + type codes.
///
/// # Safety
/// As [`library_ffi_safe_call`].
pub(crate) unsafe extern "C" fn library_classic_safe_call(
    handle: *mut c_void,
    args: *const TVMFFIAny,
    num_args: i32,
    result: *mut TVMFFIAny,
) -> i32 {
    crate::unwind_guard::run("compiled function call", || {
        // SAFETY: per the contract.
        let lf = unsafe { &*handle.cast::<LibraryFunction>() };
        // SAFETY: per the calling convention.
        let views = unsafe { AnyView::slice_from_raw(args, num_args.max(0) as usize) };
        let value = lf.call_classic(views)?;
        if !result.is_null() {
            // SAFETY: the caller's writable result slot receives an owned value.
            unsafe { result.write(value.into_raw()) };
        }
        Ok(())
    })
}

/// Releases the `LibraryFunction` behind a function object.
///
/// # Safety
/// `handle` came from `Box::into_raw` of a `LibraryFunction`, released once.
pub(crate) unsafe extern "C" fn library_function_free(handle: *mut c_void) {
    crate::unwind_guard::run_or("library function deleter", (), || {
        // SAFETY: per the contract.
        drop(unsafe { Box::from_raw(handle.cast::<LibraryFunction>()) });
        Ok(())
    })
}

/// Whether `safe_call` is one of the library trampolines above.
pub(crate) fn is_library_trampoline(safe_call: crate::abi::TVMFFISafeCallType) -> bool {
    let p = safe_call as usize;
    p == library_ffi_safe_call as *const () as usize
        || p == library_classic_safe_call as *const () as usize
}

/// The library function behind `f`, if `f` is one.
pub(crate) fn library_function_of(f: &Function) -> Option<&LibraryFunction> {
    let obj = f.object().downcast_ref::<FunctionObj>()?;
    match &obj.imp {
        FunctionImpl::ExternC {
            handle, safe_call, ..
        } if is_library_trampoline(*safe_call) => {
            // SAFETY: only library functions use these trampolines, with a `LibraryFunction`
            // handle that lives as long as the function object `f` keeps alive.
            Some(unsafe { &*handle.cast::<LibraryFunction>() })
        }
        _ => None,
    }
}

/// Where compiled code finds other functions: one per ABI per loaded library (the target of
/// `__tvm_ffi__library_ctx` / `__tvm_module_ctx`).
pub(crate) struct LibraryContext {
    state_id: usize,
    /// The modules of the loads whose imports are searched (the first live one is used), held
    /// weakly: the context must not keep a load alive.
    roots: Mutex<Vec<WeakObjectRef>>,
    /// Found functions; compiled code keeps borrowed handles to them.
    cache: Mutex<HashMap<String, Function>>,
}

impl LibraryContext {
    fn new(state_id: usize) -> Self {
        LibraryContext {
            state_id,
            roots: Mutex::new(Vec::new()),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn register_root(&self, module: &Module) {
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
        let found = super::lookup_in_imports_then_global(&imports, name)?;
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
static CONTEXTS: Lazy<Mutex<std::collections::HashSet<usize>>> = Lazy::new(Default::default);

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

/// Which ABI's marker symbols a library defines.
#[derive(Clone, Copy, Debug)]
struct AbiMarkers {
    ffi: bool,
    classic: bool,
}

/// One loaded library (shared by every load of the same file).
pub struct LibraryState {
    ffi_ctx: LibraryContext,
    classic_ctx: LibraryContext,
    markers: AbiMarkers,
    key: Option<FileKey>,
    /// Taken in `drop`, to close the library at the right moment.
    source: Option<Box<dyn SymbolSource>>,
}

/// How the dynamic linker identifies a file: device and inode.
type FileKey = (u64, u64);

/// Open libraries by file identity.
static DSOS: Lazy<Mutex<HashMap<FileKey, Weak<LibraryState>>>> = Lazy::new(Default::default);
/// Signalled when a library is closed (a loader may wait for a dying state to finish).
static DSO_CLOSED: Condvar = Condvar::new();

impl LibraryState {
    /// A state over `source`: fills the context variables and function pointers it defines.
    pub(crate) fn new(source: Box<dyn SymbolSource>, key: Option<FileKey>) -> Arc<LibraryState> {
        let has = |n: &str| source.lookup(n).is_some();
        let markers = AbiMarkers {
            ffi: has(FFI_LIBRARY_CTX) || has(super::blob::FFI_BLOB_SYMBOL) || has(FFI_MAIN),
            classic: has(CLASSIC_MODULE_CTX)
                || has(super::blob::CLASSIC_BLOB_SYMBOL)
                || has(CLASSIC_MAIN),
        };
        let state = Arc::new_cyclic(|w: &Weak<LibraryState>| {
            let id = w.as_ptr() as usize;
            LibraryState {
                ffi_ctx: LibraryContext::new(id),
                classic_ctx: LibraryContext::new(id),
                markers,
                key,
                source: Some(source),
            }
        });
        {
            let mut ctxs = CONTEXTS.lock();
            ctxs.insert(state.ffi_ctx_ptr() as usize);
            ctxs.insert(state.classic_ctx_ptr() as usize);
        }
        state.init_context_symbols();
        state
    }

    pub(crate) fn source(&self) -> &dyn SymbolSource {
        // Present until `drop`.
        self.source
            .as_deref()
            .expect("library source present until drop")
    }

    fn ffi_ctx_ptr(&self) -> *mut c_void {
        (&self.ffi_ctx as *const LibraryContext).cast_mut().cast()
    }

    fn classic_ctx_ptr(&self) -> *mut c_void {
        (&self.classic_ctx as *const LibraryContext)
            .cast_mut()
            .cast()
    }

    fn id(&self) -> usize {
        self as *const LibraryState as usize
    }

    /// Writes `value` into the pointer variable `name` if the library defines it as data.
    fn set_pointer_variable(&self, name: &str, value: *mut c_void) {
        let Some(info) = self.source().lookup(name) else {
            return;
        };
        let too_small = info
            .size
            .is_some_and(|s| s < std::mem::size_of::<*mut c_void>());
        if info.kind == SymbolKind::Function || too_small {
            return; // Not a pointer variable: never write into code or a smaller object.
        }
        // SAFETY: a pointer-sized data variable of the library, which stays mapped while the
        // state lives; compiled code reads it only when called, after this store.
        unsafe { info.addr.as_ptr().cast::<*mut c_void>().write(value) };
        log::debug!("{}: set `{name}`", self.source().describe());
    }

    fn init_context_symbols(&self) {
        for (name, value) in context_symbols() {
            self.set_pointer_variable(&name, value as *mut c_void);
        }
        self.set_pointer_variable(FFI_LIBRARY_CTX, self.ffi_ctx_ptr());
        self.set_pointer_variable(CLASSIC_MODULE_CTX, self.classic_ctx_ptr());
    }

    /// The blob symbol's body (after the size prefix) and whether it is the tvm-ffi one.
    pub(crate) fn blob(&self) -> Result<Option<(&[u8], bool)>> {
        use super::blob::{blob_body_len, CLASSIC_BLOB_SYMBOL, FFI_BLOB_SYMBOL, SIZE_PREFIX_LEN};
        for (symbol, is_ffi) in [(FFI_BLOB_SYMBOL, true), (CLASSIC_BLOB_SYMBOL, false)] {
            let Some(info) = self.source().lookup(symbol) else {
                continue;
            };
            if info.kind == SymbolKind::Function {
                crate::bail_value!("`{symbol}` is a function, not a library blob");
            }
            if let Some(size) = info.size {
                if size < SIZE_PREFIX_LEN {
                    crate::bail_value!(
                        "truncated library blob: `{symbol}` is {size} bytes, too short for its \
                         8-byte size prefix"
                    );
                }
            }
            let base = info.addr.as_ptr().cast::<u8>();
            // SAFETY: the symbol holds at least the 8-byte prefix (checked above when the size
            // is known; TVM assumes it always).
            let prefix = unsafe { base.cast::<[u8; 8]>().read_unaligned() };
            let n = blob_body_len(prefix)?;
            if let Some(size) = info.size {
                if n > size - SIZE_PREFIX_LEN {
                    crate::bail_value!(
                        "truncated library blob: `{symbol}` says {n} bytes follow its size \
                         prefix, but the symbol holds only {}",
                        size - SIZE_PREFIX_LEN
                    );
                }
            }
            // SAFETY: in bounds of the symbol (checked when its size is known); read-only
            // data that stays mapped as long as `self` (the borrow's lifetime).
            let body = unsafe { std::slice::from_raw_parts(base.add(SIZE_PREFIX_LEN), n) };
            return Ok(Some((body, is_ffi)));
        }
        Ok(None)
    }

    fn function_symbol(&self, name: &str) -> Option<NonNull<c_void>> {
        let info = self.source().lookup(name)?;
        (info.kind != SymbolKind::Data).then_some(info.addr)
    }

    /// Finds the compiled function `name`: tvm-ffi first, then classic.
    fn find(&self, name: &str) -> Option<(NonNull<c_void>, Abi)> {
        let allow_ffi = self.markers.ffi || !self.markers.classic;
        let allow_classic = self.markers.classic || !self.markers.ffi;
        if name == CLASSIC_MAIN {
            let entry = self.classic_entry_name()?;
            return self.function_symbol(&entry).map(|p| (p, Abi::Classic));
        }
        if allow_ffi {
            if let Some(p) = self.function_symbol(&format!("{FFI_SYMBOL_PREFIX}{name}")) {
                log::debug!("`{name}`: symbol `{FFI_SYMBOL_PREFIX}{name}` (tvm-ffi ABI)");
                return Some((p, Abi::Ffi));
            }
        }
        if allow_classic && !name.starts_with("__") && !name.is_empty() {
            if let Some(p) = self.function_symbol(name) {
                log::debug!("`{name}`: symbol `{name}` (classic ABI)");
                return Some((p, Abi::Classic));
            }
        }
        None
    }

    /// The name stored in `__tvm_main__` (a C string), read within the symbol's bounds.
    fn classic_entry_name(&self) -> Option<String> {
        let info = self.source().lookup(CLASSIC_MAIN)?;
        if info.kind == SymbolKind::Function {
            return None;
        }
        let p = info.addr.as_ptr().cast::<u8>();
        let text = match info.size {
            Some(size) => {
                // SAFETY: `size` bytes of read-only data in the mapped library.
                let bytes = unsafe { std::slice::from_raw_parts(p, size) };
                let end = bytes.iter().position(|&b| b == 0)?;
                std::str::from_utf8(&bytes[..end]).ok()?.to_string()
            }
            // SAFETY: TVM's codegen emits a NUL-terminated string (size unknown here).
            None => unsafe { CStr::from_ptr(p.cast()) }
                .to_str()
                .ok()?
                .to_string(),
        };
        (!text.is_empty()).then_some(text)
    }

    /// Lets compiled code of this library search `root_imports` (classic context) and
    /// `lib_imports` (tvm-ffi context).
    pub(crate) fn register_roots(&self, classic_root: &Module, ffi_libs: &[Module]) {
        self.classic_ctx.register_root(classic_root);
        for m in ffi_libs {
            self.ffi_ctx.register_root(m);
            // Classic code searches from the root, as TVM; when the root is gone but the
            // library module lives on (a graph executor keeps only the library of its
            // factory), the library's own imports (its device modules) still serve it, where
            // TVM's context would dangle.
            if m.as_ptr() != classic_root.as_ptr() {
                self.classic_ctx.register_root(m);
            }
        }
    }
}

impl Drop for LibraryState {
    fn drop(&mut self) {
        // Cached functions of other libraries go first: their teardown may close those
        // libraries, which takes the table lock below.
        let caches = (
            std::mem::take(self.ffi_ctx.cache.get_mut()),
            std::mem::take(self.classic_ctx.cache.get_mut()),
        );
        drop(caches);
        {
            let mut ctxs = CONTEXTS.lock();
            ctxs.remove(&(self.ffi_ctx_ptr() as usize));
            ctxs.remove(&(self.classic_ctx_ptr() as usize));
        }
        let id = self.id();
        let mut table = DSOS.lock();
        if let Some(key) = self.key {
            if table.get(&key).is_some_and(|w| w.as_ptr() as usize == id) {
                table.remove(&key);
            }
        }
        // Close under the lock: a concurrent load of this file waits, then reopens it fresh.
        drop(self.source.take());
        drop(table);
        DSO_CLOSED.notify_all();
    }
}

/// The library module kind (`"library"`).
pub struct LibraryModule {
    state: Arc<LibraryState>,
}

impl LibraryModule {
    /// A library module over a shared state.
    pub(crate) fn new(state: Arc<LibraryState>) -> Self {
        LibraryModule { state }
    }
}

impl ModuleKind for LibraryModule {
    fn kind(&self) -> &str {
        "library"
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        Ok(self.state.find(name).map(|(symbol, abi)| {
            LibraryFunction {
                symbol,
                abi,
                state_id: self.state.id(),
                owner: Some(this.clone()),
                name: name.into(),
            }
            .into_function()
        }))
    }

    fn implements_function(&self, _this: &Module, name: &str) -> bool {
        self.state.find(name).is_some()
    }

    /// Binary-serializable and runnable, as tvm-ffi's `LibraryModuleObj`.
    fn property_mask(&self) -> i32 {
        3
    }

    fn function_info(&self, name: &str, what: super::FunctionInfo) -> Result<Option<String>> {
        let prefix = match what {
            super::FunctionInfo::Metadata => "__tvm_ffi__metadata_",
            super::FunctionInfo::Doc => "__tvm_ffi__doc_",
        };
        let Some(sym) = self.state.source().lookup(&format!("{prefix}{name}")) else {
            return Ok(None);
        };
        // SAFETY: tvm-ffi's export macros define these symbols as `TVMFFISafeCallType`
        // functions taking no arguments and returning a string.
        let getter = unsafe {
            std::mem::transmute::<*mut std::ffi::c_void, crate::abi::TVMFFISafeCallType>(
                sym.addr.as_ptr(),
            )
        };
        let f = Function::from_extern_c(std::ptr::null_mut(), getter, None);
        let v = f.call(&[])?;
        Ok(v.view().as_str().map(str::to_string))
    }
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

/// A shared library opened with `dlopen`.
struct Dso {
    /// Owns the `dlopen` handle: dropping it closes the library.
    _lib: libloading::os::unix::Library,
    /// The `dlopen` handle of `lib` (as an address), for direct `dlsym` probes.
    handle: usize,
    /// The library's `link_map` (glibc), to tell its own symbols from its dependencies'.
    link_map: usize,
    /// Its own dynamic symbols, looked up without `dlsym` when it has a GNU hash table.
    symbols: Option<super::dynsym::DynSymbols>,
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
            Err(e) if super::tvm_ffi_alias::is_missing_alias(&text_of(&e)) => {
                if super::tvm_ffi_alias::ensure_loaded() {
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
            if super::runtime_scope::is_missing_runtime_symbol(&text_of(e)) {
                match super::runtime_scope::ensure_global() {
                    Ok(true) => lib = open(),
                    Ok(false) => {}
                    Err(why) => promotion_failed = Some(why),
                }
            }
        }
        let lib = lib.map_err(|e| {
            let text = text_of(&e);
            let hint = if super::runtime_scope::is_missing_runtime_symbol(&text) {
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
            } else if super::tvm_ffi_alias::is_missing_alias(&text) {
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
            symbols: unsafe { super::dynsym::DynSymbols::of(link_map) },
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
                super::dynsym::Lookup::Found(info) => return Some(info),
                super::dynsym::Lookup::Absent => return None,
                super::dynsym::Lookup::Ask => {}
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

    use super::super::dynsym::ElfSym;
    use super::{SymbolInfo, SymbolKind};

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
    let name = unsafe { CStr::from_ptr(head.l_name) }.to_str().ok()?;
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn loaded_file_name(_link_map: usize) -> Option<String> {
    None
}

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
/// (TVM would refuse it). A path is checked ([`super::elf_check`]) before it is mapped.
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
    super::elf_check::check_elf_file(path)?;
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

/// A library module tree over any symbol source (the system library uses this): context
/// variables are filled and the embedded blob, if any, is restored (TVM's
/// `CreateLibraryModule`).
pub fn create_library_module(source: Box<dyn SymbolSource>) -> Result<Module> {
    let state = LibraryState::new(source, None);
    super::loader::build_library_tree(state)
}
