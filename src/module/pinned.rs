//! Modules kept alive for the life of the process: tvm-ffi's `ModuleGlobals`
//! (`ffi.ModuleGlobalsAdd`, `ffi.ModuleGlobalsRemove`), which `tvm_ffi.load_module` uses by
//! default so that functions a library registered stay callable while it is loaded. A module is
//! kept once however often it is added.

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use super::Module;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::value::{Any, AnyView};

static PINNED: Lazy<Mutex<Vec<Module>>> = Lazy::new(|| Mutex::new(Vec::new()));

/// Keeps `m` alive until [`unpin`] (at most one reference per module).
pub fn pin(m: Module) {
    let mut pinned = PINNED.lock();
    if !pinned.iter().any(|p| p.as_ptr() == m.as_ptr()) {
        pinned.push(m);
    }
}

/// Releases the reference [`pin`] took, if any.
pub fn unpin(m: &Module) {
    let removed = {
        let mut pinned = PINNED.lock();
        let i = pinned.iter().position(|p| p.as_ptr() == m.as_ptr());
        i.map(|i| pinned.remove(i))
    };
    // Dropped after the lock: unloading may run code that pins or unpins.
    drop(removed);
}

fn module_arg(name: &str, args: &[AnyView<'_>]) -> Result<Module> {
    if args.len() != 1 {
        return Err(Error::type_error(format!(
            "`{name}` expects 1 argument (the module), got {}",
            args.len()
        )));
    }
    Module::from_view(&args[0], "mod")
}

/// The global functions of this module.
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.ModuleGlobalsAdd",
            Function::from_fn(|args| {
                pin(module_arg("ffi.ModuleGlobalsAdd", args)?);
                Ok(Any::none())
            }),
        ),
        (
            "ffi.ModuleGlobalsRemove",
            Function::from_fn(|args| {
                unpin(&module_arg("ffi.ModuleGlobalsRemove", args)?);
                Ok(Any::none())
            }),
        ),
    ]
}
