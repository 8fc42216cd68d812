//! The structural hooks of the built-in types for the traversal engines inlined in tvm-ffi's C++
//! headers (`extra/structural_visit.h`, `extra/structural_mutate.h`): a C++ `StructuralVisitor`,
//! `StructuralMutateEngine` or `StructuralMapEngineBase` runs in the client's own code and asks
//! the runtime, through the `__s_visit__`, `__s_mutate__` and `__s_maybe_inplace_mutate__`
//! type attributes, how to descend into a container (tvm-ffi `src/ffi/extra/structural_visit.cc`,
//! `structural_mutate.cc`):
//!
//! - arrays and lists visit and mutate their items, maps and dicts their values (keys are
//!   anchors, never visited);
//! - strings, bytes and big integers are immutable leaves (mutation leaves them unchanged);
//! - a mutation copies a container from its first changed item on (the items before it shared)
//!   and leaves it unchanged when no item changes; the in-place form (called only for a
//!   container its caller alone holds) changes items where they are.
//!
//! Each hook has the engines' C ABI: `TVMFFIAny (*)(Engine* engine, AnyView value)`, the result
//! a raw value: `None` or a `VisitInterrupt` (visit), a replacement or the `Unchanged` marker
//! (mutate), or an error object. The engine is reached through its dispatch table, the first
//! field after its header (`vtable_`).

use std::ffi::c_void;

use crate::abi::{type_index as ti, TVMFFIAny};
use crate::error::{Error, Result};
use crate::object::containers::array::{new_array, seq_item_raw, seq_len, set_item_in_place};
use crate::object::containers::list::{new_list, seq_items};
use crate::object::containers::map::{
    map_entries, map_len, map_value_raw, new_dict, new_map, set_value_in_place, Entry,
};
use crate::object::type_registry::{self, static_index};
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

/// `kTVMFFIUnchanged`: the marker a mutation returns for "keep the input".
const UNCHANGED: i32 = 13;

/// An engine's hook ABI (`FStructuralVisitABI`, `FStructuralMutateABI`).
type EngineFn = unsafe extern "C" fn(*mut c_void, TVMFFIAny) -> TVMFFIAny;

/// `StructuralVisitorVTable`.
#[repr(C)]
struct VisitorVTable {
    visit: EngineFn,
}

/// `StructuralMutatorVTable` (the two variable-remap entries follow; unused here).
#[repr(C)]
struct MutatorVTable {
    mutate: EngineFn,
    maybe_inplace_mutate: EngineFn,
}

/// The engine's dispatch table: the first field after the object header.
///
/// # Safety
/// `engine` is a live C++ structural visitor or mutator object.
unsafe fn vtable<T>(engine: *mut c_void) -> &'static T {
    // SAFETY: per the contract; the table outlives the engine (tvm-ffi requires it).
    unsafe {
        &**engine
            .cast::<u8>()
            .add(std::mem::size_of::<crate::object::ObjectHeader>())
            .cast::<*const T>()
    }
}

fn unchanged() -> TVMFFIAny {
    TVMFFIAny {
        type_index: UNCHANGED,
        small_str_len: 0,
        payload: crate::abi::AnyPayload { v_int64: 0 },
    }
}

/// The raw result of a hook body: its value, or its error as an error object.
fn finish(r: Result<TVMFFIAny>) -> TVMFFIAny {
    match r {
        Ok(v) => v,
        Err(e) => Any::from_object(crate::object::error_obj::new_error(&e)).into_raw(),
    }
}

/// Runs a hook body behind the unwind guard: no panic reaches the C++ engine.
fn guarded(name: &'static str, body: impl FnOnce() -> Result<TVMFFIAny>) -> TVMFFIAny {
    let out = crate::unwind_guard::run_or(name, None, || body().map(Some));
    match out {
        Some(v) => v,
        None => finish(Err(crate::raised::take_raised()
            .unwrap_or_else(|| Error::runtime(format!("{name} failed"))))),
    }
}

