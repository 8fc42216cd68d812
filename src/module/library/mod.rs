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
//!
//! The parts: `function` (a compiled function as a function object, and the trampolines that
//! call it in either ABI), `context` (what a library's context variables point at, and the
//! context symbols), `state` (a loaded library: its symbols, markers and module), and `dso`
//! (opening a shared library with `dlopen`).

mod context;
mod dso;
mod function;
mod state;

pub use context::register_context_symbol;
pub(crate) use context::{context_symbols, env_lookup, LibraryContext};
pub(crate) use dso::open_dso;
pub use function::LibraryFunction;
// The graph executor calls classic kernels directly.
#[cfg(feature = "graph")]
pub(crate) use function::invoke_classic;
pub(crate) use function::{library_classic_safe_call, library_function_of, take_classic_result};
pub use state::{LibraryModule, LibraryState};

use std::ffi::c_void;
use std::ptr::NonNull;

use super::Module;
use crate::error::Result;

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

/// A library module tree over any symbol source (the system library uses this): context
/// variables are filled and the embedded blob, if any, is restored (TVM's
/// `CreateLibraryModule`).
pub fn create_library_module(source: Box<dyn SymbolSource>) -> Result<Module> {
    let state = LibraryState::new(source, None);
    super::loader::build_library_tree(state)
}
