//! The global function table shared by both C doors.
//!
//! A read-write lock guards the map, and it is never held while a function runs: lookups clone
//! the function reference out first. A function may therefore look up, register or call others
//! from inside a call, from any thread.
//!
//! The registry knows no subsystem. The first time the table is touched it is filled with the
//! built-in functions (loaders, module helpers, VM builtins, ...) that the library's top
//! (`src/globals.rs`) collects from every subsystem and hands in through one link-time symbol.

use std::collections::HashMap;

use once_cell::sync::Lazy;
use parking_lot::RwLock;

use super::Function;
use crate::error::{Error, Result};

/// The built-in functions, by name, as the library's top hands them in.
pub type Globals = Vec<(&'static str, Function)>;

/// The symbol by which the registry asks the library's top for [`Globals`] (versioned: a
/// change of its type is a new name).
macro_rules! globals_symbol {
    () => {
        "__tvmrt_builtin_globals_v1"
    };
}
pub(crate) use globals_symbol;

extern "Rust" {
    // Defined by `src/globals.rs` with `#[export_name = globals_symbol!()]` and this exact
    // signature. The linker must resolve it, so every link of the library (cdylib, a C program
    // linking libtvmrt.a, a Rust crate using the rlib) keeps the code that defines it and every
    // subsystem that code names.
    #[link_name = globals_symbol!()]
    fn builtin_globals() -> Globals;
}

static TABLE: Lazy<RwLock<HashMap<String, Function>>> = Lazy::new(|| {
    // SAFETY: the symbol is defined once, in this crate (src/globals.rs), as a safe Rust
    // function of the signature declared above (both sides spell its type as `Globals`); it
    // takes no arguments and touches no registry state.
    let globals = unsafe { builtin_globals() };
    let mut map = HashMap::with_capacity(globals.len() + 64);
    for (name, f) in globals {
        map.insert(name.to_string(), f);
    }
    RwLock::new(map)
});

/// Installs the built-in functions now if nothing has touched the table yet. With them the
/// library's reflected types and their type attributes are registered, which C++ clients may
/// read (a type attribute column, a type's metadata) before they call any function.
pub fn ensure_builtins() {
    Lazy::force(&TABLE);
}

/// Metadata (tvm-ffi's JSON text: type schema, ...) of functions registered with some.
static METADATA: Lazy<RwLock<HashMap<String, String>>> = Lazy::new(|| RwLock::new(HashMap::new()));

/// Registers `f` as `name` with tvm-ffi's metadata text (`TVMFFIMethodInfo::metadata`).
pub fn register_with_metadata(
    name: &str,
    f: Function,
    metadata: &str,
    allow_override: bool,
) -> Result<()> {
    register(name, f, allow_override)?;
    if !metadata.is_empty() {
        METADATA
            .write()
            .insert(name.to_string(), metadata.to_string());
    }
    Ok(())
}

/// The metadata text of a registered function (empty when it has none), or a `RuntimeError`
/// when `name` is not registered (`ffi.GetGlobalFuncMetadata`).
pub fn metadata(name: &str) -> Result<String> {
    if get(name).is_none() {
        return Err(Error::runtime(format!(
            "Global Function is not found: {name}"
        )));
    }
    Ok(METADATA.read().get(name).cloned().unwrap_or_default())
}

/// Registers `f` as `name`. Without `allow_override`, an existing name is an error.
pub fn register(name: &str, f: Function, allow_override: bool) -> Result<()> {
    if name.is_empty() {
        return Err(Error::value("global function name must not be empty"));
    }
    let previous = {
        let mut table = TABLE.write();
        if !allow_override && table.contains_key(name) {
            return Err(Error::value(format!(
                "Global function `{name}` is already registered"
            )));
        }
        table.insert(name.to_string(), f)
    };
    METADATA.write().remove(name);
    // The replaced function is released after the lock is dropped: its finalizer may call back
    // into the registry.
    drop(previous);
    Ok(())
}

/// Looks up `name`.
pub fn get(name: &str) -> Option<Function> {
    TABLE.read().get(name).cloned()
}

/// Looks up `name`, or an `AttributeError` naming it.
pub fn get_required(name: &str) -> Result<Function> {
    get(name).ok_or_else(|| Error::attribute(format!("global function `{name}` is not registered")))
}

/// Removes `name`; returns whether it was registered.
pub fn remove(name: &str) -> bool {
    let removed = TABLE.write().remove(name);
    METADATA.write().remove(name);
    removed.is_some()
}

/// All registered names, sorted.
pub fn list_names() -> Vec<String> {
    let mut names: Vec<String> = TABLE.read().keys().cloned().collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Any;

    #[test]
    fn register_get_override_remove() {
        let one = Function::from_fn(|_| Ok(Any::from(1i64)));
        let two = Function::from_fn(|_| Ok(Any::from(2i64)));
        register("test.registry.f", one, false).unwrap();
        let err = register("test.registry.f", two.clone(), false).unwrap_err();
        assert!(err.message.contains("already registered"), "{err}");
        register("test.registry.f", two, true).unwrap();
        let f = get("test.registry.f").unwrap();
        assert_eq!(f.call(&[]).unwrap().view().as_i64(), Some(2));
        assert!(list_names().iter().any(|n| n == "test.registry.f"));
        assert!(remove("test.registry.f"));
        assert!(!remove("test.registry.f"));
        assert!(get("test.registry.f").is_none());
    }

    #[test]
    fn functions_may_reenter_the_registry() {
        let inner = Function::from_fn(|args| Ok(Any::from(args[0].expect_i64("x")? * 2)));
        register("test.registry.inner", inner, true).unwrap();
        let outer = Function::from_fn(|args| {
            let x = args[0].expect_i64("x")?;
            // Register and look up while being called: the table lock is not held.
            register(
                "test.registry.made_inside",
                Function::from_fn(|_| Ok(Any::none())),
                true,
            )?;
            get_required("test.registry.inner")?.call(&[x.into()])
        });
        register("test.registry.outer", outer, true).unwrap();
        let r = get("test.registry.outer")
            .unwrap()
            .call(&[21i64.into()])
            .unwrap();
        assert_eq!(r.view().as_i64(), Some(42));
        assert!(get("test.registry.made_inside").is_some());
    }
}
