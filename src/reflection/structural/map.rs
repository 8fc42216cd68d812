//! `ffi.StructuralMap`: rebuilds a value with typed callbacks replacing the nodes they match,
//! sharing every part that does not change.
//!
//! In pre-order a node's callback runs first and the children of what it returns are mapped;
//! in post-order the children are mapped first and the callback gets the rebuilt node. Children
//! are as in the walk (array and list items, map and dict values, reflected fields in their def
//! regions). A container or object whose children all come back unchanged is returned as it is;
//! otherwise a new one is made (objects by their `__ffi_shallow_copy__`, then the changed
//! fields set), or, when the value is held by nothing but this call (a root moved in), changed
//! in place. Free-variable and DAG objects are rebuilt once per def region their fields are
//! walked in, so every use of a variable maps to the same new variable. A callback result equal
//! to its input (the same object, or the same string, bytes or scalar) keeps the input.

use std::collections::HashMap;

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::{new_array, replace_items_if_unique};
use crate::object::containers::list::{self, new_list, seq_items};
use crate::object::containers::map::{map_entries, new_dict, new_map, Entry as MapEntry};
use crate::object::ObjectRef;
use crate::reflection::fields;
use crate::value::{Any, AnyView};

use super::callbacks::{self, Entry};
use super::equal::content_kind;
use super::{field_region, kind, region, StackBase, SEQ_HASH_IGNORE};

