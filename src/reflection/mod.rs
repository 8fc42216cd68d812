//! The runtime content tvm-ffi's library registers when it loads, so tvm-ffi's own clients (its
//! Python package, C++ code built on its headers) find what they look up:
//! - here: the sentinel objects ([`sentinels`]), the global-name and type-key listings, global
//!   function metadata, `ffi.MakeObjectFromPackedArgs`, the field getter/setter factories;
//! - [`fields`]: reading and writing reflected fields; [`init`]: the reflection-made
//!   `__ffi_init__`; [`py_class`]: objects of types defined in Python;
//! - [`library_types`], [`access_path`]: the reflected types tvm-ffi's library defines;
//!   [`convert`]: `__ffi_convert__` of the built-in types;
//! - [`recursive`], [`repr`], [`deep_copy`], [`json_graph`]: comparison and hash, repr, deep
//!   copy, JSON values and object graphs; [`structural`]: structural equality, hash and keys;
//! - [`visit_error`]: access paths from a visit error's breadcrumbs.
//!
//! The containers these work on are in [`crate::object::containers`].
//!
//! All but [`sentinels`] (which the containers hand out) are the `reflection` feature (on by
//! default; a C deployment running models needs none of it).

#[cfg(feature = "reflection")]
pub mod access_path;
#[cfg(feature = "reflection")]
pub mod convert;
#[cfg(feature = "reflection")]
pub mod deep_copy;
#[cfg(feature = "reflection")]
pub mod fields;
#[cfg(feature = "reflection")]
pub mod init;
#[cfg(feature = "reflection")]
pub mod json;
#[cfg(feature = "reflection")]
pub mod json_graph;
#[cfg(feature = "reflection")]
pub mod library_types;
#[cfg(feature = "reflection")]
pub mod py_class;
#[cfg(feature = "reflection")]
pub mod recursive;
#[cfg(feature = "reflection")]
pub mod repr;
pub mod sentinels;
#[cfg(feature = "reflection")]
pub mod structural;
#[cfg(feature = "reflection")]
pub mod visit_error;

#[cfg(feature = "reflection")]
use crate::error::{Error, Result};
#[cfg(feature = "reflection")]
use crate::function::{registry, Function};
#[cfg(feature = "reflection")]
use crate::object::containers::array::new_array;
#[cfg(feature = "reflection")]
use crate::object::type_registry;
#[cfg(feature = "reflection")]
use crate::value::{Any, AnyView};

#[cfg(feature = "reflection")]
/// Registers tvm-ffi's library types' fields, methods and attributes (once, deferred by the
/// core until type information is first read or written).
fn register_types() {
    if let Err(e) = library_types::register_all()
        .and_then(|()| convert::register_all())
        .and_then(|()| access_path::register_all())
        .and_then(|()| structural::register_all())
        .and_then(|()| crate::module::reflect::register_fields())
    {
        log::error!(target: "tvmrt::reflection", "registering tvm-ffi's library types failed: {e}");
    }
}

#[cfg(feature = "reflection")]
/// The global functions of this module, by name (installed by the library's top, `src/globals.rs`).
///
/// Also hands the core the registration of the library's reflected types ([`library_types`]),
/// which runs at the first read or write of type information
/// (`type_registry::defer_content`): a program that runs models without reading type
/// information never pays for it.
pub fn builtins() -> Vec<(&'static str, Function)> {
    type_registry::defer_content(register_types);
    vec![
        (
            "ffi.GetInvalidObject",
            Function::from_fn(|_| Ok(Any::from_object(sentinels::missing()))),
        ),
        (
            "ffi.GetKwargsObject",
            Function::from_fn(|_| Ok(Any::from_object(sentinels::kwargs()))),
        ),
        (
            "ffi.FunctionListGlobalNamesFunctor",
            Function::from_fn(|_| Ok(Any::from(list_names_functor()))),
        ),
        (
            "ffi.GetRegisteredTypeKeys",
            Function::from_fn(|_| {
                let keys = type_registry::registered_keys()
                    .into_iter()
                    .map(|(_, key)| Any::from(key))
                    .collect();
                Ok(Any::from_object(new_array(keys)))
            }),
        ),
        (
            "ffi._RegisterFFIInit",
            Function::from_fn(|args| {
                let t = arg(args, 0, 1, "type_index")?.expect_i64("type_index")?;
                init::register_ffi_init(type_index_arg(t)?)?;
                Ok(Any::none())
            }),
        ),
        (
            "ffi._PyClassRegisterTypeAttrColumns",
            Function::from_fn(|args| {
                let t = arg(args, 0, 2, "type_index")?.expect_i64("type_index")?;
                let size = arg(args, 1, 2, "total_size")?.expect_i64("total_size")?;
                let size = i32::try_from(size)
                    .map_err(|_| Error::value(format!("object size {size} out of range")))?;
                py_class::register_type_attrs(type_index_arg(t)?, size)?;
                Ok(Any::none())
            }),
        ),
        (
            "ffi.FunctionFromExternC",
            Function::from_fn(|args| {
                let ptr = |i: usize, what: &str| -> Result<*mut std::ffi::c_void> {
                    let v = arg(args, i, 3, what)?;
                    v.as_opaque_ptr()
                        .ok_or_else(|| v.type_mismatch(what, "void*"))
                };
                let (handle, call, deleter) =
                    (ptr(0, "self")?, ptr(1, "safe_call")?, ptr(2, "deleter")?);
                if call.is_null() {
                    return Err(Error::value("ffi.FunctionFromExternC: safe_call is null"));
                }
                // SAFETY: the caller passes a `TVMFFISafeCallType` and an optional deleter of
                // `self`, as tvm-ffi's `Function::FromExternC` takes them (unchecked there too).
                let (call, deleter) = unsafe {
                    (
                        std::mem::transmute::<*mut std::ffi::c_void, crate::abi::TVMFFISafeCallType>(
                            call,
                        ),
                        (!deleter.is_null()).then(|| {
                            std::mem::transmute::<
                                *mut std::ffi::c_void,
                                unsafe extern "C" fn(*mut std::ffi::c_void),
                            >(deleter)
                        }),
                    )
                };
                Ok(Any::from(Function::from_extern_c(handle, call, deleter)))
            }),
        ),
        (
            "ffi.GetGlobalFuncMetadata",
            Function::from_fn(|args| {
                let name = arg(args, 0, 1, "name")?.expect_str("name")?;
                Ok(Any::from(registry::metadata(name)?))
            }),
        ),
        (
            "ffi.MakeObjectFromPackedArgs",
            Function::from_fn(|args| Ok(Any::from_object(make_object(args)?))),
        ),
        (
            "ffi.MakeFieldGetter",
            Function::from_fn(|args| {
                let t = arg(args, 0, 1, "field_type_index")?.expect_i64("field_type_index")?;
                Ok(Any::from(py_class::field_getter(type_index_arg(t)?)?))
            }),
        ),
        (
            "ffi.MakeFieldSetter",
            Function::from_fn(|args| {
                let t = arg(args, 0, 3, "field_type_index")?.expect_i64("field_type_index")?;
                let conv = arg(args, 1, 3, "type_converter")?.expect_i64("type_converter")?;
                let f = arg(args, 2, 3, "f_convert")?.expect_i64("f_convert")?;
                Ok(Any::from(py_class::field_setter(
                    type_index_arg(t)?,
                    conv,
                    f,
                )?))
            }),
        ),
    ]
}

