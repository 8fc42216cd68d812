//! The `__ffi_convert__` attribute tvm-ffi sets on its built-in object types (`def_convert` in
//! `src/ffi/object.cc`): a function that converts a value to the type the way its C++ `TypeTraits`
//! would (an `ffi.Array` or `ffi.List` of integers to an `ffi.Shape`, a list to an array, a dict
//! to a map, ...), or raises `TypeError: Cannot cast from X to Y`. tvm-ffi's Python package
//! falls back to it when its own conversion rules do not apply.

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::new_array;
use crate::object::containers::list::{new_list, seq_items};
use crate::object::containers::map::{map_entries, new_dict, new_map};
use crate::object::shape::new_shape;
use crate::object::type_registry::{self, static_index};
use crate::value::{Any, AnyView};

fn key(t: i32) -> String {
    super::fields::type_info(t)
        .map(super::fields::type_key)
        .unwrap_or_else(|_| crate::value::type_name(t).to_string())
}

/// Converts `v` to built-in object type `target`.
fn convert(target: i32, v: &AnyView<'_>) -> Result<Any> {
    let t = v.type_index();
    let fail = || {
        Error::type_error(format!(
            "Cannot cast from `{}` to `{}`",
            key(t),
            key(target)
        ))
    };
    let obj = v.as_object();
    let same = obj.as_ref().is_some_and(|o| o.type_index() == target);
    match target {
        ti::OBJECT if obj.is_some() => Ok(v.to_owned_any()),
        ti::STR if matches!(t, ti::STR | ti::SMALL_STR | ti::RAW_STR) => {
            Ok(Any::string_compact(v.as_str().ok_or_else(fail)?))
        }
        ti::BYTES if matches!(t, ti::BYTES | ti::SMALL_BYTES | ti::BYTE_ARRAY_PTR) => {
            Ok(Any::bytes_compact(v.as_byte_slice().ok_or_else(fail)?))
        }
        _ if same => Ok(v.to_owned_any()),
        ti::SHAPE => {
            let items = obj.as_ref().and_then(seq_items).ok_or_else(fail)?;
            let dims = items
                .iter()
                .map(|x| match x.view().type_index() {
                    ti::INT => x.view().as_i64().ok_or_else(fail),
                    _ => Err(fail()),
                })
                .collect::<Result<Vec<i64>>>()?;
            Ok(Any::from_object(new_shape(&dims)))
        }
        ti::ARRAY | static_index::LIST => {
            let items = obj.as_ref().and_then(seq_items).ok_or_else(fail)?;
            Ok(Any::from_object(if target == ti::ARRAY {
                new_array(items)
            } else {
                new_list(items)
            }))
        }
        ti::MAP | static_index::DICT => {
            let entries = obj.as_ref().and_then(map_entries).ok_or_else(fail)??;
            Ok(Any::from_object(if target == ti::MAP {
                new_map(entries)
            } else {
                new_dict(entries)
            }))
        }
        _ => Err(fail()),
    }
}

/// Sets `__ffi_convert__` on the built-in object types (as tvm-ffi's library does at load).
pub fn register_all() -> Result<()> {
    for target in [
        ti::OBJECT,
        ti::STR,
        ti::BYTES,
        ti::ERROR,
        ti::FUNCTION,
        ti::SHAPE,
        ti::TENSOR,
        ti::ARRAY,
        ti::MAP,
        static_index::LIST,
        static_index::DICT,
    ] {
        let f = Function::from_fn(move |args| {
            if args.len() != 1 {
                return Err(Error::type_error("__ffi_convert__ expects 1 argument"));
            }
            convert(target, &args[0])
        });
        type_registry::register_attr(target, "__ffi_convert__", Any::from(f).view())?;
    }
    Ok(())
}
