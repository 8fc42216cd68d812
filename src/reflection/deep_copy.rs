//! `ffi.DeepCopy`: copies a value's object graph as tvm-ffi does (`ObjectDeepCopier` in
//! `src/ffi/extra/dataclass.cc`): containers are rebuilt, reflected objects are copied with
//! their type's `__ffi_shallow_copy__` then have each field replaced by its deep copy; strings,
//! bytes, shapes, big integers and enum singletons are shared; an object reached twice is copied
//! once (sharing and cycles are kept). A cycle through an immutable container (array, map),
//! which cannot be built before its items, is patched once the copy is complete.

use std::collections::{HashMap, HashSet};

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::new_array;
use crate::object::containers::list::{self, new_list, seq_items};
use crate::object::containers::map::{self, map_entries, new_dict, new_map, Entry};
use crate::object::type_registry::{self, static_index};
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::fields::{self, set_field};

/// Whether two values are the same (same kind and payload: identical objects).
fn same(a: &AnyView<'_>, b: &AnyView<'_>) -> bool {
    // SAFETY: every payload is 8 readable bytes.
    a.type_index() == b.type_index()
        && unsafe { a.raw().payload.v_int64 == b.raw().payload.v_int64 }
}

fn ptr_key(o: &ObjectRef) -> usize {
    o.as_ptr() as usize
}

/// One deep copy in progress.
#[derive(Default)]
struct Copier {
    copies: HashMap<usize, Any>,
    in_progress: HashSet<usize>,
    deferred: bool,
    depth: usize,
}

impl Copier {
    fn copy(&mut self, v: &AnyView<'_>) -> Result<Any> {
        let t = v.type_index();
        if t < ti::STATIC_OBJECT_BEGIN {
            return Ok(v.to_owned_any());
        }
        let Some(obj) = v.as_object() else {
            return Ok(v.to_owned_any());
        };
        if let Some(c) = self.copies.get(&ptr_key(&obj)) {
            return Ok(c.clone());
        }
        if self.in_progress.contains(&ptr_key(&obj)) {
            self.deferred = true;
            return Ok(v.to_owned_any());
        }
        if matches!(t, ti::STR | ti::BYTES | ti::SHAPE | static_index::BIG_INT) || is_enum(t) {
            return Ok(v.to_owned_any());
        }
        if self.depth >= 1 << 12 {
            return Err(Error::value("DeepCopy: maximum depth exceeded"));
        }
        self.depth += 1;
        let r = self.copy_object(&obj, t);
        self.depth -= 1;
        r
    }

    fn copy_object(&mut self, obj: &ObjectRef, t: i32) -> Result<Any> {
        let key = ptr_key(obj);
        match t {
            ti::ARRAY => {
                self.in_progress.insert(key);
                let items = seq_items(obj).unwrap_or_default();
                let copied = items
                    .iter()
                    .map(|x| self.copy(&x.view()))
                    .collect::<Result<Vec<Any>>>();
                self.in_progress.remove(&key);
                let out = Any::from_object(new_array(copied?));
                self.copies.insert(key, out.clone());
                Ok(out)
            }
            ti::MAP => {
                self.in_progress.insert(key);
                let r = self.copy_entries(obj);
                self.in_progress.remove(&key);
                let out = Any::from_object(new_map(r?));
                self.copies.insert(key, out.clone());
                Ok(out)
            }
            static_index::LIST => {
                let out_obj = new_list(Vec::new());
                let out = Any::from_object(out_obj.clone());
                self.copies.insert(key, out.clone());
                for x in seq_items(obj).unwrap_or_default() {
                    let c = self.copy(&x.view())?;
                    list::modify(&out_obj, |items| {
                        items.push(c);
                        Ok(())
                    })?;
                }
                Ok(out)
            }
            static_index::DICT => {
                let out_obj = new_dict(Vec::new());
                let out = Any::from_object(out_obj.clone());
                self.copies.insert(key, out.clone());
                let entries = self.copy_entries(obj)?;
                map::modify_dict(&out_obj, |e| {
                    for x in entries {
                        map::set(e, x.key, x.value);
                    }
                    Ok(())
                })?;
                Ok(out)
            }
            _ => self.copy_reflected(obj, t),
        }
    }

