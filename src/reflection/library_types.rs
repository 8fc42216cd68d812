//! Reflected object types tvm-ffi's library defines and its clients construct or read by
//! reflection: the enum machinery (`ffi.EnumState`, `ffi.Enum`, `ffi.IntEnum`, `ffi.StrEnum`,
//! `include/tvm/ffi/enum.h`, registered in `src/ffi/object.cc`).
//!
//! Each is laid out as tvm-ffi's C++ class: the header, then its fields at the same offsets,
//! stored as [`Storage`] kinds (an `int64_t`, a nullable object pointer). Objects are zeroed
//! blocks with tvmrt's `library_object_deleter`; the type's `creator` (in its metadata) makes
//! one with the fields C++'s default constructor would set.

use std::ffi::c_void;

use crate::abi::{type_index as ti, ObjectDeleter, TVMFFIAny, TVMFFIByteArray};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::list::new_list;
use crate::object::containers::map::new_dict;
use crate::object::type_registry::{self, static_index, TVMFFIFieldInfo, TVMFFITypeMetadata};
use crate::object::{ObjectHeader, ObjectRef};
use crate::value::{Any, AnyView};

use super::fields::{self, Storage, INIT_OFF};

/// One field of a library type.
struct FieldSpec {
    name: &'static str,
    /// tvm-ffi's field metadata: a JSON object whose `type_schema` is the field's type as JSON.
    metadata: &'static str,
    doc: &'static str,
    offset: i64,
    static_index: i32,
    size: i64,
    flags: i64,
}

/// `kTVMFFIFieldFlagBitMaskSEqHashIgnore`.
const SEQ_HASH_IGNORE: i64 = 1 << 3;

const fn field(
    name: &'static str,
    metadata: &'static str,
    doc: &'static str,
    offset: i64,
    static_index: i32,
    flags: i64,
) -> FieldSpec {
    // `String` fields are 16-byte `Any`-like cells declared with the `Any` type index; `Any`
    // fields are 16 bytes too; object references are a pointer; `int64_t` is 8 bytes.
    let size = if static_index == ti::STR || static_index == ANY {
        16
    } else if static_index == ti::INT {
        8
    } else {
        PTR
    };
    let static_index = if static_index == ti::STR {
        ANY
    } else {
        static_index
    };
    FieldSpec {
        name,
        metadata,
        doc,
        offset,
        static_index,
        size,
        flags,
    }
}

const ANY: i32 = super::fields::ANY_INDEX;

const HEADER: i64 = 24;
/// Bytes of a pointer (an `ObjectRef` field): 4 on 32-bit targets, where C++ packs the
/// fields after one closer than on 64-bit ones.
const PTR: i64 = std::mem::size_of::<*const c_void>() as i64;
/// `sizeof` of a class whose fields end at `end`: C++ rounds it to the header's 8-byte
/// alignment.
const fn class_size(end: i64) -> usize {
    ((end + 7) / 8 * 8) as usize
}
const INT_SCHEMA: &str = r#"{"type_schema":"{\"type\":\"int\"}"}"#;
const STR_SCHEMA: &str = r#"{"type_schema":"{\"type\":\"ffi.String\"}"}"#;

