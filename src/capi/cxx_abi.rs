//! The C++ doors: what `libtvm_ffi.so` exports besides its C functions (see [`crate::cxx`]).
//! Each function is a jump to its C++ implementation in `src/cxx/shim.cc`, which is the
//! boundary (it catches every exception and calls the core through hooks that catch panics);
//! `ModuleObj`'s vtable and typeinfo are statics laid out as GCC lays out tvm-ffi's.

use std::ptr::addr_of;

use crate::cxx::{ClassTypeInfo, Slot, StaticPtr, VTable, VmiClassTypeInfo1, MODULE_SLOTS};

/// One tail jump to `{0}`, which must be a symbol of the same linked object.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
macro_rules! tail_jump {
    () => {
        "jmp {0}"
    };
}
#[cfg(any(target_arch = "aarch64", target_arch = "arm"))]
macro_rules! tail_jump {
    () => {
        "b {0}"
    };
}
#[cfg(target_arch = "riscv64")]
macro_rules! tail_jump {
    () => {
        "tail {0}"
    };
}

/// Defines each exported C++ function `$mangled` as a jump to the hidden C++ function
/// `$target` of `shim.cc`, which has the same signature.
macro_rules! cxx_functions {
    ($($name:ident = $mangled:literal => $target:ident;)*) => {
        extern "C" {
            $(fn $target();)*
        }
        $(
            #[unsafe(naked)]
            #[export_name = $mangled]
            unsafe extern "C" fn $name() {
                core::arch::naked_asm!(tail_jump!(), sym $target)
            }
        )*
    };
}

cxx_functions! {
    module_load_from_file = "_ZN3tvm3ffi6Module12LoadFromFileERKNS0_6StringE"
        => tvmrt_cxx_Module_LoadFromFile;
    module_visit_context_symbols =
        "_ZN3tvm3ffi6Module19VisitContextSymbolsERKNS0_13TypedFunctionIFvNS0_6StringEPvEEE"
        => tvmrt_cxx_Module_VisitContextSymbols;
    module_obj_get_function = "_ZN3tvm3ffi9ModuleObj11GetFunctionERKNS0_6StringEb"
        => tvmrt_cxx_ModuleObj_GetFunction;
    module_obj_implements_function = "_ZN3tvm3ffi9ModuleObj18ImplementsFunctionERKNS0_6StringEb"
        => tvmrt_cxx_ModuleObj_ImplementsFunction;
    module_obj_get_function_doc = "_ZN3tvm3ffi9ModuleObj14GetFunctionDocERKNS0_6StringEb"
        => tvmrt_cxx_ModuleObj_GetFunctionDoc;
    module_obj_get_function_metadata =
        "_ZN3tvm3ffi9ModuleObj19GetFunctionMetadataERKNS0_6StringEb"
        => tvmrt_cxx_ModuleObj_GetFunctionMetadata;
    module_obj_import_module = "_ZN3tvm3ffi9ModuleObj12ImportModuleERKNS0_6ModuleE"
        => tvmrt_cxx_ModuleObj_ImportModule;
    module_obj_clear_imports = "_ZN3tvm3ffi9ModuleObj12ClearImportsEv"
        => tvmrt_cxx_ModuleObj_ClearImports;
    json_parse = "_ZN3tvm3ffi4json5ParseERKNS0_6StringEPS2_" => tvmrt_cxx_json_Parse;
    json_stringify = "_ZN3tvm3ffi4json9StringifyERKNS0_3AnyERKNS0_8OptionalIivEE"
        => tvmrt_cxx_json_Stringify;
    structural_equal = "_ZN3tvm3ffi15StructuralEqual5EqualERKNS0_3AnyES4_bb"
        => tvmrt_cxx_StructuralEqual_Equal;
    structural_first_mismatch =
        "_ZN3tvm3ffi15StructuralEqual16GetFirstMismatchERKNS0_3AnyES4_bb"
        => tvmrt_cxx_StructuralEqual_GetFirstMismatch;
    structural_hash = "_ZN3tvm3ffi14StructuralHash4HashERKNS0_3AnyEbb"
        => tvmrt_cxx_StructuralHash_Hash;
    repr_print = "_ZN3tvm3ffi9ReprPrintERKNS0_3AnyE" => tvmrt_cxx_ReprPrint;
    find_access_paths =
        "_ZN3tvm3ffi17VisitErrorContext15FindAccessPathsERKNS0_9ObjectRefERKS1_b"
        => tvmrt_cxx_VisitErrorContext_FindAccessPaths;
    deep_copy = "_ZN3tvm3ffi8DeepCopyERKNS0_3AnyE" => tvmrt_cxx_DeepCopy;
    recursive_hash = "_ZN3tvm3ffi13RecursiveHashERKNS0_3AnyE" => tvmrt_cxx_RecursiveHash;
    recursive_eq = "_ZN3tvm3ffi11RecursiveEqERKNS0_3AnyES3_" => tvmrt_cxx_RecursiveEq;
    recursive_lt = "_ZN3tvm3ffi11RecursiveLtERKNS0_3AnyES3_" => tvmrt_cxx_RecursiveLt;
    recursive_le = "_ZN3tvm3ffi11RecursiveLeERKNS0_3AnyES3_" => tvmrt_cxx_RecursiveLe;
    recursive_gt = "_ZN3tvm3ffi11RecursiveGtERKNS0_3AnyES3_" => tvmrt_cxx_RecursiveGt;
    recursive_ge = "_ZN3tvm3ffi11RecursiveGeERKNS0_3AnyES3_" => tvmrt_cxx_RecursiveGe;
    to_json_graph = "_ZN3tvm3ffi11ToJSONGraphERKNS0_3AnyES3_" => tvmrt_cxx_ToJSONGraph;
    from_json_graph = "_ZN3tvm3ffi13FromJSONGraphERKNS0_3AnyE" => tvmrt_cxx_FromJSONGraph;
}

