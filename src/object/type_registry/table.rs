//! The table behind the lock: the registered types, their index ranges and ancestry, and the
//! storage C reads from.

use std::cell::UnsafeCell;
use std::collections::HashMap;

use crate::abi::{type_index as ti, TVMFFIAny, TVMFFIByteArray};
use crate::error::{Error, Result};
use crate::object::ObjectRef;
use crate::value::Any;

use super::*;

/// FNV-1a 64: a stable hash of the type key for `type_key_hash`.
fn key_hash(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Copies bytes into storage that lives as long as the table, NUL-terminated so the data is
/// also a C string. Empty input gives `{NULL, 0}`, as tvm-ffi's `CopyString`.
pub(super) fn keep_bytes(pool: &mut Vec<Box<[u8]>>, bytes: &[u8]) -> TVMFFIByteArray {
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
pub(super) struct Published<T: Copy> {
    pub(super) items: Vec<T>,
    current: Box<[T]>,
    retired: Vec<Box<[T]>>,
}

impl<T: Copy> Published<T> {
    pub(super) fn new() -> Self {
        Published {
            items: Vec::new(),
            current: Box::new([]),
            retired: Vec::new(),
        }
    }

    /// Changes the items and publishes them as a new array, keeping the old one readable.
    pub(super) fn update(&mut self, change: impl FnOnce(&mut Vec<T>)) {
        change(&mut self.items);
        let next = self.items.clone().into_boxed_slice();
        let old = std::mem::replace(&mut self.current, next);
        self.retired.push(old);
    }

    pub(super) fn ptr(&self) -> *const T {
        if self.current.is_empty() {
            std::ptr::null()
        } else {
            self.current.as_ptr()
        }
    }
}

/// One registered type.
pub(super) struct Entry {
    /// What C reads; mutated only under the table lock.
    info: UnsafeCell<TVMFFITypeInfo>,
    pub(super) key: String,
    _key_storage: Box<[u8]>,
    _ancestors: Box<[*const TVMFFITypeInfo]>,
    /// Slots reserved for this type and its children (`num_child_slots + 1`).
    num_slots: i32,
    /// Slots of the reservation already used (the type itself counts as one).
    allocated_slots: i32,
    child_slots_can_overflow: bool,
    pub(super) fields: Published<TVMFFIFieldInfo>,
    pub(super) methods: Published<TVMFFIMethodInfo>,
    pub(super) metadata: Option<Box<TVMFFITypeMetadata>>,
}

impl Entry {
    pub(super) fn info(&self) -> &TVMFFITypeInfo {
        // SAFETY: only mutated through `info_mut`, which needs `&mut self`.
        unsafe { &*self.info.get() }
    }

    pub(super) fn info_mut(&mut self) -> &mut TVMFFITypeInfo {
        self.info.get_mut()
    }

    pub(super) fn info_ptr(&self) -> *const TVMFFITypeInfo {
        self.info.get()
    }
}

/// One attribute column.
pub(super) struct AttrColumn {
    pub(super) cell: UnsafeCell<TVMFFITypeAttrColumn>,
    pub(super) data: Published<TVMFFIAny>,
}

/// The table behind the lock.
pub(super) struct Table {
    pub(super) entries: HashMap<i32, Box<Entry>>,
    pub(super) by_key: HashMap<String, i32>,
    /// Next index for an overflowing dynamic type (tvm-ffi's `type_counter_`).
    type_counter: i32,
    pub(super) strings: Vec<Box<[u8]>>,
    /// Values referenced from records and columns (defaults, methods, setters, attributes).
    pub(super) values: Vec<Any>,
    pub(super) setters: Vec<ObjectRef>,
    /// Boxed so a column's cell keeps its address (C holds it) while the list grows.
    #[allow(clippy::vec_box)]
    pub(super) columns: Vec<Box<AttrColumn>>,
    pub(super) column_by_name: HashMap<String, usize>,
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
    pub(super) fn new() -> Table {
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

    pub(super) fn entry(&self, index: i32) -> Result<&Entry> {
        self.entries
            .get(&index)
            .map(|b| &**b)
            .ok_or_else(|| Error::value(format!("no type is registered with type index {index}")))
    }

    pub(super) fn entry_mut(&mut self, index: i32) -> Result<&mut Entry> {
        self.entries
            .get_mut(&index)
            .map(|b| &mut **b)
            .ok_or_else(|| Error::value(format!("no type is registered with type index {index}")))
    }

    pub(super) fn get_or_alloc(
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
}
