//! The runtime content tvm-ffi's library registers, as tvmrt provides it (issue 12): container
//! globals with tvm-ffi's error kinds, recursive comparison and hash, repr, deep copy, JSON
//! graph round trips, and the start-up columns and types. tvm-ffi's own Python suite runs the
//! same functions end to end (conformance/tvm_ffi/run.sh); these tests pin the Rust side.

use tvmrt::error::{Error, Result};
use tvmrt::function::registry;
use tvmrt::object::type_registry;
use tvmrt::value::{Any, AnyView};

fn call(name: &str, args: &[Any]) -> Result<Any> {
    let views: Vec<AnyView<'_>> = args.iter().map(AnyView::from).collect();
    registry::get_required(name)?.call(&views)
}

fn kind_of(r: Result<Any>) -> String {
    let e: Error = r.expect_err("expected an error");
    e.kind.clone()
}

fn array(items: Vec<Any>) -> Any {
    call("ffi.Array", &items).unwrap()
}

#[test]
fn array_accessors_and_their_errors() {
    let a = array(vec![1i64.into(), "two".into()]);
    assert_eq!(
        call("ffi.ArraySize", std::slice::from_ref(&a))
            .unwrap()
            .view()
            .as_i64(),
        Some(2)
    );
    let item = call("ffi.ArrayGetItem", &[a.clone(), 1i64.into()]).unwrap();
    assert_eq!(item.view().as_str(), Some("two"));
    assert!(call("ffi.ArrayContains", &[a.clone(), "two".into()])
        .unwrap()
        .view()
        .as_bool()
        .unwrap());
    assert_eq!(
        kind_of(call("ffi.ArrayGetItem", &[a.clone(), 2i64.into()])),
        "IndexError"
    );
    assert_eq!(
        kind_of(call("ffi.ArrayGetItem", &[a.clone(), (-1i64).into()])),
        "IndexError"
    );
    let m = call("ffi.Map", &["k".into(), 1i64.into()]).unwrap();
    assert_eq!(kind_of(call("ffi.ArraySize", &[m])), "TypeError");
    assert_eq!(kind_of(call("ffi.ArraySize", &[])), "TypeError");
}

#[test]
fn list_mutation_and_errors() {
    let l = call("ffi.List", &[1i64.into(), 2i64.into()]).unwrap();
    call("ffi.ListAppend", &[l.clone(), 3i64.into()]).unwrap();
    call("ffi.ListInsert", &[l.clone(), 0i64.into(), 0i64.into()]).unwrap();
    let popped = call("ffi.ListPop", &[l.clone(), 1i64.into()]).unwrap();
    assert_eq!(popped.view().as_i64(), Some(1));
    call("ffi.ListReverse", std::slice::from_ref(&l)).unwrap();
    let repr = call("ffi.ReprPrint", std::slice::from_ref(&l)).unwrap();
    assert_eq!(repr.view().as_str(), Some("[3, 2, 0]"));
    assert_eq!(
        kind_of(call(
            "ffi.ListSetItem",
            &[l.clone(), 3i64.into(), 0i64.into()]
        )),
        "IndexError"
    );
    assert_eq!(
        kind_of(call(
            "ffi.ListEraseRange",
            &[l.clone(), 2i64.into(), 1i64.into()]
        )),
        "IndexError"
    );
    let a = array(vec![]);
    assert_eq!(
        kind_of(call("ffi.ListAppend", &[a, 1i64.into()])),
        "TypeError"
    );
}

#[test]
fn map_and_dict_keys_compare_as_any_equal() {
    // "a" as an inline small string and as a string object are the same key; 1 and True are not.
    let long_key = "a key longer than seven bytes";
    let m = call(
        "ffi.Map",
        &[
            Any::string_compact("a"),
            1i64.into(),
            long_key.into(),
            2i64.into(),
            true.into(),
            3i64.into(),
        ],
    )
    .unwrap();
    assert_eq!(
        call("ffi.MapSize", std::slice::from_ref(&m))
            .unwrap()
            .view()
            .as_i64(),
        Some(3)
    );
    let got = call("ffi.MapGetItem", &[m.clone(), Any::from("a")]).unwrap();
    assert_eq!(got.view().as_i64(), Some(1));
    let got = call(
        "ffi.MapGetItem",
        &[m.clone(), Any::string_compact(long_key)],
    )
    .unwrap();
    assert_eq!(got.view().as_i64(), Some(2));
    assert_eq!(
        call("ffi.MapCount", &[m.clone(), 1i64.into()])
            .unwrap()
            .view()
            .as_i64(),
        Some(0)
    );
    assert_eq!(
        kind_of(call("ffi.MapGetItem", &[m.clone(), "zz".into()])),
        "KeyError"
    );
    let d = call("ffi.Dict", &[]).unwrap();
    call("ffi.DictSetItem", &[d.clone(), "x".into(), 1i64.into()]).unwrap();
    call("ffi.DictSetItem", &[d.clone(), "x".into(), 2i64.into()]).unwrap();
    assert_eq!(
        call("ffi.DictSize", std::slice::from_ref(&d))
            .unwrap()
            .view()
            .as_i64(),
        Some(1)
    );
    assert_eq!(
        kind_of(call("ffi.DictSetItem", &[m, "x".into(), 1i64.into()])),
        "TypeError"
    );
    assert_eq!(kind_of(call("ffi.Map", &["odd".into()])), "ValueError");
}

