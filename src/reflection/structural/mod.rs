//! Structural equality and hash (`ffi.StructuralEqual`, `ffi.GetFirstStructuralMismatch`,
//! `ffi.StructuralHash`), the structural key (`ffi.StructuralKey`, `ffi.StructuralKeyEqual`) and
//! the traversals ([`walk`]: `ffi.StructuralWalk`, [`map`]: `ffi.StructuralMap`, [`owned`]:
//! `ffi.StructuralVisit` and `ffi.StructuralMutate` with their visitor and mutator handles),
//! with tvm-ffi's rules (`src/ffi/extra/structural_equal.cc`, `structural_hash.cc`, and the
//! def-region semantics its `c_api.h` documents):
//!
//! - values of different kinds differ, except that string and bytes objects equal their small
//!   inline forms; floats compare by value with every NaN equal; strings and bytes by content;
//!   arrays and lists item by item; maps and dicts by their keys' values; shapes by dimension;
//!   tensors by shape, dtype and (unless skipped) their bytes;
//! - other objects by the structural kind their type registered (`TVMFFISEqHashKind`): a tree
//!   node by its fields (skipping `SEqHashIgnore` ones) or its `__s_equal__` / `__s_hash__`
//!   hook; a constant tree node the same, identity short-cutting; a unique instance by
//!   identity; a DAG node is paired with the first node it equals and must stay paired; a free
//!   variable equals another only when both are bound to each other, which happens on first
//!   sight inside a def region (a field flagged `SEqHashDefPattern` or `SEqHashDefSimple`, or
//!   everywhere with `map_free_vars`) or when they are the same object. A pattern region
//!   propagates into everything below it; inside a simple region a variable's own fields are
//!   walked as uses. A type without a structural kind is a `TypeError`.
//!
//! Hash values are tvmrt's own (stable within a process), consistent with the equality: equal
//! values hash alike.

mod callbacks;
mod children;
mod equal;
mod hash;
mod map;
mod native;
mod owned;
mod walk;

use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::array::new_array;
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

pub use equal::{first_mismatch, structural_equal};
pub use hash::structural_hash;

use super::fields;

/// `TVMFFISEqHashKind` values.
mod kind {
    pub const UNSUPPORTED: i32 = 0;
    pub const FREE_VAR: i32 = 2;
    pub const DAG_NODE: i32 = 3;
    pub const CONST_TREE_NODE: i32 = 4;
    pub const UNIQUE_INSTANCE: i32 = 5;
}

/// `TVMFFIDefRegionKind` values.
mod region {
    pub const NONE: i32 = 0;
    pub const PATTERN: i32 = 1;
    pub const SIMPLE: i32 = 2;
}

/// `kTVMFFIFieldFlagBitMaskSEqHashIgnore`.
const SEQ_HASH_IGNORE: i64 = 1 << 3;
/// `kTVMFFIFieldFlagBitMaskSEqHashDefPattern`.
const DEF_PATTERN: i64 = 1 << 4;
/// `kTVMFFIFieldFlagBitMaskSEqHashDefSimple`.
const DEF_SIMPLE: i64 = 1 << 12;

/// Stack a walk may use below its entry before giving up with a `ValueError`: nesting this
/// deep is a cycle or a value no thread stack could walk (threads get 2 MiB or more).
const STACK_BUDGET: usize = 1 << 20;

/// Where a walk entered the stack, to bound how deep it goes ([`STACK_BUDGET`]).
#[derive(Clone, Copy)]
struct StackBase(usize);

impl StackBase {
    fn here() -> StackBase {
        StackBase(stack_address())
    }

    /// A `ValueError` once the walk has used [`STACK_BUDGET`] bytes of stack.
    fn check(self, what: &str) -> Result<()> {
        if self.0.abs_diff(stack_address()) > STACK_BUDGET {
            return Err(Error::value(format!(
                "{what}: the value nests too deeply to walk (a cycle?)"
            )));
        }
        Ok(())
    }
}