/// The container behind a hook's value.
fn container(value: &TVMFFIAny) -> Result<ObjectRef> {
    // SAFETY: the engine passes a live value it holds for the call.
    let view = unsafe { AnyView::from_raw(*value) };
    view.as_object()
        .ok_or_else(|| Error::type_error("structural hook called on a value that is not an object"))
}

// ---- visit -----------------------------------------------------------------------------------

/// Visits `items` through the engine; the first interrupt or error ends the walk.
///
/// # Safety
/// `visitor` is a live C++ structural visitor.
unsafe fn visit_all(visitor: *mut c_void, items: impl IntoIterator<Item = Any>) -> TVMFFIAny {
    // SAFETY: per the contract.
    let table = unsafe { vtable::<VisitorVTable>(visitor) };
    for item in items {
        // SAFETY: `item` is alive for the call (a borrowed view is passed).
        let r = unsafe { (table.visit)(visitor, *item.raw()) };
        if r.type_index != ti::NONE {
            return r;
        }
    }
    TVMFFIAny::NONE
}

/// `__s_visit__` of arrays and lists: each item.
///
/// # Safety
/// The engine ABI: a live visitor and a value it holds.
unsafe extern "C" fn visit_seq(visitor: *mut c_void, value: TVMFFIAny) -> TVMFFIAny {
    guarded("__s_visit__", || {
        // The items are held for the walk: a callback may change a list meanwhile.
        let items = seq_items(&container(&value)?).unwrap_or_default();
        // SAFETY: per the contract.
        Ok(unsafe { visit_all(visitor, items) })
    })
}

/// `__s_visit__` of maps and dicts: each value.
///
/// # Safety
/// As [`visit_seq`].
unsafe extern "C" fn visit_map(visitor: *mut c_void, value: TVMFFIAny) -> TVMFFIAny {
    guarded("__s_visit__", || {
        let entries = map_entries(&container(&value)?).unwrap_or_else(|| Ok(Vec::new()))?;
        // SAFETY: per the contract.
        Ok(unsafe { visit_all(visitor, entries.into_iter().map(|e| e.value)) })
    })
}

// ---- mutate ----------------------------------------------------------------------------------

/// tvm-ffi's `UnchangedOrSameAs`: the marker, or the very same value (`Any::same_as`: the same
/// 16 bytes bar the padding word's use as a small-string length).
fn unchanged_or_same(result: &TVMFFIAny, item: &TVMFFIAny) -> bool {
    // SAFETY: every payload is 8 readable bytes.
    result.type_index == UNCHANGED
        || (result.type_index == item.type_index
            && result.small_str_len == item.small_str_len
            && unsafe { result.payload.v_int64 == item.payload.v_int64 })
}

/// An error object an engine or hook returned, passed on untouched (it carries the visit
/// context C++ engines attach on the way up).
struct Failed(TVMFFIAny);

/// One item, borrowed from its container, mutated through the engine: `Ok(None)` unchanged,
/// `Ok(Some(v))` replaced, or the engine's error. With `allow_inplace`, an item only the
/// container holds may be changed in place (tvm-ffi's `MutateExpected(item, kAllow)`, which
/// checks uniqueness on the borrowed item).
///
/// # Safety
/// `mutator` is a live C++ structural mutator; `item` is alive for the call.
unsafe fn mutate_item(
    mutator: *mut c_void,
    item: TVMFFIAny,
    allow_inplace: bool,
) -> std::result::Result<Option<Any>, Failed> {
    // SAFETY: per the contract.
    let table = unsafe { vtable::<MutatorVTable>(mutator) };
    let unique = allow_inplace
        && item.type_index >= ti::STATIC_OBJECT_BEGIN
        // SAFETY: a live object (borrowed): its header is readable.
        && unsafe {
            (*item.payload.v_obj.cast::<crate::object::ObjectHeader>())
                .combined_ref_count
                .load(std::sync::atomic::Ordering::Relaxed)
                & 0xffff_ffff
                == 1
        };
    let hook = if unique {
        table.maybe_inplace_mutate
    } else {
        table.mutate
    };
    // SAFETY: a borrowed view of `item`; the result is owned.
    let r = unsafe { hook(mutator, item) };
    if r.type_index == ti::ERROR {
        return Err(Failed(r));
    }
    let changed = !unchanged_or_same(&r, &item);
    // SAFETY: owned (the marker, the item again, or a replacement).
    let r = unsafe { Any::from_raw(r) };
    Ok(changed.then_some(r))
}

