//! The classic door's values: `TVMValue` + type code, to and from [`Any`].
//!
//! Type codes from TVM 0.19 `c_runtime_api.h`. Compatibility facts kept here:
//! - a classic `NDArray` handle (code 13) is the `DLTensor*` inside the array object, which in
//!   tvmrt (as in TVM) is 24 bytes after the object header;
//! - `TVMFuncCall` returns strings, bytes and data types in thread-local storage valid until
//!   the next call on the thread, data types as their string form (TVM 0.19 `TVMFuncCall`);
//! - a bool is `uint1` on the classic side and `kDLBool` inside
//!   ([`crate::dtype::classic_bool`]): tensors, tensor descriptors and data types are
//!   converted here, both ways (a descriptor by a copy that lives for the call, a tensor by a
//!   view of the same bytes).

use std::ffi::c_void;

use crate::abi::DLTensor;
use crate::abi::{AnyPayload, TVMFFIAny};
use crate::object::ObjectHeader;

const HEADER_BYTES: usize = std::mem::size_of::<ObjectHeader>();

/// The `DLTensor` of a tensor object (after its header).
///
/// # Safety
/// `obj` is a live tensor object.
unsafe fn tensor_cell(obj: *mut c_void) -> *const DLTensor {
    // SAFETY: tensor objects carry their descriptor right after the header.
    unsafe { obj.cast::<u8>().add(HEADER_BYTES).cast() }
}

/// Whether a pointer leaves bytes of the 8-byte payload unused (32-bit targets).
const POINTER_PADDING: bool = std::mem::size_of::<*mut c_void>() < 8;

fn raw(index: i32, payload: AnyPayload) -> TVMFFIAny {
    TVMFFIAny {
        type_index: index,
        small_str_len: 0,
        payload,
    }
}

mod inbound;
mod outbound;
mod returns;
#[cfg(test)]
mod tests;

pub use inbound::*;
pub use outbound::*;
pub use returns::*;