#[test]
fn recursive_compare_and_hash() {
    let a = array(vec![1i64.into(), "x".into(), array(vec![2.5f64.into()])]);
    let b = array(vec![1i64.into(), "x".into(), array(vec![2.5f64.into()])]);
    let c = array(vec![1i64.into(), "y".into()]);
    assert!(call("ffi.RecursiveEq", &[a.clone(), b.clone()])
        .unwrap()
        .view()
        .as_bool()
        .unwrap());
    assert!(!call("ffi.RecursiveEq", &[a.clone(), c.clone()])
        .unwrap()
        .view()
        .as_bool()
        .unwrap());
    assert!(call("ffi.RecursiveLt", &[a.clone(), c.clone()])
        .unwrap()
        .view()
        .as_bool()
        .unwrap());
    let ha = call("ffi.RecursiveHash", &[a]).unwrap().view().as_i64();
    let hb = call("ffi.RecursiveHash", &[b]).unwrap().view().as_i64();
    assert_eq!(ha, hb);
    // NaN equals NaN for equality; ordering it, or values of different kinds, is a TypeError.
    let nan = Any::from(f64::NAN);
    assert!(call("ffi.RecursiveEq", &[nan.clone(), nan.clone()])
        .unwrap()
        .view()
        .as_bool()
        .unwrap());
    assert_eq!(
        kind_of(call("ffi.RecursiveLt", &[nan.clone(), nan])),
        "TypeError"
    );
    assert_eq!(
        kind_of(call("ffi.RecursiveLt", &[1i64.into(), "1".into()])),
        "TypeError"
    );
    let m1 = call("ffi.Map", &["k".into(), 1i64.into()]).unwrap();
    let m2 = call("ffi.Map", &["k".into(), 2i64.into()]).unwrap();
    assert_eq!(kind_of(call("ffi.RecursiveLt", &[m1, m2])), "TypeError");
}

#[test]
fn repr_formats_as_tvm_ffi() {
    let cases: Vec<(Any, &str)> = vec![
        (Any::none(), "None"),
        (true.into(), "True"),
        (3.0f64.into(), "3"),
        (0.1f64.into(), "0.1"),
        ("a\"b\n".into(), "\"a\\\"b\\n\""),
        (Any::bytes_compact(&[0, b'a']), "b\"\\x00a\""),
        (array(vec![1i64.into()]), "(1,)"),
        (
            call("ffi.Map", &["k".into(), 1i64.into()]).unwrap(),
            "{\"k\": 1}",
        ),
        (
            call("ffi.Shape", &[2i64.into(), 3i64.into()]).unwrap(),
            "Shape(2, 3)",
        ),
    ];
    for (v, want) in cases {
        let got = call("ffi.ReprPrint", &[v]).unwrap();
        assert_eq!(got.view().as_str(), Some(want));
    }
}

#[test]
fn deep_copy_keeps_sharing_and_copies_mutables() {
    let inner = call("ffi.List", &[1i64.into()]).unwrap();
    let outer = array(vec![inner.clone(), inner.clone()]);
    let copy = call("ffi.DeepCopy", &[outer]).unwrap();
    let first = call("ffi.ArrayGetItem", &[copy.clone(), 0i64.into()]).unwrap();
    let second = call("ffi.ArrayGetItem", &[copy, 1i64.into()]).unwrap();
    let ptr = |a: &Any| a.view().as_object().unwrap().as_ptr();
    assert_eq!(
        ptr(&first),
        ptr(&second),
        "shared once in the original, shared in the copy"
    );
    assert_ne!(ptr(&first), ptr(&inner), "the list was copied");
}

