//! String and bytes objects: the header, then `{const char* data; size_t size}`.
//!
//! tvm-ffi reads the cell directly (`TVMFFIBytesGetByteArrayPtr`), so readers here also go
//! through the cell and work for strings made by any producer. tvmrt keeps a NUL after the
//! bytes so `data` is also a valid C string, as tvm-ffi's `String` guarantees.

use super::{new_object, ObjectPayload, ObjectRef};
use crate::abi::{type_index, TVMFFIByteArray};

/// Payload of a `ffi.String` object (type index 65).
#[repr(C)]
pub struct StrObj {
    cell: TVMFFIByteArray,
    storage: Box<[u8]>,
}

/// Payload of a `ffi.Bytes` object (type index 66).
#[repr(C)]
pub struct BytesObj {
    cell: TVMFFIByteArray,
    storage: Box<[u8]>,
}

// SAFETY: the cell is a prefix of the payload and matches `TVMFFIByteArray`; the storage is
// immutable after creation.
unsafe impl ObjectPayload for StrObj {
    const TYPE_INDEX: i32 = type_index::STR;
}
// SAFETY: as above.
unsafe impl ObjectPayload for BytesObj {
    const TYPE_INDEX: i32 = type_index::BYTES;
}

fn nul_terminated(bytes: &[u8]) -> (Box<[u8]>, TVMFFIByteArray) {
    let mut v = Vec::with_capacity(bytes.len() + 1);
    v.extend_from_slice(bytes);
    v.push(0);
    let storage = v.into_boxed_slice();
    let cell = TVMFFIByteArray {
        data: storage.as_ptr().cast(),
        size: bytes.len(),
    };
    (storage, cell)
}

/// Creates a string object holding `s`.
pub fn new_str(s: &str) -> ObjectRef {
    let (storage, cell) = nul_terminated(s.as_bytes());
    new_object(StrObj { cell, storage })
}

/// Creates a bytes object holding `b`.
pub fn new_bytes(b: &[u8]) -> ObjectRef {
    let (storage, cell) = nul_terminated(b);
    new_object(BytesObj { cell, storage })
}

/// The bytes of a string or bytes object (any producer), or `None` for other kinds.
pub fn object_bytes(obj: &ObjectRef) -> Option<&[u8]> {
    match obj.type_index() {
        type_index::STR | type_index::BYTES => {
            // SAFETY: str and bytes objects have a `TVMFFIByteArray` cell after the header,
            // valid while the object lives (at least as long as `obj` is borrowed).
            Some(unsafe { (*obj.cell_ptr().cast::<TVMFFIByteArray>()).as_slice() })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_cell_is_nul_terminated_and_sized() {
        let s = new_str("héllo");
        assert_eq!(s.type_index(), type_index::STR);
        assert_eq!(object_bytes(&s).unwrap(), "héllo".as_bytes());
        // SAFETY: the cell of a live string object.
        let cell = unsafe { *s.cell_ptr().cast::<TVMFFIByteArray>() };
        assert_eq!(cell.size, 6);
        // SAFETY: tvmrt keeps a NUL after the data.
        assert_eq!(unsafe { *cell.data.add(6) }, 0);
        let b = new_bytes(&[0, 1, 2]);
        assert_eq!(b.type_index(), type_index::BYTES);
        assert_eq!(object_bytes(&b).unwrap(), &[0, 1, 2]);
    }
}
