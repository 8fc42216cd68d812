//! The tvm-ffi type table and the remaining C exports, called as C would call them.

use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use tvmrt::abi::{type_index as ti, AnyPayload, TVMFFIAny, TVMFFIByteArray, TVMFFIErrorCell};
use tvmrt::capi::classic_error::TVMGetLastError;
use tvmrt::capi::classic_extra::*;
use tvmrt::capi::ffi_core::{TVMFFIFunctionGetGlobal, TVMFFIObjectDecRef, TVMFFIObjectIncRef};
use tvmrt::capi::ffi_misc::*;
use tvmrt::capi::ffi_types::*;
use tvmrt::object::type_registry::{
    field_flag, TVMFFIFieldInfo, TVMFFIMethodInfo, TVMFFITypeInfo, TVMFFITypeMetadata,
};
use tvmrt::{Any, Function};

fn ba(s: &str) -> TVMFFIByteArray {
    TVMFFIByteArray::from_slice(s.as_bytes())
}

fn text(b: TVMFFIByteArray) -> String {
    // SAFETY: byte arrays handed out by tvmrt stay valid while their owner lives.
    String::from_utf8(unsafe { b.as_slice() }.to_vec()).unwrap()
}

fn raised_message() -> String {
    tvmrt::raised::take_raised()
        .map(|e| format!("{}: {}", e.kind, e.message))
        .unwrap_or_default()
}

fn key_to_index(key: &str) -> Result<i32, String> {
    let mut out = -1;
    // SAFETY: valid byte array and out pointer.
    let rc = unsafe { TVMFFITypeKeyToIndex(&ba(key), &mut out) };
    if rc == 0 {
        Ok(out)
    } else {
        Err(raised_message())
    }
}

fn alloc(key: &str, static_index: i32, depth: i32, slots: i32, overflow: bool, parent: i32) -> i32 {
    // SAFETY: valid byte array.
    unsafe {
        TVMFFITypeGetOrAllocIndex(
            &ba(key),
            static_index,
            depth,
            slots,
            overflow as i32,
            parent,
        )
    }
}

fn info(index: i32) -> &'static TVMFFITypeInfo {
    let p = TVMFFIGetTypeInfo(index);
    assert!(
        !p.is_null(),
        "no type info for {index}: {}",
        raised_message()
    );
    // SAFETY: type infos live for the life of the process.
    unsafe { &*p }
}

fn ancestor_indexes(info: &TVMFFITypeInfo) -> Vec<i32> {
    (0..info.type_depth as usize)
        // SAFETY: `type_depth` valid ancestor pointers.
        .map(|d| unsafe { (**info.type_ancestors.add(d)).type_index })
        .collect()
}

/// tvm-ffi's `object.h` `IsObjectInstance` for a non-final target, as compiled C++ runs it.
fn is_instance(obj: i32, target: i32, target_depth: i32, child_slots: i32, overflow: bool) -> bool {
    if child_slots != 0 {
        if obj >= target && obj < target + child_slots + 1 {
            return true;
        }
    } else if obj == target {
        return true;
    }
    if !overflow || obj < target {
        return false;
    }
    let i = info(obj);
    i.type_depth > target_depth && ancestor_indexes(i)[target_depth as usize] == target
}

#[test]
fn builtin_keys_have_tvm_ffi_indexes() {
    let expected = [
        ("ffi.Object", 64),
        ("ffi.String", 65),
        ("ffi.Bytes", 66),
        ("ffi.Error", 67),
        ("ffi.Function", 68),
        ("ffi.Shape", 69),
        ("ffi.Tensor", 70),
        ("ffi.Array", 71),
        ("ffi.Map", 72),
        ("ffi.Module", 73),
        ("ffi.OpaquePyObject", 74),
        ("ffi.List", 75),
        ("ffi.Dict", 76),
        ("ffi.BigInt", 78),
        ("None", 0),
        ("int", 1),
        ("float", 3),
        ("ffi.SmallStr", 11),
    ];
    for (key, index) in expected {
        assert_eq!(key_to_index(key), Ok(index), "{key}");
        let i = info(index);
        assert_eq!(text(i.type_key), key);
        assert_eq!(i.type_index, index);
    }
    let tensor = info(70);
    assert_eq!(tensor.type_depth, 1);
    assert_eq!(ancestor_indexes(tensor), vec![64]);
    assert_eq!(info(64).type_depth, 0);
    assert_ne!(info(64).type_key_hash, info(65).type_key_hash);
    assert!(!info(64).metadata.is_null());
    // SAFETY: checked non-null.
    assert_eq!(unsafe { (*info(64).metadata).total_size }, 24);

    let err = key_to_index("no.such.Type").unwrap_err();
    assert!(err.contains("no.such.Type"), "{err}");
    assert!(TVMFFIGetTypeInfo(12345).is_null());
    assert!(raised_message().contains("12345"));
}

