//! tvm-ffi's C++ ABI: what `libtvm_ffi.so` exports besides its C functions, so C++ programs and
//! libraries built against tvm-ffi's headers link against tvmrt unchanged (`-ltvmrt`, or the
//! `libtvm_ffi.so` alias).
//!
//! tvm-ffi's C++ headers are mostly inline over the C ABI. The rest is exported C++ (`nm -DC
//! libtvm_ffi.so`, tvm-ffi 0.1.15): `Module::LoadFromFile`, `Module::VisitContextSymbols`,
//! `ModuleObj::{GetFunction, ImplementsFunction, GetFunctionDoc, GetFunctionMetadata}(name,
//! query_imports)`, `ModuleObj::{ImportModule, ClearImports}`, the `ModuleObj` vtable and
//! typeinfo, `json::{Parse, Stringify}`, `StructuralEqual::{Equal, GetFirstMismatch}`,
//! `StructuralHash::Hash`, `ReprPrint`, `DeepCopy`, `Recursive{Hash, Eq, Lt, Le, Gt, Ge}`,
//! `{To, From}JSONGraph` and `VisitErrorContext::FindAccessPaths`.
//!
//! # How they are built
//!
//! The functions are C++ (`shim.cc`, compiled by `build.rs` with the `cc` crate against tvmrt's
//! own declarations in `abi.h`): a C++ compiler knows how the platform passes and returns class
//! types (a hidden result pointer in a register of its own on AArch64, for instance) and how to
//! throw `tvm::ffi::Error`. Rust links the cdylib, though, and exports only what the Rust code
//! defines (its version script hides every other symbol). So each exported name is defined in
//! src/capi/cxx_abi.rs (with the C doors), as a naked function that jumps to the hidden
//! C++ function: one instruction, which leaves every register as the caller set it, whatever
//! the signature.
//!
//! The data symbols (`ModuleObj`'s vtable, typeinfo and typeinfo name) are Rust statics laid
//! out as the Itanium C++ ABI and GCC lay out tvm-ffi's (same sizes: an executable may hold a
//! copy of them, made by a copy relocation against `libtvm_ffi.so`).
//!
//! # Modules
//!
//! tvmrt's modules are allocated as C++ `ModuleObj` objects
//! ([`crate::cxx::rust_module_vptr`]): a vtable pointer before the header whose functions (in
//! `shim.cc`) call the Rust module, and `imports_` after it. Modules made by C++ code are
//! called through their own vtable (`crate::module::cxx`).
//!
//! Exceptions never cross into Rust: `shim.cc` catches everything a C++ module throws and
//! raises it as the thread's error, and the Rust code it calls reports errors as status codes.

use std::ffi::c_void;

/// A pointer in a static (vtables, typeinfo), shared read-only by every thread.
#[repr(transparent)]
pub struct StaticPtr(pub *const c_void);

// SAFETY: only ever read; what it points to is immutable (functions, read-only statics).
unsafe impl Sync for StaticPtr {}

/// An entry of a vtable: a function's address.
pub type Slot = unsafe extern "C" fn();

/// A vtable as the Itanium C++ ABI lays it out for a class without virtual bases: the offset
/// to the top of the object, the typeinfo, then one entry per virtual function. An object's
/// vptr points at `slots`.
#[repr(C)]
pub struct VTable<const N: usize> {
    pub offset_to_top: isize,
    pub typeinfo: StaticPtr,
    pub slots: [Slot; N],
}

/// `__cxxabiv1::__class_type_info`: a class without bases.
#[repr(C)]
pub struct ClassTypeInfo {
    pub vptr: StaticPtr,
    pub name: StaticPtr,
}

/// `__cxxabiv1::__vmi_class_type_info` with one base.
#[repr(C)]
pub struct VmiClassTypeInfo1 {
    pub vptr: StaticPtr,
    pub name: StaticPtr,
    pub flags: u32,
    pub base_count: u32,
    pub base_type: StaticPtr,
    /// The base's offset in the upper bits, `__public_mask` (2) in the low ones.
    pub offset_flags: isize,
}

/// `__cxxabiv1::__si_class_type_info`: one public base at offset 0.
#[repr(C)]
pub struct SiClassTypeInfo {
    pub vptr: StaticPtr,
    pub name: StaticPtr,
    pub base_type: StaticPtr,
}

/// The number of virtual functions of `tvm::ffi::ModuleObj` (tvm-ffi `extra/module.h`).
pub const MODULE_SLOTS: usize = 12;

#[cfg(tvmrt_cxx)]
mod rust_module;

/// The address of a typeinfo class's vtable (libstdc++'s `__cxxabiv1::__*_type_info`) as a
/// typeinfo's vptr: two words past its start.
pub const fn typeinfo_vptr(vtable: *const [StaticPtr; 0]) -> StaticPtr {
    StaticPtr(
        vtable
            .cast::<u8>()
            .wrapping_add(2 * std::mem::size_of::<usize>())
            .cast(),
    )
}

/// A typeinfo's name (a NUL-terminated mangled type name).
pub const fn static_name(s: &'static [u8]) -> StaticPtr {
    StaticPtr(s.as_ptr().cast())
}

/// The vtable pointer of tvmrt's module objects (null when tvmrt is built without its C++ part,
/// on a platform `build.rs` does not know).
pub fn rust_module_vptr() -> *const c_void {
    #[cfg(tvmrt_cxx)]
    {
        rust_module::RUST_MODULE_VTABLE.slots.as_ptr().cast()
    }
    #[cfg(not(tvmrt_cxx))]
    {
        std::ptr::null()
    }
}

/// Whether this build has the C++ part (modules made by C++ code can then be used).
pub const ENABLED: bool = cfg!(tvmrt_cxx);
