//! Every row of `docs/bad_input.md`, checked: each kind of bad input given to the C API, and
//! what the caller gets back (return code, error kind, message). Run with `--nocapture` to see
//! the messages as a markdown table.

mod reliability_support;

use std::ffi::{c_int, c_void, CStr, CString};
use std::sync::Mutex;

use reliability_support::*;
use tvmrt::abi::{type_code as tc, DLManagedTensorVersioned, DLTensor, TVMValue};
use tvmrt::capi::classic_error::{TVMAPISetLastError, TVMGetLastError};
use tvmrt::capi::classic_func::{
    TVMFuncCall, TVMFuncCreateFromCFunc, TVMFuncFree, TVMFuncGetGlobal, TVMFuncRegisterGlobal,
    TVMFuncRemoveGlobal,
};
use tvmrt::capi::dlpack::TVMFFITensorFromDLPackVersioned;
use tvmrt::capi::module::{TVMModFree, TVMModGetFunction, TVMModLoadFromFile};
use tvmrt::capi::tensor::{TVMArrayAlloc, TVMArrayCopyFromBytes, TVMArrayFree};
use tvmrt::function::{registry, Function};

static ROWS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Asserts a failed call: `rc == -1`, the classic text starts with `kind: ` and contains
/// `needle`. Records the row and returns the message.
fn refused(what: &str, rc: c_int, kind: &str, needle: &str) -> String {
    // SAFETY: a NUL-terminated string valid until the next call on this thread.
    let text = unsafe { CStr::from_ptr(TVMGetLastError()) }
        .to_string_lossy()
        .into_owned();
    assert_eq!(rc, -1, "{what}: expected -1, got {rc}");
    // An empty kind: the text is the caller's own, passed through as TVM does.
    assert!(
        kind.is_empty() || text.starts_with(&format!("{kind}: ")),
        "{what}: expected a {kind}, got {text:?}"
    );
    assert!(text.contains(needle), "{what}: {needle:?} not in {text:?}");
    let first_line = text.lines().next().unwrap_or_default().to_string();
    let row = format!("| {what} | -1 | `{first_line}` |");
    // Printed at once too, so a failure later still shows the rows before it.
    println!("{row}");
    ROWS.lock().unwrap().push(row);
    text
}

fn load(path: &str) -> (c_int, *mut c_void) {
    let mut m = std::ptr::null_mut();
    // SAFETY: valid strings and out pointer.
    let rc = unsafe { TVMModLoadFromFile(cstr(path).as_ptr(), cstr("").as_ptr(), &mut m) };
    (rc, m)
}

