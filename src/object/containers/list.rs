//! `ffi.List` (type index 75): tvm-ffi's mutable sequence. Same cell as `ffi.Array`
//! ([`super::array::TVMFFISeqCell`]); tvmrt keeps the items in a `Vec` behind a lock and
//! republishes the cell after every change, so C++ readers of the cell see the current items.

use std::cell::UnsafeCell;

use parking_lot::Mutex;

use super::array::TVMFFISeqCell;
use crate::abi::TVMFFIAny;
use crate::error::{Error, Result};
use crate::object::type_registry::static_index;
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::value::{Any, AnyView};

/// Payload of a tvmrt list object.
#[repr(C)]
pub struct ListObj {
    cell: UnsafeCell<TVMFFISeqCell>,
    items: Mutex<Vec<Any>>,
}

// SAFETY: the cell (tvm-ffi's `ListObj` prefix after the header) is written only while `items`
// is locked; items are `Any`, which are shareable.
unsafe impl Sync for ListObj {}
// SAFETY: as above.
unsafe impl Send for ListObj {}
// SAFETY: `TVMFFISeqCell` first, as tvm-ffi's `ListObj` (index 75).
unsafe impl ObjectPayload for ListObj {
    const TYPE_INDEX: i32 = static_index::LIST;
}

impl ListObj {
    /// Points the public cell at the current items.
    fn publish(&self, items: &mut Vec<Any>) {
        // SAFETY: called with `items` locked; the cell is ours to write.
        unsafe {
            *self.cell.get() = TVMFFISeqCell {
                data: items.as_mut_ptr().cast(),
                size: items.len() as i64,
                capacity: items.capacity() as i64,
                data_deleter: None,
            }
        };
    }
}

/// Creates a list holding `items`.
pub fn new_list(items: Vec<Any>) -> ObjectRef {
    let obj = new_object(ListObj {
        cell: UnsafeCell::new(TVMFFISeqCell {
            data: std::ptr::null_mut(),
            size: 0,
            capacity: 0,
            data_deleter: None,
        }),
        items: Mutex::new(items),
    });
    if let Some(l) = obj.downcast_ref::<ListObj>() {
        l.publish(&mut l.items.lock());
    }
    obj
}

/// Runs `change` on the items of a tvmrt list, then republishes its cell.
pub fn modify<R>(obj: &ObjectRef, change: impl FnOnce(&mut Vec<Any>) -> Result<R>) -> Result<R> {
    let list = obj.downcast_ref::<ListObj>().ok_or_else(|| {
        if obj.type_index() == static_index::LIST {
            Error::type_error("this ffi.List was not made by tvmrt and cannot be changed by it")
        } else {
            Error::type_error(format!(
                "expected ffi.List, got {}",
                crate::value::type_name(obj.type_index())
            ))
        }
    })?;
    let mut items = list.items.lock();
    let r = change(&mut items);
    list.publish(&mut items);
    r
}

/// The items of any array or list (tvmrt's or tvm-ffi's: both have the sequence cell), as
/// new references; `None` for other objects.
pub fn seq_items(obj: &ObjectRef) -> Option<Vec<Any>> {
    let t = obj.type_index();
    if t != crate::abi::type_index::ARRAY && t != static_index::LIST {
        return None;
    }
    if let Some(list) = obj.downcast_ref::<ListObj>() {
        return Some(list.items.lock().clone());
    }
    // SAFETY: arrays and lists (any producer) have a `TVMFFISeqCell` after the header.
    let cell = unsafe { *obj.cell_ptr().cast::<TVMFFISeqCell>() };
    let n = usize::try_from(cell.size).ok()?;
    // SAFETY: the cell describes `n` live items owned by the object.
    let views = unsafe { AnyView::slice_from_raw(cell.data.cast::<TVMFFIAny>(), n) };
    Some(views.iter().map(|v| v.to_owned_any()).collect())
}