#[test]
fn dynamic_types_use_child_slots_then_overflow() {
    let base = alloc("test.ffi_types.Base", -1, 1, 2, true, 64);
    assert!(base >= 128, "dynamic index {base}");
    let a = alloc("test.ffi_types.A", -1, 2, 0, true, base);
    let b = alloc("test.ffi_types.B", -1, 2, 0, true, base);
    let c = alloc("test.ffi_types.C", -1, 2, 0, true, base);
    // The first two children sit in Base's reserved range, the third overflows past it.
    assert_eq!((a, b), (base + 1, base + 2));
    assert!(c > base + 2, "overflow index {c}");
    let leaf = alloc("test.ffi_types.C.Leaf", -1, 3, 0, true, c);
    assert!(leaf > c);

    // Re-registration and look-up only.
    assert_eq!(alloc("test.ffi_types.A", -1, 2, 0, true, base), a);
    assert_eq!(alloc("test.ffi_types.Missing", -1, 1, 0, true, -2), -2);
    assert_eq!(alloc("test.ffi_types.A", -1, 2, 0, true, -2), a);

    let li = info(leaf);
    assert_eq!(li.type_depth, 3);
    assert_eq!(ancestor_indexes(li), vec![64, base, c]);
    assert_eq!(ancestor_indexes(info(a)), vec![64, base]);

    // IsInstance as tvm-ffi's C++ headers compute it.
    for (obj, want) in [
        (base, true),
        (a, true),
        (b, true),
        (c, true),
        (leaf, true),
        (70, false),
    ] {
        assert_eq!(is_instance(obj, base, 1, 2, true), want, "{obj} is a Base");
    }
    assert!(is_instance(leaf, c, 2, 0, true));
    assert!(!is_instance(a, c, 2, 0, true));
    assert!(is_instance(leaf, 64, 0, 0, true));

    // Static index taken by another key; missing parent; bad depth.
    assert_eq!(alloc("test.ffi_types.Clash", 65, 1, 0, false, 64), -1);
    assert!(raised_message().contains("conflicting static type index 65"));
    assert_eq!(alloc("test.ffi_types.Orphan", -1, 1, 0, true, 99999), -1);
    assert!(raised_message().contains("99999"));
    assert_eq!(alloc("test.ffi_types.Deep", -1, 5, 0, true, 64), -1);
    assert!(raised_message().contains("type_depth 5"));
    assert_eq!(alloc("test.ffi_types.Huge", -1, 1, i32::MAX, true, 64), -1);
    assert!(raised_message().contains("num_child_slots"));
    // Built-in objects are closed: no subclass of ffi.Tensor.
    assert_eq!(alloc("test.ffi_types.MyTensor", -1, 2, 0, true, 70), -1);
    assert!(raised_message().contains("maximum number of subclasses"));
}

unsafe extern "C" fn getter_stub(_field: *mut c_void, _out: *mut TVMFFIAny) -> i32 {
    0
}

fn int_any(v: i64) -> TVMFFIAny {
    TVMFFIAny {
        type_index: ti::INT,
        small_str_len: 0,
        payload: AnyPayload { v_int64: v },
    }
}

