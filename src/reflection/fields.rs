//! Reading and writing reflected fields, as tvm-ffi's `reflection/accessor.h` and
//! `reflection/creator.h` do: the field records of a type and its ancestors, setters (a C
//! function or a function object), defaults and factories, and creating an empty object of a
//! type (its native creator, else its `__ffi_new__` attribute).
//!
//! Also the storage of fields in objects laid out by tvm-ffi's Python package (`py_class`):
//! by the field's static type index, a POD value in place, an `ObjectRef` (a nullable object
//! pointer) or an `Any` (a `TVMFFIAny` holding an owned value).

use std::ffi::c_void;

use crate::abi::{type_index as ti, DLDataType, DLDevice, TVMFFIAny};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::type_registry::{self, field_flag, TVMFFIFieldInfo, TVMFFITypeInfo};
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

/// `kTVMFFIAny`: a field of any type.
pub const ANY_INDEX: i32 = -1;
/// `kTVMFFIFieldFlagBitMaskDefaultFromFactory`.
pub const DEFAULT_FROM_FACTORY: i64 = 1 << 5;
/// `kTVMFFIFieldFlagBitMaskInitOff`.
pub const INIT_OFF: i64 = 1 << 9;
/// `kTVMFFIFieldFlagBitMaskKwOnly`.
pub const KW_ONLY: i64 = 1 << 10;

/// The type record of a registered index.
pub fn type_info(type_index: i32) -> Result<&'static TVMFFITypeInfo> {
    let p = type_registry::type_info_ptr(type_index)?;
    // SAFETY: type records live for the life of the process.
    Ok(unsafe { &*p })
}

/// The type key of a record.
pub fn type_key(info: &TVMFFITypeInfo) -> String {
    // SAFETY: the registry keeps the key bytes alive with the record.
    String::from_utf8_lossy(unsafe { info.type_key.as_slice() }).into_owned()
}

/// The name of a field record.
pub fn field_name(f: &TVMFFIFieldInfo) -> String {
    // SAFETY: field names are kept alive by the registry.
    String::from_utf8_lossy(unsafe { f.name.as_slice() }).into_owned()
}

/// Every field of a type, its ancestors' first (root excluded), as `ForEachFieldInfo` visits them.
pub fn all_fields(info: &TVMFFITypeInfo) -> Vec<TVMFFIFieldInfo> {
    let mut out = Vec::new();
    let mut push = |t: &TVMFFITypeInfo| {
        if t.num_fields > 0 && !t.fields.is_null() {
            // SAFETY: `num_fields` records at `fields`, kept alive by the registry.
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts(t.fields, t.num_fields as usize)
            });
        }
    };
    for d in 1..info.type_depth.max(0) as usize {
        // SAFETY: `type_depth` ancestor pointers, valid for the life of the process.
        let parent = unsafe { &**info.type_ancestors.add(d) };
        push(parent);
    }
    push(info);
    out
}

/// Reads a field of `obj` through the field's getter (`obj` must be of the field's type).
pub fn read_field(obj: &ObjectRef, f: &TVMFFIFieldInfo) -> Result<Any> {
    let getter = f
        .getter
        .ok_or_else(|| Error::attribute(format!("field `{}` has no getter", field_name(f))))?;
    let mut out = TVMFFIAny::NONE;
    // SAFETY: the offset comes from the type's own record and `obj` is of that type; the getter
    // writes an owned value on success.
    let rc = unsafe {
        getter(
            obj.as_ptr().cast::<u8>().add(f.offset as usize).cast(),
            &mut out,
        )
    };
    if rc != 0 {
        return Err(crate::raised::take_raised()
            .unwrap_or_else(|| Error::runtime("field getter failed without raising")));
    }
    // SAFETY: as above.
    Ok(unsafe { Any::from_raw(out) })
}

