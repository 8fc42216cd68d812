//! `ffi.Array` (type index 71): tvm-ffi's array, also the VM's tuples (`vm.builtin.make_tuple`,
//! tuple returns).
//!
//! Layout: the header, then tvm-ffi's `TVMFFISeqCell {void* data; int64_t size; int64_t
//! capacity; void (*data_deleter)(void*)}` (`c_api.h`), `data` pointing at `size` `TVMFFIAny`
//! items, so C code reads a returned tuple the way it reads one made by tvm-ffi. tvmrt's arrays
//! are immutable once built; `data_deleter` is null as in tvm-ffi's `ArrayObj` (the items are
//! released with the object).

use std::ffi::c_void;

use crate::abi::{type_index, TVMFFIAny};
use crate::error::{Error, Result};
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::value::{Any, AnyView};

/// `TVMFFISeqCell`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TVMFFISeqCell {
    /// First item.
    pub data: *mut c_void,
    /// Item count.
    pub size: i64,
    /// Allocated items.
    pub capacity: i64,
    /// Releases `data` when it is a separate allocation (null for arrays).
    pub data_deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// Payload of a tvmrt array object.
#[repr(C)]
pub struct ArrayObj {
    cell: TVMFFISeqCell,
    items: Box<[Any]>,
}

// SAFETY: the cell is the prefix tvm-ffi's `ArrayObj` has after the header (index 71); items
// are never changed after construction, except by their only holder
// ([`replace_items_if_unique`]).
unsafe impl ObjectPayload for ArrayObj {
    const TYPE_INDEX: i32 = type_index::ARRAY;
}

/// Creates an array holding `items`.
pub fn new_array(items: Vec<Any>) -> ObjectRef {
    let mut items = items.into_boxed_slice();
    let cell = TVMFFISeqCell {
        data: items.as_mut_ptr().cast(),
        size: items.len() as i64,
        capacity: items.len() as i64,
        data_deleter: None,
    };
    new_object(ArrayObj { cell, items })
}

/// Puts `items` in place of the items of `obj` when it is a tvmrt array of that length held by
/// exactly `holders` strong references, all of them the caller's (so nothing else can see the
/// change); `Ok(None)` then. Otherwise gives `items` back untouched.
pub fn replace_items_if_unique(
    obj: &ObjectRef,
    items: Vec<Any>,
    holders: u32,
) -> Result<Option<Vec<Any>>> {
    let Some(arr) = obj.downcast_ref::<ArrayObj>() else {
        return Ok(Some(items));
    };
    if obj.strong_count() != holders || arr.items.len() != items.len() {
        return Ok(Some(items));
    }
    let slots = arr.items.as_ptr().cast_mut();
    for (i, item) in items.into_iter().enumerate() {
        // SAFETY: the caller holds every strong reference to this array, so no other code
        // reads its items; `i` is inside the boxed slice, and the old item is dropped in place.
        unsafe { *slots.add(i) = item };
    }
    Ok(None)
}

/// The item count of an array or list of any producer (its sequence cell's `size`).
pub fn seq_len(obj: &ObjectRef) -> usize {
    // SAFETY: arrays and lists (any producer) have the sequence cell after the header.
    let cell = unsafe { *obj.cell_ptr().cast::<TVMFFISeqCell>() };
    usize::try_from(cell.size).unwrap_or(0)
}

/// Item `index` of an array or list of any producer, borrowed as a raw value (no reference
/// taken), as C++ code reads `self->begin()[index]`.
///
/// # Safety
/// `obj` is an array or list; the value is valid while the item stays in it.
pub unsafe fn seq_item_raw(obj: &ObjectRef, index: usize) -> Option<TVMFFIAny> {
    // SAFETY: per the contract, the sequence cell follows the header.
    let cell = unsafe { *obj.cell_ptr().cast::<TVMFFISeqCell>() };
    if usize::try_from(cell.size).map_or(true, |n| index >= n) {
        return None;
    }
    // SAFETY: `index` is one of the cell's live items.
    Some(unsafe { *cell.data.cast::<TVMFFIAny>().add(index) })
}

/// Replaces item `index` of an array or list of any producer (the sequence cell's items), in
/// place; `false` when `index` is out of range.
///
/// # Safety
/// The caller holds the only reference to `obj` (tvm-ffi's in-place structural mutation
/// contract), so nothing reads the item while it changes, and no length change runs meanwhile.
pub unsafe fn set_item_in_place(obj: &ObjectRef, index: usize, value: Any) -> bool {
    // SAFETY: arrays and lists (any producer) have the sequence cell after the header.
    let cell = unsafe { *obj.cell_ptr().cast::<TVMFFISeqCell>() };
    if usize::try_from(cell.size).map_or(true, |n| index >= n) {
        return false;
    }
    // SAFETY: `index` is one of the cell's live items; the old item is released in place.
    unsafe { *cell.data.cast::<Any>().add(index) = value };
    true
}

/// The items of any array object (tvmrt's or tvm-ffi's: both have the sequence cell), as
/// views valid while `obj` lives; `None` when `obj` is not an array.
pub fn array_items(obj: &ObjectRef) -> Option<&[AnyView<'_>]> {
    if obj.type_index() != type_index::ARRAY {
        return None;
    }
    // SAFETY: array objects (any producer) have a `TVMFFISeqCell` after the header.
    let cell = unsafe { *obj.cell_ptr().cast::<TVMFFISeqCell>() };
    let n = usize::try_from(cell.size).ok()?;
    // SAFETY: the cell describes `size` live `TVMFFIAny` items owned by the object.
    Some(unsafe { AnyView::slice_from_raw(cell.data.cast::<TVMFFIAny>(), n) })
}

/// Item `index` of an array (a new reference), with TVM's `IndexError` when out of range.
pub fn array_get(obj: &ObjectRef, index: i64) -> Result<Any> {
    let items = array_items(obj).ok_or_else(|| {
        Error::type_error(format!(
            "expected ffi.Array, got {}",
            crate::value::type_name(obj.type_index())
        ))
    })?;
    let i = usize::try_from(index)
        .ok()
        .filter(|&i| i < items.len())
        .ok_or_else(|| {
            Error::index(format!(
                "indexing `{index}` on an array of size {}",
                items.len()
            ))
        })?;
    Ok(items[i].to_owned_any())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_round_trip() {
        let a = new_array(vec![Any::from(3i64), Any::from("x")]);
        assert_eq!(a.type_index(), 71);
        let items = array_items(&a).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].as_i64(), Some(3));
        assert_eq!(array_get(&a, 1).unwrap().view().as_str(), Some("x"));
        assert!(array_get(&a, 2).is_err());
        assert!(array_get(&a, -1).is_err());
    }

    #[test]
    fn items_change_in_place_through_the_cell() {
        let a = new_array(vec![Any::from(3i64), Any::from("a string on the heap")]);
        assert_eq!(seq_len(&a), 2);
        // SAFETY: only this test holds the array.
        unsafe {
            assert!(set_item_in_place(&a, 1, Any::from(4i64)));
            assert!(!set_item_in_place(&a, 2, Any::none()));
            assert_eq!(
                AnyView::from_raw(seq_item_raw(&a, 1).unwrap()).as_i64(),
                Some(4)
            );
            assert!(seq_item_raw(&a, 2).is_none());
        }
        assert_eq!(array_get(&a, 0).unwrap().view().as_i64(), Some(3));
    }
}
