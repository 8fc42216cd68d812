//! The module subsystem's global functions (`ffi.ModuleLoadFromFile`, `ffi.ModuleGetFunction`,
//! ...), with TVM's names.

use super::*;

fn arg<'a, 'b>(args: &'a [AnyView<'b>], i: usize, what: &str) -> Result<&'a AnyView<'b>> {
    args.get(i).ok_or_else(|| {
        Error::type_error(format!(
            "missing argument {i} (`{what}`): got {} arguments",
            args.len()
        ))
    })
}

fn arg_bool(args: &[AnyView<'_>], i: usize, what: &str) -> Result<bool> {
    let v = arg(args, i, what)?;
    v.as_bool()
        .or_else(|| v.as_i64().map(|x| x != 0))
        .ok_or_else(|| v.type_mismatch(what, "bool"))
}

fn fn_or_none(f: Option<Function>) -> Any {
    f.map(Any::from).unwrap_or_default()
}

/// Global functions of the module subsystem, with TVM's names (tvm-ffi
/// `src/ffi/extra/module.cc`, TVM <= 0.20 `src/runtime/module.cc`).
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    fn load(args: &[AnyView<'_>]) -> Result<Any> {
        let path = arg(args, 0, "file_name")?.expect_str("file_name")?;
        let format = match args.get(1) {
            Some(v) if !v.is_none() => v.expect_str("format")?,
            _ => "",
        };
        Ok(load_from_file(path, format)?.into())
    }
    /// The `(mod, name, query_imports = false)` arguments of a function lookup.
    fn lookup_args<'a>(args: &'a [AnyView<'_>]) -> Result<(Module, &'a str, bool)> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let name = arg(args, 1, "name")?.expect_str("name")?;
        let q = if args.len() > 2 {
            arg_bool(args, 2, "query_imports")?
        } else {
            false
        };
        Ok((m, name, q))
    }
    fn get_function(args: &[AnyView<'_>]) -> Result<Any> {
        let (m, name, q) = lookup_args(args)?;
        Ok(fn_or_none(m.get_function(name, q)?))
    }
    fn implements(args: &[AnyView<'_>]) -> Result<Any> {
        let (m, name, q) = lookup_args(args)?;
        Ok(Any::from(m.try_implements_function(name, q)?))
    }
    fn info(args: &[AnyView<'_>], what: FunctionInfo) -> Result<Any> {
        let (m, name, q) = lookup_args(args)?;
        Ok(match m.function_info(name, what, q)? {
            Some(s) => Any::from(s),
            None => Any::none(),
        })
    }
    fn kind(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        Ok(Any::from(m.kind()))
    }
    fn import(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let other = Module::from_view(arg(args, 1, "other")?, "other")?;
        m.import(&other)?;
        Ok(Any::none())
    }
    fn clear(args: &[AnyView<'_>]) -> Result<Any> {
        Module::from_view(arg(args, 0, "mod")?, "mod")?.clear_imports()?;
        Ok(Any::none())
    }
    fn imports_size(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        Ok(Any::from(m.imports().len() as i64))
    }
    fn get_import(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let i = arg(args, 1, "index")?.expect_i64("index")?;
        let imports = m.imports();
        let n = imports.len();
        let idx = usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| {
            Error::index(format!(
                "import index {i} out of range: the module has {n} imports"
            ))
        })?;
        Ok(imports[idx].clone().into())
    }
    fn save_to_bytes(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        Ok(Any::bytes(&m.save_to_bytes()?))
    }
    fn property_mask(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        Ok(Any::from(i64::from(m.property_mask()?)))
    }
    fn write_formats(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let formats = m.write_formats()?;
        Ok(Any::from_object(
            crate::object::containers::array::new_array(
                formats.into_iter().map(Any::from).collect(),
            ),
        ))
    }
    fn inspect_source(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let format = match args.get(1) {
            Some(f) => f.expect_str("format")?,
            None => "",
        };
        Ok(Any::from(m.inspect_source(format)?))
    }
    fn write_to_file(args: &[AnyView<'_>]) -> Result<Any> {
        let m = Module::from_view(arg(args, 0, "mod")?, "mod")?;
        let path = arg(args, 1, "file_name")?.expect_str("file_name")?;
        let format = arg(args, 2, "format")?.expect_str("format")?;
        m.write_to_file(path, format)?;
        Ok(Any::none())
    }
    fn load_so(args: &[AnyView<'_>]) -> Result<Any> {
        let path = arg(args, 0, "library_path")?.expect_str("library_path")?;
        Ok(load_dso(path)?.into())
    }

    vec![
        ("ffi.ModuleLoadFromFile", Function::from_fn(load)),
        ("runtime.ModuleLoadFromFile", Function::from_fn(load)),
        ("ffi.ModuleGetFunction", Function::from_fn(get_function)),
        ("runtime.ModuleGetFunction", Function::from_fn(get_function)),
        (
            "ffi.ModuleImplementsFunction",
            Function::from_fn(implements),
        ),
        ("ffi.ModuleGetKind", Function::from_fn(kind)),
        (
            "ffi.ModuleGetFunctionMetadata",
            Function::from_fn(|a| info(a, FunctionInfo::Metadata)),
        ),
        (
            "ffi.ModuleGetFunctionDoc",
            Function::from_fn(|a| info(a, FunctionInfo::Doc)),
        ),
        ("runtime.ModuleGetTypeKey", Function::from_fn(kind)),
        ("ffi.ModuleImportModule", Function::from_fn(import)),
        ("runtime.ModuleImport", Function::from_fn(import)),
        ("ffi.ModuleClearImports", Function::from_fn(clear)),
        ("runtime.ModuleImportsSize", Function::from_fn(imports_size)),
        ("runtime.ModuleGetImport", Function::from_fn(get_import)),
        ("ffi.ModuleSaveToBytes", Function::from_fn(save_to_bytes)),
        (
            "ffi.ModuleGetPropertyMask",
            Function::from_fn(property_mask),
        ),
        (
            "ffi.ModuleGetWriteFormats",
            Function::from_fn(write_formats),
        ),
        ("ffi.ModuleInspectSource", Function::from_fn(inspect_source)),
        ("ffi.ModuleWriteToFile", Function::from_fn(write_to_file)),
        ("ffi.Module.load_from_file.so", Function::from_fn(load_so)),
        ("runtime.module.loadfile_so", Function::from_fn(load_so)),
        (
            "tvmrt.ModuleCreate",
            Function::from_fn(callback::create_from_args),
        ),
    ]
}
