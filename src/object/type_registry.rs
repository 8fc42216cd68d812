//! The type table: type keys, indexes, ancestry and reflection records of every object type.
//!
//! This follows tvm-ffi's `TypeTable` (`src/ffi/object.cc`) because C++ code compiled against
//! tvm-ffi's headers depends on its exact behaviour:
//! - built-in keys have fixed indexes (`"ffi.Object"` = 64, `"ffi.String"` = 65, ...), the POD
//!   kinds below 64 are registered too (`"int"` = 1, ...);
//! - a type declared with a static index gets it; a dynamic type takes the next free slot of the
//!   slots its parent reserved for children (`num_child_slots`), and when those are used up
//!   (and the parent allows overflow) a fresh range from a counter starting at 128;
//! - `object.h`'s `IsObjectInstance` first checks the reserved range
//!   `[index, index + child_slots]`, then falls back to `TVMFFIGetTypeInfo(t)` and compares
//!   `type_ancestors[depth]`, so every child index is above its parent's and every entry lists
//!   all its ancestors, root first.
//!
//! The returned `TVMFFITypeInfo*` stay valid for the life of the process: entries are boxed and
//! never removed. Registration (fields, methods, attributes) is expected at start-up, as in
//! tvm-ffi: it is serialized by a lock, but C readers of a `TVMFFITypeInfo` read without one.
//! Arrays a reader may hold (fields, methods, attribute columns) are never freed when they grow;
//! the old copy is kept, so a stale pointer still reads valid (older) data.
//!
//! Differences from tvm-ffi, kept small on purpose: `type_key_hash` is FNV-1a 64 of the key
//! (tvm-ffi uses `std::hash`, whose value is implementation-defined); dynamic slot ranges are
//! bounded ([`MAX_CHILD_SLOTS`], [`MAX_TYPE_INDEX`]) so bad input cannot size an allocation;
//! attributes can only be set on registered types; every failed check (empty key, unknown parent,
//! a depth that does not follow the parent, a taken static index) is an error, never an abort.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ffi::c_void;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::abi::{type_index as ti, TVMFFIAny, TVMFFIByteArray};
use crate::error::{Error, Result};
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

/// Static type indexes tvm-ffi defines beyond those in [`crate::abi::type_index`]
/// (`TVMFFITypeIndex` in `c_api.h`).
pub mod static_index {
    /// `kTVMFFIUnchanged`.
    pub const UNCHANGED: i32 = 13;
    /// `kTVMFFIOpaquePyObject`: header then `TVMFFIOpaqueObjectCell`.
    pub const OPAQUE_PY_OBJECT: i32 = 74;
    /// `kTVMFFIList`.
    pub const LIST: i32 = 75;
    /// `kTVMFFIDict`.
    pub const DICT: i32 = 76;
    /// `kTVMFFIVisitInterrupt`.
    pub const VISIT_INTERRUPT: i32 = 77;
    /// `kTVMFFIBigInt`: header, `size_t` word count, then the words.
    pub const BIG_INT: i32 = 78;
}

/// `TVMFFIFieldFlagBitMask` bits tvmrt acts on.
pub mod field_flag {
    /// `kTVMFFIFieldFlagBitMaskWritable`.
    pub const WRITABLE: i64 = 1 << 0;
    /// `kTVMFFIFieldFlagBitMaskHasDefault`: `default_value_or_factory` is meaningful.
    pub const HAS_DEFAULT: i64 = 1 << 1;
    /// `kTVMFFIFieldFlagBitMaskIsStaticMethod`.
    pub const IS_STATIC_METHOD: i64 = 1 << 2;
    /// `kTVMFFIFieldFlagBitSetterIsFunctionObj`: `setter` is a function object.
    pub const SETTER_IS_FUNCTION_OBJ: i64 = 1 << 11;
}

/// Largest `num_child_slots` a type may reserve (tvm-ffi has no bound; TVM's own types use
/// a few dozen at most).
pub const MAX_CHILD_SLOTS: i32 = 1 << 16;
/// Indexes handed out stay below this bound.
pub const MAX_TYPE_INDEX: i32 = 1 << 20;

