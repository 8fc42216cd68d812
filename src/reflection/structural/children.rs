//! The children a structural traversal descends into, shared by the walk, visit, map and
//! mutate: array and list items, map and dict values (keys are not children), and the fields
//! of reflected objects (skipping `SEqHashIgnore` ones), each in the def region its field flags
//! give; inside a simple region a free variable's own fields are uses.

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::object::containers::array::{new_array, replace_items_if_unique};
use crate::object::containers::list::{self, new_list, seq_items};
use crate::object::containers::map::{map_entries, new_dict, new_map, Entry as MapEntry};
use crate::object::type_registry::{static_index, TVMFFITypeInfo};
use crate::object::ObjectRef;
use crate::reflection::fields;
use crate::value::{Any, AnyView};

use super::equal::content_kind;
use super::{field_region, kind, region, SEQ_HASH_IGNORE};

/// The structural kind of a reflected object's type (`UNSUPPORTED` without metadata).
pub(super) fn kind_of(info: &TVMFFITypeInfo) -> i32 {
    if info.metadata.is_null() {
        return kind::UNSUPPORTED;
    }
    // SAFETY: registered metadata lives as long as the type table.
    unsafe { (*info.metadata).structural_eq_hash_kind }
}

/// The region an object's fields are walked in, from the region the object is met in.
pub(super) fn fields_region(info: &TVMFFITypeInfo, met_in: i32) -> i32 {
    if kind_of(info) == kind::FREE_VAR && met_in == region::SIMPLE {
        region::NONE
    } else {
        met_in
    }
}

/// The reflected object `v` holds, if it is one (a registered type with fields).
pub(super) fn reflected(v: &AnyView<'_>) -> Option<(ObjectRef, &'static TVMFFITypeInfo)> {
    let obj = v.as_object()?;
    if obj.type_index() < ti::DYN_OBJECT_BEGIN {
        return None;
    }
    let info = fields::type_info(obj.type_index()).ok()?;
    Some((obj, info))
}

