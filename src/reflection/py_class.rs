//! Objects of types defined in Python through tvm-ffi's package (`@py_class`): the package lays
//! out their fields itself and asks the library for
//! - `ffi.MakeFieldGetter(field_type_index)`: a `TVMFFIFieldGetter` C function (as an int) that
//!   reads a field of that static type;
//! - `ffi.MakeFieldSetter(field_type_index, converter, f_convert)`: a function object
//!   `(field address, value)` that converts the value with the package's converter callback
//!   and stores it;
//! - `ffi._PyClassRegisterTypeAttrColumns(type_index, total_size)`: `__ffi_init__`,
//!   `__ffi_new__` (a zeroed block of `total_size` bytes with tvm-ffi's header and
//!   `py_class_deleter`) and `__ffi_shallow_copy__` for the type.

use std::ffi::c_void;

use crate::abi::{type_index as ti, ObjectDeleter, TVMFFIAny};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::type_registry;
use crate::object::{ObjectHeader, ObjectRef};
use crate::value::{Any, AnyView};

use super::fields::{self, Storage};

/// Both counts at one (`kCombinedRefCountBothOne`).
const BOTH_ONE: u64 = 1 | (1 << 32);

/// Field getter of one storage kind: reads `*field` into `result` as an owned value.
///
/// # Safety
/// `field` holds a live value of the kind; `result` is writable.
unsafe fn get_as(kind: Storage, field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
    // SAFETY: per the contract.
    unsafe { *result = fields::read_stored(kind, field).into_raw() };
    0
}

macro_rules! getter {
    ($name:ident, $kind:expr) => {
        /// A `TVMFFIFieldGetter` for one storage kind (see [`get_as`]).
        unsafe extern "C" fn $name(field: *mut c_void, result: *mut TVMFFIAny) -> i32 {
            // SAFETY: tvm-ffi calls getters with the field's address and a result slot.
            unsafe { get_as($kind, field, result) }
        }
    };
}
getter!(get_int, Storage::Pod(ti::INT));
getter!(get_float, Storage::Pod(ti::FLOAT));
getter!(get_bool, Storage::Pod(ti::BOOL));
getter!(get_ptr, Storage::Pod(ti::OPAQUE_PTR));
getter!(get_dtype, Storage::Pod(ti::DATA_TYPE));
getter!(get_device, Storage::Pod(ti::DEVICE));
getter!(get_any, Storage::Any);
getter!(get_object, Storage::Object);

/// The getter for fields of static type `field_type_index`, as an integer (`MakeFieldGetter`).
pub fn field_getter(field_type_index: i32) -> Result<i64> {
    type Getter = unsafe extern "C" fn(*mut c_void, *mut TVMFFIAny) -> i32;
    let g: Getter = match fields::storage(field_type_index)? {
        Storage::Pod(ti::INT) => get_int,
        Storage::Pod(ti::FLOAT) => get_float,
        Storage::Pod(ti::BOOL) => get_bool,
        Storage::Pod(ti::OPAQUE_PTR) => get_ptr,
        Storage::Pod(ti::DATA_TYPE) => get_dtype,
        Storage::Pod(ti::DEVICE) => get_device,
        Storage::Any => get_any,
        Storage::Object => get_object,
        Storage::Pod(other) => {
            return Err(Error::value(format!(
                "Unsupported field type index for getter: {other}"
            )))
        }
    };
    Ok(g as usize as i64)
}

/// The package's converter callback: `int(void* converter, const TVMFFIAny* in, TVMFFIAny* out)`.
type FConvert = unsafe extern "C" fn(*mut c_void, *const TVMFFIAny, *mut TVMFFIAny) -> i32;

/// The setter function for fields of static type `field_type_index` (`MakeFieldSetter`).
pub fn field_setter(field_type_index: i32, converter: i64, f_convert: i64) -> Result<Function> {
    let kind = fields::storage(field_type_index)?;
    if f_convert == 0 {
        return Err(Error::value("MakeFieldSetter: null converter function"));
    }
    let converter = converter as usize;
    // SAFETY: the package passes the address of its converter C function.
    let f_convert: FConvert = unsafe { std::mem::transmute::<usize, FConvert>(f_convert as usize) };
    Ok(Function::from_fn(move |args: &[AnyView<'_>]| {
        if args.len() != 2 {
            return Err(Error::type_error(format!(
                "field setter expects 2 arguments (address, value), got {}",
                args.len()
            )));
        }
        let addr = args[0]
            .as_opaque_ptr()
            .filter(|p| !p.is_null())
            .ok_or_else(|| args[0].type_mismatch("field address", "void*"))?;
        let mut out = TVMFFIAny::NONE;
        // SAFETY: the converter object outlives the type (the package keeps it).
        let rc = unsafe { f_convert(converter as *mut c_void, args[1].raw(), &mut out) };
        if rc != 0 {
            return Err(crate::raised::take_raised()
                .unwrap_or_else(|| Error::runtime("field converter failed without raising")));
        }
        // SAFETY: on success the converter wrote an owned value.
        let value = unsafe { Any::from_raw(out) };
        // SAFETY: the package calls setters with the address of a field of this kind.
        unsafe { fields::write_stored(kind, addr, value)? };
        Ok(Any::none())
    }))
}

