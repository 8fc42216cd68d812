//! Traversals whose callbacks own the descent: `ffi.StructuralVisit` hands each matched value
//! and an `ffi.StructuralVisitor` to its callback, `ffi.StructuralMutate` an
//! `ffi.StructuralMutator`; the callback recurses (or not) through the handle's methods
//! (`ffi.StructuralVisitorVisit` / `DefaultVisit`, `ffi.StructuralMutatorMutate` /
//! `DefaultMutate`, the def-region kind, the mutator's variable remap).
//!
//! A value no callback matches takes the default descent: its children ([`super::children`])
//! visited, or mutated and rebuilt with unchanged parts shared. A mutate callback's result is
//! final. Its optional in-place mode is `ALLOW` (1) only for a value this call alone holds (a
//! root moved in), `DISALLOW` (0) otherwise. A handle is valid on its thread while its traversal
//! runs; used afterwards it gives a `ValueError`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::type_registry::static_index;
use crate::object::ObjectRef;
use crate::reflection::library_types::{handle_id, new_handle};
use crate::value::{Any, AnyView};

use super::callbacks::{self, Entry};
use super::children::{each_child, is_unchanged_marker, kind_of, rebuild, reflected};
use super::{callback_region, kind, region, StackBase};
use crate::reflection::visit_error::{record_visit, with_visit_frame};

const VISITOR: &str = "ffi.StructuralVisitor";
const MUTATOR: &str = "ffi.StructuralMutator";
/// `InplaceMode.DISALLOW`, `InplaceMode.ALLOW`.
const DISALLOW: i64 = 0;
const ALLOW: i64 = 1;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// State shared by a visit and a mutate: the callbacks, the current def region, the handle
/// given to callbacks.
struct Common {
    entries: Vec<Entry>,
    region: Cell<i32>,
    stack: StackBase,
    handle: ObjectRef,
}

impl Common {
    fn new(entries: Vec<Entry>, key: &str, id: u64) -> Result<Common> {
        Ok(Common {
            entries,
            region: Cell::new(region::NONE),
            stack: StackBase::here(),
            handle: new_handle(key, id)?,
        })
    }

    /// Runs `f` with the region set to `r`.
    fn in_region<R>(&self, r: i32, f: impl FnOnce() -> R) -> R {
        let saved = self.region.replace(r);
        let out = f();
        self.region.set(saved);
        out
    }

    /// `WithDefRegionKind(handle, kind, callback)`.
    fn with_region(&self, kind: &AnyView<'_>, callback: &AnyView<'_>) -> Result<Any> {
        let r = callback_region(self.region.get(), kind)?;
        let f = callback.expect_function("callback")?;
        self.in_region(r, || f.call(&[]))
    }
}

struct Visitor(Common);
struct Mutator {
    common: Common,
    remap: RefCell<HashMap<usize, (ObjectRef, Any)>>,
}

thread_local! {
    static VISITORS: RefCell<HashMap<u64, Rc<Visitor>>> = RefCell::new(HashMap::new());
    static MUTATORS: RefCell<HashMap<u64, Rc<Mutator>>> = RefCell::new(HashMap::new());
}

/// Registers a running traversal for its handle's id; unregisters it when dropped.
struct Running<T: 'static> {
    table: &'static std::thread::LocalKey<RefCell<HashMap<u64, Rc<T>>>>,
    id: u64,
}

impl<T> Running<T> {
    fn start(
        table: &'static std::thread::LocalKey<RefCell<HashMap<u64, Rc<T>>>>,
        id: u64,
        state: Rc<T>,
    ) -> Running<T> {
        table.with(|t| t.borrow_mut().insert(id, state));
        Running { table, id }
    }
}

impl<T> Drop for Running<T> {
    fn drop(&mut self) {
        self.table.with(|t| t.borrow_mut().remove(&self.id));
    }
}

/// The running traversal a handle argument names.
fn running<T>(
    table: &'static std::thread::LocalKey<RefCell<HashMap<u64, Rc<T>>>>,
    handle: &AnyView<'_>,
    key: &str,
) -> Result<Rc<T>> {
    let id = handle
        .as_object()
        .and_then(|o| handle_id(&o, key))
        .ok_or_else(|| handle.type_mismatch("the handle argument", key))?;
    table.with(|t| t.borrow().get(&id).cloned()).ok_or_else(|| {
        Error::value(format!(
            "this {key} belongs to a traversal that has ended (or runs on another thread)"
        ))
    })
}

