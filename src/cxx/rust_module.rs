//! The C++ class of tvmrt's module objects, `tvmrt::RustModuleObj`: a `ModuleObj` subclass whose
//! virtual functions (in `shim.cc`) call the Rust module.

use std::ptr::addr_of;

use super::{static_name, typeinfo_vptr, SiClassTypeInfo, StaticPtr, VTable, MODULE_SLOTS};

extern "C" {
    /// libstdc++: the vtable of `__cxxabiv1::__si_class_type_info`.
    #[link_name = "_ZTVN10__cxxabiv120__si_class_type_infoE"]
    static SI_CLASS_TYPE_INFO_VTABLE: [StaticPtr; 0];
    /// `typeinfo for tvm::ffi::ModuleObj`, the base class (exported from src/capi/cxx_abi.rs).
    #[link_name = "_ZTIN3tvm3ffi9ModuleObjE"]
    static MODULE_OBJ_TYPEINFO: [StaticPtr; 0];

    // shim.cc: the virtual functions of tvmrt's modules.
    fn tvmrt_cxx_rust_module_kind();
    fn tvmrt_cxx_rust_module_property_mask();
    fn tvmrt_cxx_rust_module_get_function();
    fn tvmrt_cxx_rust_module_implements_function();
    fn tvmrt_cxx_rust_module_get_function_doc();
    fn tvmrt_cxx_rust_module_get_function_metadata();
    fn tvmrt_cxx_rust_module_write_to_file();
    fn tvmrt_cxx_rust_module_get_write_formats();
    fn tvmrt_cxx_rust_module_save_to_bytes();
    fn tvmrt_cxx_rust_module_inspect_source();
    // shim.cc: tvm-ffi's `ModuleObj::ImportModule` / `ClearImports` (exported under their C++
    // names from src/capi/cxx_abi.rs).
    fn tvmrt_cxx_ModuleObj_ImportModule();
    fn tvmrt_cxx_ModuleObj_ClearImports();
}

/// `typeinfo name for tvmrt::RustModuleObj`.
static RUST_MODULE_TYPEINFO_NAME: [u8; 24] = *b"N5tvmrt13RustModuleObjE\0";

/// `typeinfo for tvmrt::RustModuleObj`: a `ModuleObj` subclass (one base at offset 0).
static RUST_MODULE_TYPEINFO: SiClassTypeInfo = SiClassTypeInfo {
    vptr: typeinfo_vptr(addr_of!(SI_CLASS_TYPE_INFO_VTABLE)),
    name: static_name(&RUST_MODULE_TYPEINFO_NAME),
    base_type: StaticPtr(addr_of!(MODULE_OBJ_TYPEINFO).cast()),
};

/// The vtable of tvmrt's module objects: every virtual function calls the Rust module;
/// `ImportModule` / `ClearImports` are tvm-ffi's.
pub(super) static RUST_MODULE_VTABLE: VTable<MODULE_SLOTS> = VTable {
    offset_to_top: 0,
    typeinfo: StaticPtr(addr_of!(RUST_MODULE_TYPEINFO).cast()),
    slots: [
        tvmrt_cxx_rust_module_kind,
        tvmrt_cxx_rust_module_property_mask,
        tvmrt_cxx_rust_module_get_function,
        tvmrt_cxx_rust_module_implements_function,
        tvmrt_cxx_rust_module_get_function_doc,
        tvmrt_cxx_rust_module_get_function_metadata,
        tvmrt_cxx_rust_module_write_to_file,
        tvmrt_cxx_rust_module_get_write_formats,
        tvmrt_cxx_rust_module_save_to_bytes,
        tvmrt_cxx_rust_module_inspect_source,
        tvmrt_cxx_ModuleObj_ImportModule,
        tvmrt_cxx_ModuleObj_ClearImports,
    ],
};
