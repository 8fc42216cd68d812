//! The reflected field of `ffi.Module` that tvm-ffi's clients read: `imports_`, the modules this
//! one imports (tvm-ffi's `ModuleObj::imports_`, an `Array<Any>`; its Python `Module.imports`
//! reads it). The field is where tvm-ffi's C++ class has it; its getter takes a reference under
//! the lock that serializes tvmrt's changes to it.

use std::ffi::c_void;

use crate::abi::{type_index, TVMFFIAny, TVMFFIByteArray};
use crate::error::{Error, Result};
use crate::object::type_registry::{self, TVMFFIFieldInfo};
use crate::object::ObjectRef;
use crate::value::Any;

use super::Module;

/// Where the field claims to live: the start of the module's cell, right after the header.
const FIELD_OFFSET: usize = 24;

/// `TVMFFIFieldGetter` of `imports_`: the module's imports as a new array.
///
/// # Safety
/// `field` is `FIELD_OFFSET` bytes into a live module object; `result` is writable.
unsafe extern "C" fn imports_getter(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    let r = std::panic::catch_unwind(|| -> Result<Any> {
        // SAFETY: per the contract, the object starts `FIELD_OFFSET` bytes before the field.
        let obj =
            unsafe { ObjectRef::from_raw_borrowed(field.cast::<u8>().sub(FIELD_OFFSET).cast()) }
                .ok_or_else(|| Error::value("imports_: null module"))?;
        Ok(Any::from_object(Module::from_object(obj)?.imports_array()))
    });
    match r {
        Ok(Ok(v)) => {
            // SAFETY: per the contract.
            unsafe { *result = v.into_raw() };
            0
        }
        Ok(Err(e)) => {
            crate::raised::set_raised(e);
            -1
        }
        Err(_) => {
            crate::raised::set_raised(Error::runtime("imports_ getter panicked"));
            -1
        }
    }
}

fn bytes(s: &'static str) -> TVMFFIByteArray {
    TVMFFIByteArray {
        data: s.as_ptr().cast(),
        size: s.len(),
    }
}

/// Registers `ffi.Module`'s `imports_` field and its metadata (the real size of tvmrt's module
/// object; no structural kind, as tvm-ffi's `ModuleObj`), once, at start-up.
pub fn register_fields() -> Result<()> {
    let md = type_registry::TVMFFITypeMetadata {
        doc: bytes("A module: compiled functions and the modules it imports."),
        creator: None,
        total_size: (FIELD_OFFSET + std::mem::size_of::<super::ModuleObj>()) as i32,
        structural_eq_hash_kind: 0,
    };
    // SAFETY: a static doc string.
    unsafe { type_registry::register_metadata(type_index::MODULE, &md)? };
    let info = TVMFFIFieldInfo {
        name: bytes("imports_"),
        doc: bytes("The modules this module imports."),
        metadata: bytes(
            r#"{"type_schema":"{\"type\":\"ffi.Array\",\"args\":[{\"type\":\"Any\"}]}"}"#,
        ),
        flags: 0,
        // An `Array<Any>`: one object pointer.
        size: std::mem::size_of::<*const c_void>() as i64,
        alignment: std::mem::align_of::<*const c_void>() as i64,
        offset: FIELD_OFFSET as i64,
        getter: Some(imports_getter),
        setter: std::ptr::null_mut(),
        default_value_or_factory: TVMFFIAny::NONE,
        field_static_type_index: type_index::ARRAY,
    };
    // SAFETY: static strings; a read-only field (no setter).
    unsafe { type_registry::register_field(type_index::MODULE, &info) }
}