/// Object types tvm-ffi's library registers when it loads (key, parent), in its order so they
/// get the same dynamic indexes (128...). Their fields are not registered yet.
pub const LIBRARY_TYPES: &[(&str, &str)] = &[
    ("ffi.EnumState", "ffi.Object"),
    ("ffi.Enum", "ffi.Object"),
    ("ffi.IntEnum", "ffi.Enum"),
    ("ffi.StrEnum", "ffi.Enum"),
    ("ffi.reflection.AccessStep", "ffi.Object"),
    ("ffi.reflection.AccessPath", "ffi.Object"),
    ("ffi.StructuralVisitor", "ffi.Object"),
    ("ffi.VisitErrorContext", "ffi.Object"),
    ("ffi.StructuralMutator", "ffi.Object"),
    ("ffi.StructuralKey", "ffi.Object"),
];

/// Type-attribute columns tvm-ffi's library creates when it loads (`EnsureTypeAttrColumn` in its
/// `src/ffi`), empty until a type sets a value. Clients built on its C++ headers look them up
/// with `TypeAttrColumn`, which throws when a column does not exist.
pub const STARTUP_ATTR_COLUMNS: &[&str] = &[
    "__ffi_enum__",
    "__ffi_init__",
    "__ffi_new__",
    "__ffi_convert__",
    "__ffi_repr__",
    "__ffi_hash__",
    "__ffi_eq__",
    "__ffi_compare__",
    "__ffi_shallow_copy__",
    "__any_hash__",
    "__any_equal__",
    "__s_equal__",
    "__s_hash__",
    "__s_visit__",
    "__s_mutate__",
    "__s_maybe_inplace_mutate__",
    "__data_to_json__",
    "__data_from_json__",
];

/// `TVMFFIFieldGetter`.
pub type TVMFFIFieldGetter = unsafe extern "C" fn(*mut c_void, *mut TVMFFIAny) -> i32;
/// `TVMFFIObjectCreator`.
pub type TVMFFIObjectCreator = unsafe extern "C" fn(*mut *mut c_void) -> i32;

/// `TVMFFIFieldInfo`: reflection record of one field.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIFieldInfo {
    pub name: TVMFFIByteArray,
    pub doc: TVMFFIByteArray,
    pub metadata: TVMFFIByteArray,
    pub flags: i64,
    pub size: i64,
    pub alignment: i64,
    pub offset: i64,
    pub getter: Option<TVMFFIFieldGetter>,
    pub setter: *mut c_void,
    pub default_value_or_factory: TVMFFIAny,
    pub field_static_type_index: i32,
}

/// `TVMFFIMethodInfo`: reflection record of one method.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFIMethodInfo {
    pub name: TVMFFIByteArray,
    pub doc: TVMFFIByteArray,
    pub metadata: TVMFFIByteArray,
    pub flags: i64,
    pub method: TVMFFIAny,
}

/// `TVMFFITypeMetadata`: optional extra data of a type.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFITypeMetadata {
    pub doc: TVMFFIByteArray,
    pub creator: Option<TVMFFIObjectCreator>,
    pub total_size: i32,
    /// A `TVMFFISEqHashKind`.
    pub structural_eq_hash_kind: i32,
}

/// `TVMFFITypeAttrColumn`: one attribute for many types, indexed by `type_index - begin_index`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFITypeAttrColumn {
    pub data: *const TVMFFIAny,
    pub size: i32,
    pub begin_index: i32,
}

/// `TVMFFITypeInfo`: what `TVMFFIGetTypeInfo` returns.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TVMFFITypeInfo {
    pub type_index: i32,
    pub type_depth: i32,
    pub type_key: TVMFFIByteArray,
    /// `type_ancestors[d]` is the ancestor at depth `d`, for `d < type_depth`.
    pub type_ancestors: *const *const TVMFFITypeInfo,
    pub type_key_hash: u64,
    pub num_fields: i32,
    pub num_methods: i32,
    pub fields: *const TVMFFIFieldInfo,
    pub methods: *const TVMFFIMethodInfo,
    pub metadata: *const TVMFFITypeMetadata,
}