/// An address in the caller's stack frame.
#[inline(never)]
fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// The region after entering `entered` from `current`: a pattern region propagates, `NONE`
/// keeps the current one.
fn enter(current: i32, entered: i32) -> i32 {
    if current == region::PATTERN || entered == region::NONE {
        current
    } else {
        entered
    }
}

/// The region a field with `flags` is compared in (a field flagged both ways is simple).
fn field_region(current: i32, flags: i64) -> i32 {
    if flags & DEF_SIMPLE != 0 {
        enter(current, region::SIMPLE)
    } else if flags & DEF_PATTERN != 0 {
        enter(current, region::PATTERN)
    } else {
        current
    }
}

/// The region a hook's callback asks for (an int `TVMFFIDefRegionKind`).
fn callback_region(current: i32, asked: &AnyView<'_>) -> Result<i32> {
    let k = asked.expect_i64("def_region_kind")?;
    match k as i32 {
        region::NONE | region::PATTERN | region::SIMPLE if (0..=2).contains(&k) => {
            Ok(enter(current, k as i32))
        }
        _ => Err(Error::value(format!(
            "def_region_kind must be 0 (none), 1 (pattern) or 2 (simple), got {k}"
        ))),
    }
}

/// The structural kind of an object's type, or the `TypeError` tvm-ffi raises for a type
/// without one.
fn object_kind(
    obj: &ObjectRef,
) -> Result<(i32, &'static crate::object::type_registry::TVMFFITypeInfo)> {
    let info = fields::type_info(obj.type_index())?;
    let key = fields::type_key(info);
    if info.metadata.is_null() {
        return Err(Error::type_error(format!(
            "Type metadata is not set for type `{key}`, so StructuralHash is not supported for \
             this type"
        )));
    }
    // SAFETY: registered metadata lives as long as the type table.
    let k = unsafe { (*info.metadata).structural_eq_hash_kind };
    if k == kind::UNSUPPORTED {
        return Err(Error::type_error(format!(
            "_type_s_eq_hash_kind is not set for type `{key}`, so StructuralHash is not \
             supported for this type"
        )));
    }
    Ok((k, info))
}

/// A type's structural hook (`__s_equal__`, `__s_hash__`), when it sets one.
fn hook(
    name: &str,
    info: &crate::object::type_registry::TVMFFITypeInfo,
) -> Result<Option<Function>> {
    let Some(attr) = fields::type_attr(name, info.type_index) else {
        return Ok(None);
    };
    attr.view().as_function().map(Some).ok_or_else(|| {
        Error::type_error(format!(
            "the {name} attribute of `{}` is not a function",
            fields::type_key(info)
        ))
    })
}

/// A running computation that a hook's callback re-enters: reachable only on the thread that
/// runs the hook, and only until [`Reentry::end`] (the hook has returned).
struct Reentry<T> {
    ptr: std::sync::Arc<std::sync::atomic::AtomicPtr<T>>,
    owner: std::thread::ThreadId,
}

impl<T> Clone for Reentry<T> {
    fn clone(&self) -> Self {
        Reentry {
            ptr: self.ptr.clone(),
            owner: self.owner,
        }
    }
}

impl<T> Reentry<T> {
    /// Makes `running` reachable; the caller must not touch it until [`Reentry::end`].
    fn new(running: &mut T) -> Reentry<T> {
        Reentry {
            ptr: std::sync::Arc::new(std::sync::atomic::AtomicPtr::new(running)),
            owner: std::thread::current().id(),
        }
    }