/// A copy of `fixture` with the bytes of its blob patched at `patches` (offsets from the
/// start of the blob symbol).
fn patched(fixture: &str, patches: &[(usize, &[u8])]) -> String {
    let file = std::fs::read(fixtures().join(fixture)).unwrap();
    let blob = std::fs::read(fixtures().join(fixture.replace(".so", ".blob.bin"))).unwrap();
    let at = find_bytes(&file, &blob).unwrap();
    let mut bytes = file.clone();
    for (off, p) in patches {
        bytes[at + off..at + off + p.len()].copy_from_slice(p);
    }
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let path = scratch("bad_input").join(format!("patched_{n}.so"));
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

fn call(f: *mut c_void, values: &mut [TVMValue], codes: &mut [c_int]) -> c_int {
    let mut ret = TVMValue::default();
    let mut code = 0;
    // SAFETY: arrays of equal length; writable return slots; `f` live or null (checked).
    unsafe {
        TVMFuncCall(
            f,
            values.as_mut_ptr(),
            codes.as_mut_ptr(),
            values.len() as c_int,
            &mut ret,
            &mut code,
        )
    }
}

fn f32_array(shape: &[i64]) -> *mut DLTensor {
    let mut out = std::ptr::null_mut();
    // SAFETY: `shape` has `ndim` values; writable out pointer.
    let rc = unsafe {
        TVMArrayAlloc(
            shape.as_ptr(),
            shape.len() as c_int,
            2,
            32,
            1,
            1,
            0,
            &mut out,
        )
    };
    assert_eq!(rc, 0);
    out
}

unsafe extern "C" fn failing_callback(
    _args: *mut TVMValue,
    _codes: *mut c_int,
    _n: c_int,
    _ret: *mut c_void,
    _resource: *mut c_void,
) -> c_int {
    // SAFETY: a valid C string.
    unsafe { TVMAPISetLastError(c"my callback failed: bad state".as_ptr()) };
    -1
}

unsafe extern "C" fn silent_callback(
    _args: *mut TVMValue,
    _codes: *mut c_int,
    _n: c_int,
    _ret: *mut c_void,
    _resource: *mut c_void,
) -> c_int {
    -1
}

#[test]
fn bad_input_table() {
    let dir = scratch("bad_input");

    // --- Loading files -------------------------------------------------------------------
    let (rc, _) = load("/nonexistent/model.so");
    refused(
        "library file missing",
        rc,
        "ValueError",
        "cannot load library",
    );
    // A library apache-tvm 0.27 built for another CPU (tests/fixtures/cross).
    let other_cpu = if cfg!(target_arch = "aarch64") {
        ("riscv64", "RISC-V")
    } else {
        ("aarch64", "AArch64")
    };
    let path = fixtures().join(format!("cross/{}/model.so", other_cpu.0));
    let (rc, _) = load(path.to_str().unwrap());
    refused(
        "library built for another CPU",
        rc,
        "ValueError",
        &format!(
            "model.so is built for {} but this process runs on ",
            other_cpu.1
        ),
    );
    let not_elf = dir.join("text.so");
    std::fs::write(&not_elf, "not a library").unwrap();
    let (rc, _) = load(not_elf.to_str().unwrap());
    refused(
        "file is not a shared library",
        rc,
        "ValueError",
        "cannot load library",
    );
    let (rc, _) = load("/tmp/model.unknownfmt");
    refused(
        "unknown file format",
        rc,
        "ValueError",
        "no loader for `.unknownfmt` files",
    );
    let (rc, _) = load("/tmp/model");
    refused(
        "file name without extension, no format",
        rc,
        "ValueError",
        "cannot deduce the format",
    );

    // --- Corrupt blobs (mlp.so: size prefix, tree, keys at known offsets) -----------------
    let huge = u64::MAX.to_le_bytes();
    let (rc, _) = load(&patched("mlp.so", &[(0, &huge)]));
    refused(
        "blob size prefix larger than the symbol",
        rc,
        "ValueError",
        "size prefix",
    );
    let (rc, _) = load(&patched("mlp.so", &[(0, &6000u64.to_le_bytes())]));
    refused(
        "blob size prefix past the end of its symbol",
        rc,
        "ValueError",
        "truncated library blob",
    );
    let (rc, _) = load(&patched("mlp.so", &[(16, &1u64.to_le_bytes())]));
    refused(
        "import tree malformed",
        rc,
        "ValueError",
        "indptr[0] is 1, not 0",
    );
    let (rc, _) = load(&patched("mlp.so", &[(90, &[0u8; 8])]));
    refused(
        "payload rejected by its loader",
        rc,
        "ValueError",
        "invalid relax.VMExecutable",
    );
    let (rc, _) = load(&patched("mlp.so", &[(0, &5000u64.to_le_bytes())]));
    refused(
        "blob truncated (size prefix shrunk)",
        rc,
        "ValueError",
        "library blob",
    );
    let (rc, _) = load(&patched("mlp.so", &[(8, &huge)]));
    refused("blob vector count huge", rc, "ValueError", "indptr");
    let (rc, _) = load(&patched("mlp.so", &[(48, &7u64.to_le_bytes())]));
    refused("import index out of range", rc, "ValueError", "7");
    let (rc, _) = load(&patched("mlp.so", &[(48, &0u64.to_le_bytes())]));
    refused("module imports itself (cycle)", rc, "ValueError", "ycl");
    let (rc, _) = load(&patched("mlp.so", &[(81, b"X")]));
    refused(
        "module kind without a registered loader",
        rc,
        "ValueError",
        "no loader `ffi.Module.load_from_bytes.relax.VMExecutablX`",
    );

    // Decoder-level rows (no real library has these shapes), through the Rust API, whose
    // messages the C API returns behind `loading `<path>`: `.
    let mut body = Vec::new();
    for v in [2u64, 0, 0, 0, 4] {
        body.extend(v.to_le_bytes());
    }
    body.extend(b"_lib\x00");
    let e = tvmrt::module::blob::decode_ffi(&body).unwrap_err();
    assert!(e.message.contains("after the last module"), "{e}");
    ROWS.lock().unwrap().push(format!(
        "| bytes after the last module (decoder) | Err | `{e}` |"
    ));
    let mut classic = Vec::new();
    classic.extend(1u64.to_le_bytes());
    classic.extend(11u64.to_le_bytes());
    classic.extend(b"examplejson");
    classic.extend(b"abc");
    let e = tvmrt::module::blob::decode_classic(&classic, &|_, _| Ok(100)).unwrap_err();
    assert!(e.message.contains("claims 100 bytes"), "{e}");
    ROWS.lock().unwrap().push(format!(
        "| classic loader claims more than remains (decoder) | Err | `{e}` |"
    ));

    // --- Module payloads ------------------------------------------------------------------
    let mut create = std::ptr::null_mut();
    // SAFETY: valid name and out pointer.
    assert_eq!(
        unsafe {
            TVMFuncGetGlobal(
                cstr("module.examplejson_module_create").as_ptr(),
                &mut create,
            )
        },
        0
    );
    let text = cstr("subgraph_0\ninput 0 2\nconv 1 inputs: 0 shape: 2\n");
    let rc = call(
        create,
        &mut [TVMValue::c_str(text.as_ptr())],
        &mut [tc::STR],
    );
    refused(
        "ExampleJSON text with an unknown op",
        rc,
        "ValueError",
        "line 3",
    );

    // --- Calls ----------------------------------------------------------------------------
    let rc = call(std::ptr::null_mut(), &mut [], &mut []);
    refused("NULL function handle", rc, "ValueError", "func");
    let mut ret = TVMValue::default();
    let mut code = 0;
    // SAFETY: a negative count is refused before the (NULL) arrays are read.
    let rc = unsafe {
        TVMFuncCall(
            create,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            -1,
            &mut ret,
            &mut code,
        )
    };
    refused(
        "negative num_args",
        rc,
        "ValueError",
        "num_args must be >= 0, got -1",
    );
    let rc = call(create, &mut [TVMValue { v_int64: 0 }], &mut [99]);
    refused(
        "unknown type code",
        rc,
        "TypeError",
        "unknown classic type code 99",
    );
    let rc = call(create, &mut [TVMValue { v_int64: 5 }], &mut [tc::INT]);
    refused("argument of the wrong type", rc, "TypeError", "");
    let mut cb = std::ptr::null_mut();
    // SAFETY: a valid callback; writable out pointer.
    assert_eq!(
        unsafe {
            TVMFuncCreateFromCFunc(Some(failing_callback), std::ptr::null_mut(), None, &mut cb)
        },
        0
    );
    let rc = call(cb, &mut [], &mut []);
    refused(
        "C callback returns -1 after TVMAPISetLastError",
        rc,
        "",
        "my callback failed",
    );
    // On a fresh thread (nothing raised yet there: otherwise, as in TVM, the thread's earlier
    // error is what the caller sees).
    let mut silent = std::ptr::null_mut();
    assert_eq!(
        // SAFETY: a valid callback and out pointer.
        unsafe {
            TVMFuncCreateFromCFunc(
                Some(silent_callback),
                std::ptr::null_mut(),
                None,
                &mut silent,
            )
        },
        0
    );
    let silent_addr = silent as usize;
    std::thread::spawn(move || {
        let rc = call(silent_addr as *mut c_void, &mut [], &mut []);
        refused(
            "C callback returns -1 without raising an error",
            rc,
            "",
            "returned -1 without setting an error",
        );
    })
    .join()
    .unwrap();
    // SAFETY: the handle this test created.
    assert_eq!(unsafe { TVMFuncFree(silent) }, 0);
    registry::register(
        "reliability.panics",
        Function::from_fn(|_| panic!("deliberate panic in a Rust callback")),
        true,
    )
    .unwrap();
    let mut p = std::ptr::null_mut();
    // SAFETY: valid name and out pointer.
    assert_eq!(
        unsafe { TVMFuncGetGlobal(cstr("reliability.panics").as_ptr(), &mut p) },
        0
    );
    let rc = call(p, &mut [], &mut []);
    refused(
        "a Rust callback panics",
        rc,
        "",
        "deliberate panic in a Rust callback",
    );

    // Kernels: wrong shapes, counts and dtypes are caught by TVM's generated checks.
    let (rc, m) = load(fixtures().join("add_dyn.so").to_str().unwrap());
    assert_eq!(rc, 0);
    let mut add = std::ptr::null_mut();
    // SAFETY: a live module; valid strings and out pointer.
    assert_eq!(
        unsafe { TVMModGetFunction(m, cstr("add").as_ptr(), 0, &mut add) },
        0
    );
    let (a, b, c) = (f32_array(&[4]), f32_array(&[5]), f32_array(&[4]));
    let h = |t: *mut DLTensor| TVMValue::handle(t.cast());
    let rc = call(add, &mut [h(a), h(b), h(c)], &mut [tc::NDARRAY_HANDLE; 3]);
    refused("kernel given mismatched shapes", rc, "ValueError", "");
    let rc = call(add, &mut [h(a), h(c)], &mut [tc::NDARRAY_HANDLE; 2]);
    refused("kernel given too few arguments", rc, "TypeError", "");
    let rc = call(
        add,
        &mut [h(a), TVMValue { v_int64: 1 }, h(c)],
        &mut [tc::NDARRAY_HANDLE, tc::INT, tc::NDARRAY_HANDLE],
    );
    refused("kernel given an int for a tensor", rc, "TypeError", "");
    let mut missing = std::ptr::null_mut();
    // SAFETY: as above.
    let rc = unsafe { TVMModGetFunction(m, cstr("no_such_fn").as_ptr(), 0, &mut missing) };
    assert_eq!(
        (rc, missing),
        (0, std::ptr::null_mut()),
        "missing function: 0 and NULL, as TVM"
    );
    ROWS.lock().unwrap().push(
        "| TVMModGetFunction / TVMFuncGetGlobal: unknown name | 0 | `*out` set to NULL (as TVM) |"
            .into(),
    );
    // SAFETY: `add` is a function handle, not a module.
    let rc = unsafe { TVMModFree(add) };
    refused("function handle passed as a module", rc, "TypeError", "");

    // ExampleJSON kernel arguments.
    let ej = cstr("subgraph_0\ninput 0 4\nrelu 1 inputs: 0 shape: 4\n");
    let mut ret = TVMValue::default();
    let mut code = 0;
    let mut args = [TVMValue::c_str(ej.as_ptr())];
    let mut codes = [tc::STR];
    // SAFETY: as `call`.
    assert_eq!(
        unsafe {
            TVMFuncCall(
                create,
                args.as_mut_ptr(),
                codes.as_mut_ptr(),
                1,
                &mut ret,
                &mut code,
            )
        },
        0
    );
    let ej_mod = unsafe { ret.v_handle };
    let mut sg = std::ptr::null_mut();
    // SAFETY: a live module; valid strings and out pointer.
    assert_eq!(
        unsafe { TVMModGetFunction(ej_mod, cstr("subgraph_0").as_ptr(), 0, &mut sg) },
        0
    );
    let rc = call(sg, &mut [h(b), h(c)], &mut [tc::NDARRAY_HANDLE; 2]);
    refused(
        "ExampleJSON function given a wrong shape",
        rc,
        "ValueError",
        "",
    );

    // --- Tensors --------------------------------------------------------------------------
    let mut out = std::ptr::null_mut();
    let neg = [2i64, -3];
    // SAFETY: `neg` has 2 values; writable out.
    let rc = unsafe { TVMArrayAlloc(neg.as_ptr(), 2, 2, 32, 1, 1, 0, &mut out) };
    refused("negative dimension", rc, "ValueError", "negative");
    let big = [i64::MAX, 4];
    // SAFETY: as above.
    let rc = unsafe { TVMArrayAlloc(big.as_ptr(), 2, 2, 32, 1, 1, 0, &mut out) };
    refused("shape whose size overflows", rc, "ValueError", "");
    // SAFETY: as above.
    let rc = unsafe { TVMArrayAlloc(neg.as_ptr(), 1, 2, 7, 1, 1, 0, &mut out) };
    refused("unsupported dtype (float7)", rc, "TypeError", "");
    let one = [4i64];
    // SAFETY: as above.
    let rc = unsafe { TVMArrayAlloc(one.as_ptr(), 1, 2, 32, 1, 10, 0, &mut out) };
    refused("device without a back end", rc, "ValueError", "");
    let mut bytes = [0u8; 3];
    // SAFETY: `a` is live; 3 readable bytes.
    let rc = unsafe { TVMArrayCopyFromBytes(a, bytes.as_mut_ptr().cast(), 3) };
    refused(
        "copy with the wrong byte count",
        rc,
        "ValueError",
        "expected 16 bytes, got 3",
    );
    let mut shape = [4i64];
    let mut managed = DLManagedTensorVersioned {
        version: tvmrt::abi::DLPackVersion { major: 2, minor: 0 },
        manager_ctx: std::ptr::null_mut(),
        deleter: None,
        // SAFETY: the flags are a `u64` bit set; all-zero is "no flags".
        flags: unsafe { std::mem::zeroed() },
        dl_tensor: DLTensor {
            data: bytes.as_mut_ptr().cast(),
            device: tvmrt::abi::DLDevice {
                device_type: tvmrt::abi::DLDeviceType::CPU,
                device_id: 0,
            },
            ndim: 1,
            dtype: tvmrt::dtype::dtypes::UINT8,
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
    };
    let mut t = std::ptr::null_mut();
    // SAFETY: a live managed tensor we own; writable out.
    let rc = unsafe { TVMFFITensorFromDLPackVersioned(&mut managed, 0, 0, &mut t) };
    refused(
        "DLPack tensor of another major version",
        rc,
        "ValueError",
        "major version 2",
    );
    managed.version.major = 1;
    managed.dl_tensor.data = std::ptr::null_mut();
    // SAFETY: as above.
    let rc = unsafe { TVMFFITensorFromDLPackVersioned(&mut managed, 0, 0, &mut t) };
    refused(
        "DLPack tensor with null data",
        rc,
        "ValueError",
        "data is null",
    );

    // --- Registry -------------------------------------------------------------------------
    // SAFETY: valid name and handle.
    let rc = unsafe { TVMFuncRegisterGlobal(cstr("reliability.panics").as_ptr(), cb, 0) };
    refused(
        "register an existing name without override",
        rc,
        "ValueError",
        "reliability.panics",
    );
    // SAFETY: valid name and handle.
    let rc = unsafe { TVMFuncRegisterGlobal(cstr("").as_ptr(), cb, 1) };
    refused(
        "register an empty name",
        rc,
        "ValueError",
        "must not be empty",
    );
    // SAFETY: a valid name.
    let rc = unsafe { TVMFuncRemoveGlobal(cstr("reliability.no_such").as_ptr()) };
    refused(
        "remove an unknown global",
        rc,
        "AttributeError",
        "reliability.no_such",
    );

    // SAFETY: handles we own.
    unsafe {
        for t in [a, b, c] {
            TVMArrayFree(t);
        }
        TVMFuncFree(add);
        TVMFuncFree(sg);
        TVMFuncFree(cb);
        TVMFuncFree(p);
        TVMFuncFree(create);
        TVMModFree(m);
        TVMModFree(ej_mod);
    }
    registry::remove("reliability.panics");
    println!("| bad input | returns | TVMGetLastError() |\n|---|---|---|");
    for r in ROWS.lock().unwrap().iter() {
        println!("{r}");
    }
}
