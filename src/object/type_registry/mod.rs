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

mod members;
mod records;
mod table;

pub use records::*;
use table::Table;

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::value::AnyView;

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
    use crate::abi::type_index as ti;

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