const ENUM_STATE_FIELDS: &[FieldSpec] = &[
    field(
        "entries",
        r#"{"type_schema":"{\"type\":\"ffi.List\",\"args\":[{\"type\":\"ffi.Object\"}]}"}"#,
        "Enum singletons in registration order.",
        HEADER,
        static_index::LIST,
        INIT_OFF,
    ),
    field(
        "indexes",
        r#"{"type_schema":"{\"type\":\"ffi.Dict\",\"args\":[{\"type\":\"Any\"},{\"type\":\"ffi.Object\"}]}"}"#,
        "Canonical integer and string indices to enum singletons.",
        HEADER + PTR,
        ti::OBJECT,
        INIT_OFF,
    ),
    field(
        "attrs",
        r#"{"type_schema":"{\"type\":\"ffi.Dict\",\"args\":[{\"type\":\"ffi.String\"},{\"type\":\"ffi.Dict\",\"args\":[{\"type\":\"ffi.Object\"},{\"type\":\"Any\"}]}]}"}"#,
        "Extensible-attribute columns keyed by enum singleton.",
        HEADER + 2 * PTR,
        ti::OBJECT,
        INIT_OFF,
    ),
];
const ENUM_FIELDS: &[FieldSpec] = &[
    field(
        "_int_index",
        INT_SCHEMA,
        "Canonical integer index.",
        HEADER,
        ti::INT,
        SEQ_HASH_IGNORE,
    ),
    field(
        "_str_index",
        STR_SCHEMA,
        "Canonical string index.",
        HEADER + 8,
        ti::STR,
        0,
    ),
];
const INT_ENUM_FIELDS: &[FieldSpec] = &[field(
    "value",
    INT_SCHEMA,
    "Canonical integer index.",
    HEADER,
    ti::INT,
    INIT_OFF | SEQ_HASH_IGNORE,
)];
const STRUCTURAL_KEY_FIELDS: &[FieldSpec] = &[
    field(
        "key",
        r#"{"type_schema":"{\"type\":\"Any\"}"}"#,
        "The key value.",
        HEADER,
        ANY,
        INIT_OFF,
    ),
    field(
        "hash_i64",
        INT_SCHEMA,
        "Cached structural hash of the key.",
        HEADER + 16,
        ti::INT,
        INIT_OFF,
    ),
];
const VISIT_INTERRUPT_FIELDS: &[FieldSpec] = &[field(
    "value",
    r#"{"type_schema":"{\"type\":\"Any\"}"}"#,
    "The payload carried out of the visit.",
    HEADER,
    ANY,
    0,
)];
const VISIT_ERROR_CONTEXT_FIELDS: &[FieldSpec] = &[
    field(
        "reverse_visit_pattern",
        r#"{"type_schema":"{\"type\":\"ffi.List\",\"args\":[{\"type\":\"ffi.Object\"}]}"}"#,
        "The objects visited when the error was raised, innermost first.",
        HEADER,
        static_index::LIST,
        0,
    ),
    field(
        "prev_error_context",
        r#"{"type_schema":"{\"type\":\"Optional\",\"args\":[{\"type\":\"ffi.Object\"}]}"}"#,
        "The error's extra context before this one was attached.",
        HEADER + PTR,
        ti::OBJECT,
        0,
    ),
];
const STR_ENUM_FIELDS: &[FieldSpec] = &[field(
    "value",
    STR_SCHEMA,
    "Canonical string index.",
    HEADER + 8,
    ti::STR,
    INIT_OFF | SEQ_HASH_IGNORE,
)];

/// Deleter of library objects: the strong flag releases the fields of the object's type (and
/// its ancestors), the weak flag frees the `calloc` block.
///
/// # Safety
/// `ptr` is an object made by [`alloc`] whose count reached zero for the flags given.
unsafe extern "C" fn library_object_deleter(ptr: *mut c_void, flags: i32) {
    // SAFETY: the header is live until the block is freed.
    let type_index = unsafe { (*ptr.cast::<ObjectHeader>()).type_index };
    if flags & crate::abi::deleter_flag::STRONG != 0 {
        if let Ok(info) = fields::type_info(type_index) {
            for f in fields::all_fields(info) {
                if let Ok(kind) = fields::field_storage(&f) {
                    // SAFETY: the field at its offset holds a value of its kind.
                    unsafe {
                        fields::clear_stored(kind, ptr.cast::<u8>().add(f.offset as usize).cast())
                    };
                }
            }
        }
    }
    if flags & crate::abi::deleter_flag::WEAK != 0 {
        // SAFETY: the block came from `libc::calloc` in `alloc`.
        unsafe { libc::free(ptr) };
    }
}

/// A zeroed object block of `size` bytes with the header set, freed by
/// `library_object_deleter` (which releases the fields its type registers).
pub(crate) fn alloc(type_index: i32, size: usize) -> Result<ObjectRef> {
    // SAFETY: plain allocation; checked for null below.
    let p = unsafe { libc::calloc(1, size) };
    if p.is_null() {
        return Err(Error::runtime(format!("failed to allocate {size} bytes")));
    }
    let header = p.cast::<ObjectHeader>();
    // SAFETY: a fresh zeroed block with room for the header.
    unsafe {
        (*header).combined_ref_count = (1u64 | (1 << 32)).into();
        (*header).type_index = type_index;
        (*header).deleter = Some(library_object_deleter as ObjectDeleter);
    }
    // SAFETY: one strong reference, now ours.
    unsafe { ObjectRef::from_raw_owned(p) }.ok_or_else(|| Error::runtime("null object"))
}

