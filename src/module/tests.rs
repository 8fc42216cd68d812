use super::*;

struct Fixed {
    kind: &'static str,
    names: &'static [&'static str],
}

impl ModuleKind for Fixed {
    fn kind(&self) -> &str {
        self.kind
    }
    fn get_function(&self, this: &Module, name: &str) -> Result<Option<Function>> {
        if !self.names.contains(&name) {
            return Ok(None);
        }
        let keep = this.clone();
        let tag = format!("{}:{name}", self.kind);
        Ok(Some(Function::from_fn(move |_| {
            let _ = &keep;
            Ok(Any::from(tag.as_str()))
        })))
    }
}

fn m(kind: &'static str, names: &'static [&'static str]) -> Module {
    Module::new(Fixed { kind, names })
}

fn call_tag(f: Option<Function>) -> String {
    f.unwrap()
        .call(&[])
        .unwrap()
        .view()
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn lookup_is_depth_first_and_pre_order() {
    let root = m("root", &["r"]);
    let a = m("a", &[]);
    let a1 = m("a1", &["x"]);
    let b = m("b", &["x"]);
    a.import(&a1).unwrap();
    root.import(&a).unwrap();
    root.import(&b).unwrap();
    assert_eq!(call_tag(root.get_function("r", false).unwrap()), "root:r");
    assert!(root.get_function("x", false).unwrap().is_none());
    // a1 (inside the first import) is found before b (the second import).
    assert_eq!(call_tag(root.get_function("x", true).unwrap()), "a1:x");
    assert!(root.implements_function("x", true));
    assert!(!root.implements_function("x", false));
    assert_eq!(root.imports().len(), 2);
    root.clear_imports().unwrap();
    assert!(root.get_function("x", true).unwrap().is_none());
}

#[test]
fn imports_and_lookup_cache_live_where_cpp_has_them() {
    let root = m("root", &[]);
    let a = m("a", &["x"]);
    root.import(&a).unwrap();
    let header = root.as_ptr().cast::<u8>();
    // C++ reads `imports_` inline: an ffi.Array of the modules, right after the header.
    // SAFETY: a module's `imports_` slot holds a live array while the module lives.
    let imports =
        unsafe { ObjectRef::from_raw_borrowed(*header.add(24).cast::<*mut c_void>()).unwrap() };
    assert_eq!(imports.type_index(), type_index::ARRAY);
    let items = array_items(&imports).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].as_object().unwrap().as_ptr(), a.as_ptr());
    // The vtable pointer C++ calls through, before the header.
    // SAFETY: tvmrt's modules are allocated with a vtable pointer 8 bytes before the header.
    let vptr = unsafe { *header.sub(8).cast::<*const c_void>() };
    assert_eq!(vptr, crate::cxx::rust_module_vptr());
    // Compiled code's lookups are cached in the `import_lookup_cache_` slot.
    let f = root.env_lookup("x").unwrap();
    assert_eq!(root.env_lookup("x").unwrap(), f);
    // SAFETY: the cache slot follows `imports_`.
    let cache = unsafe { *header.add(32).cast::<*mut c_void>() };
    assert!(!cache.is_null());
    root.clear_imports().unwrap();
    assert!(root.imports().is_empty());
    // The old array stays valid for whoever holds it.
    assert_eq!(array_items(&imports).unwrap().len(), 1);
}

#[test]
fn import_rejects_cycles() {
    let a = m("a", &[]);
    let b = m("b", &[]);
    a.import(&b).unwrap();
    let e = b.import(&a).unwrap_err();
    assert!(e.message.contains("Cyclic dependency"), "{e}");
    let e = a.import(&a).unwrap_err();
    assert!(e.message.contains("cannot import itself"), "{e}");
}

#[test]
fn function_keeps_module_alive() {
    let root = m("root", &["r"]);
    let f = root.get_function("r", false).unwrap().unwrap();
    let weak_probe = root.object().strong_count();
    assert_eq!(weak_probe, 2, "the function holds one reference");
    drop(root);
    assert_eq!(f.call(&[]).unwrap().view().as_str(), Some("root:r"));
}

#[test]
fn downcast_and_kind() {
    let a = m("a", &[]);
    assert_eq!(a.kind(), "a");
    assert!(a.downcast::<Fixed>().is_some());
    assert!(!a.save_to_bytes().unwrap_err().message.is_empty());
    let any = Any::from(a.clone());
    assert_eq!(any.view().type_index(), type_index::MODULE);
    let back = Module::from_view(&any.view(), "m").unwrap();
    assert_eq!(back.as_ptr(), a.as_ptr());
    let e = Module::from_view(&Any::from(1i64).view(), "m").unwrap_err();
    assert!(e.message.contains("m: expected ffi.Module, got int"), "{e}");
}
