//! Stress and unloading.
//!
//! `stress_mixed_operations`: 8 threads for 10 s (`TVMRT_STRESS_SECS` changes it) through the
//! C API, mixing global registration, lookup, calls and removal; C callbacks; module loads and
//! frees of real TVM 0.27 libraries (the same files from several threads at once, so library
//! states are shared and torn down concurrently); kernel calls, parallel ones included
//! (`parallel.so` `matmul_dyn_m`, which launches on the shared pool from every thread); tensor
//! allocation and copies; ExampleJSON modules. Every result is checked. A watchdog aborts the
//! process with a message if the run is not over after 60 s (a deadlock). Memory: the resident
//! set is measured after a warm-up round of the same mix and again after the run; it must come
//! back to within [`RSS_TOLERANCE`] (see there for why a tolerance at all).
//!
//! `unloading_*`: a module freed while its functions are still held keeps its library mapped
//! (checked in /proc/self/maps); the last release unmaps it; functions of freed modules stay
//! callable while held.

mod reliability_support;

use std::ffi::{c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reliability_support::*;
use tvmrt::abi::{type_code as tc, DLTensor, TVMValue};
use tvmrt::capi::classic_error::TVMGetLastError;
use tvmrt::capi::classic_func::{
    TVMCFuncSetReturn, TVMFuncCall, TVMFuncCreateFromCFunc, TVMFuncFree, TVMFuncGetGlobal,
    TVMFuncRegisterGlobal, TVMFuncRemoveGlobal,
};
use tvmrt::capi::module::{TVMModFree, TVMModGetFunction, TVMModLoadFromFile};
use tvmrt::capi::tensor::{
    TVMArrayAlloc, TVMArrayCopyFromBytes, TVMArrayCopyToBytes, TVMArrayFree,
};

const THREADS: usize = 8;
const WATCHDOG: Duration = Duration::from_secs(60);
/// How far the resident set may end above its post-warm-up level. glibc's malloc keeps freed
/// memory in its per-thread arenas instead of returning it to the system, and which arena a
/// thread gets varies from run to run, so the same work can leave some more pages resident
/// (0.3 MiB in a 10 s debug run here). A leak exceeds 8 MiB quickly: each run does thousands of
/// operations (about 7000 in 10 s in a debug build), so losing 1.2 KiB per operation, any
/// tensor (up to 256 KiB each), or a library mapping per load would show.
const RSS_TOLERANCE: u64 = 8 << 20;

fn last_error() -> String {
    // SAFETY: a NUL-terminated string valid until the next call on this thread.
    unsafe { CStr::from_ptr(TVMGetLastError()) }
        .to_string_lossy()
        .into_owned()
}

/// Panics with the thread's last error when `rc` is not 0.
fn ok(rc: c_int, what: &str) {
    assert_eq!(rc, 0, "{what} failed: {}", last_error());
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// An f32 CPU array through the C API, released on drop.
struct Array(*mut DLTensor);

impl Array {
    fn f32(shape: &[i64]) -> Array {
        let mut out: *mut DLTensor = std::ptr::null_mut();
        // SAFETY: `shape` holds `ndim` values; `out` is writable.
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
        ok(rc, "TVMArrayAlloc");
        Array(out)
    }
    fn fill(&self, values: &[f32]) {
        // SAFETY: a live array of exactly this many bytes (checked by the callee).
        let rc = unsafe {
            TVMArrayCopyFromBytes(self.0, values.as_ptr() as *mut c_void, values.len() * 4)
        };
        ok(rc, "TVMArrayCopyFromBytes");
    }
    fn read(&self, n: usize) -> Vec<f32> {
        let mut v = vec![0f32; n];
        // SAFETY: as above.
        let rc = unsafe { TVMArrayCopyToBytes(self.0, v.as_mut_ptr().cast(), n * 4) };
        ok(rc, "TVMArrayCopyToBytes");
        v
    }
    fn arg(&self, as_ndarray: bool) -> (TVMValue, c_int) {
        (
            TVMValue::handle(self.0.cast()),
            if as_ndarray {
                tc::NDARRAY_HANDLE
            } else {
                tc::DL_TENSOR_HANDLE
            },
        )
    }
}

impl Drop for Array {
    fn drop(&mut self) {
        // SAFETY: the handle we own.
        ok(unsafe { TVMArrayFree(self.0) }, "TVMArrayFree");
    }
}

/// Calls `f` with classic arguments; returns the (value, code) result.
fn call(f: *mut c_void, args: &[(TVMValue, c_int)]) -> (TVMValue, c_int) {
    let mut values: Vec<TVMValue> = args.iter().map(|a| a.0).collect();
    let mut codes: Vec<c_int> = args.iter().map(|a| a.1).collect();
    let mut ret = TVMValue::default();
    let mut code = 0;
    // SAFETY: a live function; arrays of `args.len()` entries; writable return slots.
    let rc = unsafe {
        TVMFuncCall(
            f,
            values.as_mut_ptr(),
            codes.as_mut_ptr(),
            args.len() as c_int,
            &mut ret,
            &mut code,
        )
    };
    ok(rc, "TVMFuncCall");
    (ret, code)
}

fn int(v: i64) -> (TVMValue, c_int) {
    (TVMValue { v_int64: v }, tc::INT)
}

/// A module handle, freed on drop.
struct Mod(*mut c_void);

impl Mod {
    fn load(fixture: &str) -> Mod {
        let path = cstr(fixtures().join(fixture).to_str().unwrap());
        let mut m = std::ptr::null_mut();
        // SAFETY: valid strings and out pointer.
        let rc = unsafe { TVMModLoadFromFile(path.as_ptr(), cstr("so").as_ptr(), &mut m) };
        ok(rc, "TVMModLoadFromFile");
        Mod(m)
    }
    fn func(&self, name: &str) -> Func {
        let mut f = std::ptr::null_mut();
        // SAFETY: a live module; valid strings and out pointer.
        let rc = unsafe { TVMModGetFunction(self.0, cstr(name).as_ptr(), 1, &mut f) };
        ok(rc, "TVMModGetFunction");
        assert!(!f.is_null(), "{name} not found");
        Func(f)
    }
}

impl Drop for Mod {
    fn drop(&mut self) {
        // SAFETY: the handle we own.
        ok(unsafe { TVMModFree(self.0) }, "TVMModFree");
    }
}

/// A function handle, freed on drop.
struct Func(*mut c_void);

// SAFETY: function handles may be used and released from any thread (tvmrt's objects are
// reference counted atomically and its functions callable from any thread).
unsafe impl Send for Func {}
// SAFETY: as above; calls through a shared handle do not mutate it.
unsafe impl Sync for Func {}

impl Drop for Func {
    fn drop(&mut self) {
        // SAFETY: the handle we own.
        ok(unsafe { TVMFuncFree(self.0) }, "TVMFuncFree");
    }
}

/// A C callback: returns `args[0] * 3 + args[1]`.
unsafe extern "C" fn triple_plus(
    args: *mut TVMValue,
    codes: *mut c_int,
    n: c_int,
    ret: *mut c_void,
    _resource: *mut c_void,
) -> c_int {
    assert_eq!(n, 2);
    // SAFETY: two int arguments per the calls below.
    let (a, b, ca, cb) = unsafe {
        (
            (*args).v_int64,
            (*args.add(1)).v_int64,
            *codes,
            *codes.add(1),
        )
    };
    assert_eq!((ca, cb), (tc::INT, tc::INT));
    let mut v = TVMValue { v_int64: a * 3 + b };
    let mut c = tc::INT;
    // SAFETY: `ret` is the handle we were given; one value.
    unsafe { TVMCFuncSetReturn(ret, &mut v, &mut c, 1) }
}

/// Registration, lookup, calls and removal of globals private to this thread and iteration,
/// and lookups of a shared one.
fn op_registry(thread: usize, iter: u64) {
    let name = cstr(&format!("stress.t{thread}.i{}", iter % 4));
    let mut f = std::ptr::null_mut();
    // SAFETY: a valid callback without resource or finalizer; writable out pointer.
    ok(
        unsafe { TVMFuncCreateFromCFunc(Some(triple_plus), std::ptr::null_mut(), None, &mut f) },
        "TVMFuncCreateFromCFunc",
    );
    let f = Func(f);
    // SAFETY: valid name and handle.
    ok(
        unsafe { TVMFuncRegisterGlobal(name.as_ptr(), f.0, 1) },
        "TVMFuncRegisterGlobal",
    );
    drop(f);
    let mut g = std::ptr::null_mut();
    // SAFETY: valid name and out pointer.
    ok(
        unsafe { TVMFuncGetGlobal(name.as_ptr(), &mut g) },
        "TVMFuncGetGlobal",
    );
    assert!(!g.is_null());
    let g = Func(g);
    let (v, code) = call(g.0, &[int(iter as i64), int(thread as i64)]);
    assert_eq!(code, tc::INT);
    // SAFETY: an int result.
    assert_eq!(unsafe { v.v_int64 }, iter as i64 * 3 + thread as i64);
    // SAFETY: a valid name.
    ok(
        unsafe { TVMFuncRemoveGlobal(name.as_ptr()) },
        "TVMFuncRemoveGlobal",
    );
    // The removed function still works through the handle we hold.
    let (v, _) = call(g.0, &[int(1), int(1)]);
    // SAFETY: an int result.
    assert_eq!(unsafe { v.v_int64 }, 4);
    drop(g);
    let mut shared = std::ptr::null_mut();
    // SAFETY: valid name and out pointer.
    ok(
        unsafe { TVMFuncGetGlobal(cstr("stress.shared").as_ptr(), &mut shared) },
        "TVMFuncGetGlobal(shared)",
    );
    let shared = Func(shared);
    let (v, _) = call(shared.0, &[int(5), int(2)]);
    // SAFETY: an int result.
    assert_eq!(unsafe { v.v_int64 }, 17);
}

/// Loads a kernel library, calls it, frees everything (the same file is loaded by other
/// threads at the same time).
fn op_module(iter: u64) {
    let (lib, name) = if iter.is_multiple_of(2) {
        ("add_dyn.so", "add")
    } else {
        ("two_funcs.so", "inner")
    };
    let m = Mod::load(lib);
    let f = m.func(name);
    let n = 1 + (iter % 97) as usize;
    let a = Array::f32(&[n as i64]);
    let b = Array::f32(&[n as i64]);
    let c = Array::f32(&[n as i64]);
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let ys: Vec<f32> = (0..n).map(|i| (i * 2) as f32 + 0.5).collect();
    a.fill(&xs);
    b.fill(&ys);
    let as_nd = !iter.is_multiple_of(3);
    if name == "add" {
        drop(m); // The function keeps the library loaded.
        call(f.0, &[a.arg(as_nd), b.arg(as_nd), c.arg(as_nd)]);
        let expect: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| x + y).collect();
        assert_eq!(c.read(n), expect);
    } else {
        call(f.0, &[a.arg(as_nd), c.arg(as_nd)]);
        let expect: Vec<f32> = xs.iter().map(|x| x * 2.0).collect();
        assert_eq!(c.read(n), expect);
        drop(m);
    }
}

/// A parallel kernel launched from this thread while others launch too.
fn op_parallel(matmul: &Func, iter: u64) {
    let m = 1 + (iter % 4) as usize;
    let a = Array::f32(&[m as i64, 256]);
    let b = Array::f32(&[256, 256]);
    let c = Array::f32(&[m as i64, 256]);
    let av: Vec<f32> = (0..m * 256).map(|i| ((i % 5) as f32) - 2.0).collect();
    let bv: Vec<f32> = (0..256 * 256).map(|i| ((i % 7) as f32) - 3.0).collect();
    a.fill(&av);
    b.fill(&bv);
    call(matmul.0, &[a.arg(true), b.arg(true), c.arg(true)]);
    let out = c.read(m * 256);
    // Small integers: every sum is exact in f32, in any order.
    for (i, j) in [(0usize, 0usize), (m - 1, 255), (m / 2, 17)] {
        let expect: f32 = (0..256).map(|k| av[i * 256 + k] * bv[k * 256 + j]).sum();
        assert_eq!(out[i * 256 + j], expect, "C[{i}][{j}]");
    }
}

/// Tensor allocation and copies of various sizes.
fn op_tensor(iter: u64) {
    let n = 1 + ((iter * 7919) % 65536) as usize;
    let a = Array::f32(&[n as i64]);
    let v: Vec<f32> = (0..n).map(|i| (i as f32) * 0.5).collect();
    a.fill(&v);
    assert_eq!(a.read(n), v);
}

/// An ExampleJSON module made through the registry and called.
fn op_examplejson(iter: u64) {
    let mut create = std::ptr::null_mut();
    // SAFETY: valid name and out pointer.
    ok(
        unsafe {
            TVMFuncGetGlobal(
                cstr("module.examplejson_module_create").as_ptr(),
                &mut create,
            )
        },
        "TVMFuncGetGlobal(examplejson)",
    );
    let create = Func(create);
    let text = cstr("subgraph_0\ninput 0 8\ninput 1 8\nmul 2 inputs: 0 1 shape: 8\n");
    let (v, code) = call(create.0, &[(TVMValue::c_str(text.as_ptr()), tc::STR)]);
    assert_eq!(code, tc::MODULE_HANDLE);
    // SAFETY: a module handle we now own.
    let m = Mod(unsafe { v.v_handle });
    let f = m.func("subgraph_0");
    drop(m);
    let a = Array::f32(&[8]);
    let b = Array::f32(&[8]);
    let c = Array::f32(&[8]);
    let xs: Vec<f32> = (0..8).map(|i| (i + iter as usize % 3) as f32).collect();
    a.fill(&xs);
    b.fill(&xs);
    call(f.0, &[a.arg(true), b.arg(true), c.arg(true)]);
    let expect: Vec<f32> = xs.iter().map(|x| x * x).collect();
    assert_eq!(c.read(8), expect);
}

/// Runs the mix on `THREADS` threads until `duration` has passed; returns the operation count.
fn run_mix(duration: Duration, matmul: &Arc<Func>) -> u64 {
    let total = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + duration;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let total = total.clone();
            let matmul = matmul.clone();
            std::thread::Builder::new()
                .name(format!("stress-{t}"))
                .spawn(move || {
                    let mut iter = 0u64;
                    while Instant::now() < deadline {
                        match (iter + t as u64) % 6 {
                            0 | 1 => op_registry(t, iter),
                            2 => op_module(iter),
                            3 => op_parallel(&matmul, iter),
                            4 => op_tensor(iter),
                            _ => op_examplejson(iter),
                        }
                        iter += 1;
                    }
                    total.fetch_add(iter, Ordering::Relaxed);
                })
                .unwrap()
        })
        .collect();
    let mut failed = Vec::new();
    for (t, h) in handles.into_iter().enumerate() {
        if let Err(e) = h.join() {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("thread {t}: {msg}"));
        }
    }
    assert!(
        failed.is_empty(),
        "stress threads failed:\n{}",
        failed.join("\n")
    );
    total.load(Ordering::Relaxed)
}