/// Writes `value` into the field at `addr` through the field's setter.
///
/// # Safety
/// `addr` is the field's address inside a live object of the field's type.
pub unsafe fn call_setter(
    f: &TVMFFIFieldInfo,
    addr: *mut c_void,
    value: AnyView<'_>,
) -> Result<()> {
    if f.setter.is_null() {
        return Err(Error::attribute(format!(
            "field `{}` is read-only",
            field_name(f)
        )));
    }
    if f.flags & field_flag::SETTER_IS_FUNCTION_OBJ != 0 {
        // SAFETY: with this flag the setter is a live function object (kept by the registry).
        let setter = unsafe { ObjectRef::from_raw_borrowed(f.setter) }
            .ok_or_else(|| Error::runtime("null field setter"))?;
        let setter = Function::from_object(setter)?;
        let addr_arg = Any::opaque_ptr(addr);
        setter.call(&[addr_arg.view(), value])?;
        return Ok(());
    }
    type Setter = unsafe extern "C" fn(*mut c_void, *const TVMFFIAny) -> i32;
    // SAFETY: without the flag the setter is a `TVMFFIFieldSetter` C function.
    let setter: Setter = unsafe { std::mem::transmute::<*mut c_void, Setter>(f.setter) };
    // SAFETY: per the contract; the value is a valid borrowed `TVMFFIAny`.
    let rc = unsafe { setter(addr, value.raw()) };
    if rc != 0 {
        return Err(crate::raised::take_raised()
            .unwrap_or_else(|| Error::runtime("field setter failed without raising")));
    }
    Ok(())
}

/// Sets the field at `addr` to its default (calling the factory for factory defaults).
///
/// # Safety
/// As [`call_setter`].
pub unsafe fn set_default(f: &TVMFFIFieldInfo, addr: *mut c_void) -> Result<()> {
    // SAFETY: the registry keeps the default value alive.
    let default = unsafe { AnyView::from_raw(f.default_value_or_factory) };
    if f.flags & DEFAULT_FROM_FACTORY != 0 {
        let factory = default.expect_function("default factory")?;
        let value = factory.call(&[])?;
        // SAFETY: per the contract.
        return unsafe { call_setter(f, addr, value.view()) };
    }
    // SAFETY: per the contract.
    unsafe { call_setter(f, addr, default) }
}

/// Sets field `f` of `obj` (an object of the field's type) through its setter.
pub fn set_field(obj: &ObjectRef, f: &TVMFFIFieldInfo, v: AnyView<'_>) -> Result<()> {
    // SAFETY: the field's own offset inside an object of its type.
    unsafe {
        let addr = obj.as_ptr().cast::<u8>().add(f.offset as usize).cast();
        call_setter(f, addr, v)
    }
}

/// The value of type attribute `name` for `type_index`, if set.
pub fn type_attr(name: &str, type_index: i32) -> Option<Any> {
    let col = type_registry::attr_column(name)?;
    // SAFETY: columns are never freed; a column's data array stays readable (old copies kept).
    let col = unsafe { *col };
    let offset = type_index.checked_sub(col.begin_index)?;
    if offset < 0 || offset >= col.size || col.data.is_null() {
        return None;
    }
    // SAFETY: `offset` is inside the column's `size` items.
    let raw = unsafe { *col.data.add(offset as usize) };
    if raw.type_index == ti::NONE {
        return None;
    }
    // SAFETY: the registry owns the value; we take our own reference.
    Some(unsafe { AnyView::from_raw(raw) }.to_owned_any())
}