    /// Runs `f` on the computation, or gives a `ValueError` outside its hook (after it
    /// returned, or on another thread).
    fn with<R>(&self, what: &str, f: impl FnOnce(&mut T) -> Result<R>) -> Result<R> {
        let p = self.ptr.load(std::sync::atomic::Ordering::Acquire);
        if p.is_null() || std::thread::current().id() != self.owner {
            return Err(Error::value(format!(
                "{what} callback called outside its hook (after it returned, or from another \
                 thread)"
            )));
        }
        // SAFETY: non-null only while the hook runs, used on the thread whose frame below
        // holds the computation and does not touch it until the hook returns; re-entries nest
        // on that one stack, each borrow ending before the callback returns.
        f(unsafe { &mut *p })
    }

    /// The hook has returned: the computation is its frame's again.
    fn end(&self) {
        self.ptr
            .store(std::ptr::null_mut(), std::sync::atomic::Ordering::Release);
    }
}

/// The optional bool arguments `map_free_vars` and `skip_tensor_content` at `i`, `i + 1`.
fn options(args: &[AnyView<'_>], i: usize, what: &str) -> Result<(bool, bool)> {
    let flag = |j: usize, name: &str| -> Result<bool> {
        match args.get(j) {
            None => Ok(false),
            Some(v) => v
                .as_bool()
                .or_else(|| v.as_i64().map(|n| n != 0))
                .ok_or_else(|| v.type_mismatch(&format!("{what} argument {j} ({name})"), "bool")),
        }
    };
    Ok((
        flag(i, "map_free_vars")?,
        flag(i + 1, "skip_tensor_content")?,
    ))
}

fn check_arity(args: &[AnyView<'_>], min: usize, max: usize, what: &str) -> Result<()> {
    if args.len() < min || args.len() > max {
        return Err(Error::type_error(format!(
            "{what} expects {min} to {max} arguments, got {}",
            args.len()
        )));
    }
    Ok(())
}

/// `StructuralKeyEqual`: same object, or same cached hash and structurally equal keys.
pub fn structural_key_equal(a: &ObjectRef, b: &ObjectRef) -> Result<bool> {
    if a.as_ptr() == b.as_ptr() {
        return Ok(true);
    }
    let (ka, ha) = super::library_types::structural_key_parts(a)?;
    let (kb, hb) = super::library_types::structural_key_parts(b)?;
    Ok(ha == hb && structural_equal(&ka.view(), &kb.view(), false, false)?)
}

/// Makes `ffi.StructuralKey` objects equal as container keys when [`structural_key_equal`]
/// says so, hashing as their stored structural hash (their `__any_equal__` and `__any_hash__`
/// in tvm-ffi); once, after the library types are registered.
pub fn register_all() -> Result<()> {
    native::register_all()?;
    let t = crate::object::type_registry::key_to_index("ffi.StructuralKey")?;
    crate::object::containers::key::register_key_type(
        t,
        |a, b| structural_key_equal(a, b).unwrap_or(false),
        |k| {
            super::library_types::structural_key_parts(k)
                .map(|(_, hash)| hash as u64)
                .unwrap_or(0)
        },
    );
    Ok(())
}

/// The global functions of this module.
pub fn builtins() -> Vec<(&'static str, Function)> {
    let mut v = walk::builtins();
    v.extend(map::builtins());
    v.extend(owned::builtins());
    v.extend([
        (
            "ffi.StructuralEqual",
            Function::from_fn(|args| {
                const WHAT: &str = "ffi.StructuralEqual";
                check_arity(args, 2, 4, WHAT)?;
                let (map_free_vars, skip) = options(args, 2, WHAT)?;
                Ok(Any::from(structural_equal(
                    &args[0],
                    &args[1],
                    map_free_vars,
                    skip,
                )?))
            }),
        ),
        (
            "ffi.GetFirstStructuralMismatch",
            Function::from_fn(|args| {
                const WHAT: &str = "ffi.GetFirstStructuralMismatch";
                check_arity(args, 2, 4, WHAT)?;
                let (map_free_vars, skip) = options(args, 2, WHAT)?;
                Ok(
                    match first_mismatch(&args[0], &args[1], map_free_vars, skip)? {
                        None => Any::none(),
                        Some((l, r)) => Any::from_object(new_array(vec![
                            Any::from_object(l),
                            Any::from_object(r),
                        ])),
                    },
                )
            }),
        ),
        (
            "ffi.StructuralHash",
            Function::from_fn(|args| {
                const WHAT: &str = "ffi.StructuralHash";
                check_arity(args, 1, 3, WHAT)?;
                let (map_free_vars, skip) = options(args, 1, WHAT)?;
                Ok(Any::from(
                    structural_hash(&args[0], map_free_vars, skip)? as i64
                ))
            }),
        ),
        (
            "ffi.StructuralKey",
            Function::from_fn(|args| {
                check_arity(args, 1, 1, "ffi.StructuralKey")?;
                let hash = structural_hash(&args[0], false, false)? as i64;
                Ok(Any::from_object(super::library_types::new_structural_key(
                    args[0].to_owned_any(),
                    hash,
                )?))
            }),
        ),
        (
            "ffi.VisitInterrupt",
            Function::from_fn(|args| {
                check_arity(args, 0, 1, "ffi.VisitInterrupt")?;
                let value = args.first().map(|v| v.to_owned_any()).unwrap_or_default();
                Ok(Any::from_object(super::library_types::new_visit_interrupt(
                    value,
                )?))
            }),
        ),
        (
            "ffi.StructuralKeyEqual",
            Function::from_fn(|args| {
                const WHAT: &str = "ffi.StructuralKeyEqual";
                check_arity(args, 2, 2, WHAT)?;
                let key = |i: usize| {
                    args[i]
                        .as_object()
                        .filter(super::library_types::is_structural_key)
                        .ok_or_else(|| {
                            args[i]
                                .type_mismatch(&format!("{WHAT} argument {i}"), "ffi.StructuralKey")
                        })
                };
                Ok(Any::from(structural_key_equal(&key(0)?, &key(1)?)?))
            }),
        ),
    ]);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::type_index as ti;
    use crate::object::containers::list::{self, new_list};
    use crate::object::containers::map::{new_dict, new_map, Entry};
    use crate::reflection::access_path;

    fn arr(items: Vec<Any>) -> Any {
        Any::from_object(new_array(items))
    }

    fn map_of(pairs: &[(&str, Any)], dict: bool) -> Any {
        let entries = pairs
            .iter()
            .map(|(k, v)| Entry {
                key: Any::from(*k),
                value: v.clone(),
            })
            .collect();
        Any::from_object(if dict {
            new_dict(entries)
        } else {
            new_map(entries)
        })
    }

    fn eq(a: &Any, b: &Any) -> bool {
        structural_equal(&a.view(), &b.view(), false, false).unwrap()
    }

    fn hash(a: &Any) -> u64 {
        structural_hash(&a.view(), false, false).unwrap()
    }

    fn nested(last: i64) -> Any {
        map_of(
            &[
                (
                    "items",
                    arr(vec![
                        1.into(),
                        2.into(),
                        map_of(&[("k", last.into())], false),
                    ]),
                ),
                ("meta", map_of(&[("tag", Any::from("x"))], false)),
            ],
            false,
        )
    }

    #[test]
    fn containers_compare_by_content_in_any_key_order() {
        let a = nested(3);
        let b = map_of(
            &[
                ("meta", map_of(&[("tag", Any::from("x"))], false)),
                (
                    "items",
                    arr(vec![1.into(), 2.into(), map_of(&[("k", 3.into())], false)]),
                ),
            ],
            false,
        );
        let c = nested(4);
        assert!(eq(&a, &b));
        assert_eq!(hash(&a), hash(&b));
        assert!(!eq(&a, &c));
        assert_ne!(hash(&a), hash(&c));
        // A map and a dict with the same entries differ: different types.
        let m = map_of(&[("a", 1.into())], false);
        let d = map_of(&[("a", 1.into())], true);
        assert!(!eq(&m, &d));
        assert_ne!(hash(&m), hash(&d));
        // An array and a list with the same items differ too.
        let l = Any::from_object(new_list(vec![1.into()]));
        assert!(!eq(&arr(vec![1.into()]), &l));
    }

    #[test]
    fn scalars_follow_tvm_ffi() {
        let nan = Any::from(f64::NAN);
        assert!(eq(&nan, &Any::from(-f64::NAN)));
        assert_eq!(hash(&nan), hash(&Any::from(-f64::NAN)));
        assert!(!eq(&Any::from(1i64), &Any::from(1.0f64)));
        assert!(!eq(&Any::from(1i64), &Any::from(true)));
        // Inline and object strings are the same string.
        let long = "a string too long to be stored inline";
        let small = Any::from("abc");
        let object = Any::from_object(crate::object::string::new_str("abc"));
        assert!(eq(&small, &object));
        assert_eq!(hash(&small), hash(&object));
        assert!(!eq(&Any::from(long), &small));
    }

    #[test]
    fn the_first_mismatch_is_a_pair_of_paths() {
        let (a, c) = (nested(3), nested(4));
        assert!(first_mismatch(&a.view(), &a.view(), false, false)
            .unwrap()
            .is_none());
        let (l, r) = first_mismatch(&a.view(), &c.view(), false, false)
            .unwrap()
            .unwrap();
        // ["items"][2]["k"] on both sides.
        assert_eq!(access_path::to_steps(&l).len(), 3);
        assert_eq!(access_path::to_steps(&r).len(), 3);
        // A shorter array: the left has item 2, the right lacks it.
        let (x, y) = (
            arr(vec![1.into(), 2.into(), 3.into()]),
            arr(vec![1.into(), 2.into()]),
        );
        let (l, r) = first_mismatch(&x.view(), &y.view(), false, false)
            .unwrap()
            .unwrap();
        // The step type's reflected fields are registered with the global functions.
        global("ffi.StructuralEqual");
        let kind_of = |p: &ObjectRef| {
            let step = access_path::to_steps(p)[0].view().as_object().unwrap();
            let info = fields::type_info(step.type_index()).unwrap();
            let f = fields::all_fields(info)
                .into_iter()
                .find(|f| fields::field_name(f) == "kind")
                .unwrap();
            fields::read_field(&step, &f)
                .unwrap()
                .view()
                .as_i64()
                .unwrap()
        };
        assert_eq!(kind_of(&l), i64::from(access_path::kind::ARRAY_ITEM));
        assert_eq!(
            kind_of(&r),
            i64::from(access_path::kind::ARRAY_ITEM_MISSING)
        );
    }

    #[test]
    fn structural_keys_are_equal_container_keys() {
        let get = |n: &str| crate::function::registry::get(n).unwrap();
        let key = |v: Any| get("ffi.StructuralKey").call(&[v.view()]).unwrap();
        let (k1, k2, k3) = (key(nested(3)), key(nested(3)), key(nested(4)));
        let equal = get("ffi.StructuralKeyEqual");
        assert_eq!(
            equal
                .call(&[k1.view(), k2.view()])
                .unwrap()
                .view()
                .as_bool(),
            Some(true)
        );
        assert_eq!(
            equal
                .call(&[k1.view(), k3.view()])
                .unwrap()
                .view()
                .as_bool(),
            Some(false)
        );
        let m = get("ffi.Map")
            .call(&[
                k1.view(),
                1.into(),
                k2.view(),
                2.into(),
                k3.view(),
                3.into(),
            ])
            .unwrap();
        let size = get("ffi.MapSize").call(&[m.view()]).unwrap();
        assert_eq!(size.view().as_i64(), Some(2));
        let at = get("ffi.MapGetItem").call(&[m.view(), k1.view()]).unwrap();
        assert_eq!(at.view().as_i64(), Some(2));
        // Not a key: a clear error.
        let e = equal.call(&[k1.view(), 5.into()]).unwrap_err();
        assert_eq!(e.kind, "TypeError");
    }

    fn global(name: &str) -> Function {
        crate::function::registry::get(name).unwrap()
    }

    /// `[(type_index, callback)]` as the Python package passes it.
    fn entries(pairs: Vec<(i64, Function)>) -> Any {
        arr(pairs
            .into_iter()
            .map(|(t, f)| arr(vec![t.into(), Any::from(f)]))
            .collect())
    }

    #[test]
    fn walk_and_map_follow_the_callbacks() {
        use std::sync::{Arc, Mutex};
        let root = arr(vec![arr(vec![1.into()]), 2.into(), Any::from("s")]);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = {
            let seen = seen.clone();
            Function::from_fn(move |a| {
                seen.lock().unwrap().push(a[0].as_i64().unwrap());
                Ok(Any::none())
            })
        };
        let ints = entries(vec![(i64::from(ti::INT), record)]);
        let walked = global("ffi.StructuralWalk")
            .call(&[root.view(), ints.view(), arr(vec![]).view(), 1i64.into()])
            .unwrap();
        assert!(walked.view().is_none());
        assert_eq!(*seen.lock().unwrap(), [1, 2]);

        let add = |n: i64| {
            entries(vec![(
                i64::from(ti::INT),
                Function::from_fn(move |a| Ok(Any::from(a[0].as_i64().unwrap() + n))),
            )])
        };
        let map = |e: &Any| {
            global("ffi.StructuralMap")
                .call(&[root.view(), e.view(), arr(vec![]).view(), 1i64.into()])
                .unwrap()
        };
        // Nothing changes: the same object back.
        let same = map(&add(0));
        assert_eq!(
            same.view().as_object().unwrap().as_ptr(),
            root.view().as_object().unwrap().as_ptr()
        );
        // Every int changes: a new value, the root untouched.
        let changed = map(&add(10));
        assert!(eq(
            &changed,
            &arr(vec![arr(vec![11.into()]), 12.into(), Any::from("s")])
        ));
        assert!(eq(
            &root,
            &arr(vec![arr(vec![1.into()]), 2.into(), Any::from("s")])
        ));
    }

    #[test]
    fn visitor_handles_expire_with_their_visit() {
        use std::sync::{Arc, Mutex};
        let kept: Arc<Mutex<Option<ObjectRef>>> = Arc::default();
        let keep = {
            let kept = kept.clone();
            Function::from_fn(move |a| {
                *kept.lock().unwrap() = a[1].as_object();
                // Inside the visit the handle works: descend into the array's items.
                global("ffi.StructuralVisitorDefaultVisit").call(&[a[1], a[0]])
            })
        };
        let root = arr(vec![1.into(), 2.into()]);
        let e = entries(vec![(i64::from(ti::ARRAY), keep)]);
        global("ffi.StructuralVisit")
            .call(&[root.view(), e.view()])
            .unwrap();
        let handle = Any::from_object(kept.lock().unwrap().take().unwrap());
        let err = global("ffi.StructuralVisitorVisit")
            .call(&[handle.view(), 1i64.into()])
            .unwrap_err();
        assert_eq!(err.kind, "ValueError");
        assert!(err.message.contains("has ended"), "{}", err.message);
        // Not a handle at all.
        let err = global("ffi.StructuralVisitorVisit")
            .call(&[1i64.into(), 1i64.into()])
            .unwrap_err();
        assert_eq!(err.kind, "TypeError");
    }

    /// A tree-node type whose `__s_equal__` / `__s_hash__` hooks compare and hash through their
    /// callbacks: equal when `cb(l, r, kind, "x")` says so, for the `l` and `r` of `pair`.
    #[test]
    fn structural_hooks_recurse_through_their_callbacks() {
        use crate::object::type_registry::{self, TVMFFITypeMetadata};
        use std::sync::{Arc, Mutex};
        let t = type_registry::get_or_alloc_index("tvmrt.test.Hooked", -1, 1, 0, true, ti::OBJECT)
            .unwrap();
        let md = TVMFFITypeMetadata {
            doc: crate::abi::TVMFFIByteArray {
                data: std::ptr::null(),
                size: 0,
            },
            creator: None,
            total_size: 24,
            structural_eq_hash_kind: 1,
        };
        // SAFETY: no doc string.
        unsafe { type_registry::register_metadata(t, &md) }.unwrap();
        let pair: Arc<Mutex<(i64, i64)>> = Arc::new(Mutex::new((1, 1)));
        let kept: Arc<Mutex<Option<Function>>> = Arc::default();
        let s_equal = {
            let (pair, kept) = (pair.clone(), kept.clone());
            Function::from_fn(move |a| {
                let cb = a[2].as_function().unwrap();
                *kept.lock().unwrap() = Some(cb.clone());
                let (l, r) = *pair.lock().unwrap();
                cb.call(&[l.into(), r.into(), 0i64.into(), Any::from("x").view()])
            })
        };
        let s_hash = {
            let pair = pair.clone();
            Function::from_fn(move |a| {
                let cb = a[2].as_function().unwrap();
                cb.call(&[pair.lock().unwrap().0.into(), a[1], 0i64.into()])
            })
        };
        type_registry::register_attr(t, "__s_equal__", Any::from(s_equal).view()).unwrap();
        type_registry::register_attr(t, "__s_hash__", Any::from(s_hash).view()).unwrap();
        let alloc = || Any::from_object(crate::reflection::library_types::alloc(t, 24).unwrap());
        let (a, b) = (alloc(), alloc());
        assert!(eq(&a, &b));
        let h1 = hash(&a);
        assert_eq!(h1, hash(&b));
        *pair.lock().unwrap() = (5, 2);
        assert!(!eq(&a, &b));
        let (l, _) = first_mismatch(&a.view(), &b.view(), false, false)
            .unwrap()
            .unwrap();
        assert_eq!(
            access_path::to_steps(&l).len(),
            1,
            "the hook's field name is the step"
        );
        assert_ne!(hash(&a), h1, "the hook hashes what its callback is given");
        // The callback kept past its hook is refused.
        let cb = kept.lock().unwrap().take().unwrap();
        let e = cb
            .call(&[1i64.into(), 1i64.into(), 0i64.into(), Any::from("x").view()])
            .unwrap_err();
        assert!(e.message.contains("outside its hook"), "{}", e.message);
    }

    #[test]
    fn unsupported_types_and_cycles_are_errors() {
        let f = Any::from(Function::from_fn(|_| Ok(Any::none())));
        let e = structural_equal(&f.view(), &f.view(), false, false).unwrap_err();
        assert_eq!(e.kind, "TypeError");
        assert!(e.message.contains("ffi.Function"), "{}", e.message);
        // A list that contains itself: an error, not a crash.
        let l = new_list(Vec::new());
        list::modify(&l, |items| {
            items.push(Any::from_object(l.clone()));
            Ok(())
        })
        .unwrap();
        let v = Any::from_object(l.clone());
        let other = Any::from_object(new_list(vec![v.clone()]));
        let e = structural_equal(&v.view(), &other.view(), false, false).unwrap_err();
        assert!(e.message.contains("nests too deeply"), "{}", e.message);
        assert!(structural_hash(&v.view(), false, false).is_err());
        list::modify(&l, |items| {
            items.clear();
            Ok(())
        })
        .unwrap();
        // Bad options.
        let call = |args: &[AnyView<'_>]| {
            crate::function::registry::get("ffi.StructuralEqual")
                .unwrap()
                .call(args)
        };
        assert!(call(&[1.into()]).is_err());
        assert!(call(&[1.into(), 1.into(), Any::from("x").view()]).is_err());
    }
}