/// A borrowed item as an owned value (a new reference).
///
/// # Safety
/// `raw` is alive.
unsafe fn owned(raw: TVMFFIAny) -> Any {
    // SAFETY: per the contract.
    unsafe { AnyView::from_raw(raw) }.to_owned_any()
}

/// Mutates the `len` items `item(i)` yields in order: `None` when every one is unchanged, else
/// the new items, the ones before the first change and every unchanged one shared.
///
/// # Safety
/// `mutator` is a live C++ structural mutator; `item` yields live borrowed items.
unsafe fn mutate_all(
    mutator: *mut c_void,
    len: usize,
    item: &dyn Fn(usize) -> Result<Option<TVMFFIAny>>,
) -> Result<std::result::Result<Option<Vec<Any>>, Failed>> {
    let mut out: Option<Vec<Any>> = None;
    for i in 0..len {
        let Some(raw) = item(i)? else { break };
        // SAFETY: per the contract.
        let mapped = match unsafe { mutate_item(mutator, raw, false) } {
            Ok(m) => m,
            Err(f) => return Ok(Err(f)),
        };
        match (mapped, &mut out) {
            (Some(v), None) => {
                let mut copy = Vec::with_capacity(len);
                for j in 0..i {
                    // SAFETY: per the contract.
                    copy.push(item(j)?.map(|r| unsafe { owned(r) }).unwrap_or_default());
                }
                copy.push(v);
                out = Some(copy);
            }
            (Some(v), Some(copy)) => copy.push(v),
            // SAFETY: per the contract.
            (None, Some(copy)) => copy.push(unsafe { owned(raw) }),
            (None, None) => {}
        }
    }
    Ok(Ok(out))
}

/// `__s_mutate__` of strings, bytes and big integers: unchanged.
unsafe extern "C" fn mutate_leaf(_mutator: *mut c_void, _value: TVMFFIAny) -> TVMFFIAny {
    unchanged()
}

/// `__s_mutate__` of arrays and lists: a copy from the first changed item on.
///
/// # Safety
/// The engine ABI: a live mutator and a value it holds.
unsafe extern "C" fn mutate_seq(mutator: *mut c_void, value: TVMFFIAny) -> TVMFFIAny {
    guarded("__s_mutate__", || {
        let obj = container(&value)?;
        // SAFETY: items are borrowed from the container, which the engine's caller holds.
        let item = |i| Ok(unsafe { seq_item_raw(&obj, i) });
        // SAFETY: per the contract.
        Ok(
            match unsafe { mutate_all(mutator, seq_len(&obj), &item)? } {
                Err(Failed(e)) => e,
                Ok(None) => unchanged(),
                Ok(Some(items)) => Any::from_object(if obj.type_index() == ti::ARRAY {
                    new_array(items)
                } else {
                    new_list(items)
                })
                .into_raw(),
            },
        )
    })
}

/// `__s_maybe_inplace_mutate__` of arrays and lists: each changed item replaced where it is.
///
/// # Safety
/// As [`mutate_seq`]; the caller alone holds the container.
unsafe extern "C" fn mutate_seq_inplace(mutator: *mut c_void, value: TVMFFIAny) -> TVMFFIAny {
    guarded("__s_maybe_inplace_mutate__", || {
        let obj = container(&value)?;
        let mut i = 0;
        // SAFETY: items are borrowed from the container, which only the caller holds.
        while let Some(raw) = unsafe { seq_item_raw(&obj, i) } {
            // SAFETY: per the contract.
            match unsafe { mutate_item(mutator, raw, true) } {
                Err(Failed(e)) => return Ok(e),
                Ok(Some(v)) => {
                    // SAFETY: the engine calls this hook only for a container its caller alone
                    // holds.
                    unsafe { set_item_in_place(&obj, i, v) };
                }
                Ok(None) => {}
            }
            i += 1;
        }
        Ok(unchanged())
    })
}