#[cfg(feature = "reflection")]
/// `ffi.MakeObjectFromPackedArgs(type, name0, value0, ...)`: a new object of the type (an index
/// or a key) with the named fields set, the others at their defaults; a missing required field
/// or an unknown name is a `TypeError`.
fn make_object(args: &[AnyView<'_>]) -> Result<crate::object::ObjectRef> {
    let first = args
        .first()
        .ok_or_else(|| Error::type_error("MakeObjectFromPackedArgs expects a type first"))?;
    let t = match first.as_str() {
        Some(key) => type_registry::key_to_index(key)?,
        None => type_index_arg(first.expect_i64("type")?)?,
    };
    if args.len() % 2 != 1 {
        return Err(Error::type_error(
            "MakeObjectFromPackedArgs expects the type then name/value pairs",
        ));
    }
    let names = args[1..]
        .chunks(2)
        .map(|kv| kv[0].expect_str("field name"))
        .collect::<Result<Vec<&str>>>()?;
    let mut found = vec![false; names.len()];
    let info = fields::type_info(t)?;
    let obj = fields::create_empty(info)?;
    for f in fields::all_fields(info) {
        let name = fields::field_name(&f);
        // SAFETY (both calls): the field's own offset inside an object of its type.
        let addr = unsafe { obj.as_ptr().cast::<u8>().add(f.offset as usize) }.cast();
        match (0..names.len()).find(|&i| !found[i] && names[i] == name) {
            Some(i) => {
                unsafe { fields::call_setter(&f, addr, args[2 + 2 * i])? };
                found[i] = true;
            }
            None if f.flags & type_registry::field_flag::HAS_DEFAULT != 0 => unsafe {
                fields::set_default(&f, addr)?
            },
            None => {
                return Err(Error::type_error(format!(
                    "Required field `{name}` not set in type `{}`",
                    fields::type_key(info)
                )))
            }
        }
    }
    if let Some(i) = (0..names.len()).find(|&i| !found[i]) {
        return Err(Error::type_error(format!(
            "Type `{}` does not have field `{}`",
            fields::type_key(info),
            names[i]
        )));
    }
    Ok(obj)
}

#[cfg(feature = "reflection")]
/// A type index argument, checked to fit `i32`.
fn type_index_arg(t: i64) -> Result<i32> {
    i32::try_from(t).map_err(|_| Error::value(format!("type index {t} out of range")))
}

#[cfg(feature = "reflection")]
/// tvm-ffi's `ffi.FunctionListGlobalNamesFunctor` result: a function of `i` that returns the
/// number of names for `i < 0` and name `i` otherwise (a snapshot taken now).
fn list_names_functor() -> Function {
    let names = registry::list_names();
    Function::from_fn(move |args| {
        let i = arg(args, 0, 1, "index")?.expect_i64("index")?;
        if i < 0 {
            return Ok(Any::from(names.len() as i64));
        }
        let name = usize::try_from(i)
            .ok()
            .and_then(|i| names.get(i))
            .ok_or_else(|| {
                Error::index(format!(
                    "index {i} out of range: {} global functions",
                    names.len()
                ))
            })?;
        Ok(Any::from(name.as_str()))
    })
}

#[cfg(feature = "reflection")]
/// Argument `i` of a call that expects `n`, or a `TypeError` saying how many it takes.
pub(crate) fn arg<'a>(
    args: &'a [AnyView<'a>],
    i: usize,
    n: usize,
    what: &str,
) -> Result<&'a AnyView<'a>> {
    if args.len() != n {
        return Err(Error::type_error(format!(
            "expected {n} argument(s), got {} (argument {i} is `{what}`)",
            args.len()
        )));
    }
    Ok(&args[i])
}