/// A new object of the type with every field in its empty state (`CreateEmptyObject`).
pub fn create_empty(info: &TVMFFITypeInfo) -> Result<ObjectRef> {
    if !info.metadata.is_null() {
        // SAFETY: the registry keeps the metadata alive.
        if let Some(creator) = unsafe { (*info.metadata).creator } {
            let mut handle: *mut c_void = std::ptr::null_mut();
            // SAFETY: a creator writes an owned object handle on success.
            let rc = unsafe { creator(&mut handle) };
            if rc != 0 {
                return Err(crate::raised::take_raised()
                    .unwrap_or_else(|| Error::runtime("object creator failed without raising")));
            }
            // SAFETY: the creator handed us one owned reference.
            return unsafe { ObjectRef::from_raw_owned(handle) }
                .ok_or_else(|| Error::runtime("object creator returned null"));
        }
    }
    if let Some(new_fn) = type_attr("__ffi_new__", info.type_index) {
        if let Some(f) = new_fn.view().as_function() {
            return f
                .call(&[])?
                .view()
                .as_object()
                .ok_or_else(|| Error::type_error("__ffi_new__ did not return an object"));
        }
    }
    Err(Error::runtime(format!(
        "Type `{}` does not support reflection creation (no native creator or __ffi_new__ type attr)",
        type_key(info)
    )))
}

/// How a `py_class` field is stored, from its static type index.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Storage {
    /// A `TVMFFIAny` owning its value (`Any` and `None` fields).
    Any,
    /// A nullable owned object pointer.
    Object,
    /// Plain bytes of the POD kind given.
    Pod(i32),
}

/// The storage of a field of static type `index`, or a `ValueError` for kinds with none.
pub fn storage(index: i32) -> Result<Storage> {
    match index {
        ANY_INDEX | ti::NONE => Ok(Storage::Any),
        ti::INT | ti::FLOAT | ti::BOOL | ti::OPAQUE_PTR | ti::DATA_TYPE | ti::DEVICE => {
            Ok(Storage::Pod(index))
        }
        i if i >= ti::STATIC_OBJECT_BEGIN => Ok(Storage::Object),
        other => Err(Error::value(format!(
            "Unsupported field type index for a field: {other}"
        ))),
    }
}

/// How a reflected field is stored: as [`storage`] says for its static type index, except that
/// an `Any`-typed field of pointer size holds an object pointer (tvm-ffi's rule for C++ parents
/// that declare `ObjectRef` fields with the `Any` conversion type).
pub fn field_storage(f: &TVMFFIFieldInfo) -> Result<Storage> {
    let kind = storage(f.field_static_type_index)?;
    if kind == Storage::Any && f.size == std::mem::size_of::<*const c_void>() as i64 {
        return Ok(Storage::Object);
    }
    Ok(kind)
}

/// Reads a field stored as `kind` at `addr` as a new owned value.
///
/// # Safety
/// `addr` holds a live value of that storage.
pub unsafe fn read_stored(kind: Storage, addr: *const c_void) -> Any {
    // SAFETY (all arms): per the contract, `addr` holds a value of the given kind.
    unsafe {
        match kind {
            Storage::Any => AnyView::from_raw(*addr.cast::<TVMFFIAny>()).to_owned_any(),
            Storage::Object => match ObjectRef::from_raw_borrowed(*addr.cast::<*mut c_void>()) {
                Some(obj) => Any::from_object(obj),
                None => Any::none(),
            },
            Storage::Pod(ti::INT) => Any::from(*addr.cast::<i64>()),
            Storage::Pod(ti::FLOAT) => Any::from(*addr.cast::<f64>()),
            Storage::Pod(ti::BOOL) => Any::from(*addr.cast::<u8>() != 0),
            Storage::Pod(ti::OPAQUE_PTR) => Any::opaque_ptr(*addr.cast::<*mut c_void>()),
            Storage::Pod(ti::DATA_TYPE) => Any::from(*addr.cast::<DLDataType>()),
            Storage::Pod(ti::DEVICE) => Any::from(*addr.cast::<DLDevice>()),
            Storage::Pod(_) => Any::none(),
        }
    }
}

