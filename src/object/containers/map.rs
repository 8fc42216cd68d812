//! `ffi.Map` (index 72, immutable) and `ffi.Dict` (index 76, mutable): tvm-ffi's hash maps.
//!
//! Both start with tvm-ffi's `MapBaseObj` cell after the header: `{void* data; uint64_t size;
//! uint64_t slots; void (*data_deleter)(void*)}` (`container/map_base.h`). tvmrt always uses
//! tvm-ffi's *small* layout, which C++ code reads inline: the top bit of `slots` set, `data`
//! pointing at `size` `{Any key; Any value}` pairs searched linearly, in insertion order. (tvm-ffi
//! switches to its dense hash layout above 4 entries; a small-tagged map of any size still reads
//! correctly through its headers, and tvmrt reads dense maps that C++ code made.) Keys compare
//! with [`super::key::any_equal`].

use std::cell::UnsafeCell;
use std::ffi::c_void;

use parking_lot::Mutex;

use super::key::any_equal;
use crate::abi::{type_index, TVMFFIAny};
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
    if !args.len().is_multiple_of(2) {
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
/// Maps made by tvm-ffi's C++ headers are read in either of their layouts.
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
        // SAFETY: a map without the small tag is tvm-ffi's `DenseMapBaseObj`.
        return Some(unsafe { dense_entries(obj, &cell) });
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

/// tvm-ffi's dense layout (`DenseMapBaseObj`, `container/map_base.h`): after the cell,
/// `uint32_t fib_shift_` and the insertion-ordered list's head and tail indexes; `data` holds
/// blocks of 16 slots, each block 16 metadata bytes then 16 items of `{Any key; Any value;
/// uint64_t prev; uint64_t next}`.
mod dense {
    /// Slots per block.
    pub const BLOCK_CAP: usize = 16;
    /// Bytes of one item.
    pub const ITEM: usize = 48;
    /// Bytes of one block.
    pub const BLOCK: usize = BLOCK_CAP * (ITEM + 1);
    /// Offset of `iter_list_head_` from the cell's start.
    pub const HEAD_OFFSET: usize = 40;
    /// Offset of `next` in an item.
    pub const NEXT_OFFSET: usize = 40;
    /// `kInvalidIndex`: the end of the list.
    pub const INVALID: u64 = u64::MAX;
}

/// The entries of a dense map, in insertion order (its list from head to tail).
///
/// # Safety
/// `obj` is a live tvm-ffi dense map and `cell` its cell.
unsafe fn dense_entries(obj: &ObjectRef, cell: &MapCell) -> Result<Vec<Entry>> {
    let slots = cell.slots;
    // SAFETY: the head index follows the cell and `fib_shift_` in a dense map.
    let mut index = unsafe { *obj.cell_ptr().add(dense::HEAD_OFFSET).cast::<u64>() };
    let mut out = Vec::with_capacity(cell.size as usize);
    while index != dense::INVALID {
        if index >= slots || out.len() as u64 >= cell.size {
            return Err(Error::value(format!(
                "corrupt dense map: list index {index} with {slots} slots and {} entries",
                cell.size
            )));
        }
        let i = index as usize;
        // SAFETY: `index < slots`: slot `i` is inside block `i / 16` of `data`, and a slot on
        // the list holds a live key/value pair.
        unsafe {
            let block = cell
                .data
                .cast::<u8>()
                .add(i / dense::BLOCK_CAP * dense::BLOCK);
            let item = block.add(dense::BLOCK_CAP + i % dense::BLOCK_CAP * dense::ITEM);
            let kv = AnyView::slice_from_raw(item.cast(), 2);
            out.push(Entry {
                key: kv[0].to_owned_any(),
                value: kv[1].to_owned_any(),
            });
            index = *item.add(dense::NEXT_OFFSET).cast::<u64>();
        }
    }
    Ok(out)
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

/// The entry count of a map or dict of any producer (its cell's `size`); 0 for other objects.
pub fn map_len(obj: &ObjectRef) -> usize {
    if !is_map_kind(obj.type_index()) {
        return 0;
    }
    // SAFETY: maps and dicts (any producer) have the `MapBaseObj` cell after the header.
    let cell = unsafe { *obj.cell_ptr().cast::<MapCell>() };
    cell.size as usize
}

/// The value of the `index`-th entry (in iteration order) of a map or dict of any producer,
/// borrowed as a raw value (no reference taken), as C++ code reads `it->second`.
///
/// # Safety
/// The value is valid while the entry stays in the map.
pub unsafe fn map_value_raw(obj: &ObjectRef, index: usize) -> Result<Option<TVMFFIAny>> {
    if !is_map_kind(obj.type_index()) {
        return Ok(None);
    }
    // SAFETY: maps and dicts (any producer) have the `MapBaseObj` cell after the header (tvmrt's
    // publish theirs in the small layout).
    let cell = unsafe { *obj.cell_ptr().cast::<MapCell>() };
    if index as u64 >= cell.size {
        return Ok(None);
    }
    let slot: *const TVMFFIAny = if cell.slots & SMALL_TAG != 0 {
        // SAFETY: a small map's data holds `size` key/value pairs; the value follows its key.
        unsafe { cell.data.cast::<TVMFFIAny>().add(2 * index + 1) }
    } else {
        // SAFETY: a dense map's list links its `size` live items.
        unsafe { dense_item(obj, &cell, index)?.cast::<TVMFFIAny>().add(1) }
    };
    // SAFETY: a live value slot.
    Ok(Some(unsafe { *slot }))
}

/// Replaces the value of the `index`-th entry (in iteration order) of a map or dict of any
/// producer, in place.
///
/// # Safety
/// The caller holds the only reference to `obj` (tvm-ffi's in-place structural mutation
/// contract), so nothing reads the entry while it changes.
pub unsafe fn set_value_in_place(obj: &ObjectRef, index: usize, value: Any) -> Result<()> {
    let core = obj
        .downcast_ref::<MapObj>()
        .map(|m| &m.0)
        .or_else(|| obj.downcast_ref::<DictObj>().map(|d| &d.0));
    if let Some(core) = core {
        let mut entries = core.entries.lock();
        let e = entries
            .get_mut(index)
            .ok_or_else(|| Error::index(format!("map entry {index} out of range")))?;
        e.value = value;
        core.publish(&mut entries);
        return Ok(());
    }
    if !is_map_kind(obj.type_index()) {
        return Err(Error::type_error("expected ffi.Map or ffi.Dict"));
    }
    // SAFETY: maps and dicts (any producer) have the `MapBaseObj` cell after the header.
    let cell = unsafe { *obj.cell_ptr().cast::<MapCell>() };
    if index as u64 >= cell.size {
        return Err(Error::index(format!("map entry {index} out of range")));
    }
    let slot: *mut Any = if cell.slots & SMALL_TAG != 0 {
        // SAFETY: a small map's data holds `size` key/value pairs; the value follows its key.
        unsafe { cell.data.cast::<Any>().add(2 * index + 1) }
    } else {
        // SAFETY: a dense map's list links its `size` live items (checked by `dense_item`).
        unsafe { dense_item(obj, &cell, index)?.cast::<Any>().add(1) }
    };
    // SAFETY: a live value slot of an object only the caller holds; the old value is released.
    unsafe { *slot = value };
    Ok(())
}

/// The address of the `index`-th item (in insertion order) of a dense map.
///
/// # Safety
/// `obj` is a live tvm-ffi dense map and `cell` its cell.
unsafe fn dense_item(obj: &ObjectRef, cell: &MapCell, index: usize) -> Result<*mut u8> {
    // SAFETY: the head index follows the cell and `fib_shift_` in a dense map.
    let mut at = unsafe { *obj.cell_ptr().add(dense::HEAD_OFFSET).cast::<u64>() };
    for step in 0..=index {
        if at >= cell.slots {
            return Err(Error::value(format!(
                "corrupt dense map: list index {at} with {} slots",
                cell.slots
            )));
        }
        let i = at as usize;
        // SAFETY: `at < slots`: slot `i` is inside block `i / 16` of `data`.
        let item = unsafe {
            cell.data
                .cast::<u8>()
                .add(i / dense::BLOCK_CAP * dense::BLOCK)
                .add(dense::BLOCK_CAP + i % dense::BLOCK_CAP * dense::ITEM)
        };
        if step == index {
            return Ok(item);
        }
        // SAFETY: a listed item's `next` index.
        at = unsafe { *item.add(dense::NEXT_OFFSET).cast::<u64>() };
    }
    unreachable!("the loop returns at step == index")
}

/// The value of `key`, if present.
pub fn lookup(entries: &[Entry], key: &AnyView<'_>) -> Option<Any> {
    entries
        .iter()
        .find(|e| any_equal(&e.key.view(), key))
        .map(|e| e.value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::TVMFFIAny;
    use crate::object::ObjectHeader;

    unsafe extern "C" fn keep(_: *mut c_void, _: i32) {}

    /// A dense map laid out as tvm-ffi's C++ builds one: 2 blocks (32 slots), entries in slots
    /// 20, 2 and 5, inserted in that order.
    #[test]
    fn dense_maps_made_by_cpp_read_in_insertion_order() {
        let mut blocks = vec![0u64; 2 * dense::BLOCK / 8];
        let base = blocks.as_mut_ptr().cast::<u8>();
        let order: [(usize, i64, i64); 3] = [(20, 7, 70), (2, -1, 10), (5, 3, 30)];
        for (n, &(slot, k, v)) in order.iter().enumerate() {
            let next = order.get(n + 1).map_or(dense::INVALID, |o| o.0 as u64);
            // SAFETY: `slot < 32`: inside the two blocks.
            unsafe {
                let block = base.add(slot / dense::BLOCK_CAP * dense::BLOCK);
                *block.add(slot % dense::BLOCK_CAP) = 0;
                let item = block.add(dense::BLOCK_CAP + slot % dense::BLOCK_CAP * dense::ITEM);
                *item.cast::<TVMFFIAny>() = Any::from(k).into_raw();
                *item.add(16).cast::<TVMFFIAny>() = Any::from(v).into_raw();
                *item.add(dense::NEXT_OFFSET).cast::<u64>() = next;
            }
        }
        // Header, cell, fib_shift, list head and tail.
        let mut obj = vec![0u64; 10];
        let p = obj.as_mut_ptr().cast::<u8>();
        // SAFETY: 80 zeroed bytes, 8-aligned: the header and a dense map's fields.
        let handle = unsafe {
            *p.cast::<ObjectHeader>() = ObjectHeader {
                combined_ref_count: 1.into(),
                type_index: type_index::MAP,
                padding: 0,
                deleter: Some(keep),
            };
            *p.add(24).cast::<MapCell>() = MapCell {
                data: base.cast(),
                size: 3,
                slots: 32,
                data_deleter: None,
            };
            *p.add(24 + dense::HEAD_OFFSET).cast::<u64>() = 20;
            ObjectRef::from_raw_owned(p.cast()).unwrap()
        };
        let entries = map_entries(&handle).unwrap().unwrap();
        let pairs: Vec<(i64, i64)> = entries
            .iter()
            .map(|e| {
                (
                    e.key.view().as_i64().unwrap(),
                    e.value.view().as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(pairs, [(7, 70), (-1, 10), (3, 30)]);
        assert_eq!(
            lookup(&entries, &Any::from(3i64).view())
                .unwrap()
                .view()
                .as_i64(),
            Some(30)
        );
        // Values read and replaced in place, in insertion order (the structural hooks do this).
        assert_eq!(map_len(&handle), 3);
        // SAFETY: the map is alive and only this test holds it.
        unsafe {
            let second = map_value_raw(&handle, 1).unwrap().unwrap();
            assert_eq!(AnyView::from_raw(second).as_i64(), Some(10));
            set_value_in_place(&handle, 1, Any::from("eleven, on the heap")).unwrap();
            assert!(map_value_raw(&handle, 3).unwrap().is_none());
            assert!(set_value_in_place(&handle, 3, Any::none()).is_err());
        }
        let entries = map_entries(&handle).unwrap().unwrap();
        assert_eq!(
            entries[1].value.view().as_str(),
            Some("eleven, on the heap")
        );
        drop(entries);
        // SAFETY: as above; releases the string put there.
        unsafe { set_value_in_place(&handle, 1, Any::from(10i64)).unwrap() };
        // A list that points outside the slots is refused, not followed.
        // SAFETY: the head field of the object above.
        unsafe { *p.add(24 + dense::HEAD_OFFSET).cast::<u64>() = 99 };
        let Err(e) = map_entries(&handle).unwrap() else {
            panic!("a corrupt list was followed");
        };
        assert!(e.message.contains("corrupt dense map"), "{}", e.message);
        drop(handle);
        drop(obj);
    }

    #[test]
    fn values_of_tvmrt_maps_change_in_place() {
        let m = new_dict(vec![
            Entry {
                key: Any::from("a"),
                value: Any::from(1i64),
            },
            Entry {
                key: Any::from("b"),
                value: Any::from(2i64),
            },
        ]);
        assert_eq!(map_len(&m), 2);
        // SAFETY: only this test holds the dict.
        unsafe {
            set_value_in_place(&m, 1, Any::from("two")).unwrap();
            let v = map_value_raw(&m, 1).unwrap().unwrap();
            assert_eq!(AnyView::from_raw(v).as_str(), Some("two"));
        }
        let e = map_entries(&m).unwrap().unwrap();
        assert_eq!(e[0].value.view().as_i64(), Some(1));
        assert_eq!(e[1].key.view().as_str(), Some("b"));
    }
}
