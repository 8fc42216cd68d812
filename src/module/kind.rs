//! What a kind of module implements: the [`ModuleKind`] trait and what it is asked.

use std::any::Any as StdAny;

use crate::error::{Error, Result};
use crate::function::Function;

use super::Module;

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