/// Calls `f(child, region)` for each child of `v` (met in `met_in`), in order, until one
/// returns `Some`.
pub(super) fn each_child(
    v: &AnyView<'_>,
    met_in: i32,
    f: &mut dyn FnMut(&AnyView<'_>, i32) -> Result<Option<Any>>,
) -> Result<Option<Any>> {
    let Some(obj) = v.as_object() else {
        return Ok(None);
    };
    let children: Vec<(Any, i32)> = match obj.type_index() {
        ti::ARRAY | static_index::LIST => seq_items(&obj)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c, met_in))
            .collect(),
        ti::MAP | static_index::DICT => map_entries(&obj)
            .unwrap_or_else(|| Ok(Vec::new()))?
            .into_iter()
            .map(|e| (e.value, met_in))
            .collect(),
        _ => {
            let Some((obj, info)) = reflected(v) else {
                return Ok(None);
            };
            let base = fields_region(info, met_in);
            for fi in fields::all_fields(info) {
                if fi.flags & SEQ_HASH_IGNORE != 0 {
                    continue;
                }
                let value = fields::read_field(&obj, &fi)?;
                if let Some(r) = f(&value.view(), field_region(base, fi.flags))? {
                    return Ok(Some(r));
                }
            }
            return Ok(None);
        }
    };
    for (c, r) in &children {
        if let Some(found) = f(&c.view(), *r)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// Whether `v` is tvm-ffi's `Unchanged` marker (a callback's "keep the input").
pub(super) fn is_unchanged_marker(v: &AnyView<'_>) -> bool {
    v.type_index() == static_index::UNCHANGED
}

/// Whether `b` can stand for `a` unchanged: the `Unchanged` marker, the same object, or the
/// same string, bytes or scalar value.
pub(super) fn unchanged(a: &AnyView<'_>, b: &AnyView<'_>) -> bool {
    if is_unchanged_marker(b) {
        return true;
    }
    let (ka, kb) = (content_kind(a.type_index()), content_kind(b.type_index()));
    if ka != kb {
        return false;
    }
    if ka == ti::STR || ka == ti::BYTES {
        return a.as_byte_slice() == b.as_byte_slice();
    }
    let (x, y) = (a.raw(), b.raw());
    // SAFETY: every payload is 8 readable bytes (an object's is its pointer).
    let same_payload = unsafe { x.payload.v_int64 == y.payload.v_int64 };
    same_payload && x.small_str_len == y.small_str_len
}

/// Maps each of `items` with `f`; `None` when every one came back unchanged.
fn map_all(
    items: &[Any],
    met_in: i32,
    f: &mut dyn FnMut(Any, i32) -> Result<Any>,
) -> Result<Option<Vec<Any>>> {
    let mut out = Vec::with_capacity(items.len());
    let mut changed = false;
    for item in items {
        let m = f(item.clone(), met_in)?;
        if unchanged(&item.view(), &m.view()) {
            out.push(item.clone());
        } else {
            changed = true;
            out.push(m);
        }
    }
    Ok(changed.then_some(out))
}

/// `v` (met in `met_in`) with each child replaced by `f(child, region)`: `v` itself when no
/// child changes; otherwise a new container or object (objects through their
/// `__ffi_shallow_copy__`), or `v` changed in place when `v` and the caller's one other
/// reference are all that hold it.
pub(super) fn rebuild(
    v: Any,
    met_in: i32,
    f: &mut dyn FnMut(Any, i32) -> Result<Any>,
) -> Result<Any> {
    let Some(obj) = v.view().as_object() else {
        return Ok(v);
    };
    // `v` and `obj` are this call's references; a third means someone else shares it.
    let unique = obj.strong_count() <= 2;
    match obj.type_index() {
        ti::ARRAY => {
            let Some(items) = map_all(&seq_items(&obj).unwrap_or_default(), met_in, f)? else {
                return Ok(v);
            };
            if unique {
                return Ok(match replace_items_if_unique(&obj, items, 2)? {
                    None => v,
                    Some(items) => Any::from_object(new_array(items)),
                });
            }
            Ok(Any::from_object(new_array(items)))
        }
        static_index::LIST => {
            let Some(items) = map_all(&seq_items(&obj).unwrap_or_default(), met_in, f)? else {
                return Ok(v);
            };
            if unique
                && list::modify(&obj, |held| {
                    *held = items.clone();
                    Ok(())
                })
                .is_ok()
            {
                return Ok(v);
            }
            Ok(Any::from_object(new_list(items)))
        }
        ti::MAP | static_index::DICT => {
            let entries = map_entries(&obj).unwrap_or_else(|| Ok(Vec::new()))?;
            let values: Vec<Any> = entries.iter().map(|e| e.value.clone()).collect();
            let Some(values) = map_all(&values, met_in, f)? else {
                return Ok(v);
            };
            let entries: Vec<MapEntry> = entries
                .into_iter()
                .zip(values)
                .map(|(e, value)| MapEntry { key: e.key, value })
                .collect();
            Ok(Any::from_object(if obj.type_index() == ti::MAP {
                new_map(entries)
            } else {
                new_dict(entries)
            }))
        }
        _ => {
            let Some((obj, info)) = reflected(&v.view()) else {
                return Ok(v);
            };
            rebuild_object(&obj, info, v.clone(), met_in, f)
        }
    }
}

fn rebuild_object(
    obj: &ObjectRef,
    info: &'static TVMFFITypeInfo,
    v: Any,
    met_in: i32,
    f: &mut dyn FnMut(Any, i32) -> Result<Any>,
) -> Result<Any> {
    let base = fields_region(info, met_in);
    let mut changed = Vec::new();
    for fi in fields::all_fields(info) {
        if fi.flags & SEQ_HASH_IGNORE != 0 {
            continue;
        }
        let value = fields::read_field(obj, &fi)?;
        let mapped = f(value.clone(), field_region(base, fi.flags))?;
        if !unchanged(&value.view(), &mapped.view()) {
            changed.push((fi, mapped));
        }
    }
    if changed.is_empty() {
        return Ok(v);
    }
    let shallow = fields::type_attr("__ffi_shallow_copy__", info.type_index)
        .and_then(|f| f.view().as_function())
        .ok_or_else(|| {
            Error::type_error(format!(
                "cannot rebuild an object of type `{}`: it has no __ffi_shallow_copy__",
                fields::type_key(info)
            ))
        })?;
    let copy = shallow.call(&[v.view()])?;
    let copy_obj = copy
        .view()
        .as_object()
        .ok_or_else(|| Error::type_error("__ffi_shallow_copy__ did not return an object"))?;
    for (fi, value) in changed {
        fields::set_field(&copy_obj, &fi, value.view())?;
    }
    Ok(copy)
}
