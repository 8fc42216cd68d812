//! Shape objects: the header, then `{const int64_t* data; size_t size}` (`TVMFFIShapeCell`).

use super::{new_object, ObjectPayload, ObjectRef};
use crate::abi::{type_index, TVMFFIShapeCell};

/// Payload of a `ffi.Shape` object (type index 69).
#[repr(C)]
pub struct ShapeObj {
    cell: TVMFFIShapeCell,
    storage: Box<[i64]>,
}

// SAFETY: the cell is a prefix and matches `TVMFFIShapeCell`; the storage is immutable.
unsafe impl ObjectPayload for ShapeObj {
    const TYPE_INDEX: i32 = type_index::SHAPE;
}

/// Creates a shape object holding `dims`.
pub fn new_shape(dims: &[i64]) -> ObjectRef {
    let storage: Box<[i64]> = dims.into();
    let cell = TVMFFIShapeCell {
        data: storage.as_ptr(),
        size: storage.len(),
    };
    new_object(ShapeObj { cell, storage })
}

/// The dims of a shape object (any producer), or `None` for other kinds.
pub fn shape_dims(obj: &ObjectRef) -> Option<&[i64]> {
    if obj.type_index() != type_index::SHAPE {
        return None;
    }
    // SAFETY: shape objects have a `TVMFFIShapeCell` after the header, valid while they live.
    let cell = unsafe { *obj.cell_ptr().cast::<TVMFFIShapeCell>() };
    if cell.size == 0 || cell.data.is_null() {
        return Some(&[]);
    }
    // SAFETY: the cell describes `size` readable i64s owned by the object.
    Some(unsafe { std::slice::from_raw_parts(cell.data, cell.size) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_round_trip() {
        let s = new_shape(&[2, 3, 4]);
        assert_eq!(shape_dims(&s).unwrap(), &[2, 3, 4]);
        assert_eq!(shape_dims(&new_shape(&[])).unwrap(), &[] as &[i64]);
    }
}