#[test]
fn fields_methods_metadata_and_attrs_read_back() {
    let t = alloc("test.ffi_types.Point", -1, 1, 0, true, 64);
    let empty = TVMFFIByteArray::from_slice(b"");
    let field = |name: &str, offset: i64| TVMFFIFieldInfo {
        name: ba(name),
        doc: ba("the coordinate"),
        metadata: ba("{\"unit\": \"px\"}"),
        flags: field_flag::HAS_DEFAULT | field_flag::WRITABLE,
        size: 8,
        alignment: 8,
        offset,
        getter: Some(getter_stub),
        setter: std::ptr::null_mut(),
        default_value_or_factory: int_any(7),
        field_static_type_index: ti::INT,
    };
    // Register from temporary strings: the table must copy them.
    {
        let name = String::from("x");
        // SAFETY: valid record.
        assert_eq!(unsafe { TVMFFITypeRegisterField(t, &field(&name, 24)) }, 0);
    }
    let first_fields = info(t).fields;
    // SAFETY: valid record.
    assert_eq!(unsafe { TVMFFITypeRegisterField(t, &field("y", 32)) }, 0);
    // SAFETY: as above; a duplicate name is refused.
    assert_eq!(unsafe { TVMFFITypeRegisterField(t, &field("x", 40)) }, -1);
    assert!(raised_message().contains("duplicate field name `x`"));

    let i = info(t);
    assert_eq!(i.num_fields, 2);
    // SAFETY: `num_fields` records.
    let fields = unsafe { std::slice::from_raw_parts(i.fields, 2) };
    assert_eq!(text(fields[0].name), "x");
    assert_eq!(text(fields[1].name), "y");
    assert_eq!(text(fields[1].doc), "the coordinate");
    assert_eq!(text(fields[1].metadata), "{\"unit\": \"px\"}");
    assert_eq!((fields[0].offset, fields[1].offset), (24, 32));
    assert_eq!(fields[1].default_value_or_factory.type_index, ti::INT);
    // SAFETY: an int value.
    assert_eq!(
        unsafe { fields[1].default_value_or_factory.payload.v_int64 },
        7
    );
    // A pointer read before the second registration still reads the first record.
    // SAFETY: old arrays are kept alive.
    assert_eq!(text(unsafe { (*first_fields).name }), "x");

    let f = Function::from_fn(|args| Ok(Any::from(args[0].as_i64().unwrap_or(0) * 2)));
    let method_value = Any::from(f);
    let method = TVMFFIMethodInfo {
        name: ba("scale"),
        doc: empty,
        metadata: empty,
        flags: 0,
        method: *method_value.raw(),
    };
    // SAFETY: valid record.
    assert_eq!(unsafe { TVMFFITypeRegisterMethod(t, &method) }, 0);
    drop(method_value);
    let i = info(t);
    assert_eq!(i.num_methods, 1);
    // SAFETY: one record.
    let m = unsafe { &*i.methods };
    assert_eq!(text(m.name), "scale");
    assert!(m.doc.data.is_null());
    // The table kept the function alive after our value was dropped.
    // SAFETY: the table owns the function for the life of the process.
    let view = unsafe { tvmrt::AnyView::from_raw(m.method) };
    let out = view
        .as_function()
        .unwrap()
        .call_values(&[Any::from(21i64)])
        .unwrap();
    assert_eq!(out.view().as_i64(), Some(42));

    let md = TVMFFITypeMetadata {
        doc: ba("a point"),
        creator: None,
        total_size: 40,
        structural_eq_hash_kind: 1,
    };
    // SAFETY: valid record.
    assert_eq!(unsafe { TVMFFITypeRegisterMetadata(t, &md) }, 0);
    // SAFETY: as above; a second registration is refused.
    assert_eq!(unsafe { TVMFFITypeRegisterMetadata(t, &md) }, -1);
    assert!(raised_message().contains("already registered"));
    // SAFETY: registered above.
    let got = unsafe { &*info(t).metadata };
    assert_eq!((got.total_size, text(got.doc)), (40, "a point".to_string()));

    // Attributes: a column indexed by type index.
    // SAFETY: valid arguments.
    assert!(unsafe { TVMFFIGetTypeAttrColumn(&ba("test.ffi_types.repr")) }.is_null());
    // SAFETY: valid arguments.
    assert_eq!(
        unsafe { TVMFFITypeRegisterAttr(t, &ba("test.ffi_types.repr"), &int_any(5)) },
        0
    );
    // SAFETY: valid arguments; the slot is taken.
    assert_eq!(
        unsafe { TVMFFITypeRegisterAttr(t, &ba("test.ffi_types.repr"), &int_any(6)) },
        -1
    );
    assert!(raised_message().contains("already registered for type index"));
    // SAFETY: valid arguments; type 99999 is not registered.
    assert_eq!(
        unsafe { TVMFFITypeRegisterAttr(99999, &ba("test.ffi_types.repr"), &int_any(6)) },
        -1
    );
    assert!(raised_message().contains("99999"));
    // SAFETY: valid arguments.
    let col = unsafe { &*TVMFFIGetTypeAttrColumn(&ba("test.ffi_types.repr")) };
    assert_eq!(col.begin_index, 0);
    assert_eq!(col.size, t + 1);
    // SAFETY: `size` entries.
    let slot = unsafe { *col.data.add((t - col.begin_index) as usize) };
    // SAFETY: an int value.
    assert_eq!(
        (slot.type_index, unsafe { slot.payload.v_int64 }),
        (ti::INT, 5)
    );
    // SAFETY: `size` entries; other types have None.
    assert_eq!(unsafe { (*col.data.add(64)).type_index }, ti::NONE);
    // The None sentinel only creates a column.
    // SAFETY: valid arguments.
    assert_eq!(
        unsafe { TVMFFITypeRegisterAttr(0, &ba("test.ffi_types.empty"), &int_any(1)) },
        0
    );
    // SAFETY: valid arguments.
    let empty_col = unsafe { &*TVMFFIGetTypeAttrColumn(&ba("test.ffi_types.empty")) };
    assert_eq!(empty_col.size, 0);
}