    fn copy_entries(&mut self, obj: &ObjectRef) -> Result<Vec<Entry>> {
        let entries = map_entries(obj).unwrap_or_else(|| Ok(Vec::new()))?;
        let mut out = Vec::with_capacity(entries.len());
        for e in &entries {
            let key = self.copy(&e.key.view())?;
            let value = self.copy(&e.value.view())?;
            out.push(Entry { key, value });
        }
        Ok(out)
    }

    fn copy_reflected(&mut self, obj: &ObjectRef, t: i32) -> Result<Any> {
        let info = fields::type_info(t)?;
        let shallow = fields::type_attr("__ffi_shallow_copy__", t)
            .and_then(|f| f.view().as_function())
            .ok_or_else(|| {
                Error::new(
                    "InternalError",
                    format!(
                        "Cannot deep copy object of type \"{}\" because it is not copy-constructible",
                        fields::type_key(info)
                    ),
                )
            })?;
        let copy = shallow.call(&[Any::from_object(obj.clone()).view()])?;
        let copy_obj = copy
            .view()
            .as_object()
            .ok_or_else(|| Error::type_error("__ffi_shallow_copy__ did not return an object"))?;
        self.copies.insert(ptr_key(obj), copy.clone());
        for f in fields::all_fields(info) {
            let original = fields::read_field(obj, &f)?;
            let resolved = self.copy(&original.view())?;
            if !same(&original.view(), &resolved.view()) {
                set_field(&copy_obj, &f, resolved.view())?;
            }
        }
        Ok(copy)
    }

    /// Replaces, inside every copy, references to originals that were copied later.
    fn fix_deferred(&self) -> Result<()> {
        let mapped = |v: &AnyView<'_>| -> Option<Any> {
            v.as_object()
                .and_then(|o| self.copies.get(&ptr_key(&o)).cloned())
        };
        for copy in self.copies.values() {
            let Some(c) = copy.view().as_object() else {
                continue;
            };
            let t = c.type_index();
            if t == static_index::LIST {
                list::modify(&c, |items| {
                    for x in items.iter_mut() {
                        if let Some(m) = mapped(&x.view()) {
                            *x = m;
                        }
                    }
                    Ok(())
                })?;
            } else if t == static_index::DICT {
                map::modify_dict(&c, |entries| {
                    let old = std::mem::take(entries);
                    for e in old {
                        let key = mapped(&e.key.view()).unwrap_or(e.key);
                        let value = mapped(&e.value.view()).unwrap_or(e.value);
                        map::set(entries, key, value);
                    }
                    Ok(())
                })?;
            } else if t >= ti::DYN_OBJECT_BEGIN {
                let info = fields::type_info(t)?;
                for f in fields::all_fields(info) {
                    let v = fields::read_field(&c, &f)?;
                    if let Some(m) = mapped(&v.view()) {
                        if !same(&m.view(), &v.view()) {
                            set_field(&c, &f, m.view())?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether `t` is an enum type (derived from `ffi.Enum`).
fn is_enum(t: i32) -> bool {
    type_registry::lookup("ffi.Enum").is_some_and(|e| {
        t >= ti::DYN_OBJECT_BEGIN && type_registry::derived_from(t, e).unwrap_or(false)
    })
}

/// The deep copy of `v`.
pub fn deep_copy(v: &AnyView<'_>) -> Result<Any> {
    let mut c = Copier::default();
    let out = c.copy(v)?;
    if c.deferred {
        c.fix_deferred()?;
    }
    Ok(out)
}

/// `ffi.DeepCopy`.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![(
        "ffi.DeepCopy",
        Function::from_fn(|args| {
            if args.len() != 1 {
                return Err(Error::type_error("`ffi.DeepCopy` expects 1 argument"));
            }
            deep_copy(&args[0])
        }),
    )]
}