/// `__s_mutate__` of maps and dicts: a copy (same keys, same order) from the first changed value
/// on.
///
/// # Safety
/// As [`mutate_seq`].
unsafe extern "C" fn mutate_map(mutator: *mut c_void, value: TVMFFIAny) -> TVMFFIAny {
    guarded("__s_mutate__", || {
        let obj = container(&value)?;
        // SAFETY: values are borrowed from the container, which the engine's caller holds.
        let item = |i| unsafe { map_value_raw(&obj, i) };
        // SAFETY: per the contract.
        Ok(
            match unsafe { mutate_all(mutator, map_len(&obj), &item)? } {
                Err(Failed(e)) => e,
                Ok(None) => unchanged(),
                Ok(Some(values)) => {
                    let entries = map_entries(&obj).unwrap_or_else(|| Ok(Vec::new()))?;
                    let entries: Vec<Entry> = entries
                        .into_iter()
                        .zip(values)
                        .map(|(e, value)| Entry { key: e.key, value })
                        .collect();
                    Any::from_object(if obj.type_index() == ti::MAP {
                        new_map(entries)
                    } else {
                        new_dict(entries)
                    })
                    .into_raw()
                }
            },
        )
    })
}

/// `__s_maybe_inplace_mutate__` of maps and dicts: each changed value replaced where it is.
///
/// # Safety
/// As [`mutate_seq_inplace`].
unsafe extern "C" fn mutate_map_inplace(mutator: *mut c_void, value: TVMFFIAny) -> TVMFFIAny {
    guarded("__s_maybe_inplace_mutate__", || {
        let obj = container(&value)?;
        let mut i = 0;
        // SAFETY: values are borrowed from the container, which only the caller holds.
        while let Some(raw) = unsafe { map_value_raw(&obj, i)? } {
            // SAFETY: per the contract.
            match unsafe { mutate_item(mutator, raw, true) } {
                Err(Failed(e)) => return Ok(e),
                Ok(Some(v)) => {
                    // SAFETY: the engine calls this hook only for a container its caller alone
                    // holds.
                    unsafe { set_value_in_place(&obj, i, v)? };
                }
                Ok(None) => {}
            }
            i += 1;
        }
        Ok(unchanged())
    })
}

/// Registers the hooks above for the built-in types (once, with the library's types).
pub fn register_all() -> Result<()> {
    let hook = |f: EngineFn| Any::opaque_ptr(f as *mut c_void);
    let mut attrs: Vec<(i32, &str, Any)> = vec![
        (ti::ARRAY, "__s_visit__", hook(visit_seq)),
        (static_index::LIST, "__s_visit__", hook(visit_seq)),
        (ti::MAP, "__s_visit__", hook(visit_map)),
        (static_index::DICT, "__s_visit__", hook(visit_map)),
    ];
    for (t, mutate, inplace) in [
        (
            ti::ARRAY,
            mutate_seq as EngineFn,
            mutate_seq_inplace as EngineFn,
        ),
        (static_index::LIST, mutate_seq, mutate_seq_inplace),
        (ti::MAP, mutate_map, mutate_map_inplace),
        (static_index::DICT, mutate_map, mutate_map_inplace),
        (ti::STR, mutate_leaf, mutate_leaf),
        (ti::BYTES, mutate_leaf, mutate_leaf),
        (static_index::BIG_INT, mutate_leaf, mutate_leaf),
    ] {
        attrs.push((t, "__s_mutate__", hook(mutate)));
        attrs.push((t, "__s_maybe_inplace_mutate__", hook(inplace)));
    }
    for (t, name, value) in attrs {
        type_registry::register_attr(t, name, value.view())?;
    }
    Ok(())
}