/// Storage kind and offset of every field of a type.
fn layout(type_index: i32) -> Result<Vec<(Storage, usize, usize)>> {
    let info = fields::type_info(type_index)?;
    fields::all_fields(info)
        .iter()
        .map(|f| {
            Ok((
                fields::field_storage(f)?,
                f.offset as usize,
                f.size as usize,
            ))
        })
        .collect()
}

/// Deleter of `py_class` objects: the strong flag releases the fields, the weak flag frees the
/// block (allocated with `calloc` by [`alloc`]).
///
/// # Safety
/// `ptr` is an object made by [`alloc`] whose count reached zero for the flags given.
unsafe extern "C" fn py_class_deleter(ptr: *mut c_void, flags: i32) {
    // SAFETY: the header is live until the block is freed.
    let type_index = unsafe { (*ptr.cast::<ObjectHeader>()).type_index };
    if flags & crate::abi::deleter_flag::STRONG != 0 {
        if let Ok(fields) = layout(type_index) {
            for (kind, offset, _) in fields {
                // SAFETY: each field at its offset holds a value of its kind.
                unsafe { fields::clear_stored(kind, ptr.cast::<u8>().add(offset).cast()) };
            }
        }
    }
    if flags & crate::abi::deleter_flag::WEAK != 0 {
        // SAFETY: the block came from `libc::calloc` in `alloc`.
        unsafe { libc::free(ptr) };
    }
}

/// A zeroed object of `total_size` bytes with the header set (every field empty).
fn alloc(type_index: i32, total_size: usize) -> Result<ObjectRef> {
    if total_size < std::mem::size_of::<ObjectHeader>() {
        return Err(Error::value(format!(
            "object size {total_size} is smaller than the object header"
        )));
    }
    // SAFETY: plain allocation; checked for null below.
    let p = unsafe { libc::calloc(1, total_size) };
    if p.is_null() {
        return Err(Error::runtime(format!(
            "failed to allocate {total_size} bytes"
        )));
    }
    let header = p.cast::<ObjectHeader>();
    // SAFETY: `p` is a fresh zeroed block large enough for the header.
    unsafe {
        (*header).combined_ref_count = BOTH_ONE.into();
        (*header).type_index = type_index;
        (*header).deleter = Some(py_class_deleter as ObjectDeleter);
    }
    // SAFETY: the block is an object with one strong reference we now own.
    unsafe { ObjectRef::from_raw_owned(p) }.ok_or_else(|| Error::runtime("null object"))
}

/// `ffi._PyClassRegisterTypeAttrColumns`.
pub fn register_type_attrs(type_index: i32, total_size: i32) -> Result<()> {
    let total = usize::try_from(total_size)
        .map_err(|_| Error::value(format!("negative object size {total_size}")))?;
    // Every field has a storage kind and lies inside the object, so `__ffi_new__` blocks are
    // large enough for the fields written into them.
    let end = layout(type_index)?
        .iter()
        .map(|&(_, offset, size)| offset.saturating_add(size))
        .max()
        .unwrap_or(0);
    if total < end.max(std::mem::size_of::<ObjectHeader>()) {
        return Err(Error::value(format!(
            "object size {total} is smaller than its header and fields ({end} bytes)"
        )));
    }
    super::init::register_ffi_init(type_index)?;
    let new_fn = Function::from_fn(move |_| Ok(Any::from_object(alloc(type_index, total)?)));
    type_registry::register_attr(type_index, "__ffi_new__", Any::from(new_fn).view())?;
    let copy_fn = Function::from_fn(move |args: &[AnyView<'_>]| {
        let src = args
            .first()
            .and_then(|a| a.as_object())
            .filter(|o| o.type_index() == type_index)
            .ok_or_else(|| {
                Error::type_error("__ffi_shallow_copy__ expects an object of its type")
            })?;
        let dst = alloc(type_index, total)?;
        for (kind, offset, size) in layout(type_index)? {
            // SAFETY: both objects have this type's layout; `dst`'s fields are empty.
            unsafe {
                fields::copy_stored(
                    kind,
                    src.as_ptr().cast::<u8>().add(offset).cast(),
                    dst.as_ptr().cast::<u8>().add(offset).cast(),
                    size,
                )
            };
        }
        Ok(Any::from_object(dst))
    });
    type_registry::register_attr(
        type_index,
        "__ffi_shallow_copy__",
        Any::from(copy_fn).view(),
    )
}