/// Stores `value` in the object field at `addr`.
///
/// # Safety
/// `addr` is a field of `kind` in a live library object.
unsafe fn store(kind: Storage, addr: *mut c_void, value: Any) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { fields::write_stored(kind, addr, value) }
}

macro_rules! setter {
    ($name:ident, $kind:expr) => {
        /// A `TVMFFIFieldSetter` for one storage kind.
        unsafe extern "C" fn $name(field: *mut c_void, value: *const TVMFFIAny) -> i32 {
            let r = std::panic::catch_unwind(|| {
                // SAFETY: tvm-ffi calls setters with the field's address and a valid value.
                let v = unsafe { AnyView::from_raw(*value) }.to_owned_any();
                // SAFETY: as above.
                unsafe { store($kind, field, v) }
            });
            match r {
                Ok(Ok(())) => 0,
                Ok(Err(e)) => {
                    crate::raised::set_raised(e);
                    -1
                }
                Err(_) => {
                    crate::raised::set_raised(Error::runtime("field setter panicked"));
                    -1
                }
            }
        }
    };
}
setter!(set_int, Storage::Pod(ti::INT));
setter!(set_object, Storage::Object);
setter!(set_any, Storage::Any);

fn register_fields(type_index: i32, specs: &[FieldSpec]) -> Result<()> {
    for s in specs {
        let kind = fields::storage(s.static_index)?;
        let setter = match kind {
            Storage::Pod(_) => set_int as *mut c_void,
            Storage::Any => set_any as *mut c_void,
            Storage::Object => set_object as *mut c_void,
        };
        let getter = super::py_class::field_getter(s.static_index)?;
        let bytes = |t: &'static str| TVMFFIByteArray {
            data: t.as_ptr().cast(),
            size: t.len(),
        };
        let info = TVMFFIFieldInfo {
            name: bytes(s.name),
            doc: bytes(s.doc),
            metadata: bytes(s.metadata),
            flags: s.flags,
            size: s.size,
            alignment: s.size.min(8),
            offset: s.offset,
            // SAFETY: the getter is one of tvmrt's `TVMFFIFieldGetter` functions.
            getter: Some(unsafe {
                std::mem::transmute::<usize, type_registry::TVMFFIFieldGetter>(getter as usize)
            }),
            setter,
            default_value_or_factory: TVMFFIAny::NONE,
            field_static_type_index: s.static_index,
        };
        // SAFETY: the record's strings are static; no default, a C-function setter.
        unsafe { type_registry::register_field(type_index, &info)? };
    }
    Ok(())
}

fn register_metadata(
    type_index: i32,
    size: i32,
    creator: type_registry::TVMFFIObjectCreator,
) -> Result<()> {
    let md = TVMFFITypeMetadata {
        doc: TVMFFIByteArray {
            data: std::ptr::null(),
            size: 0,
        },
        creator: Some(creator),
        total_size: size,
        structural_eq_hash_kind: 0,
    };
    // SAFETY: an empty doc.
    unsafe { type_registry::register_metadata(type_index, &md) }
}

/// Writes a creator's result or raises its error.
fn creator_result(r: Result<ObjectRef>, out: *mut *mut c_void) -> i32 {
    match r {
        Ok(obj) => {
            // SAFETY: tvm-ffi passes a writable handle slot.
            unsafe { *out = obj.into_raw() };
            0
        }
        Err(e) => {
            crate::raised::set_raised(e);
            -1
        }
    }
}

fn index_of(key: &str) -> Result<i32> {
    type_registry::key_to_index(key)
}

/// `sizeof(EnumStateObj)`: the header and three object references.
const ENUM_STATE_SIZE: usize = class_size(HEADER + 3 * PTR);

/// A new `ffi.EnumState` with empty containers, as C++'s default constructor makes it.
fn new_enum_state() -> Result<ObjectRef> {
    let obj = alloc(index_of("ffi.EnumState")?, ENUM_STATE_SIZE)?;
    let base = obj.as_ptr().cast::<u8>();
    let [entries, indexes, attrs] = [0, 1, 2].map(|i| ENUM_STATE_FIELDS[i].offset as usize);
    // SAFETY: the three fields of a fresh, empty `EnumState`.
    unsafe {
        store(
            Storage::Object,
            base.add(entries).cast(),
            Any::from_object(new_list(Vec::new())),
        )?;
        store(
            Storage::Object,
            base.add(indexes).cast(),
            Any::from_object(new_dict(Vec::new())),
        )?;
        store(
            Storage::Object,
            base.add(attrs).cast(),
            Any::from_object(new_dict(Vec::new())),
        )?;
    }
    Ok(obj)
}