extern "C" {
    /// libstdc++ (CXXABI_1.3): what a pure virtual slot points at.
    fn __cxa_pure_virtual();
    // The vtables of the typeinfo classes (libstdc++); a typeinfo's vptr points 2 words in.
    #[link_name = "_ZTVN10__cxxabiv117__class_type_infoE"]
    static CLASS_TYPE_INFO_VTABLE: [StaticPtr; 0];
    #[link_name = "_ZTVN10__cxxabiv121__vmi_class_type_infoE"]
    static VMI_CLASS_TYPE_INFO_VTABLE: [StaticPtr; 0];

    // shim.cc: tvm-ffi's inline defaults of ModuleObj's virtual functions.
    fn tvmrt_cxx_module_default_property_mask();
    fn tvmrt_cxx_module_default_implements_function();
    fn tvmrt_cxx_module_default_function_info();
    fn tvmrt_cxx_module_default_write_to_file();
    fn tvmrt_cxx_module_default_get_write_formats();
    fn tvmrt_cxx_module_default_save_to_bytes();
    fn tvmrt_cxx_module_default_inspect_source();

}

/// `typeinfo name for tvm::ffi::Object` (not exported: tvm-ffi does not export it either).
static OBJECT_TYPEINFO_NAME: [u8; 18] = *b"N3tvm3ffi6ObjectE\0";

/// `typeinfo for tvm::ffi::Object`, the non-polymorphic base of `ModuleObj`.
static OBJECT_TYPEINFO: ClassTypeInfo = ClassTypeInfo {
    vptr: crate::cxx::typeinfo_vptr(addr_of!(CLASS_TYPE_INFO_VTABLE)),
    name: crate::cxx::static_name(&OBJECT_TYPEINFO_NAME),
};

/// `typeinfo name for tvm::ffi::ModuleObj`.
#[export_name = "_ZTSN3tvm3ffi9ModuleObjE"]
pub static MODULE_OBJ_TYPEINFO_NAME: [u8; 21] = *b"N3tvm3ffi9ModuleObjE\0";

/// `typeinfo for tvm::ffi::ModuleObj`: `Object` is a public base 8 bytes in (after the vptr),
/// so GCC describes the class with `__vmi_class_type_info` (flags 0, one base, offset 8 << 8 |
/// public), as in `libtvm_ffi.so`.
#[export_name = "_ZTIN3tvm3ffi9ModuleObjE"]
pub static MODULE_OBJ_TYPEINFO: VmiClassTypeInfo1 = VmiClassTypeInfo1 {
    vptr: crate::cxx::typeinfo_vptr(addr_of!(VMI_CLASS_TYPE_INFO_VTABLE)),
    name: crate::cxx::static_name(&MODULE_OBJ_TYPEINFO_NAME),
    flags: 0,
    base_count: 1,
    base_type: StaticPtr(addr_of!(OBJECT_TYPEINFO).cast()),
    offset_flags: ((crate::object::VPTR_HEADER_OFFSET as isize) << 8) | 2,
};

/// `vtable for tvm::ffi::ModuleObj`: the two pure virtual functions (`kind`, `GetFunction`),
/// tvm-ffi's inline defaults, and its `ImportModule` / `ClearImports` (the exported functions
/// above, as `libtvm_ffi.so`'s vtable points at its exported ones).
#[export_name = "_ZTVN3tvm3ffi9ModuleObjE"]
pub static MODULE_OBJ_VTABLE: VTable<MODULE_SLOTS> = VTable {
    offset_to_top: 0,
    typeinfo: StaticPtr(addr_of!(MODULE_OBJ_TYPEINFO).cast()),
    slots: [
        __cxa_pure_virtual,
        tvmrt_cxx_module_default_property_mask,
        __cxa_pure_virtual,
        tvmrt_cxx_module_default_implements_function,
        tvmrt_cxx_module_default_function_info,
        tvmrt_cxx_module_default_function_info,
        tvmrt_cxx_module_default_write_to_file,
        tvmrt_cxx_module_default_get_write_formats,
        tvmrt_cxx_module_default_save_to_bytes,
        tvmrt_cxx_module_default_inspect_source,
        module_obj_import_module as Slot,
        module_obj_clear_imports as Slot,
    ],
};

// The sizes of libtvm_ffi.so's symbols (112 and 40 bytes on 64-bit targets): an executable's
// copy relocation copies exactly that many bytes.
const _: () = assert!(
    std::mem::size_of::<VTable<MODULE_SLOTS>>()
        == (2 + MODULE_SLOTS) * std::mem::size_of::<usize>()
);
// `__vmi_class_type_info` with one base: vptr, name, two 32-bit words, base, offset-flags.
const _: () =
    assert!(std::mem::size_of::<VmiClassTypeInfo1>() == 4 * std::mem::size_of::<usize>() + 8);