fn arity(args: &[AnyView<'_>], n: usize, what: &str) -> Result<()> {
    if args.len() != n {
        return Err(Error::type_error(format!(
            "{what} expects {n} arguments, got {}",
            args.len()
        )));
    }
    Ok(())
}

impl Visitor {
    /// The value's callback, or its default descent; an error coming up names `v` in its visit
    /// context (one frame per node, as tvm-ffi's engines add).
    fn visit(&self, v: &AnyView<'_>) -> Result<Option<Any>> {
        self.visit_node(v).map_err(|e| record_visit(e, v))
    }

    fn visit_node(&self, v: &AnyView<'_>) -> Result<Option<Any>> {
        self.0.stack.check("StructuralVisit")?;
        let Some(e) = callbacks::first_match(&self.0.entries, v.type_index()) else {
            return self.default_visit(v);
        };
        let r = callbacks::failed_if_error(
            e.f.call(&[*v, Any::from_object(self.0.handle.clone()).view()])?,
        )?;
        Ok((r.view().type_index() == static_index::VISIT_INTERRUPT).then_some(r))
    }

    /// The value's children, each visited.
    fn default_visit(&self, v: &AnyView<'_>) -> Result<Option<Any>> {
        each_child(v, self.0.region.get(), &mut |c, r| {
            self.0.in_region(r, || self.visit(c))
        })
    }
}

impl Mutator {
    /// The value's callback (its result final), or its default mutation. `owned`: this call
    /// holds the value's only outside reference (it was moved in). An error coming up names `v`
    /// in its visit context.
    fn mutate(&self, v: Any, owned: bool) -> Result<Any> {
        let c = &self.common;
        c.stack.check("StructuralMutate")?;
        let Some(e) = callbacks::first_match(&c.entries, v.view().type_index()) else {
            return with_visit_frame(v, |v| self.default_mutate(v));
        };
        let handle = Any::from_object(c.handle.clone());
        let mut args = vec![v.clone(), handle];
        if e.takes_mode {
            // `v` and the argument list hold two references; more means it is shared.
            let alone = owned && v.view().as_object().is_none_or(|o| o.strong_count() <= 3);
            args.push(Any::from(if alone { ALLOW } else { DISALLOW }));
        }
        let r =
            e.f.call_values(&args)
                .and_then(callbacks::failed_if_error)
                .map_err(|err| record_visit(err, &v.view()))?;
        drop(args);
        // A callback's `Unchanged` keeps its input (tvm-ffi's `ValueOrUnchanged`).
        Ok(if is_unchanged_marker(&r.view()) { v } else { r })
    }

    /// The value rebuilt from its mutated children; a variable or DAG node is mutated once and
    /// then remapped.
    fn default_mutate(&self, v: Any) -> Result<Any> {
        let met_in = self.common.region.get();
        let mut each = |child: Any, r: i32| self.common.in_region(r, || self.mutate(child, false));
        let Some((obj, info)) = reflected(&v.view()) else {
            return rebuild(v, met_in, &mut each);
        };
        let k = kind_of(info);
        if k != kind::FREE_VAR && k != kind::DAG_NODE {
            return rebuild(v, met_in, &mut each);
        }
        let key = obj.as_ptr() as usize;
        if let Some((_, done)) = self.remap.borrow().get(&key) {
            return Ok(done.clone());
        }
        let r = rebuild(v, met_in, &mut each)?;
        self.remap.borrow_mut().insert(key, (obj, r.clone()));
        Ok(r)
    }
}

/// A variable (free-variable or DAG object) for the remap functions.
fn remap_key(v: &AnyView<'_>, what: &str) -> Result<ObjectRef> {
    match reflected(v) {
        Some((obj, info)) if matches!(kind_of(info), kind::FREE_VAR | kind::DAG_NODE) => Ok(obj),
        _ => Err(v.type_mismatch(
            &format!("{what} argument 1"),
            "an object of a free-variable or DAG type",
        )),
    }
}

fn structural_visit(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "ffi.StructuralVisit";
    arity(args, 2, WHAT)?;
    let entries = callbacks::entries(&args[1], false, WHAT)?;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let state = Rc::new(Visitor(Common::new(entries, VISITOR, id)?));
    let _running = Running::start(&VISITORS, id, state.clone());
    Ok(state.visit(&args[0])?.unwrap_or_default())
}

fn structural_mutate(args: &[AnyView<'_>]) -> Result<Any> {
    const WHAT: &str = "ffi.StructuralMutate";
    arity(args, 2, WHAT)?;
    let entries = callbacks::entries(&args[1], false, WHAT)?;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let state = Rc::new(Mutator {
        common: Common::new(entries, MUTATOR, id)?,
        remap: RefCell::new(HashMap::new()),
    });
    let _running = Running::start(&MUTATORS, id, state.clone());
    match args[0].take_rvalue_object() {
        Some(obj) => state.mutate(Any::from_object(obj), true),
        None => state.mutate(args[0].to_owned_any(), false),
    }
}

/// The global functions of the visit and the mutate.
pub fn builtins() -> Vec<(&'static str, Function)> {
    let visitor = |args: &[AnyView<'_>], n: usize, what: &str| {
        arity(args, n, what)?;
        running(&VISITORS, &args[0], VISITOR)
    };
    let mutator = |args: &[AnyView<'_>], n: usize, what: &str| {
        arity(args, n, what)?;
        running(&MUTATORS, &args[0], MUTATOR)
    };
    vec![
        ("ffi.StructuralVisit", Function::from_fn(structural_visit)),
        (
            "ffi.StructuralVisitorVisit",
            Function::from_fn(move |a| {
                let v = visitor(a, 2, "ffi.StructuralVisitorVisit")?;
                Ok(v.visit(&a[1])?.unwrap_or_default())
            }),
        ),
        (
            "ffi.StructuralVisitorDefaultVisit",
            Function::from_fn(move |a| {
                let v = visitor(a, 2, "ffi.StructuralVisitorDefaultVisit")?;
                Ok(v.default_visit(&a[1])?.unwrap_or_default())
            }),
        ),
        (
            "ffi.StructuralVisitorDefRegionKind",
            Function::from_fn(move |a| {
                let v = visitor(a, 1, "ffi.StructuralVisitorDefRegionKind")?;
                Ok(Any::from(i64::from(v.0.region.get())))
            }),
        ),
        (
            "ffi.StructuralVisitorWithDefRegionKind",
            Function::from_fn(move |a| {
                let v = visitor(a, 3, "ffi.StructuralVisitorWithDefRegionKind")?;
                v.0.with_region(&a[1], &a[2])
            }),
        ),
        ("ffi.StructuralMutate", Function::from_fn(structural_mutate)),
        (
            "ffi.StructuralMutatorMutate",
            Function::from_fn(move |a| {
                let m = mutator(a, 2, "ffi.StructuralMutatorMutate")?;
                match a[1].take_rvalue_object() {
                    Some(obj) => m.mutate(Any::from_object(obj), true),
                    None => m.mutate(a[1].to_owned_any(), false),
                }
            }),
        ),
        (
            "ffi.StructuralMutatorDefaultMutate",
            Function::from_fn(move |a| {
                let m = mutator(a, 2, "ffi.StructuralMutatorDefaultMutate")?;
                m.default_mutate(a[1].to_owned_any())
            }),
        ),
        (
            "ffi.StructuralMutatorVarRemapGet",
            Function::from_fn(move |a| {
                let m = mutator(a, 2, "ffi.StructuralMutatorVarRemapGet")?;
                let var = remap_key(&a[1], "ffi.StructuralMutatorVarRemapGet")?;
                let found = m.remap.borrow().get(&(var.as_ptr() as usize)).cloned();
                Ok(found.map(|(_, v)| v).unwrap_or_default())
            }),
        ),
        (
            "ffi.StructuralMutatorVarRemapSet",
            Function::from_fn(move |a| {
                let m = mutator(a, 3, "ffi.StructuralMutatorVarRemapSet")?;
                let var = remap_key(&a[1], "ffi.StructuralMutatorVarRemapSet")?;
                let key = var.as_ptr() as usize;
                m.remap.borrow_mut().insert(key, (var, a[2].to_owned_any()));
                Ok(Any::none())
            }),
        ),
        (
            "ffi.StructuralMutatorDefRegionKind",
            Function::from_fn(move |a| {
                let m = mutator(a, 1, "ffi.StructuralMutatorDefRegionKind")?;
                Ok(Any::from(i64::from(m.common.region.get())))
            }),
        ),
        (
            "ffi.StructuralMutatorWithDefRegionKind",
            Function::from_fn(move |a| {
                let m = mutator(a, 3, "ffi.StructuralMutatorWithDefRegionKind")?;
                m.common.with_region(&a[1], &a[2])
            }),
        ),
    ]
}