unsafe extern "C" fn create_enum_state(out: *mut *mut c_void) -> i32 {
    creator_result(new_enum_state(), out)
}

macro_rules! enum_creator {
    ($name:ident, $key:expr, $size:expr) => {
        /// Creator of an empty enum object (`_str_index` empty).
        unsafe extern "C" fn $name(out: *mut *mut c_void) -> i32 {
            creator_result(index_of($key).and_then(|t| alloc(t, $size)), out)
        }
    };
}
enum_creator!(create_enum, "ffi.Enum", 48);
enum_creator!(create_int_enum, "ffi.IntEnum", 48);
enum_creator!(create_str_enum, "ffi.StrEnum", 48);

/// Size of an `ffi.StructuralKey`: the header, `Any key`, `int64_t hash_i64`.
const STRUCTURAL_KEY_SIZE: usize = 48;

enum_creator!(
    create_structural_key,
    "ffi.StructuralKey",
    STRUCTURAL_KEY_SIZE
);

/// Size of an `ffi.VisitInterrupt`: the header and `Any value`.
const VISIT_INTERRUPT_SIZE: usize = 40;

enum_creator!(
    create_visit_interrupt,
    "ffi.VisitInterrupt",
    VISIT_INTERRUPT_SIZE
);

/// Size of an `ffi.VisitErrorContext`: the header, a list and an optional object.
const VISIT_ERROR_CONTEXT_SIZE: usize = class_size(HEADER + 2 * PTR);

/// A new, empty `ffi.VisitErrorContext` (an empty pattern, as C++'s constructor leaves it).
fn new_visit_error_context() -> Result<ObjectRef> {
    let obj = alloc(index_of("ffi.VisitErrorContext")?, VISIT_ERROR_CONTEXT_SIZE)?;
    // SAFETY: the pattern field of a fresh, zeroed context.
    unsafe {
        store(
            Storage::Object,
            obj.as_ptr().cast::<u8>().add(HEADER as usize).cast(),
            Any::from_object(new_list(Vec::new())),
        )?;
    }
    Ok(obj)
}

unsafe extern "C" fn create_visit_error_context(out: *mut *mut c_void) -> i32 {
    creator_result(new_visit_error_context(), out)
}

/// A new `ffi.VisitInterrupt` carrying `value`.
pub fn new_visit_interrupt(value: Any) -> Result<ObjectRef> {
    let obj = alloc(index_of("ffi.VisitInterrupt")?, VISIT_INTERRUPT_SIZE)?;
    let base = obj.as_ptr().cast::<u8>();
    // SAFETY: the one field of a fresh, zeroed interrupt.
    unsafe { store(Storage::Any, base.add(HEADER as usize).cast(), value)? };
    Ok(obj)
}

/// A handle object of type `key` (`ffi.StructuralVisitor`, `ffi.StructuralMutator`): the header
/// and an `int64_t` id naming the traversal it belongs to.
pub fn new_handle(key: &str, id: u64) -> Result<ObjectRef> {
    let obj = alloc(index_of(key)?, HANDLE_SIZE)?;
    // SAFETY: a fresh block of `HANDLE_SIZE` bytes; the id follows the header.
    unsafe { *obj.as_ptr().cast::<u8>().add(HEADER as usize).cast::<u64>() = id };
    Ok(obj)
}

/// The id of a handle object of type `key`, or `None` for any other object.
pub fn handle_id(obj: &ObjectRef, key: &str) -> Option<u64> {
    if index_of(key).ok()? != obj.type_index() {
        return None;
    }
    // SAFETY: handle objects of `key` hold their id after the header.
    Some(unsafe { *obj.as_ptr().cast::<u8>().add(HEADER as usize).cast::<u64>() })
}

/// Size of a handle object.
const HANDLE_SIZE: usize = 32;

/// Whether `obj` is an `ffi.StructuralKey`.
pub fn is_structural_key(obj: &ObjectRef) -> bool {
    index_of("ffi.StructuralKey").is_ok_and(|t| obj.type_index() == t)
}