#[test]
fn stress_mixed_operations() {
    let secs: f64 = std::env::var("TVMRT_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10.0);
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            while !done.load(Ordering::SeqCst) {
                if start.elapsed() > WATCHDOG {
                    eprintln!(
                        "stress_mixed_operations: not finished after {WATCHDOG:?}: deadlock; \
                         aborting"
                    );
                    std::process::abort();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let mut shared = std::ptr::null_mut();
    // SAFETY: a valid callback; writable out pointer.
    ok(
        unsafe {
            TVMFuncCreateFromCFunc(Some(triple_plus), std::ptr::null_mut(), None, &mut shared)
        },
        "TVMFuncCreateFromCFunc",
    );
    let shared = Func(shared);
    // SAFETY: valid name and handle.
    ok(
        unsafe { TVMFuncRegisterGlobal(cstr("stress.shared").as_ptr(), shared.0, 1) },
        "TVMFuncRegisterGlobal",
    );
    drop(shared);
    let parallel = Mod::load("parallel.so");
    let matmul = Arc::new(parallel.func("matmul_dyn_m"));
    drop(parallel);

    // Warm-up: the same mix, so pools, arenas, thread-locals and caches exist before measuring.
    let warm_ops = run_mix(
        Duration::from_secs_f64((secs / 5.0).clamp(0.2, 2.0)),
        &matmul,
    );
    let rss_before = rss_bytes();
    let t0 = Instant::now();
    let ops = run_mix(Duration::from_secs_f64(secs), &matmul);
    let elapsed = t0.elapsed();
    let rss_after = rss_bytes();
    done.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();

    drop(matmul);
    // SAFETY: valid name.
    ok(
        unsafe { TVMFuncRemoveGlobal(cstr("stress.shared").as_ptr()) },
        "TVMFuncRemoveGlobal",
    );
    let left: Vec<String> = tvmrt::function::registry::list_names()
        .into_iter()
        .filter(|n| n.starts_with("stress."))
        .collect();
    assert!(
        left.is_empty(),
        "globals registered by the run are left: {left:?}"
    );
    for lib in ["parallel.so", "add_dyn.so", "two_funcs.so"] {
        assert!(
            !is_mapped(lib),
            "{lib} still mapped after every handle was freed"
        );
    }
    println!(
        "stress: {THREADS} threads, {ops} operations in {elapsed:.1?} ({:.0}/s; warm-up {warm_ops}); \
         RSS {:.1} MiB -> {:.1} MiB",
        ops as f64 / elapsed.as_secs_f64(),
        rss_before as f64 / (1 << 20) as f64,
        rss_after as f64 / (1 << 20) as f64
    );
    assert!(ops > THREADS as u64, "the threads made no progress");
    assert!(
        rss_after <= rss_before + RSS_TOLERANCE,
        "resident memory grew from {rss_before} to {rss_after} bytes (tolerance {RSS_TOLERANCE})"
    );
}

#[test]
fn unloading_keeps_the_library_while_functions_are_held() {
    // A private copy, so no other test of this executable maps the same file.
    let dir = scratch("unload");
    let copy = dir.join("unload_add_dyn.so");
    std::fs::copy(fixtures().join("add_dyn.so"), &copy).unwrap();
    let path = cstr(copy.to_str().unwrap());
    assert!(!is_mapped("unload_add_dyn.so"));

    let mut m = std::ptr::null_mut();
    // SAFETY: valid strings and out pointer.
    ok(
        unsafe { TVMModLoadFromFile(path.as_ptr(), cstr("so").as_ptr(), &mut m) },
        "load",
    );
    let m = Mod(m);
    assert!(is_mapped("unload_add_dyn.so"));
    let f1 = m.func("add");
    let f2 = m.func("add");
    // A second load of the same file shares the mapping.
    let mut m2 = std::ptr::null_mut();
    // SAFETY: as above.
    ok(
        unsafe { TVMModLoadFromFile(path.as_ptr(), cstr("so").as_ptr(), &mut m2) },
        "load 2",
    );
    let m2 = Mod(m2);
    drop(m);
    assert!(
        is_mapped("unload_add_dyn.so"),
        "unmapped while functions are held"
    );
    drop(m2);
    assert!(
        is_mapped("unload_add_dyn.so"),
        "unmapped while functions are held"
    );

    // Still callable after every module handle is gone.
    let a = Array::f32(&[4]);
    let b = Array::f32(&[4]);
    let c = Array::f32(&[4]);
    a.fill(&[1.0, 2.0, 3.0, 4.0]);
    b.fill(&[10.0, 20.0, 30.0, 40.0]);
    call(f1.0, &[a.arg(true), b.arg(true), c.arg(true)]);
    assert_eq!(c.read(4), vec![11.0, 22.0, 33.0, 44.0]);
    drop(f1);
    assert!(
        is_mapped("unload_add_dyn.so"),
        "unmapped while a function is held"
    );
    call(f2.0, &[a.arg(false), b.arg(false), c.arg(false)]);
    assert_eq!(c.read(4), vec![11.0, 22.0, 33.0, 44.0]);
    drop(f2);
    assert!(
        !is_mapped("unload_add_dyn.so"),
        "still mapped after the last function was freed"
    );

    // Loading it again after the unmap works (a fresh mapping, not a stale state).
    let m = Mod(load_ptr(&path));
    let f = m.func("add");
    drop(m);
    call(f.0, &[a.arg(true), b.arg(true), c.arg(true)]);
    assert_eq!(c.read(4), vec![11.0, 22.0, 33.0, 44.0]);
    drop(f);
    assert!(!is_mapped("unload_add_dyn.so"));
}

fn load_ptr(path: &CStr) -> *mut c_void {
    let mut m = std::ptr::null_mut();
    // SAFETY: valid strings and out pointer.
    ok(
        unsafe { TVMModLoadFromFile(path.as_ptr(), cstr("so").as_ptr(), &mut m) },
        "load",
    );
    m
}

#[test]
fn unloading_a_global_registration_keeps_the_library() {
    let dir = scratch("unload_global");
    let copy = dir.join("unload_global_two_funcs.so");
    std::fs::copy(fixtures().join("two_funcs.so"), &copy).unwrap();
    let path = cstr(copy.to_str().unwrap());
    let m = Mod(load_ptr(&path));
    let inner = m.func("inner");
    // The registry holds a reference of its own to a library function.
    let gname = cstr("reliability.unload.inner");
    // SAFETY: valid name and handle.
    ok(
        unsafe { TVMFuncRegisterGlobal(gname.as_ptr(), inner.0, 1) },
        "register",
    );
    drop(inner);
    drop(m);
    assert!(
        is_mapped("unload_global_two_funcs.so"),
        "unmapped while registered"
    );
    let mut g = std::ptr::null_mut();
    // SAFETY: valid name and out pointer.
    ok(unsafe { TVMFuncGetGlobal(gname.as_ptr(), &mut g) }, "get");
    let g = Func(g);
    let a = Array::f32(&[3]);
    let b = Array::f32(&[3]);
    a.fill(&[1.0, 2.0, 3.0]);
    call(g.0, &[a.arg(true), b.arg(true)]);
    assert_eq!(b.read(3), vec![2.0, 4.0, 6.0]);
    drop(g);
    // SAFETY: valid name.
    ok(unsafe { TVMFuncRemoveGlobal(gname.as_ptr()) }, "remove");
    assert!(
        !is_mapped("unload_global_two_funcs.so"),
        "still mapped after the registration, the last reference, was removed"
    );
}

static FINALIZED: AtomicU64 = AtomicU64::new(0);
static CALLED: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn counted_callback(
    _args: *mut TVMValue,
    _codes: *mut c_int,
    _n: c_int,
    _ret: *mut c_void,
    resource: *mut c_void,
) -> c_int {
    // The resource is live until the finalizer runs; calling after it would read freed memory.
    assert_eq!(
        FINALIZED.load(Ordering::SeqCst),
        0,
        "called after its finalizer ran"
    );
    // SAFETY: the resource is the boxed u64 made below, alive until the finalizer.
    assert_eq!(unsafe { *resource.cast::<u64>() }, 0xC0FFEE);
    CALLED.fetch_add(1, Ordering::SeqCst);
    0
}

unsafe extern "C" fn counted_finalizer(resource: *mut c_void) {
    // SAFETY: the box made below, released exactly once here.
    drop(unsafe { Box::from_raw(resource.cast::<u64>()) });
    FINALIZED.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn unloading_a_callback_finalizes_once_after_the_last_reference() {
    let resource = Box::into_raw(Box::new(0xC0FFEEu64)).cast::<c_void>();
    let mut f = std::ptr::null_mut();
    // SAFETY: a valid callback and finalizer for `resource`; writable out pointer.
    ok(
        unsafe {
            TVMFuncCreateFromCFunc(
                Some(counted_callback),
                resource,
                Some(counted_finalizer),
                &mut f,
            )
        },
        "TVMFuncCreateFromCFunc",
    );
    let f = Func(f);
    let name = cstr("reliability.unload.counted");
    // SAFETY: valid name and handle.
    ok(
        unsafe { TVMFuncRegisterGlobal(name.as_ptr(), f.0, 1) },
        "register",
    );
    let mut g = std::ptr::null_mut();
    // SAFETY: valid name and out pointer.
    ok(unsafe { TVMFuncGetGlobal(name.as_ptr(), &mut g) }, "get");
    let g = Func(g);
    drop(f);
    // SAFETY: valid name.
    ok(unsafe { TVMFuncRemoveGlobal(name.as_ptr()) }, "remove");
    assert_eq!(
        FINALIZED.load(Ordering::SeqCst),
        0,
        "finalized while a handle is held"
    );
    call(g.0, &[]);
    call(g.0, &[]);
    assert_eq!(CALLED.load(Ordering::SeqCst), 2);
    drop(g);
    assert_eq!(
        FINALIZED.load(Ordering::SeqCst),
        1,
        "finalized once, at the last release"
    );
}