#[test]
fn set_global_from_method_info_registers_the_function() {
    let f = Function::from_fn(|_| Ok(Any::from("from method info")));
    let value = Any::from(f);
    let info = TVMFFIMethodInfo {
        name: ba("test.ffi_types.global"),
        doc: ba("doc"),
        metadata: TVMFFIByteArray::from_slice(b""),
        flags: field_flag::IS_STATIC_METHOD,
        method: *value.raw(),
    };
    // SAFETY: valid record.
    assert_eq!(
        unsafe { TVMFFIFunctionSetGlobalFromMethodInfo(&info, 0) },
        0
    );
    // SAFETY: as above; without override a second registration fails.
    assert_eq!(
        unsafe { TVMFFIFunctionSetGlobalFromMethodInfo(&info, 0) },
        -1
    );
    assert!(raised_message().contains("already registered"));
    // SAFETY: as above.
    assert_eq!(
        unsafe { TVMFFIFunctionSetGlobalFromMethodInfo(&info, 1) },
        0
    );
    let mut handle = std::ptr::null_mut();
    // SAFETY: valid arguments.
    assert_eq!(
        unsafe { TVMFFIFunctionGetGlobal(&ba("test.ffi_types.global"), &mut handle) },
        0
    );
    assert!(!handle.is_null());
    // SAFETY: a new reference from GetGlobal.
    let obj = unsafe { tvmrt::object::ObjectRef::from_raw_owned(handle) }.unwrap();
    let out = Function::from_object(obj).unwrap().call(&[]).unwrap();
    assert_eq!(out.view().as_str(), Some("from method info"));

    let not_fn = TVMFFIMethodInfo {
        method: int_any(1),
        name: ba("test.ffi_types.not_fn"),
        ..info
    };
    // SAFETY: valid record holding an int.
    assert_eq!(
        unsafe { TVMFFIFunctionSetGlobalFromMethodInfo(&not_fn, 0) },
        -1
    );
    assert!(raised_message().contains("TypeError"));
}

static OPAQUE_DELETES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_delete(handle: *mut c_void) {
    assert_eq!(handle as usize, 0xfeed);
    OPAQUE_DELETES.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn opaque_object_deleter_runs_once() {
    let mut obj = std::ptr::null_mut();
    // SAFETY: valid arguments.
    let rc = unsafe {
        TVMFFIObjectCreateOpaque(0xfeed as *mut c_void, 74, Some(count_delete), &mut obj)
    };
    assert_eq!(rc, 0);
    // SAFETY: a live object: header then `TVMFFIOpaqueObjectCell {handle}`.
    unsafe {
        assert_eq!(*(obj as *const i32).add(2), 74);
        assert_eq!(*(obj as *const u8).add(24).cast::<usize>(), 0xfeed);
        assert_eq!(TVMFFIObjectIncRef(obj), 0);
        assert_eq!(TVMFFIObjectDecRef(obj), 0);
    }
    assert_eq!(OPAQUE_DELETES.load(Ordering::SeqCst), 0);
    // SAFETY: the last reference.
    assert_eq!(unsafe { TVMFFIObjectDecRef(obj) }, 0);
    assert_eq!(OPAQUE_DELETES.load(Ordering::SeqCst), 1);

    // Only ffi.OpaquePyObject is supported, as in tvm-ffi.
    let mut other = std::ptr::null_mut();
    // SAFETY: valid arguments.
    let rc = unsafe {
        TVMFFIObjectCreateOpaque(0xfeed as *mut c_void, 70, Some(count_delete), &mut other)
    };
    assert_eq!(rc, -1);
    assert!(raised_message().contains("only type index 74"));
    assert_eq!(OPAQUE_DELETES.load(Ordering::SeqCst), 1);
}

fn big_int(words: &[i64]) -> Result<TVMFFIAny, String> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let mut out = TVMFFIAny::NONE;
    // SAFETY: valid arguments.
    let rc = unsafe { TVMFFIBigIntFromByteArray(&TVMFFIByteArray::from_slice(&bytes), &mut out) };
    if rc == 0 {
        Ok(out)
    } else {
        Err(raised_message())
    }
}

