//! A loaded library ([`LibraryState`]): its symbols, which ABI's markers it defines, its
//! context, one state per file however often it is opened, and its module.

use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex};

use super::context::CONTEXTS;
use super::{
    context_symbols, Abi, LibraryContext, LibraryFunction, SymbolKind, SymbolSource, CLASSIC_MAIN,
    CLASSIC_MODULE_CTX, FFI_LIBRARY_CTX, FFI_MAIN, FFI_SYMBOL_PREFIX,
};
use crate::error::Result;
use crate::function::Function;
use crate::module::{Module, ModuleKind};

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
pub(super) type FileKey = (u64, u64);

/// Open libraries by file identity.
pub(super) static DSOS: Lazy<Mutex<HashMap<FileKey, Weak<LibraryState>>>> =
    Lazy::new(Default::default);
/// Signalled when a library is closed (a loader may wait for a dying state to finish).
pub(super) static DSO_CLOSED: Condvar = Condvar::new();

impl LibraryState {
    /// A state over `source`: fills the context variables and function pointers it defines.
    pub(crate) fn new(source: Box<dyn SymbolSource>, key: Option<FileKey>) -> Arc<LibraryState> {
        let has = |n: &str| source.lookup(n).is_some();
        let markers = AbiMarkers {
            ffi: has(FFI_LIBRARY_CTX) || has(crate::module::blob::FFI_BLOB_SYMBOL) || has(FFI_MAIN),
            classic: has(CLASSIC_MODULE_CTX)
                || has(crate::module::blob::CLASSIC_BLOB_SYMBOL)
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
        use crate::module::blob::{
            blob_body_len, CLASSIC_BLOB_SYMBOL, FFI_BLOB_SYMBOL, SIZE_PREFIX_LEN,
        };
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

    fn function_info(
        &self,
        name: &str,
        what: crate::module::FunctionInfo,
    ) -> Result<Option<String>> {
        let prefix = match what {
            crate::module::FunctionInfo::Metadata => "__tvm_ffi__metadata_",
            crate::module::FunctionInfo::Doc => "__tvm_ffi__doc_",
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
