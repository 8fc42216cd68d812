//! The system library's symbol table: functions compiled into the executable (a static TVM
//! deployment) register themselves at start-up through `TVMBackendRegisterSystemLibSymbol` /
//! `TVMFFIEnvModRegisterSystemLibSymbol`, and `runtime.SystemLib` / `ffi.SystemLib` expose
//! them as a library module (tvm-ffi `src/ffi/extra/library_module_system_lib.cc`).

use std::collections::HashMap;
use std::ffi::c_void;

use once_cell::sync::Lazy;
use parking_lot::RwLock;

/// A registered symbol's address (a function or data pointer from the executable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolAddr(pub *mut c_void);

// SAFETY: the address is only a value here; whoever registers it vouches that it stays valid
// for the life of the process (it points into the executable image).
unsafe impl Send for SymbolAddr {}
// SAFETY: as above.
unsafe impl Sync for SymbolAddr {}

static SYMBOLS: Lazy<RwLock<HashMap<String, SymbolAddr>>> = Lazy::new(Default::default);

/// Registers `name` at `addr`. Re-registering a name replaces it, as in tvm-ffi (which warns).
pub fn register_symbol(name: &str, addr: *mut c_void) {
    SYMBOLS.write().insert(name.to_string(), SymbolAddr(addr));
}

/// The address registered for `name`.
pub fn lookup_symbol(name: &str) -> Option<*mut c_void> {
    SYMBOLS.read().get(name).map(|s| s.0)
}

/// Every registered name, sorted.
pub fn symbol_names() -> Vec<String> {
    let mut v: Vec<String> = SYMBOLS.read().keys().cloned().collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_and_lookup() {
        let mut x = 5u8;
        register_symbol("test.syslib.x", (&mut x as *mut u8).cast());
        assert_eq!(
            lookup_symbol("test.syslib.x"),
            Some((&mut x as *mut u8).cast())
        );
        assert!(lookup_symbol("test.syslib.missing").is_none());
        assert!(symbol_names().contains(&"test.syslib.x".to_string()));
    }
}