fn words_of(v: &TVMFFIAny) -> Vec<i64> {
    // SAFETY: a live int / big-int value.
    let b = unsafe { TVMFFIBigIntGetContentByteArray(v) };
    // SAFETY: the words live as long as `v`.
    unsafe { b.as_slice() }
        .chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn big_int_round_trips_and_normalizes() {
    // 2^64 + 1 needs two words (plus no sign word: the top word is positive).
    let v = big_int(&[1, 1]).unwrap();
    assert_eq!(v.type_index, 78);
    assert_eq!(words_of(&v), vec![1, 1]);
    // SAFETY: a big-int object: header, word count.
    let obj = unsafe { v.payload.v_obj };
    assert_eq!(unsafe { *(obj as *const u8).add(24).cast::<usize>() }, 2);
    // SAFETY: the value owns one reference; give it back.
    drop(unsafe { Any::from_raw(v) });

    // Redundant sign words are dropped; values that fit become plain ints.
    let v = big_int(&[5, 0, 0]).unwrap();
    assert_eq!(v.type_index, ti::INT);
    assert_eq!(words_of(&v), vec![5]);
    let v = big_int(&[-1, -1]).unwrap();
    // SAFETY: an int value.
    assert_eq!((v.type_index, unsafe { v.payload.v_int64 }), (ti::INT, -1));
    let v = big_int(&[]).unwrap();
    // SAFETY: an int value.
    assert_eq!((v.type_index, unsafe { v.payload.v_int64 }), (ti::INT, 0));
    // u64::MAX needs a sign word of 0; the trailing extra zero goes.
    let v = big_int(&[-1, 0, 0]).unwrap();
    assert_eq!(v.type_index, 78);
    assert_eq!(words_of(&v), vec![-1, 0]);
    // SAFETY: owned value.
    drop(unsafe { Any::from_raw(v) });

    let err = big_int_bytes_err(&[0u8; 12]);
    assert!(err.contains("whole 64-bit words"), "{err}");
    let b = {
        let s = Any::from("not an int");
        // SAFETY: a live value.
        unsafe { TVMFFIBigIntGetContentByteArray(s.raw()) }
    };
    assert!(b.data.is_null() && b.size == 0);
    assert!(raised_message().contains("TypeError"));
}

fn big_int_bytes_err(bytes: &[u8]) -> String {
    let mut out = TVMFFIAny::NONE;
    // SAFETY: valid arguments.
    let rc = unsafe { TVMFFIBigIntFromByteArray(&TVMFFIByteArray::from_slice(bytes), &mut out) };
    assert_eq!(rc, -1);
    raised_message()
}

fn cell(obj: *mut c_void) -> TVMFFIErrorCell {
    // SAFETY: a live error object.
    unsafe { *(obj as *const u8).add(24).cast::<TVMFFIErrorCell>() }
}

fn strong(obj: *mut c_void) -> u64 {
    // SAFETY: a live object; the count is the first word.
    unsafe { *(obj as *const u64) & 0xffff_ffff }
}

#[test]
fn error_with_cause_chain() {
    let create = |kind: &str, msg: &str, cause: *mut c_void, extra: *mut c_void| {
        let mut out = std::ptr::null_mut();
        // SAFETY: valid arguments.
        let rc = unsafe {
            TVMFFIErrorCreateWithCauseAndExtraContext(
                &ba(kind),
                &ba(msg),
                &ba("  bt\n"),
                cause,
                extra,
                &mut out,
            )
        };
        (rc, out)
    };
    let (rc, root) = create(
        "ValueError",
        "root cause",
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    assert_eq!(rc, 0);
    assert!(cell(root).cause_chain.is_null());
    let ctx = Any::from("some context");
    // SAFETY: a string object value.
    let ctx_obj = unsafe { ctx.raw().payload.v_obj };
    let (rc, mid) = create("RuntimeError", "middle", root, ctx_obj);
    assert_eq!(rc, 0);
    let (rc, top) = create("RuntimeError", "top", mid, std::ptr::null_mut());
    assert_eq!(rc, 0);
    assert_eq!(strong(root), 2);
    assert_eq!(strong(mid), 2);

    // Walk the chain through the public cells.
    let mut chain = Vec::new();
    let mut at = top;
    while !at.is_null() {
        let c = cell(at);
        chain.push(format!("{}: {}", text(c.kind), text(c.message)));
        at = c.cause_chain;
    }
    assert_eq!(
        chain,
        [
            "RuntimeError: top",
            "RuntimeError: middle",
            "ValueError: root cause"
        ]
    );
    assert_eq!(cell(mid).extra_context, ctx_obj);
    assert_eq!(text(cell(mid).backtrace), "  bt\n");

    // The cause must be an error.
    let (rc, _) = create("ValueError", "bad", ctx_obj, std::ptr::null_mut());
    assert_eq!(rc, -1);
    assert!(raised_message().contains("cause_chain must be an ffi.Error"));

    // Releasing the top releases the chain's references, not our own.
    // SAFETY: we own one reference to each.
    unsafe {
        assert_eq!(TVMFFIObjectDecRef(top), 0);
        assert_eq!(strong(mid), 1);
        assert_eq!(TVMFFIObjectDecRef(mid), 0);
        assert_eq!(strong(root), 1);
        assert_eq!(TVMFFIObjectDecRef(root), 0);
    }
    assert_eq!(strong(ctx_obj), 1);
}

fn classic_key2index(key: &str) -> Result<u32, String> {
    let key = CString::new(key).unwrap();
    let mut out = 0u32;
    // SAFETY: valid arguments.
    if unsafe { TVMObjectTypeKey2Index(key.as_ptr(), &mut out) } == 0 {
        Ok(out)
    } else {
        Err(raised_message())
    }
}

fn classic_index2key(index: u32) -> Result<String, String> {
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: valid arguments.
    if unsafe { TVMObjectTypeIndex2Key(index, &mut out) } != 0 {
        return Err(raised_message());
    }
    // SAFETY: a malloc'ed C string we now own.
    let key = unsafe { CStr::from_ptr(out) }.to_str().unwrap().to_string();
    // SAFETY: released with free(), as TVM's callers do.
    unsafe { libc::free(out.cast()) };
    Ok(key)
}

fn derived(child: u32, parent: u32) -> Result<bool, String> {
    let mut out = -1;
    // SAFETY: valid out pointer.
    if unsafe { TVMObjectDerivedFrom(child, parent, &mut out) } == 0 {
        Ok(out == 1)
    } else {
        Err(raised_message())
    }
}

#[test]
fn classic_type_key_and_index_functions() {
    assert_eq!(classic_key2index("ffi.Tensor"), Ok(70));
    assert_eq!(classic_key2index("runtime.NDArray"), Ok(70));
    assert_eq!(classic_key2index("runtime.Module"), Ok(73));
    assert!(classic_key2index("runtime.Nope")
        .unwrap_err()
        .contains("runtime.Nope"));
    assert_eq!(classic_index2key(65).as_deref(), Ok("ffi.String"));
    assert_eq!(classic_index2key(1).as_deref(), Ok("int"));
    assert!(classic_index2key(100_000).unwrap_err().contains("100000"));

    let base = alloc("test.ffi_types.classic.Base", -1, 1, 0, true, 64) as u32;
    let child = alloc("test.ffi_types.classic.Child", -1, 2, 0, true, base as i32) as u32;
    assert_eq!(
        classic_index2key(child).as_deref(),
        Ok("test.ffi_types.classic.Child")
    );
    assert_eq!(derived(70, 64), Ok(true));
    assert_eq!(derived(64, 70), Ok(false));
    assert_eq!(derived(70, 70), Ok(true));
    assert_eq!(derived(child, base), Ok(true));
    assert_eq!(derived(child, 64), Ok(true));
    assert_eq!(derived(child, 70), Ok(false));
    assert!(derived(child, 100_000).unwrap_err().contains("100000"));
}

#[test]
fn backtrace_pointer_is_stable_per_thread() {
    let file = CString::new("kernel.cc").unwrap();
    let func = CString::new("compute").unwrap();
    // SAFETY: valid C strings.
    let p1 = unsafe { TVMFFIBacktrace(file.as_ptr(), 42, func.as_ptr(), 0) };
    // SAFETY: the thread-local array, valid until the next call.
    assert_eq!(
        text(unsafe { *p1 }),
        "  File \"kernel.cc\", line 42, in compute\n"
    );
    // SAFETY: null names are allowed.
    let p2 = unsafe { TVMFFIBacktrace(std::ptr::null(), 0, std::ptr::null(), 1) };
    assert_eq!(p1, p2);
    // SAFETY: as above.
    assert_eq!(unsafe { (*p2).size }, 0);
    // Another thread gets its own array.
    let other = std::thread::spawn(|| {
        // SAFETY: null names are allowed.
        unsafe { TVMFFIBacktrace(std::ptr::null(), 0, std::ptr::null(), 1) as usize }
    })
    .join()
    .unwrap();
    assert_ne!(other, p1 as usize);
}

#[test]
fn custom_allocator_builtin_and_override() {
    let builtin = TVMFFIGetCustomAllocator();
    assert!(!builtin.is_null());
    // SAFETY: the built-in allocator entry.
    let allocate = unsafe { (*builtin).allocate }.unwrap();
    // SAFETY: allocation contract of `TVMFFICustomAllocator`.
    unsafe {
        let body = allocate(40, 64, 64, std::ptr::null_mut());
        assert!(!body.is_null());
        assert_eq!(body as usize % 64, 0);
        std::ptr::write_bytes(body.cast::<u8>(), 0xab, 40);
        // The header sits right before the body (4 bytes on 32-bit targets, 8 on 64-bit).
        let header = body
            .cast::<u8>()
            .sub(std::mem::size_of::<TVMFFIObjectAllocHeader>())
            .cast::<TVMFFIObjectAllocHeader>();
        let delete_space = (*header).delete_space.unwrap();
        delete_space(body);
        // A bad alignment is an error, not a crash.
        assert!(allocate(8, 3, 64, std::ptr::null_mut()).is_null());
    }
    assert!(raised_message().contains("power of two"));

    // SAFETY: an allocator without `allocate` is refused.
    let mut bad = TVMFFICustomAllocator {
        allocate: None,
        context: std::ptr::null_mut(),
    };
    // SAFETY: valid pointer.
    assert_eq!(unsafe { TVMFFISetCustomAllocator(&mut bad) }, -1);
    assert_eq!(TVMFFIGetCustomAllocator(), builtin);
    // Installing and restoring: kept for the process, so leak the entry.
    let mine = Box::leak(Box::new(TVMFFICustomAllocator {
        allocate: Some(allocate),
        context: 0x1234 as *mut c_void,
    }));
    // SAFETY: a process-lifetime entry.
    assert_eq!(unsafe { TVMFFISetCustomAllocator(mine) }, 0);
    assert_eq!(TVMFFIGetCustomAllocator(), mine as *mut _);
    // SAFETY: NULL restores the built-in allocator.
    assert_eq!(unsafe { TVMFFISetCustomAllocator(std::ptr::null_mut()) }, 0);
    assert_eq!(TVMFFIGetCustomAllocator(), builtin);
}

static SIGNAL_STATUS: AtomicI64 = AtomicI64::new(0);

unsafe extern "C" fn fake_check_signals() -> i32 {
    SIGNAL_STATUS.load(Ordering::SeqCst) as i32
}

#[test]
fn env_check_signals_uses_the_registered_host_function() {
    let name = CString::new("PyErr_CheckSignals").unwrap();
    assert!(env_check_signals().is_ok(), "no host check registered");
    // SAFETY: valid C string and a function with the `int (*)(void)` signature.
    assert_eq!(
        unsafe { TVMFFIEnvRegisterCAPI(name.as_ptr(), fake_check_signals as *mut c_void) },
        0
    );
    assert!(env_check_signals().is_ok());
    SIGNAL_STATUS.store(-1, Ordering::SeqCst);
    let err = env_check_signals().unwrap_err();
    assert!(err.message.contains("pending signal"), "{err}");
    // SAFETY: NULL unregisters.
    assert_eq!(
        unsafe { TVMFFIEnvRegisterCAPI(name.as_ptr(), std::ptr::null_mut()) },
        0
    );
    assert!(env_check_signals().is_ok());
}

static PY_REFS: AtomicI64 = AtomicI64::new(0);

unsafe extern "C" fn fake_incref(_obj: *mut c_void) {
    PY_REFS.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn fake_decref(_obj: *mut c_void) {
    PY_REFS.fetch_sub(1, Ordering::SeqCst);
}

fn last_error() -> String {
    // SAFETY: TVMGetLastError returns a valid C string.
    unsafe { CStr::from_ptr(TVMGetLastError()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn python_errors_and_env_capi() {
    let name = |s: &str| CString::new(s).unwrap();
    // SAFETY: valid C strings and function pointers.
    unsafe {
        assert_eq!(
            TVMBackendRegisterEnvCAPI(name("Py_IncRef").as_ptr(), fake_incref as *mut c_void),
            0
        );
        assert_eq!(
            TVMBackendRegisterEnvCAPI(name("Py_DecRef").as_ptr(), fake_decref as *mut c_void),
            0
        );
        assert_eq!(
            TVMBackendRegisterEnvCAPI(name("Bogus").as_ptr(), fake_decref as *mut c_void),
            -1
        );
    }
    assert!(raised_message().contains("unknown env API `Bogus`"));
    // SAFETY: as above; tvm-ffi's entry point shares the table.
    assert_eq!(
        unsafe { TVMFFIEnvRegisterCAPI(name("Nope").as_ptr(), std::ptr::null_mut()) },
        -1
    );
    assert!(raised_message().contains("unknown env API"));

    let py = 0x5151 as *mut c_void;
    // SAFETY: a (fake) Python object pointer.
    unsafe { TVMAPISetLastPythonError(py) };
    assert_eq!(PY_REFS.load(Ordering::SeqCst), 1);
    assert_eq!(TVMGetLastPythonError(), py);
    assert!(
        last_error().starts_with("PythonError: "),
        "{}",
        last_error()
    );
    // The marker survives being re-raised through tvmrt's call layers (same kind and message).
    let e = tvmrt::raised::take_raised().unwrap();
    tvmrt::raised::set_raised(e);
    assert_eq!(TVMGetLastPythonError(), py);
    TVMDropLastPythonError();
    assert!(TVMGetLastPythonError().is_null());
    assert!(tvmrt::raised::take_raised().is_none());
    assert_eq!(PY_REFS.load(Ordering::SeqCst), 0);

    // A later error replaces the Python one, which is then released.
    // SAFETY: as above.
    unsafe { TVMAPISetLastPythonError(py) };
    let msg = CString::new("ValueError: something else").unwrap();
    // SAFETY: valid C string.
    unsafe { tvmrt::capi::classic_error::TVMAPISetLastError(msg.as_ptr()) };
    assert!(TVMGetLastPythonError().is_null());
    assert_eq!(PY_REFS.load(Ordering::SeqCst), 0);
    TVMDropLastPythonError();
    assert_eq!(
        last_error(),
        "ValueError: something else",
        "drop leaves other errors"
    );

    // TVMThrowLastError returns and leaves the error in place.
    TVMThrowLastError();
    assert_eq!(last_error(), "ValueError: something else");
    // No backtrace on a plain error; an error object's backtrace is reported.
    assert!(TVMGetLastBacktrace().is_null());
    let mut err = tvmrt::Error::runtime("with trace");
    err.backtrace = "  File \"x.cc\", line 1, in f\n".into();
    tvmrt::raised::set_raised(err);
    // SAFETY: valid until the next call on this thread.
    let bt = unsafe { CStr::from_ptr(TVMGetLastBacktrace()) };
    assert_eq!(bt.to_str().unwrap(), "  File \"x.cc\", line 1, in f\n");
    drop(tvmrt::raised::take_raised());
    assert!(TVMGetLastBacktrace().is_null());
}