/// `ffi.StructuralMap(root, entries, entries_with_def_region_kind, order)`.
pub fn structural_map(args: &[AnyView<'_>]) -> Result<Any> {
    let (entries, preorder) = callbacks::parse(args, "ffi.StructuralMap")?;
    let mut m = Mapper {
        entries,
        preorder,
        region: region::NONE,
        stack: StackBase::here(),
        rebuilt: HashMap::new(),
    };
    // A root moved in (an rvalue reference) is ours alone: it may be changed in place.
    let root = match args[0].take_rvalue_object() {
        Some(obj) => Any::from_object(obj),
        None => args[0].to_owned_any(),
    };
    m.map(root)
}

/// Whether `b` can stand for `a` unchanged: the same object, or the same string, bytes or
/// scalar value.
fn unchanged(a: &AnyView<'_>, b: &AnyView<'_>) -> bool {
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

struct Mapper {
    entries: Vec<Entry>,
    preorder: bool,
    region: i32,
    stack: StackBase,
    /// Free-variable and DAG objects already rebuilt, by address and the region their fields
    /// were walked in (the originals are kept alive so addresses stay theirs).
    rebuilt: HashMap<(usize, i32), (ObjectRef, Any)>,
}

impl Mapper {
    fn map(&mut self, v: Any) -> Result<Any> {
        self.stack.check("StructuralMap")?;
        if self.preorder {
            let v = self.call(v)?;
            self.children(v)
        } else {
            let v = self.children(v)?;
            self.call(v)
        }
    }

    /// The first matching callback's result, or `v` when none matches or the result is `v`.
    fn call(&self, v: Any) -> Result<Any> {
        match callbacks::call_first(&self.entries, &v.view(), self.region)? {
            Some(r) if !unchanged(&v.view(), &r.view()) => Ok(r),
            _ => Ok(v),
        }
    }

    /// Maps each of `items`; `None` when every one came back unchanged.
    fn map_all(&mut self, items: &[Any]) -> Result<Option<Vec<Any>>> {
        let mut out = Vec::with_capacity(items.len());
        let mut changed = false;
        for item in items {
            let m = self.map(item.clone())?;
            changed |= !unchanged(&item.view(), &m.view());
            out.push(m);
        }
        Ok(changed.then_some(out))
    }

    fn children(&mut self, v: Any) -> Result<Any> {
        let Some(obj) = v.view().as_object() else {
            return Ok(v);
        };
        // `v` and `obj` are the references this call holds; more means someone else shares it.
        let unique = || obj.strong_count() <= 2;
        match obj.type_index() {
            ti::ARRAY => {
                let items = seq_items(&obj).unwrap_or_default();
                let Some(items) = self.map_all(&items)? else {
                    return Ok(v);
                };
                if unique() {
                    if let Some(items) = replace_items_if_unique(&obj, items, 2)? {
                        return Ok(Any::from_object(new_array(items)));
                    }
                    return Ok(v);
                }
                Ok(Any::from_object(new_array(items)))
            }
            crate::object::type_registry::static_index::LIST => {
                let items = seq_items(&obj).unwrap_or_default();
                let Some(items) = self.map_all(&items)? else {
                    return Ok(v);
                };
                if unique() {
                    list::modify(&obj, |held| {
                        *held = items;
                        Ok(())
                    })?;
                    return Ok(v);
                }
                Ok(Any::from_object(new_list(items)))
            }
            ti::MAP | crate::object::type_registry::static_index::DICT => {
                let entries = map_entries(&obj).unwrap_or_else(|| Ok(Vec::new()))?;
                let values: Vec<Any> = entries.iter().map(|e| e.value.clone()).collect();
                let Some(values) = self.map_all(&values)? else {
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
            t if t >= ti::DYN_OBJECT_BEGIN => self.object(&obj, v),
            _ => Ok(v),
        }
    }

    /// A reflected object with its fields mapped.
    fn object(&mut self, obj: &ObjectRef, v: Any) -> Result<Any> {
        let info = fields::type_info(obj.type_index())?;
        let k = if info.metadata.is_null() {
            kind::UNSUPPORTED
        } else {
            // SAFETY: registered metadata lives as long as the type table.
            unsafe { (*info.metadata).structural_eq_hash_kind }
        };
        let outer = self.region;
        if k == kind::FREE_VAR && outer == region::SIMPLE {
            self.region = region::NONE;
        }
        let base = self.region;
        let memo_key = (obj.as_ptr() as usize, base);
        let remember = k == kind::FREE_VAR || k == kind::DAG_NODE;
        if remember {
            if let Some((_, done)) = self.rebuilt.get(&memo_key) {
                self.region = outer;
                return Ok(done.clone());
            }
        }
        let r = self.object_fields(obj, info, base, v);
        self.region = outer;
        let r = r?;
        if remember {
            self.rebuilt.insert(memo_key, (obj.clone(), r.clone()));
        }
        Ok(r)
    }

    fn object_fields(
        &mut self,
        obj: &ObjectRef,
        info: &'static crate::object::type_registry::TVMFFITypeInfo,
        base: i32,
        v: Any,
    ) -> Result<Any> {
        let mut changed = Vec::new();
        for f in fields::all_fields(info) {
            if f.flags & SEQ_HASH_IGNORE != 0 {
                continue;
            }
            let value = fields::read_field(obj, &f)?;
            self.region = field_region(base, f.flags);
            let mapped = self.map(value.clone());
            self.region = base;
            let mapped = mapped?;
            if !unchanged(&value.view(), &mapped.view()) {
                changed.push((f, mapped));
            }
        }
        if changed.is_empty() {
            return Ok(v);
        }
        let shallow = fields::type_attr("__ffi_shallow_copy__", info.type_index)
            .and_then(|f| f.view().as_function())
            .ok_or_else(|| {
                Error::type_error(format!(
                    "StructuralMap: cannot rebuild an object of type `{}`: it has no \
                     __ffi_shallow_copy__",
                    fields::type_key(info)
                ))
            })?;
        let copy = shallow.call(&[v.view()])?;
        let copy_obj = copy
            .view()
            .as_object()
            .ok_or_else(|| Error::type_error("__ffi_shallow_copy__ did not return an object"))?;
        for (f, value) in changed {
            fields::set_field(&copy_obj, &f, value.view())?;
        }
        Ok(copy)
    }
}

/// The map's global function.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![("ffi.StructuralMap", Function::from_fn(structural_map))]
}
