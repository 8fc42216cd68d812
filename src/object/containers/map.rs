//! `ffi.Map` (index 72, immutable) and `ffi.Dict` (index 76, mutable): tvm-ffi's hash maps.
//!
//! Both start with tvm-ffi's `MapBaseObj` cell after the header: `{void* data; uint64_t size;
//! uint64_t slots; void (*data_deleter)(void*)}` (`container/map_base.h`). tvmrt always uses
//! tvm-ffi's *small* layout, which C++ code reads inline: the top bit of `slots` set, `data`
//! pointing at `size` `{Any key; Any value}` pairs searched linearly, in insertion order. (tvm-ffi
//! switches to its dense hash layout above 4 entries; a small-tagged map of any size still reads
//! correctly through its headers.) Keys compare with [`super::key::any_equal`].

use std::cell::UnsafeCell;
use std::ffi::c_void;

use parking_lot::Mutex;

use super::key::any_equal;
use crate::abi::type_index;
use crate::error::{Error, Result};
use crate::object::type_registry::static_index;
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::value::{Any, AnyView};

/// The small-layout tag of `slots`.
const SMALL_TAG: u64 = 1 << 63;

/// `MapBaseObj`'s fields after the header.
#[repr(C)]
#[derive(Clone, Copy)]
struct MapCell {
    data: *mut c_void,
    size: u64,
    slots: u64,
    data_deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// One entry: `std::pair<Any, Any>`.
#[repr(C)]
#[derive(Clone)]
pub struct Entry {
    pub key: Any,
    pub value: Any,
}

// SAFETY: an entry owns its key and value; owned values (PODs, or objects with atomic reference
// counts) may move and be shared between threads.
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

/// Cell and entries, shared by both kinds.
#[repr(C)]
pub struct MapCore {
    cell: UnsafeCell<MapCell>,
    entries: Mutex<Vec<Entry>>,
}

// SAFETY: the cell is written only while `entries` is locked; entries hold shareable `Any`s.
unsafe impl Sync for MapCore {}
// SAFETY: as above.
unsafe impl Send for MapCore {}

impl MapCore {
    fn new(entries: Vec<Entry>) -> MapCore {
        let core = MapCore {
            cell: UnsafeCell::new(MapCell {
                data: std::ptr::null_mut(),
                size: 0,
                slots: SMALL_TAG,
                data_deleter: None,
            }),
            entries: Mutex::new(entries),
        };
        core.publish(&mut core.entries.lock());
        core
    }

    /// Points the public cell at the current entries.
    fn publish(&self, entries: &mut Vec<Entry>) {
        // SAFETY: called with `entries` locked; the cell is ours to write.
        unsafe {
            *self.cell.get() = MapCell {
                data: entries.as_mut_ptr().cast(),
                size: entries.len() as u64,
                slots: entries.capacity() as u64 | SMALL_TAG,
                data_deleter: None,
            }
        };
    }
}

/// Payload of a tvmrt `ffi.Map`.
#[repr(C)]
pub struct MapObj(MapCore);
/// Payload of a tvmrt `ffi.Dict`.
#[repr(C)]
pub struct DictObj(MapCore);

// SAFETY: `MapBaseObj`'s cell first, as tvm-ffi's `MapObj` (index 72).
unsafe impl ObjectPayload for MapObj {
    const TYPE_INDEX: i32 = type_index::MAP;
}
// SAFETY: as above, for `DictObj` (index 76).
unsafe impl ObjectPayload for DictObj {
    const TYPE_INDEX: i32 = static_index::DICT;
}

/// Entries from alternating key/value arguments; a repeated key keeps its first position and
/// takes the last value.
pub fn entries_from_pairs(args: &[AnyView<'_>]) -> Result<Vec<Entry>> {
    if args.len() % 2 != 0 {
        return Err(Error::value(format!(
            "expected key/value pairs, got an odd number of arguments ({})",
            args.len()
        )));
    }
    let mut entries: Vec<Entry> = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks(2) {
        set(&mut entries, pair[0].to_owned_any(), pair[1].to_owned_any());
    }
    Ok(entries)
}

/// Sets `key` to `value` in `entries`.
pub fn set(entries: &mut Vec<Entry>, key: Any, value: Any) {
    match entries
        .iter_mut()
        .find(|e| any_equal(&e.key.view(), &key.view()))
    {
        Some(e) => e.value = value,
        None => entries.push(Entry { key, value }),
    }
}

/// Creates an `ffi.Map`.
pub fn new_map(entries: Vec<Entry>) -> ObjectRef {
    new_object(MapObj(MapCore::new(entries)))
}

/// Creates an `ffi.Dict`.
pub fn new_dict(entries: Vec<Entry>) -> ObjectRef {
    new_object(DictObj(MapCore::new(entries)))
}

fn is_map_kind(t: i32) -> bool {
    t == type_index::MAP || t == static_index::DICT
}

/// The entries of any map or dict, in order, as new references; `None` for other objects.
/// Maps made by tvm-ffi itself are read when they use the small layout.
pub fn map_entries(obj: &ObjectRef) -> Option<Result<Vec<Entry>>> {
    if !is_map_kind(obj.type_index()) {
        return None;
    }
    if let Some(m) = obj.downcast_ref::<MapObj>() {
        return Some(Ok(m.0.entries.lock().clone()));
    }
    if let Some(d) = obj.downcast_ref::<DictObj>() {
        return Some(Ok(d.0.entries.lock().clone()));
    }
    // SAFETY: maps and dicts (any producer) have the `MapBaseObj` cell after the header.
    let cell = unsafe { *obj.cell_ptr().cast::<MapCell>() };
    if cell.slots & SMALL_TAG == 0 {
        return Some(Err(Error::type_error(
            "reading tvm-ffi's dense map layout is not supported by tvmrt yet",
        )));
    }
    let n = cell.size as usize;
    // SAFETY: a small map's data holds `size` live key/value pairs.
    let views = unsafe { AnyView::slice_from_raw(cell.data.cast(), 2 * n) };
    Some(Ok(views
        .chunks(2)
        .map(|kv| Entry {
            key: kv[0].to_owned_any(),
            value: kv[1].to_owned_any(),
        })
        .collect()))
}

/// Runs `change` on the entries of a tvmrt dict, then republishes its cell.
pub fn modify_dict<R>(
    obj: &ObjectRef,
    change: impl FnOnce(&mut Vec<Entry>) -> Result<R>,
) -> Result<R> {
    let dict = obj.downcast_ref::<DictObj>().ok_or_else(|| {
        if obj.type_index() == static_index::DICT {
            Error::type_error("this ffi.Dict was not made by tvmrt and cannot be changed by it")
        } else {
            Error::type_error(format!(
                "expected ffi.Dict, got {}",
                crate::value::type_name(obj.type_index())
            ))
        }
    })?;
    let mut entries = dict.0.entries.lock();
    let r = change(&mut entries);
    dict.0.publish(&mut entries);
    r
}

/// The value of `key`, if present.
pub fn lookup(entries: &[Entry], key: &AnyView<'_>) -> Option<Any> {
    entries
        .iter()
        .find(|e| any_equal(&e.key.view(), key))
        .map(|e| e.value.clone())
}