/// Writes `value` (already converted to the field's type) into a field stored as `kind`,
/// releasing what it held.
///
/// # Safety
/// `addr` holds a live value of that storage (zeroed memory counts as empty).
pub unsafe fn write_stored(kind: Storage, addr: *mut c_void, value: Any) -> Result<()> {
    let v = value.view();
    let mismatch = |want: &str| v.type_mismatch("field value", want);
    // SAFETY (all writes): per the contract `addr` has room for the kind's value.
    unsafe {
        match kind {
            Storage::Any => {
                let old = std::mem::replace(&mut *addr.cast::<TVMFFIAny>(), value.into_raw());
                drop(Any::from_raw(old));
            }
            Storage::Object => {
                let new = if v.is_none() {
                    std::ptr::null_mut()
                } else {
                    v.as_object()
                        .ok_or_else(|| mismatch("an object"))?
                        .into_raw()
                };
                let old = std::mem::replace(&mut *addr.cast::<*mut c_void>(), new);
                drop(ObjectRef::from_raw_owned(old));
            }
            Storage::Pod(ti::INT) => {
                *addr.cast::<i64>() = v.as_i64().ok_or_else(|| mismatch("int"))?
            }
            Storage::Pod(ti::FLOAT) => {
                *addr.cast::<f64>() = v.as_f64().ok_or_else(|| mismatch("float"))?
            }
            Storage::Pod(ti::BOOL) => {
                *addr.cast::<u8>() = u8::from(v.as_bool().ok_or_else(|| mismatch("bool"))?)
            }
            Storage::Pod(ti::OPAQUE_PTR) => {
                *addr.cast::<*mut c_void>() = if v.is_none() {
                    std::ptr::null_mut()
                } else {
                    v.as_opaque_ptr().ok_or_else(|| mismatch("void*"))?
                }
            }
            Storage::Pod(ti::DATA_TYPE) => {
                *addr.cast::<DLDataType>() = v.as_dtype().ok_or_else(|| mismatch("DataType"))?
            }
            Storage::Pod(ti::DEVICE) => {
                *addr.cast::<DLDevice>() = v.as_device().ok_or_else(|| mismatch("Device"))?
            }
            Storage::Pod(other) => {
                return Err(Error::value(format!(
                    "Unsupported field type index for setter: {other}"
                )))
            }
        }
    }
    Ok(())
}

/// Releases what a field stored as `kind` holds, leaving it empty.
///
/// # Safety
/// As [`write_stored`].
pub unsafe fn clear_stored(kind: Storage, addr: *mut c_void) {
    // SAFETY: per the contract.
    unsafe {
        match kind {
            Storage::Any => {
                let old = std::mem::replace(&mut *addr.cast::<TVMFFIAny>(), TVMFFIAny::NONE);
                drop(Any::from_raw(old));
            }
            Storage::Object => {
                let old = std::mem::replace(&mut *addr.cast::<*mut c_void>(), std::ptr::null_mut());
                drop(ObjectRef::from_raw_owned(old));
            }
            Storage::Pod(_) => {}
        }
    }
}

/// Copies a field stored as `kind` from `src` into empty storage at `dst` (new references).
///
/// # Safety
/// `src` holds a live value of that storage; `dst` has `size` writable bytes, empty.
pub unsafe fn copy_stored(kind: Storage, src: *const c_void, dst: *mut c_void, size: usize) {
    // SAFETY: per the contract.
    unsafe {
        match kind {
            Storage::Pod(_) => {
                std::ptr::copy_nonoverlapping(src.cast::<u8>(), dst.cast::<u8>(), size)
            }
            Storage::Any => {
                let v = AnyView::from_raw(*src.cast::<TVMFFIAny>()).to_owned_any();
                *dst.cast::<TVMFFIAny>() = v.into_raw();
            }
            Storage::Object => {
                let p = *src.cast::<*mut c_void>();
                *dst.cast::<*mut c_void>() = match ObjectRef::from_raw_borrowed(p) {
                    Some(o) => o.into_raw(),
                    None => std::ptr::null_mut(),
                };
            }
        }
    }
}
