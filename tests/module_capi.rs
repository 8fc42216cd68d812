//! The module C API (`TVMMod*`, `TVMBackendGetFuncFromEnv`, the tvm-ffi environment calls and
//! the `ffi.Module*` globals), called as a C program would.

mod module_support;

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

use module_support::*;
use tvmrt::abi::{type_code, TVMValue};
use tvmrt::capi::classic_error::TVMGetLastError;
use tvmrt::capi::classic_func::{TVMFuncCall, TVMFuncFree};
use tvmrt::capi::env::{
    TVMFFIEnvModLookupFromImports, TVMFFIEnvModRegisterContextSymbol, TVMFFIHandleDeinitOnce,
    TVMFFIHandleInitOnce,
};
use tvmrt::capi::module::{
    TVMBackendGetFuncFromEnv, TVMModFree, TVMModGetFunction, TVMModImport, TVMModLoadFromFile,
};
use tvmrt::function::{registry, Function};
use tvmrt::module::Module;
use tvmrt::value::Any;

fn last_error() -> String {
    // SAFETY: TVMGetLastError returns a valid C string.
    unsafe { CStr::from_ptr(TVMGetLastError()) }
        .to_string_lossy()
        .into_owned()
}

fn build(name: &str) -> PathBuf {
    let so = scratch("capi").join(format!("{name}.so"));
    compile_shared(&so, &[classic_libs().join("classic_kernels.c")], &[]);
    so
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn mod_load(path: &str) -> *mut c_void {
    let mut m = null_mut();
    // SAFETY: valid strings and out-pointer.
    let rc = unsafe { TVMModLoadFromFile(c(path).as_ptr(), null_mut(), &mut m) };
    assert_eq!(rc, 0, "{}", last_error());
    m
}

fn get_fn(m: *mut c_void, name: &str, query: c_int) -> *mut c_void {
    let mut f = null_mut();
    // SAFETY: `m` is a live module handle.
    let rc = unsafe { TVMModGetFunction(m, c(name).as_ptr(), query, &mut f) };
    assert_eq!(rc, 0, "{}", last_error());
    f
}

fn call_int(f: *mut c_void, x: i64) -> Result<i64, String> {
    let mut args = [TVMValue { v_int64: x }];
    let mut codes = [type_code::INT];
    let mut ret = TVMValue::default();
    let mut ret_code = 0;
    // SAFETY: `f` is a live function handle; arrays hold one entry.
    let rc = unsafe {
        TVMFuncCall(
            f,
            args.as_mut_ptr(),
            codes.as_mut_ptr(),
            1,
            &mut ret,
            &mut ret_code,
        )
    };
    if rc != 0 {
        return Err(last_error());
    }
    assert_eq!(ret_code, type_code::INT);
    // SAFETY: an int result.
    Ok(unsafe { ret.v_int64 })
}

#[test]
fn classic_module_api_round_trip() {
    let so = build("roundtrip");
    let m = mod_load(so.to_str().unwrap());
    let add_one = get_fn(m, "add_one", 0);
    assert!(!add_one.is_null());
    assert_eq!(call_int(add_one, 9), Ok(10));
    // Not found: out is NULL and the call succeeds, as in TVM.
    assert!(get_fn(m, "no_such_function", 1).is_null());
    // Free the module first; the function keeps the library alive.
    // SAFETY: handles owned by this test.
    unsafe {
        assert_eq!(TVMModFree(m), 0);
        assert_eq!(call_int(add_one, 1), Ok(2));
        assert_eq!(TVMFuncFree(add_one), 0);
    }
}

#[test]
fn import_and_env_lookup_through_module_handles() {
    let so = build("imports");
    let lib = mod_load(so.to_str().unwrap());
    // A module from callbacks providing `helper`, imported into the library module.
    let getter = Function::from_fn(|args| {
        if args[0].expect_str("name")? == "helper" {
            Ok(Any::from(Function::from_fn(|a| {
                Ok(Any::from(a[0].expect_i64("x")? + 1000))
            })))
        } else {
            Ok(Any::none())
        }
    });
    let dep = registry::get("tvmrt.ModuleCreate")
        .unwrap()
        .call_values(&[Any::from("helpers"), Any::from(getter)])
        .unwrap();
    let dep = Module::from_view(&dep.view(), "dep").unwrap();
    // SAFETY: live module handles.
    unsafe {
        assert_eq!(TVMModImport(lib, dep.as_ptr()), 0, "{}", last_error());
        // A cycle is refused.
        assert_eq!(TVMModImport(dep.as_ptr(), lib), -1);
        assert!(
            last_error().contains("Cyclic dependency"),
            "{}",
            last_error()
        );
    }
    // query_imports finds `helper` in the import.
    let helper = get_fn(lib, "helper", 1);
    assert!(!helper.is_null());
    assert!(get_fn(lib, "helper", 0).is_null());
    assert_eq!(call_int(helper, 1), Ok(1001));
    // The classic library's context is the root (this library module), whose imports now
    // include `helpers`: compiled code finds `helper` there.
    let call_helper = get_fn(lib, "call_helper", 0);
    assert_eq!(call_int(call_helper, 5), Ok(1005));
    // Both environment lookups also accept a module handle as the context.
    let mut out = null_mut();
    // SAFETY: live handle, valid strings.
    unsafe {
        assert_eq!(
            TVMBackendGetFuncFromEnv(lib, c("helper").as_ptr(), &mut out),
            0
        );
        assert_eq!(call_int(out, 2), Ok(1002));
        let mut out2 = null_mut();
        assert_eq!(
            TVMFFIEnvModLookupFromImports(lib, c("helper").as_ptr(), &mut out2),
            0
        );
        assert_eq!(out, out2, "the same cached, borrowed handle");
        assert_eq!(
            TVMFFIEnvModLookupFromImports(lib, c("absent_fn").as_ptr(), &mut out2),
            -1
        );
        assert!(last_error().contains(
            "Cannot find function absent_fn in the imported modules or global registry."
        ));
        TVMFuncFree(helper);
        TVMFuncFree(call_helper);
        TVMModFree(lib);
    }
}

#[test]
fn null_and_wrong_handles_are_errors() {
    let mut out = null_mut();
    // SAFETY: exercising the checks with bad arguments.
    unsafe {
        assert_eq!(
            TVMModGetFunction(null_mut(), c("f").as_ptr(), 0, &mut out),
            -1
        );
        assert!(
            last_error().contains("null handle passed as `mod`"),
            "{}",
            last_error()
        );
        assert_eq!(TVMModLoadFromFile(null_mut(), null_mut(), &mut out), -1);
        assert!(last_error().contains("file_name"), "{}", last_error());
        assert_eq!(
            TVMModLoadFromFile(c("/no/such/lib.so").as_ptr(), null_mut(), &mut out),
            -1
        );
        assert!(
            last_error().contains("cannot load library"),
            "{}",
            last_error()
        );
        assert_eq!(TVMModFree(null_mut()), -1);
        assert_eq!(TVMModImport(null_mut(), null_mut()), -1);
        // A function handle is not a module.
        let f = Function::from_fn(|_| Ok(Any::none()));
        assert_eq!(TVMModFree(f.object().as_ptr()), -1);
        assert!(last_error().contains("not a module"), "{}", last_error());
        assert_eq!(
            TVMModGetFunction(f.object().as_ptr(), c("x").as_ptr(), 0, &mut out),
            -1
        );
        assert!(
            last_error().contains("expected ffi.Module"),
            "{}",
            last_error()
        );
        assert_eq!(
            TVMBackendGetFuncFromEnv(null_mut(), c("x").as_ptr(), &mut out),
            -1
        );
        assert!(
            last_error().contains("library context is NULL"),
            "{}",
            last_error()
        );
        let so = build("nulls");
        let m = mod_load(so.to_str().unwrap());
        assert_eq!(TVMModGetFunction(m, null_mut(), 0, &mut out), -1);
        assert_eq!(
            TVMModGetFunction(m, c("add_one").as_ptr(), 0, null_mut()),
            -1
        );
        TVMModFree(m);
    }
}

#[test]
fn context_symbols_registered_from_c_are_filled() {
    let marker = 0x5eed_usize as *mut c_void;
    // SAFETY: valid name; the pointer is only stored.
    let rc =
        unsafe { TVMFFIEnvModRegisterContextSymbol(c("__tvmrt_test_custom_ctx").as_ptr(), marker) };
    assert_eq!(rc, 0);
    let so = build("custom_ctx");
    let m = mod_load(so.to_str().unwrap());
    let f = get_fn(m, "read_custom", 0);
    let mut ret = TVMValue::default();
    let mut code = 0;
    // SAFETY: a live function taking no arguments.
    let rc = unsafe { TVMFuncCall(f, null_mut(), null_mut(), 0, &mut ret, &mut code) };
    assert_eq!(rc, 0, "{}", last_error());
    assert_eq!(code, type_code::OPAQUE_HANDLE);
    // SAFETY: a handle result.
    assert_eq!(unsafe { ret.v_handle }, marker);
    // SAFETY: owned handles.
    unsafe {
        TVMFuncFree(f);
        TVMModFree(m);
        assert_eq!(TVMFFIEnvModRegisterContextSymbol(null_mut(), marker), -1);
    }
}

static INIT_CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn init_ok(out: *mut *mut c_void) -> c_int {
    INIT_CALLS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the runtime passes a writable slot.
    unsafe { *out = 0x1000 as *mut c_void };
    0
}

unsafe extern "C" fn init_null(_out: *mut *mut c_void) -> c_int {
    0
}

unsafe extern "C" fn init_fails(_out: *mut *mut c_void) -> c_int {
    let kind = c("ValueError");
    let msg = c("init failed");
    // SAFETY: valid strings.
    unsafe { tvmrt::capi::ffi_core::TVMFFIErrorSetRaisedFromCStr(kind.as_ptr(), msg.as_ptr()) };
    -1
}

static DEINIT_SEEN: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn deinit(h: *mut c_void) -> c_int {
    DEINIT_SEEN.store(h as usize, Ordering::SeqCst);
    0
}

#[test]
fn handle_init_once() {
    let mut slot: *mut c_void = null_mut();
    // SAFETY: `slot` is a valid pointer slot for the calls.
    unsafe {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let addr = &mut slot as *mut *mut c_void as usize;
                std::thread::spawn(move || {
                    TVMFFIHandleInitOnce(addr as *mut *mut c_void, Some(init_ok))
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), 0);
        }
        assert_eq!(INIT_CALLS.load(Ordering::SeqCst), 1);
        assert_eq!(slot as usize, 0x1000);
        assert_eq!(TVMFFIHandleDeinitOnce(&mut slot, Some(deinit)), 0);
        assert!(slot.is_null());
        assert_eq!(DEINIT_SEEN.load(Ordering::SeqCst), 0x1000);
        assert_eq!(TVMFFIHandleInitOnce(&mut slot, Some(init_null)), -1);
        assert!(last_error().contains("non-NULL"), "{}", last_error());
        assert_eq!(TVMFFIHandleInitOnce(&mut slot, Some(init_fails)), -1);
        assert_eq!(last_error(), "ValueError: init failed");
        assert!(slot.is_null());
        assert_eq!(TVMFFIHandleInitOnce(null_mut(), Some(init_ok)), -1);
    }
}

