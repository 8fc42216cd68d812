//! tvmrt's layouts of what it shares with C and C++ code, against what the target's compiler
//! gives (`tests/layouts/<cpu>.txt`, printed by `tests/layouts/layouts.cc` compiled with tvm-ffi's
//! own headers for that CPU): the C ABI structures, DLPack's, the classic `TVMValue`, and the
//! sizes and field offsets of the C++ object classes tvm-ffi's clients read by reflection (as
//! tvmrt registers them). Run on every CPU `.ci/cross.sh` builds for, 32-bit armv7 included.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::mem::{offset_of, size_of};

use crate::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLTensor, TVMFFIAny, TVMFFIByteArray,
    TVMFFIErrorCell, TVMFFIFunctionCell, TVMFFIShapeCell, TVMValue,
};
use crate::object::big_int::BIG_INT_WORDS_OFFSET;
use crate::object::containers::array::TVMFFISeqCell;
use crate::object::type_registry::{
    self, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeAttrColumn, TVMFFITypeInfo,
    TVMFFITypeMetadata,
};
use crate::object::ObjectHeader;
use crate::reflection::fields;

/// The record's name for the CPU this test runs on.
fn cpu() -> &'static str {
    match std::env::consts::ARCH {
        "arm" => "armv7",
        other => other,
    }
}

/// The size and field offsets of a registered object type, as tvmrt registers them.
fn registered(out: &mut BTreeMap<String, usize>, key: &str) {
    let index = type_registry::key_to_index(key).unwrap();
    let info = fields::type_info(index).unwrap();
    // SAFETY: the registry's metadata record lives as long as the type.
    if let Some(metadata) = unsafe { info.metadata.as_ref() } {
        out.insert(format!("sizeof {key}"), metadata.total_size as usize);
    }
    for f in fields::all_fields(info) {
        out.insert(
            format!("{key}.{}", fields::field_name(&f)),
            f.offset as usize,
        );
    }
}

