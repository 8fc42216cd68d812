//! The tvm-ffi type table and reflection C API (`tvm/ffi/c_api.h`): type keys and indexes,
//! type info, field/method/metadata/attribute registration, global functions from method
//! records, and opaque objects. The table itself is [`crate::object::type_registry`].
//!
//! `TVMFFITypeGetOrAllocIndex`, `TVMFFIGetTypeInfo` and `TVMFFIGetTypeAttrColumn` cannot return
//! a status. tvm-ffi prints the error and exits the process there
//! (`TVM_FFI_LOG_EXCEPTION_CALL_END`); tvmrt instead prints it to stderr, raises it on the
//! thread and returns -1 / NULL, so a C caller that checks survives.

use std::ffi::{c_int, c_void};

use crate::abi::{TVMFFIAny, TVMFFIByteArray};
use crate::capi::boundary::{non_null, run_or, write_out};
use crate::error::{Error, Result};
use crate::function::registry;
use crate::object::type_registry::{
    self, static_index, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeAttrColumn, TVMFFITypeInfo,
    TVMFFITypeMetadata,
};
use crate::object::{new_object, ObjectPayload};
use crate::value::AnyView;

/// Reads a `TVMFFIByteArray*` argument as UTF-8.
///
/// # Safety
/// `p` is null or points to a valid byte array.
pub(crate) unsafe fn byte_array_str<'a>(p: *const TVMFFIByteArray, what: &str) -> Result<&'a str> {
    non_null(p, what)?;
    // SAFETY: per the contract.
    std::str::from_utf8(unsafe { (*p).as_slice() })
        .map_err(|_| Error::value(format!("`{what}` is not valid UTF-8")))
}

/// For entry points that cannot return a status: the error is also printed, since C++ callers
/// compiled against tvm-ffi's headers do not check (tvm-ffi itself prints and exits).
fn print_unchecked(name: &str, r: Result<()>) -> Result<()> {
    if let Err(e) = &r {
        eprintln!("tvmrt: error during {name}: {e}");
    }
    r
}

/// The index registered under `type_key` (an error when unknown).
///
/// # Safety
/// `type_key` points to a valid byte array; `out_tindex` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeKeyToIndex(
    type_key: *const TVMFFIByteArray,
    out_tindex: *mut i32,
) -> c_int {
    ffi_try!("TVMFFITypeKeyToIndex", {
        // SAFETY: per the contract.
        let key = unsafe { byte_array_str(type_key, "type_key")? };
        let index = type_registry::key_to_index(key)?;
        // SAFETY: per the contract.
        unsafe { write_out(out_tindex, index, "out_tindex") }
    })
}

/// Registers `type_key` or returns its existing index (see `type_registry::get_or_alloc_index`).
/// Returns -2 for a look-up-only miss (`parent_type_index` -2), and -1 on error (raised and
/// printed).
///
/// # Safety
/// `type_key` points to a valid byte array.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeGetOrAllocIndex(
    type_key: *const TVMFFIByteArray,
    static_type_index: i32,
    type_depth: i32,
    num_child_slots: i32,
    child_slots_can_overflow: i32,
    parent_type_index: i32,
) -> i32 {
    run_or("TVMFFITypeGetOrAllocIndex", -1, || {
        let mut index = -1;
        print_unchecked(
            "TVMFFITypeGetOrAllocIndex",
            (|| {
                // SAFETY: per the contract.
                let key = unsafe { byte_array_str(type_key, "type_key")? };
                index = type_registry::get_or_alloc_index(
                    key,
                    static_type_index,
                    type_depth,
                    num_child_slots,
                    child_slots_can_overflow != 0,
                    parent_type_index,
                )?;
                Ok(())
            })(),
        )?;
        Ok(index)
    })
}

/// Runtime information of a registered type index; stable for the life of the process. NULL
/// (with the error raised and printed) for an unknown index.
#[no_mangle]
pub extern "C" fn TVMFFIGetTypeInfo(type_index: i32) -> *const TVMFFITypeInfo {
    run_or("TVMFFIGetTypeInfo", std::ptr::null(), || {
        crate::function::registry::ensure_builtins();
        let mut ptr = std::ptr::null();
        print_unchecked(
            "TVMFFIGetTypeInfo",
            (|| {
                ptr = type_registry::type_info_ptr(type_index)?;
                Ok(())
            })(),
        )?;
        Ok(ptr)
    })
}

/// Adds a field record to a type. Strings and the default value are copied.
///
/// # Safety
/// `info` is a valid record (see `type_registry::register_field`).
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterField(
    type_index: i32,
    info: *const TVMFFIFieldInfo,
) -> c_int {
    ffi_try!("TVMFFITypeRegisterField", {
        non_null(info, "info")?;
        // SAFETY: per the contract.
        unsafe { type_registry::register_field(type_index, &*info) }
    })
}

/// Adds a method record to a type. Strings are copied and the method value kept.
///
/// # Safety
/// `info` is a valid record.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterMethod(
    type_index: i32,
    info: *const TVMFFIMethodInfo,
) -> c_int {
    ffi_try!("TVMFFITypeRegisterMethod", {
        non_null(info, "info")?;
        // SAFETY: per the contract.
        unsafe { type_registry::register_method(type_index, &*info) }
    })
}

