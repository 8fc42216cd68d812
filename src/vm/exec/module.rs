//! The module of kind `relax.VMExecutable` that holds an executable.

use crate::error::{Error, Result};
use crate::function::Function;
use crate::module::{Module, ModuleKind};
use crate::value::{Any, AnyView};

use super::*;

/// The module of kind `relax.VMExecutable`.
pub struct ExecutableModule {
    exec: std::sync::Arc<Executable>,
}

impl ExecutableModule {
    /// Wraps a decoded executable.
    pub fn new(exec: Executable) -> ExecutableModule {
        ExecutableModule {
            exec: std::sync::Arc::new(exec),
        }
    }

    /// The decoded executable.
    pub fn executable(&self) -> &std::sync::Arc<Executable> {
        &self.exec
    }
}

/// Loads an executable module from bytes (`ffi.Module.load_from_bytes.relax.VMExecutable`).
pub fn load_executable(bytes: &[u8]) -> Result<Module> {
    Ok(Module::new(ExecutableModule::new(Executable::from_bytes(
        bytes,
    )?)))
}

impl ModuleKind for ExecutableModule {
    fn kind(&self) -> &str {
        "relax.VMExecutable"
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let exec = self.exec.clone();
        let keep = this.clone();
        let f = match name {
            "stats" => Function::from_fn(move |_| Ok(Any::from(exec.stats()))),
            "as_text" => Function::from_fn(move |_| Ok(Any::from(exec.as_text()))),
            "has_function" => Function::from_fn(move |args: &[AnyView<'_>]| {
                let n = first_str(args, "name")?;
                Ok(Any::from(exec.func_map.contains_key(n)))
            }),
            "vm_load_executable" => {
                Function::from_fn(move |_| Ok(Any::from(crate::vm::interp::load_vm(&keep)?)))
            }
            #[cfg(feature = "profiling")]
            "vm_profiler_load_executable" => Function::from_fn(move |_| {
                Ok(Any::from(crate::vm::interp::load_profiler_vm(&keep)?))
            }),
            _ => return Ok(None),
        };
        Ok(Some(f))
    }

    fn implements_function(&self, _this: &Module, name: &str) -> bool {
        matches!(
            name,
            "stats" | "as_text" | "has_function" | "vm_load_executable"
        ) || (cfg!(feature = "profiling") && name == "vm_profiler_load_executable")
    }

    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        // Loading keeps the exact bytes, so saving is the inverse of loading.
        Ok(self.exec.bytes().to_vec())
    }

    /// Binary-serializable, as TVM's `VMExecutable`.
    fn property_mask(&self) -> i32 {
        1
    }

    /// The saved bytes, as a file (TVM's `VMExecutable::WriteToFile`, any format).
    fn write_to_file(&self, path: &str, _format: &str) -> Result<()> {
        std::fs::write(path, self.exec.bytes())
            .map_err(|e| Error::runtime(format!("cannot write `{path}`: {e}")))
    }
}

fn first_str<'a>(args: &'a [AnyView<'_>], what: &str) -> Result<&'a str> {
    args.first()
        .ok_or_else(|| Error::type_error(format!("missing argument `{what}`")))?
        .expect_str(what)
}
