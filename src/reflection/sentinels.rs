//! The two sentinel objects tvm-ffi hands out: `ffi.GetInvalidObject` (tvm-ffi's `MISSING`, an
//! absent argument or field default) and `ffi.GetKwargsObject` (marks keyword arguments in a
//! packed call). Both are plain `ffi.Object` instances compared by address, one per process.

use once_cell::sync::Lazy;

use crate::abi::type_index;
use crate::object::{new_object, ObjectPayload, ObjectRef};

/// A plain `ffi.Object` with nothing after the header.
struct PlainObject;

// SAFETY: `ffi.Object` has no cell after the header; the payload is empty.
unsafe impl ObjectPayload for PlainObject {
    const TYPE_INDEX: i32 = type_index::OBJECT;
}

static MISSING: Lazy<ObjectRef> = Lazy::new(|| new_object(PlainObject));
static KWARGS: Lazy<ObjectRef> = Lazy::new(|| new_object(PlainObject));

/// tvm-ffi's `MISSING` sentinel (`ffi.GetInvalidObject`).
pub fn missing() -> ObjectRef {
    MISSING.clone()
}

/// tvm-ffi's keyword-arguments marker (`ffi.GetKwargsObject`).
pub fn kwargs() -> ObjectRef {
    KWARGS.clone()
}