#[test]
fn json_graph_round_trip_and_bad_graphs() {
    let dict = call(
        "ffi.Dict",
        &["s".into(), call("ffi.Shape", &[4i64.into()]).unwrap()],
    )
    .unwrap();
    let value = array(vec![
        1i64.into(),
        1.5f64.into(),
        "text".into(),
        Any::bytes_compact(b"\x01\x02"),
        dict,
        Any::none(),
    ]);
    let text = call("ffi.ToJSONGraphString", std::slice::from_ref(&value)).unwrap();
    let back = call("ffi.FromJSONGraphString", std::slice::from_ref(&text)).unwrap();
    assert!(call("ffi.RecursiveEq", &[value, back])
        .unwrap()
        .view()
        .as_bool()
        .unwrap());
    let text = text.view().as_str().unwrap().to_string();
    assert!(text.starts_with("{\"root_index\":"), "{text}");
    for bad in [
        "[]",
        "{\"root_index\": 0}",
        "{\"root_index\": 5, \"nodes\": []}",
        "{\"root_index\": 0, \"nodes\": [{\"type\": \"ffi.Array\", \"data\": [0]}]}",
        "{\"root_index\": 0, \"nodes\": [{\"type\": \"ffi.Map\", \"data\": [1]}]}",
        "not json",
    ] {
        let r = call("ffi.FromJSONGraphString", &[bad.into()]);
        assert!(r.is_err(), "{bad} should fail");
    }
    let compact = call(
        "ffi.json.Stringify",
        &[call("ffi.json.Parse", &["{\"a\": [1, 2.0, null]}".into()]).unwrap()],
    );
    assert_eq!(
        compact.unwrap().view().as_str(),
        Some("{\"a\":[1,2.0,null]}")
    );
}

#[test]
fn start_up_columns_types_and_reflection_globals() {
    for column in [
        "__ffi_enum__",
        "__ffi_init__",
        "__ffi_repr__",
        "__s_equal__",
        "__any_hash__",
    ] {
        assert!(type_registry::attr_column(column).is_some(), "{column}");
    }
    assert_eq!(type_registry::lookup("ffi.EnumState"), Some(128));
    assert_eq!(type_registry::lookup("ffi.StructuralKey"), Some(137));
    let keys = call("ffi.GetRegisteredTypeKeys", &[]).unwrap();
    let n = call("ffi.ArraySize", &[keys])
        .unwrap()
        .view()
        .as_i64()
        .unwrap();
    assert!(n > 30, "{n} type keys");
    let names = call("ffi.FunctionListGlobalNamesFunctor", &[]).unwrap();
    let names = names.view().as_function().unwrap();
    let count = names
        .call(&[AnyView::from(-1i64)])
        .unwrap()
        .view()
        .as_i64()
        .unwrap();
    assert!(count > 50);
    let beyond = names.call(&[AnyView::from(count)]).unwrap_err();
    assert_eq!(beyond.kind, "IndexError");
    // Bad type indexes and field kinds are errors, not crashes.
    assert_eq!(
        kind_of(call("ffi.MakeFieldGetter", &[20i64.into()])),
        "ValueError"
    );
    assert_eq!(
        kind_of(call("ffi._RegisterFFIInit", &[99_999i64.into()])),
        "ValueError"
    );
    assert_eq!(
        kind_of(call(
            "ffi.MakeObjectFromPackedArgs",
            &["no.such.Type".into()]
        )),
        "ValueError"
    );
    // EnumState's fields have no defaults: all three are required, unknown names refused.
    let missing = call("ffi.MakeObjectFromPackedArgs", &["ffi.EnumState".into()]);
    assert_eq!(kind_of(missing), "TypeError");
    let mut args: Vec<Any> = vec!["ffi.EnumState".into()];
    args.extend(["entries".into(), call("ffi.List", &[]).unwrap()]);
    args.extend(["indexes".into(), call("ffi.Dict", &[]).unwrap()]);
    args.extend(["attrs".into(), call("ffi.Dict", &[]).unwrap()]);
    let state = call("ffi.MakeObjectFromPackedArgs", &args).unwrap();
    args.extend(["nope".into(), 1i64.into()]);
    assert_eq!(
        kind_of(call("ffi.MakeObjectFromPackedArgs", &args)),
        "TypeError"
    );
    let repr = call("ffi.ReprPrint", &[state]).unwrap();
    assert_eq!(
        repr.view().as_str(),
        Some("ffi.EnumState(entries=[], indexes={}, attrs={})")
    );
}

/// An enum state holding `entries` (any objects), made by reflection.
fn enum_state(entries: Vec<Any>) -> Any {
    let mut args: Vec<Any> = vec!["ffi.EnumState".into()];
    args.extend(["entries".into(), call("ffi.List", &entries).unwrap()]);
    args.extend(["indexes".into(), call("ffi.Dict", &[]).unwrap()]);
    args.extend(["attrs".into(), call("ffi.Dict", &[]).unwrap()]);
    call("ffi.MakeObjectFromPackedArgs", &args).unwrap()
}