/// Sets a type's metadata (once; a second registration is an error).
///
/// # Safety
/// `metadata` is a valid record.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterMetadata(
    type_index: i32,
    metadata: *const TVMFFITypeMetadata,
) -> c_int {
    ffi_try!("TVMFFITypeRegisterMetadata", {
        non_null(metadata, "metadata")?;
        // SAFETY: per the contract.
        unsafe { type_registry::register_metadata(type_index, &*metadata) }
    })
}

/// Sets attribute `attr_name` of a registered type to a copy of `attr_value` (once per type).
/// Type index 0 only creates the column.
///
/// # Safety
/// `attr_name` is a valid byte array; `attr_value` a valid borrowed value.
#[no_mangle]
pub unsafe extern "C" fn TVMFFITypeRegisterAttr(
    type_index: i32,
    attr_name: *const TVMFFIByteArray,
    attr_value: *const TVMFFIAny,
) -> c_int {
    ffi_try!("TVMFFITypeRegisterAttr", {
        // SAFETY: per the contract.
        let name = unsafe { byte_array_str(attr_name, "attr_name")? };
        non_null(attr_value, "attr_value")?;
        // SAFETY: per the contract.
        let value = unsafe { AnyView::from_raw(*attr_value) };
        type_registry::register_attr(type_index, name, value)
    })
}

/// The column of attribute `attr_name`, or NULL if it was never registered (not an error).
///
/// # Safety
/// `attr_name` is a valid byte array.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIGetTypeAttrColumn(
    attr_name: *const TVMFFIByteArray,
) -> *const TVMFFITypeAttrColumn {
    run_or("TVMFFIGetTypeAttrColumn", std::ptr::null(), || {
        crate::function::registry::ensure_builtins();
        let mut column = std::ptr::null();
        print_unchecked(
            "TVMFFIGetTypeAttrColumn",
            (|| {
                // SAFETY: per the contract.
                let name = unsafe { byte_array_str(attr_name, "attr_name")? };
                column = type_registry::attr_column(name).unwrap_or(std::ptr::null());
                Ok(())
            })(),
        )?;
        Ok(column)
    })
}

/// Registers the function in a method record as a global under the record's name, with the
/// record's metadata text (its doc is not stored).
///
/// # Safety
/// `method_info` is a valid record whose `method` holds a function.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIFunctionSetGlobalFromMethodInfo(
    method_info: *const TVMFFIMethodInfo,
    allow_override: c_int,
) -> c_int {
    ffi_try!("TVMFFIFunctionSetGlobalFromMethodInfo", {
        non_null(method_info, "method_info")?;
        // SAFETY: per the contract.
        let info = unsafe { &*method_info };
        // SAFETY: per the contract.
        let name = unsafe { byte_array_str(&info.name, "method_info->name")? };
        // SAFETY: per the contract.
        let method = unsafe { AnyView::from_raw(info.method) };
        let f = method.expect_function("method_info->method")?;
        // SAFETY: per the contract.
        let metadata = String::from_utf8_lossy(unsafe { info.metadata.as_slice() });
        registry::register_with_metadata(name, f, &metadata, allow_override != 0)
    })
}

/// Payload of an opaque object (`ffi.OpaquePyObject`): the public cell
/// `TVMFFIOpaqueObjectCell {handle}`, then the foreign deleter run when the object dies.
#[repr(C)]
pub struct OpaqueObj {
    handle: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
}

// SAFETY: the cell `{void* handle}` is the prefix tvm-ffi defines. The handle is foreign and
// only handed back to its creator's deleter; sharing it is the creator's contract, as in tvm-ffi.
unsafe impl ObjectPayload for OpaqueObj {
    const TYPE_INDEX: i32 = static_index::OPAQUE_PY_OBJECT;
}

impl Drop for OpaqueObj {
    fn drop(&mut self) {
        if let Some(deleter) = self.deleter {
            // SAFETY: runs once, when the last strong reference goes (the object deleter
            // protocol); the creator supplied `deleter` for exactly this handle.
            unsafe { deleter(self.handle) };
        }
    }
}

/// Wraps a foreign handle as an object; `deleter(handle)` (may be NULL) runs once when the
/// object dies. As in tvm-ffi, only `kTVMFFIOpaquePyObject` (74) is supported.
///
/// # Safety
/// `deleter` may be called with `handle` from any thread; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIObjectCreateOpaque(
    handle: *mut c_void,
    type_index: i32,
    deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIObjectCreateOpaque", {
        non_null(out, "out")?;
        if type_index != static_index::OPAQUE_PY_OBJECT {
            return Err(Error::value(format!(
                "TVMFFIObjectCreateOpaque: only type index {} (ffi.OpaquePyObject) is supported, \
                 got {type_index}",
                static_index::OPAQUE_PY_OBJECT
            )));
        }
        let obj = new_object(OpaqueObj { handle, deleter });
        // SAFETY: checked non-null; writable per the contract.
        unsafe { write_out(out, obj.into_raw(), "out") }
    })
}
