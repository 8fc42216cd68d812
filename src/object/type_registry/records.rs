//! The reflection records C reads (`TVMFFITypeInfo` and the records it points to), laid out
//! as tvm-ffi's `c_api.h` declares them.

use std::ffi::c_void;

use crate::abi::{TVMFFIAny, TVMFFIByteArray};

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