fn rust_layouts() -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    macro_rules! size {
        ($name:literal, $t:ty) => {
            m.insert(format!("sizeof {}", $name), size_of::<$t>());
        };
    }
    macro_rules! field {
        ($name:literal, $t:ty, $f:ident) => {
            m.insert(format!("{}.{}", $name, stringify!($f)), offset_of!($t, $f));
        };
    }
    size!("void*", *const c_void);
    size!("TVMFFIAny", TVMFFIAny);
    m.insert("TVMFFIAny.v_int64".into(), offset_of!(TVMFFIAny, payload));
    size!("TVMFFIObject", ObjectHeader);
    field!("TVMFFIObject", ObjectHeader, type_index);
    field!("TVMFFIObject", ObjectHeader, deleter);
    size!("TVMFFIByteArray", TVMFFIByteArray);
    field!("TVMFFIByteArray", TVMFFIByteArray, size);
    size!("TVMFFIShapeCell", TVMFFIShapeCell);
    field!("TVMFFIShapeCell", TVMFFIShapeCell, size);
    size!("TVMFFISeqCell", TVMFFISeqCell);
    field!("TVMFFISeqCell", TVMFFISeqCell, size);
    field!("TVMFFISeqCell", TVMFFISeqCell, capacity);
    field!("TVMFFISeqCell", TVMFFISeqCell, data_deleter);
    size!("TVMFFIErrorCell", TVMFFIErrorCell);
    field!("TVMFFIErrorCell", TVMFFIErrorCell, message);
    field!("TVMFFIErrorCell", TVMFFIErrorCell, backtrace);
    field!("TVMFFIErrorCell", TVMFFIErrorCell, update_backtrace);
    field!("TVMFFIErrorCell", TVMFFIErrorCell, cause_chain);
    field!("TVMFFIErrorCell", TVMFFIErrorCell, extra_context);
    size!("TVMFFIFunctionCell", TVMFFIFunctionCell);
    field!("TVMFFIFunctionCell", TVMFFIFunctionCell, cpp_call);
    size!("TVMFFIFieldInfo", TVMFFIFieldInfo);
    field!("TVMFFIFieldInfo", TVMFFIFieldInfo, flags);
    field!("TVMFFIFieldInfo", TVMFFIFieldInfo, size);
    field!("TVMFFIFieldInfo", TVMFFIFieldInfo, alignment);
    field!("TVMFFIFieldInfo", TVMFFIFieldInfo, offset);
    field!("TVMFFIFieldInfo", TVMFFIFieldInfo, getter);
    field!("TVMFFIFieldInfo", TVMFFIFieldInfo, setter);
    field!("TVMFFIFieldInfo", TVMFFIFieldInfo, default_value_or_factory);
    field!("TVMFFIFieldInfo", TVMFFIFieldInfo, field_static_type_index);
    size!("TVMFFIMethodInfo", TVMFFIMethodInfo);
    field!("TVMFFIMethodInfo", TVMFFIMethodInfo, flags);
    field!("TVMFFIMethodInfo", TVMFFIMethodInfo, method);
    size!("TVMFFITypeMetadata", TVMFFITypeMetadata);
    field!("TVMFFITypeMetadata", TVMFFITypeMetadata, creator);
    field!("TVMFFITypeMetadata", TVMFFITypeMetadata, total_size);
    field!(
        "TVMFFITypeMetadata",
        TVMFFITypeMetadata,
        structural_eq_hash_kind
    );
    size!("TVMFFITypeInfo", TVMFFITypeInfo);
    field!("TVMFFITypeInfo", TVMFFITypeInfo, type_key);
    field!("TVMFFITypeInfo", TVMFFITypeInfo, type_ancestors);
    field!("TVMFFITypeInfo", TVMFFITypeInfo, type_key_hash);
    field!("TVMFFITypeInfo", TVMFFITypeInfo, num_fields);
    field!("TVMFFITypeInfo", TVMFFITypeInfo, fields);
    field!("TVMFFITypeInfo", TVMFFITypeInfo, methods);
    field!("TVMFFITypeInfo", TVMFFITypeInfo, metadata);
    size!("TVMFFITypeAttrColumn", TVMFFITypeAttrColumn);
    field!("TVMFFITypeAttrColumn", TVMFFITypeAttrColumn, size);
    size!("DLTensor", DLTensor);
    field!("DLTensor", DLTensor, device);
    field!("DLTensor", DLTensor, ndim);
    field!("DLTensor", DLTensor, dtype);
    field!("DLTensor", DLTensor, shape);
    field!("DLTensor", DLTensor, strides);
    field!("DLTensor", DLTensor, byte_offset);
    size!("DLManagedTensor", DLManagedTensor);
    field!("DLManagedTensor", DLManagedTensor, manager_ctx);
    field!("DLManagedTensor", DLManagedTensor, deleter);
    size!("DLManagedTensorVersioned", DLManagedTensorVersioned);
    field!(
        "DLManagedTensorVersioned",
        DLManagedTensorVersioned,
        manager_ctx
    );
    field!(
        "DLManagedTensorVersioned",
        DLManagedTensorVersioned,
        deleter
    );
    field!("DLManagedTensorVersioned", DLManagedTensorVersioned, flags);
    field!(
        "DLManagedTensorVersioned",
        DLManagedTensorVersioned,
        dl_tensor
    );
    size!("TVMValue", TVMValue);
    // The registry installs the library types on first use.
    let _ = crate::function::registry::get("ffi.Array");
    for key in [
        "ffi.EnumState",
        "ffi.Enum",
        "ffi.StructuralKey",
        "ffi.VisitInterrupt",
        "ffi.VisitErrorContext",
        "ffi.reflection.AccessStep",
        "ffi.reflection.AccessPath",
    ] {
        registered(&mut m, key);
    }
    m.insert("sizeof ffi.BigInt".into(), BIG_INT_WORDS_OFFSET);
    m
}

fn recorded() -> BTreeMap<String, usize> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/layouts")
        .join(format!("{}.txt", cpu()));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (no record for this CPU: tests/layouts/record.sh makes one)",
            path.display()
        )
    });
    text.lines()
        .map(|line| {
            let (name, bytes) = line.rsplit_once(' ').expect("NAME BYTES");
            (name.to_string(), bytes.parse().expect("a byte count"))
        })
        .collect()
}

#[test]
fn layouts_match_the_c_compiler() {
    let (ours, c) = (rust_layouts(), recorded());
    let mut wrong = Vec::new();
    for (name, want) in &c {
        match ours.get(name) {
            Some(got) if got == want => {}
            got => wrong.push(format!("{name}: C {want}, tvmrt {got:?}")),
        }
    }
    for name in ours.keys().filter(|n| !c.contains_key(*n)) {
        wrong.push(format!("{name}: not in the record"));
    }
    assert!(
        wrong.is_empty(),
        "{} ({}):\n{}",
        cpu(),
        c.len(),
        wrong.join("\n")
    );
    assert!(c.len() > 70, "only {} facts recorded", c.len());
}
