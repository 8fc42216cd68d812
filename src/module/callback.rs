//! Modules built from packed functions, so a module kind can be written in C (or any language
//! with a C FFI): `tvmrt.ModuleCreate(kind, get_function[, save_to_bytes])`.
//!
//! `get_function(name)` returns a function or None; `save_to_bytes()` returns bytes (or a
//! string). Both are ordinary packed functions, e.g. from `TVMFuncCreateFromCFunc` or
//! `TVMFFIFunctionCreate`. A loader registered as `ffi.Module.load_from_bytes.<kind>` or
//! `runtime.module.loadbinary_<kind>` returns such a module (see the crate's module docs for the
//! loader protocol).

use super::{Module, ModuleKind};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::value::{Any, AnyView};

/// A module whose behaviour is given by packed functions.
pub struct CallbackModule {
    kind: String,
    get_function: Function,
    save_to_bytes: Option<Function>,
}

impl CallbackModule {
    /// A module of type key `kind` backed by the given callbacks.
    pub fn new(kind: &str, get_function: Function, save_to_bytes: Option<Function>) -> Self {
        CallbackModule {
            kind: kind.to_string(),
            get_function,
            save_to_bytes,
        }
    }
}

impl ModuleKind for CallbackModule {
    fn kind(&self) -> &str {
        &self.kind
    }

    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        let name_arg = Any::from(name);
        let found = self.get_function.call(&[name_arg.view()]).map_err(|e| {
            Error::new(
                e.kind.clone(),
                format!("get_function of module `{}`: {}", self.kind, e.message),
            )
        })?;
        let view = found.view();
        if view.is_none() {
            return Ok(None);
        }
        let inner = view.as_function().ok_or_else(|| {
            Error::type_error(format!(
                "get_function of module `{}` returned {} for `{name}`, not a function or None",
                self.kind,
                view.type_name()
            ))
        })?;
        // The function handed out keeps the module alive, as every module's functions do.
        let keep = this.clone();
        Ok(Some(Function::from_fn(move |args| {
            let _module = &keep;
            inner.call(args)
        })))
    }

    fn save_to_bytes(&self) -> Result<Vec<u8>> {
        let f = self.save_to_bytes.as_ref().ok_or_else(|| {
            Error::runtime(format!(
                "module of kind `{}` was created without save_to_bytes",
                self.kind
            ))
        })?;
        let out = f.call(&[])?;
        let view = out.view();
        view.as_byte_slice().map(<[u8]>::to_vec).ok_or_else(|| {
            Error::type_error(format!(
                "save_to_bytes of module `{}` returned {}, not bytes",
                self.kind,
                view.type_name()
            ))
        })
    }
}

/// `tvmrt.ModuleCreate(kind, get_function[, save_to_bytes])`.
pub(crate) fn create_from_args(args: &[AnyView<'_>]) -> Result<Any> {
    if args.len() < 2 || args.len() > 3 {
        return Err(Error::type_error(format!(
            "tvmrt.ModuleCreate expects (kind, get_function[, save_to_bytes]), got {} arguments",
            args.len()
        )));
    }
    let kind = args[0].expect_str("kind")?;
    if kind.is_empty() {
        return Err(Error::value("tvmrt.ModuleCreate: kind must not be empty"));
    }
    let get_function = args[1].expect_function("get_function")?;
    let save = match args.get(2) {
        Some(v) if !v.is_none() => Some(v.expect_function("save_to_bytes")?),
        _ => None,
    };
    Ok(Module::new(CallbackModule::new(kind, get_function, save)).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_module_looks_up_and_saves() {
        let getter = Function::from_fn(|args| {
            let name = args[0].expect_str("name")?;
            if name == "seven" {
                Ok(Any::from(Function::from_fn(|_| Ok(Any::from(7i64)))))
            } else {
                Ok(Any::none())
            }
        });
        let save = Function::from_fn(|_| Ok(Any::bytes(b"state")));
        let m = create_from_args(&[
            Any::from("cb").view(),
            Any::from(getter).view(),
            Any::from(save).view(),
        ])
        .unwrap();
        let m = Module::from_view(&m.view(), "m").unwrap();
        assert_eq!(m.kind(), "cb");
        let f = m.get_function("seven", false).unwrap().unwrap();
        assert_eq!(f.call(&[]).unwrap().view().as_i64(), Some(7));
        assert!(m.get_function("eight", false).unwrap().is_none());
        assert_eq!(m.save_to_bytes().unwrap(), b"state");
    }
}