#[test]
fn ffi_module_globals() {
    let so = build("globals");
    let path = so.to_str().unwrap();
    let g = |name: &str| registry::get(name).unwrap_or_else(|| panic!("{name} not registered"));
    let m = g("ffi.ModuleLoadFromFile")
        .call_values(&[Any::from(path)])
        .unwrap();
    assert_eq!(
        g("ffi.ModuleGetKind")
            .call_values(std::slice::from_ref(&m))
            .unwrap()
            .view()
            .as_str(),
        Some("library")
    );
    let f = g("ffi.ModuleGetFunction")
        .call_values(&[m.clone(), Any::from("add_one"), Any::from(false)])
        .unwrap();
    let f = f.view().as_function().unwrap();
    assert_eq!(
        f.call_values(&[Any::from(1i64)]).unwrap().view().as_i64(),
        Some(2)
    );
    let none = g("ffi.ModuleGetFunction")
        .call_values(&[m.clone(), Any::from("absent"), Any::from(true)])
        .unwrap();
    assert!(none.view().is_none());
    assert_eq!(
        g("ffi.ModuleImplementsFunction")
            .call_values(&[m.clone(), Any::from("greet"), Any::from(false)])
            .unwrap()
            .view()
            .as_bool(),
        Some(true)
    );
    let other = g("ffi.ModuleLoadFromFile")
        .call_values(&[Any::from(path), Any::from("so")])
        .unwrap();
    g("ffi.ModuleImportModule")
        .call_values(&[m.clone(), other.clone()])
        .unwrap();
    let imports_size = |m: &Any| {
        g("runtime.ModuleImportsSize")
            .call_values(std::slice::from_ref(m))
            .unwrap()
            .view()
            .as_i64()
    };
    assert_eq!(imports_size(&m), Some(1));
    let imported = g("runtime.ModuleGetImport")
        .call_values(&[m.clone(), Any::from(0i64)])
        .unwrap();
    assert_eq!(
        imported.view().as_object().unwrap().as_ptr(),
        other.view().as_object().unwrap().as_ptr()
    );
    let e = g("runtime.ModuleGetImport")
        .call_values(&[m.clone(), Any::from(3i64)])
        .unwrap_err();
    assert!(e.message.contains("import index 3 out of range"), "{e}");
    g("ffi.ModuleClearImports")
        .call_values(std::slice::from_ref(&m))
        .unwrap();
    assert_eq!(imports_size(&m), Some(0));
    let e = g("ffi.ModuleGetKind")
        .call_values(&[Any::from(3i64)])
        .unwrap_err();
    assert!(
        e.message.contains("mod: expected ffi.Module, got int"),
        "{e}"
    );
    let e = g("ffi.ModuleSaveToBytes").call_values(&[m]).unwrap_err();
    assert!(e.message.contains("cannot be saved"), "{e}");
    let _: *const c_char = std::ptr::null();
}