/// `FindAccessPaths` turns a visit error's breadcrumbs (innermost first) into the access paths
/// of `root` that lead through them; every expected list below is what tvm-ffi 0.1.15's own
/// library returns for the same objects.
#[test]
fn visit_error_contexts_resolve_to_access_paths() {
    let leaf = enum_state(vec![]);
    let other = enum_state(vec![]);
    let stray = enum_state(vec![]);
    let mid = enum_state(vec![other.clone(), leaf.clone()]);
    let root = enum_state(vec![other.clone(), mid.clone(), leaf.clone()]);
    let context = |pattern: &[&Any]| {
        let items: Vec<Any> = pattern.iter().map(|&a| a.clone()).collect();
        call(
            "ffi.MakeObjectFromPackedArgs",
            &[
                "ffi.VisitErrorContext".into(),
                "reverse_visit_pattern".into(),
                call("ffi.List", &items).unwrap(),
                "prev_error_context".into(),
                Any::none(),
            ],
        )
        .unwrap()
    };
    let find = |on: &Any, pattern: &[&Any], prefix: bool| -> Vec<String> {
        let paths = call(
            "ffi.VisitErrorContext.FindAccessPaths",
            &[on.clone(), context(pattern), prefix.into()],
        )
        .unwrap();
        let n = call("ffi.ArraySize", std::slice::from_ref(&paths)).unwrap();
        (0..n.view().as_i64().unwrap())
            .map(|i| {
                let p = call("ffi.ArrayGetItem", &[paths.clone(), i.into()]).unwrap();
                let r = call("ffi.ReprPrint", &[p]).unwrap();
                r.view().as_str().unwrap().to_string()
            })
            .collect()
    };
    let (m1, m11, m10) = (
        "<root>.entries[1]",
        "<root>.entries[1].entries[1]",
        "<root>.entries[1].entries[0]",
    );
    // Thrown at `leaf` (recorded twice) inside `mid`.
    assert_eq!(find(&root, &[&leaf, &leaf, &mid], false), [m11]);
    assert_eq!(find(&root, &[&leaf, &leaf, &mid], true), [m10, m11]);
    // `leaf` alone: both places it lies.
    assert_eq!(find(&root, &[&leaf], false), [m11, "<root>.entries[2]"]);
    // An inner object that is nowhere below `mid`: no full match; prefixes end below `mid`.
    assert!(find(&root, &[&stray, &mid], false).is_empty());
    assert_eq!(find(&root, &[&stray, &mid], true), [m10, m11]);
    assert_eq!(find(&root, &[&mid, &root], false), [m1]);
    assert_eq!(
        find(&root, &[&mid, &root], true),
        ["<root>.entries[0]", m1, "<root>.entries[2]"]
    );
    assert_eq!(find(&root, &[&root], false), ["<root>"]);
    // A root without type metadata (a bare array) leads nowhere.
    let bare = array(vec![other.clone(), mid.clone(), leaf.clone()]);
    assert!(find(&bare, &[&leaf], true).is_empty());
    // Bad input: not a context.
    let e = call(
        "ffi.VisitErrorContext.FindAccessPaths",
        &[root.clone(), 1i64.into()],
    )
    .unwrap_err();
    assert_eq!(e.kind, "TypeError");
}

#[test]
fn py_class_sizes_and_capacities_are_checked() {
    // A type whose declared object size cannot hold the header is refused before any object
    // of it is allocated; an impossible list capacity is an error, not an abort.
    let t = type_registry::get_or_alloc_index("test.ffi_content.Tiny", -1, 1, 0, true, 64).unwrap();
    let r = call(
        "ffi._PyClassRegisterTypeAttrColumns",
        &[i64::from(t).into(), 8i64.into()],
    );
    assert_eq!(kind_of(r), "ValueError");
    let l = call("ffi.List", &[]).unwrap();
    let r = call("ffi.ListReserve", &[l, i64::MAX.into()]);
    assert_eq!(kind_of(r), "MemoryError");
}

#[test]
fn function_from_extern_c_and_device_search() {
    let null = Any::opaque_ptr(std::ptr::null_mut());
    let r = call(
        "ffi.FunctionFromExternC",
        &[null.clone(), null.clone(), null],
    );
    assert_eq!(kind_of(r), "ValueError");
    let r = call(
        "ffi.FunctionFromExternC",
        &["not a pointer".into(), 1i64.into(), 2i64.into()],
    );
    assert_eq!(kind_of(r), "TypeError");
    // Containers without tensors report the CPU.
    let nested = array(vec![1i64.into(), call("ffi.List", &["x".into()]).unwrap()]);
    let d = call("ffi.ContainerFindFirstNonCPUDevice", &[nested]).unwrap();
    let d = d.view().as_device().unwrap();
    assert_eq!((d.device_type.0, d.device_id), (1, 0));
}