/// A new `ffi.StructuralKey` holding `key` and its structural hash.
pub fn new_structural_key(key: Any, hash: i64) -> Result<ObjectRef> {
    let obj = alloc(index_of("ffi.StructuralKey")?, STRUCTURAL_KEY_SIZE)?;
    let base = obj.as_ptr().cast::<u8>();
    // SAFETY: the two fields of a fresh, zeroed key.
    unsafe {
        store(Storage::Any, base.add(HEADER as usize).cast(), key)?;
        store(
            Storage::Pod(ti::INT),
            base.add(HEADER as usize + 16).cast(),
            Any::from(hash),
        )?;
    }
    Ok(obj)
}

/// The key value and cached hash of an `ffi.StructuralKey`.
pub fn structural_key_parts(obj: &ObjectRef) -> Result<(Any, i64)> {
    if !is_structural_key(obj) {
        return Err(Error::type_error(format!(
            "expected an ffi.StructuralKey, got an object of type index {}",
            obj.type_index()
        )));
    }
    let base = obj.as_ptr().cast::<u8>();
    // SAFETY: `obj` is a structural key: an `Any` then an `int64_t` after the header.
    unsafe {
        let key = fields::read_stored(Storage::Any, base.add(HEADER as usize).cast());
        let hash = *base.add(HEADER as usize + 16).cast::<i64>();
        Ok((key, hash))
    }
}

/// Registers fields, creators and constructors of the library types (once, at start-up).
pub fn register_all() -> Result<()> {
    let state = index_of("ffi.EnumState")?;
    register_fields(state, ENUM_STATE_FIELDS)?;
    register_metadata(state, ENUM_STATE_SIZE as i32, create_enum_state)?;
    let init = Function::from_fn(|args| {
        if !args.is_empty() {
            return Err(Error::type_error(format!(
                "ffi.EnumState.__ffi_init__() takes no arguments ({} given)",
                args.len()
            )));
        }
        Ok(Any::from_object(new_enum_state()?))
    });
    type_registry::register_attr(state, "__ffi_init__", Any::from(init).view())?;
    for (key, specs, creator) in [
        (
            "ffi.Enum",
            ENUM_FIELDS,
            create_enum as type_registry::TVMFFIObjectCreator,
        ),
        ("ffi.IntEnum", INT_ENUM_FIELDS, create_int_enum),
        ("ffi.StrEnum", STR_ENUM_FIELDS, create_str_enum),
        (
            "ffi.StructuralKey",
            STRUCTURAL_KEY_FIELDS,
            create_structural_key,
        ),
    ] {
        let t = index_of(key)?;
        register_fields(t, specs)?;
        register_metadata(t, 48, creator)?;
    }
    let t = index_of("ffi.VisitErrorContext")?;
    register_fields(t, VISIT_ERROR_CONTEXT_FIELDS)?;
    register_metadata(
        t,
        VISIT_ERROR_CONTEXT_SIZE as i32,
        create_visit_error_context,
    )?;
    let t = index_of("ffi.VisitInterrupt")?;
    register_fields(t, VISIT_INTERRUPT_FIELDS)?;
    register_metadata(t, VISIT_INTERRUPT_SIZE as i32, create_visit_interrupt)?;
    for (name, hook) in crate::object::big_int::json_hooks() {
        type_registry::register_attr(static_index::BIG_INT, name, Any::from(hook).view())?;
    }
    for (key, is_final) in TYPE_FINAL {
        type_registry::register_attr(
            index_of(key)?,
            "__ffi_type_final__",
            Any::from(*is_final).view(),
        )?;
    }
    Ok(())
}

/// `__ffi_type_final__` of the library's types: whether the C++ class is final
/// (`Class::_type_final`), published by tvm-ffi's `ObjectDef` for each type it defines.
const TYPE_FINAL: &[(&str, bool)] = &[
    ("ffi.Module", true),
    ("ffi.BigInt", true),
    ("ffi.EnumState", true),
    ("ffi.Enum", false),
    ("ffi.IntEnum", false),
    ("ffi.StrEnum", false),
    ("ffi.StructuralKey", true),
    ("ffi.VisitErrorContext", true),
    ("ffi.VisitInterrupt", true),
    ("ffi.StructuralVisitor", false),
    ("ffi.StructuralMutator", false),
    ("ffi.reflection.AccessStep", true),
    ("ffi.reflection.AccessPath", true),
];
