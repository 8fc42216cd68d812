//! The system library: kernels compiled into the executable itself (a static deployment)
//! register their symbols at start-up through `TVMBackendRegisterSystemLibSymbol` /
//! `TVMFFIEnvModRegisterSystemLibSymbol`, and `ffi.SystemLib([prefix])` /
//! `runtime.SystemLib([prefix])` return a library module that finds functions in that table
//! (tvm-ffi `src/ffi/extra/library_module_system_lib.cc`). One module per prefix is kept, so
//! every lookup sees the same module and its cached imports.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;

use once_cell::sync::Lazy;
use parking_lot::{Mutex, RwLock};

use super::library::{create_library_module, SymbolInfo, SymbolKind, SymbolSource};
use super::Module;
use crate::error::Result;
use crate::function::Function;
use crate::value::{Any, AnyView};

/// tvm-ffi's prefix of compiled functions (`symbol::tvm_ffi_symbol_prefix`).
const FFI_SYMBOL_PREFIX: &str = "__tvm_ffi_";

/// A registered address: code or data in the executable image.
#[derive(Clone, Copy)]
struct SymbolAddr(NonNull<c_void>);

// SAFETY: only an address; the registrant vouches that it stays valid for the process's life
// (it points into the executable image).
unsafe impl Send for SymbolAddr {}
// SAFETY: as above.
unsafe impl Sync for SymbolAddr {}

static SYMBOLS: Lazy<RwLock<HashMap<String, SymbolAddr>>> = Lazy::new(Default::default);
static MODULES: Lazy<Mutex<HashMap<String, Module>>> = Lazy::new(Default::default);

/// Registers `name` at `addr`. Re-registering a name replaces it, as in tvm-ffi.
pub fn register_symbol(name: &str, addr: *mut c_void) {
    if let Some(addr) = NonNull::new(addr) {
        SYMBOLS.write().insert(name.to_string(), SymbolAddr(addr));
    }
}

/// The address registered for `name`.
pub fn lookup_symbol(name: &str) -> Option<*mut c_void> {
    SYMBOLS.read().get(name).map(|s| s.0.as_ptr())
}

/// Every registered name, sorted.
pub fn symbol_names() -> Vec<String> {
    let mut v: Vec<String> = SYMBOLS.read().keys().cloned().collect();
    crate::cold_sort::sort(&mut v);
    v
}

/// The symbol table seen through a prefix: `name` is tried as `<prefix><name>` first, and
/// compiled functions `__tvm_ffi_<name>` as `__tvm_ffi_<prefix><name>` first.
struct SystemLibrary {
    prefix: String,
}

impl SymbolSource for SystemLibrary {
    fn lookup(&self, name: &str) -> Option<SymbolInfo> {
        let prefixed = match name.strip_prefix(FFI_SYMBOL_PREFIX) {
            Some(rest) => format!("{FFI_SYMBOL_PREFIX}{}{rest}", self.prefix),
            None => format!("{}{name}", self.prefix),
        };
        let table = SYMBOLS.read();
        let addr = table.get(&prefixed).or_else(|| table.get(name))?;
        Some(SymbolInfo {
            addr: addr.0,
            kind: SymbolKind::Unknown,
            size: None,
        })
    }

    fn describe(&self) -> String {
        if self.prefix.is_empty() {
            "system library".to_string()
        } else {
            format!("system library (prefix `{}`)", self.prefix)
        }
    }
}

/// The system-library module for `prefix` (created on first use, then shared).
pub fn system_lib(prefix: &str) -> Result<Module> {
    let mut modules = MODULES.lock();
    if let Some(m) = modules.get(prefix) {
        return Ok(m.clone());
    }
    let m = create_library_module(Box::new(SystemLibrary {
        prefix: prefix.to_string(),
    }))?;
    modules.insert(prefix.to_string(), m.clone());
    Ok(m)
}

/// `ffi.SystemLib` and `runtime.SystemLib`: an optional prefix argument.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    fn get(args: &[AnyView<'_>]) -> Result<Any> {
        let prefix = match args.first() {
            Some(v) if !v.is_none() => v.expect_str("symbol_prefix")?,
            _ => "",
        };
        Ok(system_lib(prefix)?.into())
    }
    vec![
        ("ffi.SystemLib", Function::from_fn(get)),
        ("runtime.SystemLib", Function::from_fn(get)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::TVMFFIAny;

    unsafe extern "C" fn plus_one(
        _: *mut c_void,
        args: *const TVMFFIAny,
        n: i32,
        out: *mut TVMFFIAny,
    ) -> i32 {
        assert_eq!(n, 1);
        // SAFETY: one int argument and a writable result, per the test's call.
        unsafe {
            let x = AnyView::from_raw(*args).as_i64().unwrap();
            *out = Any::from(x + 1).into_raw();
        }
        0
    }

    #[test]
    fn registered_functions_are_found_with_and_without_prefix() {
        register_symbol("__tvm_ffi_syslib_test_inc", plus_one as *mut c_void);
        register_symbol("__tvm_ffi_pfx_syslib_test_inc2", plus_one as *mut c_void);
        let m = system_lib("").unwrap();
        assert!(std::ptr::eq(m.as_ptr(), system_lib("").unwrap().as_ptr()));
        let f = m.get_function("syslib_test_inc", false).unwrap().unwrap();
        assert_eq!(f.call(&[41i64.into()]).unwrap().view().as_i64(), Some(42));
        let p = system_lib("pfx_").unwrap();
        let g = p.get_function("syslib_test_inc2", false).unwrap().unwrap();
        assert_eq!(g.call(&[1i64.into()]).unwrap().view().as_i64(), Some(2));
        // Without the prefix the unprefixed name is the fallback.
        assert!(p.get_function("syslib_test_inc", false).unwrap().is_some());
        assert!(m.get_function("syslib_missing", false).unwrap().is_none());
        assert!(symbol_names().contains(&"__tvm_ffi_syslib_test_inc".to_string()));
        assert!(lookup_symbol("__tvm_ffi_syslib_test_inc").is_some());
    }
}