/// FNV-1a 64: a stable hash of the type key for `type_key_hash`.
fn key_hash(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Copies bytes into storage that lives as long as the table, NUL-terminated so the data is
/// also a C string. Empty input gives `{NULL, 0}`, as tvm-ffi's `CopyString`.
fn keep_bytes(pool: &mut Vec<Box<[u8]>>, bytes: &[u8]) -> TVMFFIByteArray {
    if bytes.is_empty() {
        return TVMFFIByteArray {
            data: std::ptr::null(),
            size: 0,
        };
    }
    let mut v = Vec::with_capacity(bytes.len() + 1);
    v.extend_from_slice(bytes);
    v.push(0);
    let storage = v.into_boxed_slice();
    let out = TVMFFIByteArray {
        data: storage.as_ptr().cast(),
        size: bytes.len(),
    };
    pool.push(storage);
    out
}

/// A published array C may hold a pointer to: growing it keeps the old copy alive.
struct Published<T: Copy> {
    items: Vec<T>,
    current: Box<[T]>,
    retired: Vec<Box<[T]>>,
}

impl<T: Copy> Published<T> {
    fn new() -> Self {
        Published {
            items: Vec::new(),
            current: Box::new([]),
            retired: Vec::new(),
        }
    }

    /// Changes the items and publishes them as a new array, keeping the old one readable.
    fn update(&mut self, change: impl FnOnce(&mut Vec<T>)) {
        change(&mut self.items);
        let next = self.items.clone().into_boxed_slice();
        let old = std::mem::replace(&mut self.current, next);
        self.retired.push(old);
    }

    fn ptr(&self) -> *const T {
        if self.current.is_empty() {
            std::ptr::null()
        } else {
            self.current.as_ptr()
        }
    }
}

/// One registered type.
struct Entry {
    /// What C reads; mutated only under the table lock.
    info: UnsafeCell<TVMFFITypeInfo>,
    key: String,
    _key_storage: Box<[u8]>,
    _ancestors: Box<[*const TVMFFITypeInfo]>,
    /// Slots reserved for this type and its children (`num_child_slots + 1`).
    num_slots: i32,
    /// Slots of the reservation already used (the type itself counts as one).
    allocated_slots: i32,
    child_slots_can_overflow: bool,
    fields: Published<TVMFFIFieldInfo>,
    methods: Published<TVMFFIMethodInfo>,
    metadata: Option<Box<TVMFFITypeMetadata>>,
}

impl Entry {
    fn info(&self) -> &TVMFFITypeInfo {
        // SAFETY: only mutated through `info_mut`, which needs `&mut self`.
        unsafe { &*self.info.get() }
    }

    fn info_mut(&mut self) -> &mut TVMFFITypeInfo {
        self.info.get_mut()
    }

    fn info_ptr(&self) -> *const TVMFFITypeInfo {
        self.info.get()
    }
}

/// One attribute column.
struct AttrColumn {
    cell: UnsafeCell<TVMFFITypeAttrColumn>,
    data: Published<TVMFFIAny>,
}

/// The table behind the lock.
struct Table {
    entries: HashMap<i32, Box<Entry>>,
    by_key: HashMap<String, i32>,
    /// Next index for an overflowing dynamic type (tvm-ffi's `type_counter_`).
    type_counter: i32,
    strings: Vec<Box<[u8]>>,
    /// Values referenced from records and columns (defaults, methods, setters, attributes).
    values: Vec<Any>,
    setters: Vec<ObjectRef>,
    /// Boxed so a column's cell keeps its address (C holds it) while the list grows.
    #[allow(clippy::vec_box)]
    columns: Vec<Box<AttrColumn>>,
    column_by_name: HashMap<String, usize>,
}

// SAFETY: the raw pointers in the table point into boxes the table owns (or into objects it
// holds references to, whose counts are atomic); all access goes through the mutex.
unsafe impl Send for Table {}

/// POD kinds registered as root types (tvm-ffi `ReserveBuiltinTypeIndex`, keys from
/// `type_traits.h` `StaticTypeKey`).
const BUILTIN_PODS: &[(&str, i32)] = &[
    ("None", ti::NONE),
    ("int", ti::INT),
    ("bool", ti::BOOL),
    ("float", ti::FLOAT),
    ("void*", ti::OPAQUE_PTR),
    ("DataType", ti::DATA_TYPE),
    ("Device", ti::DEVICE),
    ("DLTensor*", ti::DL_TENSOR_PTR),
    ("const char*", ti::RAW_STR),
    ("TVMFFIByteArray*", ti::BYTE_ARRAY_PTR),
    ("ObjectRValueRef", ti::OBJECT_RVALUE_REF),
    ("ffi.SmallStr", ti::SMALL_STR),
    ("ffi.SmallBytes", ti::SMALL_BYTES),
    ("ffi.Unchanged", static_index::UNCHANGED),
];

/// Object kinds with static indexes, direct children of `ffi.Object` with no child slots and
/// no overflow (tvm-ffi `ReserveDepthOneObjectTypeIndex`; `ffi.VisitInterrupt` is declared
/// static in `extra/structural_visit.h` and registered by libtvm_ffi at load time).
const BUILTIN_OBJECTS: &[(&str, i32)] = &[
    ("ffi.String", ti::STR),
    ("ffi.BigInt", static_index::BIG_INT),
    ("ffi.Bytes", ti::BYTES),
    ("ffi.Error", ti::ERROR),
    ("ffi.Function", ti::FUNCTION),
    ("ffi.Shape", ti::SHAPE),
    ("ffi.Tensor", ti::TENSOR),
    ("ffi.Array", ti::ARRAY),
    ("ffi.List", static_index::LIST),
    ("ffi.Map", ti::MAP),
    ("ffi.Dict", static_index::DICT),
    ("ffi.Module", ti::MODULE),
    ("ffi.OpaquePyObject", static_index::OPAQUE_PY_OBJECT),
    ("ffi.VisitInterrupt", static_index::VISIT_INTERRUPT),
];

/// The `TVMFFIObject` header size, reported as `ffi.Object`'s `total_size`.
const OBJECT_HEADER_SIZE: i32 = 24;

impl Table {
    fn new() -> Table {
        let mut t = Table {
            entries: HashMap::new(),
            by_key: HashMap::new(),
            type_counter: ti::DYN_OBJECT_BEGIN,
            strings: Vec::new(),
            values: Vec::new(),
            setters: Vec::new(),
            columns: Vec::new(),
            column_by_name: HashMap::new(),
        };
        let expect = "built-in type registration";
        // `Object`: depth 0, no child slots, overflow allowed (object.h `Object`).
        t.get_or_alloc("ffi.Object", ti::OBJECT, 0, 0, true, -1)
            .expect(expect);
        let md = TVMFFITypeMetadata {
            doc: TVMFFIByteArray {
                data: std::ptr::null(),
                size: 0,
            },
            creator: None,
            total_size: OBJECT_HEADER_SIZE,
            structural_eq_hash_kind: 0,
        };
        t.register_metadata(ti::OBJECT, &md, &[]).expect(expect);
        for &(key, index) in BUILTIN_PODS {
            t.get_or_alloc(key, index, 0, 0, false, -1).expect(expect);
        }
        for &(key, index) in BUILTIN_OBJECTS {
            t.get_or_alloc(key, index, 1, 0, false, ti::OBJECT)
                .expect(expect);
        }
        for &(key, parent) in LIBRARY_TYPES {
            let parent = t.by_key[parent];
            let depth = t.entry(parent).expect(expect).info().type_depth + 1;
            t.get_or_alloc(key, -1, depth, 0, true, parent)
                .expect(expect);
        }
        for name in STARTUP_ATTR_COLUMNS {
            t.column(name);
        }
        for (key, attr, value) in crate::object::containers::key::builtin_key_attrs() {
            let index = t.by_key[key];
            t.register_attr(index, attr, value.view()).expect(expect);
        }
        t
    }

    fn entry(&self, index: i32) -> Result<&Entry> {
        self.entries
            .get(&index)
            .map(|b| &**b)
            .ok_or_else(|| Error::value(format!("no type is registered with type index {index}")))
    }

    fn entry_mut(&mut self, index: i32) -> Result<&mut Entry> {
        self.entries
            .get_mut(&index)
            .map(|b| &mut **b)
            .ok_or_else(|| Error::value(format!("no type is registered with type index {index}")))
    }

    fn get_or_alloc(
        &mut self,
        key: &str,
        static_index: i32,
        depth: i32,
        num_child_slots: i32,
        can_overflow: bool,
        parent_index: i32,
    ) -> Result<i32> {
        if let Some(&index) = self.by_key.get(key) {
            return Ok(index);
        }
        if parent_index == -2 {
            return Ok(-2);
        }
        if key.is_empty() {
            return Err(Error::value("type key must not be empty"));
        }
        if !(0..=MAX_CHILD_SLOTS).contains(&num_child_slots) {
            return Err(Error::value(format!(
                "type `{key}`: num_child_slots={num_child_slots} is outside [0, {MAX_CHILD_SLOTS}]"
            )));
        }
        if depth < 0 {
            return Err(Error::value(format!(
                "type `{key}`: negative type_depth {depth}"
            )));
        }
        let parent = if parent_index >= 0 {
            Some(self.entry(parent_index).map_err(|_| {
                Error::value(format!(
                    "type `{key}`: parent type index {parent_index} is not registered"
                ))
            })?)
        } else {
            None
        };
        let parent_ancestors: Vec<*const TVMFFITypeInfo> = match parent {
            Some(p) if depth != 0 => {
                if depth != p.info().type_depth + 1 {
                    return Err(Error::value(format!(
                        "type `{key}`: type_depth {depth} does not follow its parent `{}` \
                         (depth {})",
                        p.key,
                        p.info().type_depth
                    )));
                }
                let n = p.info().type_depth as usize;
                let mut v = Vec::with_capacity(n + 1);
                if n > 0 {
                    // SAFETY: a registered entry's ancestor array holds `type_depth` pointers
                    // and lives as long as the table.
                    v.extend_from_slice(unsafe {
                        std::slice::from_raw_parts(p.info().type_ancestors, n)
                    });
                }
                v.push(p.info_ptr());
                v
            }
            None if depth != 0 => {
                return Err(Error::value(format!(
                    "type `{key}`: type_depth {depth} needs a parent type"
                )))
            }
            _ => Vec::new(),
        };
        let num_slots = num_child_slots + 1;
        let index = if static_index >= 0 {
            if static_index >= self.type_counter.max(ti::DYN_OBJECT_BEGIN) {
                return Err(Error::value(format!(
                    "type `{key}`: static type index {static_index} is beyond the allocated \
                     range (< {})",
                    self.type_counter
                )));
            }
            if let Ok(other) = self.entry(static_index) {
                return Err(Error::value(format!(
                    "conflicting static type index {static_index} between `{}` and `{key}`",
                    other.key
                )));
            }
            static_index
        } else {
            let p = parent.ok_or_else(|| {
                Error::value(format!(
                    "type `{key}`: a dynamically indexed type needs a parent type"
                ))
            })?;
            let (p_index, p_alloc, p_slots, p_overflow) = (
                p.info().type_index,
                p.allocated_slots,
                p.num_slots,
                p.child_slots_can_overflow,
            );
            if p_alloc + num_slots <= p_slots {
                // Inside the parent's reserved range, so `IsInstance`'s range check sees it.
                let index = p_index + p_alloc;
                self.entry_mut(p_index)?.allocated_slots += num_slots;
                index
            } else {
                if !p_overflow {
                    let p_key = &self.entry(p_index)?.key;
                    return Err(Error::value(format!(
                        "type `{key}`: reached the maximum number of subclasses of `{p_key}`"
                    )));
                }
                let index = self.type_counter;
                let next = index
                    .checked_add(num_slots)
                    .filter(|&n| n <= MAX_TYPE_INDEX)
                    .ok_or_else(|| {
                        Error::value(format!(
                            "type `{key}`: type index space exhausted (limit {MAX_TYPE_INDEX})"
                        ))
                    })?;
                self.type_counter = next;
                index
            }
        };
        let mut can_overflow = can_overflow;
        if parent_index >= 0 {
            let p = self.entry(parent_index)?;
            // A child of a type that may not overflow may not either (tvm-ffi).
            if !p.child_slots_can_overflow {
                can_overflow = false;
            }
            if index <= p.info().type_index {
                return Err(Error::value(format!(
                    "type `{key}`: index {index} is not above its parent's {}",
                    p.info().type_index
                )));
            }
        }
        let mut key_storage = key.as_bytes().to_vec();
        key_storage.push(0);
        let key_storage = key_storage.into_boxed_slice();
        let ancestors = parent_ancestors.into_boxed_slice();
        let info = TVMFFITypeInfo {
            type_index: index,
            type_depth: depth,
            type_key: TVMFFIByteArray {
                data: key_storage.as_ptr().cast(),
                size: key.len(),
            },
            type_ancestors: if ancestors.is_empty() {
                std::ptr::null()
            } else {
                ancestors.as_ptr()
            },
            type_key_hash: key_hash(key.as_bytes()),
            num_fields: 0,
            num_methods: 0,
            fields: std::ptr::null(),
            methods: std::ptr::null(),
            metadata: std::ptr::null(),
        };
        let entry = Box::new(Entry {
            info: UnsafeCell::new(info),
            key: key.to_string(),
            _key_storage: key_storage,
            _ancestors: ancestors,
            num_slots,
            allocated_slots: 1,
            child_slots_can_overflow: can_overflow,
            fields: Published::new(),
            methods: Published::new(),
            metadata: None,
        });
        self.entries.insert(index, entry);
        self.by_key.insert(key.to_string(), index);
        Ok(index)
    }

    /// Keeps an owned copy of a borrowed value and returns a raw view of it.
    fn keep_value(&mut self, value: AnyView<'_>) -> TVMFFIAny {
        let owned = value.to_owned_any();
        let raw = *owned.raw();
        self.values.push(owned);
        raw
    }

    fn register_field(&mut self, index: i32, info: &TVMFFIFieldInfo, name: &[u8]) -> Result<()> {
        let entry = self.entry(index)?;
        if entry.fields.items.iter().any(|f| {
            // SAFETY: field names were copied into the table's storage.
            let existing = unsafe { f.name.as_slice() };
            existing == name
        }) {
            return Err(Error::value(format!(
                "duplicate field name `{}` in type `{}`",
                String::from_utf8_lossy(name),
                entry.key
            )));
        }
        let mut data = *info;
        if data.flags & field_flag::SETTER_IS_FUNCTION_OBJ != 0 && !data.setter.is_null() {
            // The setter is a function object: keep it alive as long as the record.
            // SAFETY: the caller passes a live function object as the setter.
            if let Some(obj) = unsafe { ObjectRef::from_raw_borrowed(data.setter) } {
                self.setters.push(obj);
            }
        }
        data.default_value_or_factory = if data.flags & field_flag::HAS_DEFAULT != 0 {
            // SAFETY: the caller guarantees the default value is a valid borrowed value.
            let view = unsafe { AnyView::from_raw(info.default_value_or_factory) };
            self.keep_value(view)
        } else {
            TVMFFIAny::NONE
        };
        data.name = keep_bytes(&mut self.strings, name);
        // SAFETY: the caller guarantees the byte arrays are readable.
        let (doc, metadata) = unsafe { (info.doc.as_slice(), info.metadata.as_slice()) };
        data.doc = keep_bytes(&mut self.strings, doc);
        data.metadata = keep_bytes(&mut self.strings, metadata);
        let entry = self.entry_mut(index)?;
        entry.fields.update(|v| v.push(data));
        let (ptr, n) = (entry.fields.ptr(), entry.fields.items.len() as i32);
        let info = entry.info_mut();
        info.fields = ptr;
        info.num_fields = n;
        Ok(())
    }

    fn register_method(&mut self, index: i32, info: &TVMFFIMethodInfo) -> Result<()> {
        self.entry(index)?;
        let mut data = *info;
        // SAFETY: the caller guarantees the record's byte arrays and value are valid.
        let (name, doc, metadata, method) = unsafe {
            (
                info.name.as_slice(),
                info.doc.as_slice(),
                info.metadata.as_slice(),
                AnyView::from_raw(info.method),
            )
        };
        data.name = keep_bytes(&mut self.strings, name);
        data.doc = keep_bytes(&mut self.strings, doc);
        data.metadata = keep_bytes(&mut self.strings, metadata);
        data.method = self.keep_value(method);
        let entry = self.entry_mut(index)?;
        entry.methods.update(|v| v.push(data));
        let (ptr, n) = (entry.methods.ptr(), entry.methods.items.len() as i32);
        let info = entry.info_mut();
        info.methods = ptr;
        info.num_methods = n;
        Ok(())
    }

    fn register_metadata(&mut self, index: i32, md: &TVMFFITypeMetadata, doc: &[u8]) -> Result<()> {
        let entry = self.entry(index)?;
        if entry.metadata.is_some() {
            return Err(Error::runtime(format!(
                "type metadata of `{}` is already registered (two registrations of the same \
                 type, or another type with the same key)",
                entry.key
            )));
        }
        let mut data = *md;
        data.doc = keep_bytes(&mut self.strings, doc);
        let entry = self.entry_mut(index)?;
        let boxed = Box::new(data);
        let ptr: *const TVMFFITypeMetadata = &*boxed;
        entry.metadata = Some(boxed);
        entry.info_mut().metadata = ptr;
        Ok(())
    }

    fn column(&mut self, name: &str) -> usize {
        if let Some(&i) = self.column_by_name.get(name) {
            return i;
        }
        self.columns.push(Box::new(AttrColumn {
            cell: UnsafeCell::new(TVMFFITypeAttrColumn {
                data: std::ptr::null(),
                size: 0,
                begin_index: 0,
            }),
            data: Published::new(),
        }));
        let i = self.columns.len() - 1;
        self.column_by_name.insert(name.to_string(), i);
        i
    }

    fn register_attr(&mut self, index: i32, name: &str, value: AnyView<'_>) -> Result<()> {
        if index != ti::NONE {
            // Checked before the column is created so a bad index leaves no trace.
            self.entry(index)?;
        }
        let col = self.column(name);
        if index == ti::NONE {
            // tvm-ffi's sentinel: only make sure the column exists.
            return Ok(());
        }
        let slot = index as usize;
        let current = &self.columns[col].data.items;
        if current.get(slot).is_some_and(|v| v.type_index != ti::NONE) {
            return Err(Error::runtime(format!(
                "type attribute `{name}` is already registered for type index {index}"
            )));
        }
        let raw = self.keep_value(value);
        let column = &mut self.columns[col];
        column.data.update(|items| {
            if items.len() <= slot {
                items.resize(slot + 1, TVMFFIAny::NONE);
            }
            items[slot] = raw;
        });
        let (ptr, size) = (column.data.ptr(), column.data.items.len() as i32);
        let cell = column.cell.get_mut();
        cell.data = ptr;
        cell.size = size;
        cell.begin_index = 0;
        Ok(())
    }
}

static TABLE: Lazy<Mutex<Table>> = Lazy::new(|| Mutex::new(Table::new()));

/// Content registered at the first read of type information rather than at start-up: the
/// library's top hands in the reflection subsystem's registration of tvm-ffi's library types
/// (fields, methods, attributes; 1/3 of a C program's cold start, BENCHMARKS.md "Cold start"),
/// and the core names no subsystem. Readers ([`type_info_ptr`], [`attr_column`]) and writers
/// (every `register_*`: a client's records come after tvmrt's, as when registered at
/// start-up) run it first.
static DEFERRED: once_cell::sync::OnceCell<fn()> = once_cell::sync::OnceCell::new();
static DEFERRED_DONE: std::sync::Once = std::sync::Once::new();

thread_local! {
    /// Whether this thread is running the deferred registration (its own reads and writes
    /// must not wait for it).
    static DEFERRED_RUNNING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sets the registration run before type information is first read or written (once; later
/// calls are ignored).
pub fn defer_content(register: fn()) {
    let _ = DEFERRED.set(register);
}

/// Runs the deferred registration if it is set and has not run.
fn ensure_content() {
    if DEFERRED_DONE.is_completed() || DEFERRED_RUNNING.with(|r| r.get()) {
        return;
    }
    let Some(register) = DEFERRED.get() else {
        return;
    };
    DEFERRED_DONE.call_once(|| {
        DEFERRED_RUNNING.with(|r| r.set(true));
        register();
        DEFERRED_RUNNING.with(|r| r.set(false));
    });
}

/// Registers `key` or returns its index if already registered (`TVMFFITypeGetOrAllocIndex`).
///
/// `static_index` >= 0 asks for that index; -1 for a dynamic one from the parent's child slots
/// or the overflow range. `parent_index` is -1 for a root type, or -2 to only look up (the
/// result is then -2 when `key` is unknown).
pub fn get_or_alloc_index(
    key: &str,
    static_index: i32,
    depth: i32,
    num_child_slots: i32,
    child_slots_can_overflow: bool,
    parent_index: i32,
) -> Result<i32> {
    TABLE.lock().get_or_alloc(
        key,
        static_index,
        depth,
        num_child_slots,
        child_slots_can_overflow,
        parent_index,
    )
}

/// The index registered under `key`, if any.
pub fn lookup(key: &str) -> Option<i32> {
    TABLE.lock().by_key.get(key).copied()
}

/// The index registered under `key`, or a `ValueError` naming it.
pub fn key_to_index(key: &str) -> Result<i32> {
    lookup(key).ok_or_else(|| Error::value(format!("cannot find type `{key}`")))
}

/// The key of a registered type index.
pub fn index_to_key(index: i32) -> Result<String> {
    Ok(TABLE.lock().entry(index)?.key.clone())
}

/// The stable `TVMFFITypeInfo` of a registered index (valid for the life of the process).
pub fn type_info_ptr(index: i32) -> Result<*const TVMFFITypeInfo> {
    ensure_content();
    Ok(TABLE.lock().entry(index)?.info_ptr())
}

/// The type depth and ancestor indexes (root first) of a registered index.
pub fn ancestors(index: i32) -> Result<(i32, Vec<i32>)> {
    let table = TABLE.lock();
    let entry = table.entry(index)?;
    let info = entry.info();
    let n = info.type_depth as usize;
    let list = if n == 0 {
        Vec::new()
    } else {
        // SAFETY: `type_depth` ancestor pointers to entries the table owns.
        unsafe { std::slice::from_raw_parts(info.type_ancestors, n) }
            .iter()
            // SAFETY: as above.
            .map(|&p| unsafe { (*p).type_index })
            .collect()
    };
    Ok((info.type_depth, list))
}

/// Whether `child` is `parent` or derives from it (`TVMObjectDerivedFrom`, and what
/// `IsObjectInstance` computes). Both must be registered.
pub fn derived_from(child: i32, parent: i32) -> Result<bool> {
    let (_, child_ancestors) = ancestors(child)?;
    let (parent_depth, _) = ancestors(parent)?;
    if child == parent {
        return Ok(true);
    }
    Ok(child_ancestors.get(parent_depth as usize) == Some(&parent))
}

/// All registered type keys, by index.
pub fn registered_keys() -> Vec<(i32, String)> {
    let table = TABLE.lock();
    let mut v: Vec<(i32, String)> = table
        .entries
        .iter()
        .map(|(&i, e)| (i, e.key.clone()))
        .collect();
    crate::cold_sort::sort(&mut v);
    v
}

/// Adds a field record to a type (`TVMFFITypeRegisterField`). Names, docs, metadata and the
/// default value are copied; a function-object setter gains a reference.
///
/// # Safety
/// The record's byte arrays are readable; its default value (with `HAS_DEFAULT`) is a valid
/// borrowed value and its setter (with `SETTER_IS_FUNCTION_OBJ`) a live object.
pub unsafe fn register_field(index: i32, info: &TVMFFIFieldInfo) -> Result<()> {
    ensure_content();
    // SAFETY: per the contract.
    let name = unsafe { info.name.as_slice() };
    if name.is_empty() {
        return Err(Error::value("field name must not be empty"));
    }
    TABLE.lock().register_field(index, info, name)
}

/// Adds a method record to a type (`TVMFFITypeRegisterMethod`); the method value is kept.
///
/// # Safety
/// The record's byte arrays are readable and its method a valid borrowed value.
pub unsafe fn register_method(index: i32, info: &TVMFFIMethodInfo) -> Result<()> {
    ensure_content();
    TABLE.lock().register_method(index, info)
}

/// Sets a type's metadata, once (`TVMFFITypeRegisterMetadata`).
///
/// # Safety
/// `md.doc` is readable.
pub unsafe fn register_metadata(index: i32, md: &TVMFFITypeMetadata) -> Result<()> {
    ensure_content();
    // SAFETY: per the contract.
    let doc = unsafe { md.doc.as_slice() };
    TABLE.lock().register_metadata(index, md, doc)
}

/// Sets attribute `name` of a registered type, once per type (`TVMFFITypeRegisterAttr`).
/// Index 0 (`None`) only creates the column, as in tvm-ffi.
pub fn register_attr(index: i32, name: &str, value: AnyView<'_>) -> Result<()> {
    ensure_content();
    TABLE.lock().register_attr(index, name, value)
}

/// The column of attribute `name`, if it was ever registered (stable pointer).
pub fn attr_column(name: &str) -> Option<*const TVMFFITypeAttrColumn> {
    ensure_content();
    let table = TABLE.lock();
    let i = *table.column_by_name.get(name)?;
    Some(table.columns[i].cell.get().cast_const())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_have_tvm_ffi_indexes_and_ancestry() {
        assert_eq!(lookup("ffi.Object"), Some(64));
        assert_eq!(lookup("ffi.String"), Some(65));
        assert_eq!(lookup("ffi.BigInt"), Some(78));
        assert_eq!(lookup("int"), Some(1));
        assert_eq!(ancestors(ti::TENSOR).unwrap(), (1, vec![64]));
        assert_eq!(ancestors(ti::OBJECT).unwrap(), (0, vec![]));
    }

    #[test]
    fn child_slots_then_overflow() {
        let base = get_or_alloc_index("test.unit.Base", -1, 1, 2, true, 64).unwrap();
        let a = get_or_alloc_index("test.unit.A", -1, 2, 0, true, base).unwrap();
        let b = get_or_alloc_index("test.unit.B", -1, 2, 0, true, base).unwrap();
        assert_eq!((a, b), (base + 1, base + 2));
        let c = get_or_alloc_index("test.unit.C", -1, 2, 0, true, base).unwrap();
        assert!(c > base + 2);
        assert!(derived_from(c, base).unwrap());
        assert!(!derived_from(base, c).unwrap());
        // Children of a type that may not overflow fail once its slots are used.
        let closed = get_or_alloc_index("test.unit.Closed", -1, 1, 1, false, 64).unwrap();
        get_or_alloc_index("test.unit.Closed.A", -1, 2, 0, true, closed).unwrap();
        let err = get_or_alloc_index("test.unit.Closed.B", -1, 2, 0, true, closed).unwrap_err();
        assert!(
            err.message.contains("maximum number of subclasses"),
            "{err}"
        );
    }
}
