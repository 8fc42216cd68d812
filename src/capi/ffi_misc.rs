//! The rest of the tvm-ffi C API: the object allocator hook, errors with a cause, backtraces,
//! big integers, and the host-environment C functions (`tvm/ffi/c_api.h`,
//! `tvm/ffi/extra/c_env_api.h`).

use std::alloc::Layout;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use once_cell::sync::Lazy;
use parking_lot::RwLock;

use crate::abi::{deleter_flag, type_index as ti, AnyPayload, TVMFFIAny, TVMFFIByteArray};
use crate::capi::boundary::{c_str, non_null, run_or, write_out};
use crate::error::{Error, Result};
use crate::object::error_obj::new_error_with_cause;
use crate::object::type_registry::static_index;
use crate::object::{ObjectHeader, ObjectRef};

// ---------------------------------------------------------------------------------------------
// Custom allocator
// ---------------------------------------------------------------------------------------------

/// `TVMFFIObjectAllocHeader`: sits right before an object body from a custom allocator.
#[repr(C)]
pub struct TVMFFIObjectAllocHeader {
    pub delete_space: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// `TVMFFICustomAllocator`.
#[repr(C)]
pub struct TVMFFICustomAllocator {
    pub allocate: Option<unsafe extern "C" fn(usize, usize, i32, *mut c_void) -> *mut c_void>,
    pub context: *mut c_void,
}

/// The built-in allocator's bookkeeping, stored before the `TVMFFIObjectAllocHeader`: what
/// `delete_space`, which only gets the body pointer, needs to rebuild the layout.
#[repr(C)]
struct BlockRecord {
    prefix: usize,
    total: usize,
    align: usize,
}

/// Bytes reserved before the body for the record and the alloc header.
const BLOCK_META: usize = std::mem::size_of::<BlockRecord>() + std::mem::size_of::<usize>();

/// `delete_space` of the built-in allocator.
///
/// # Safety
/// `ptr` is a body returned by [`builtin_allocate`], not yet freed.
unsafe extern "C" fn builtin_delete_space(ptr: *mut c_void) {
    run_or("TVMFFIObjectAllocHeader.delete_space", (), || {
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: `builtin_allocate` wrote the record `BLOCK_META` bytes before the body.
        let rec = unsafe {
            ptr.cast::<u8>()
                .sub(BLOCK_META)
                .cast::<BlockRecord>()
                .read()
        };
        let layout = Layout::from_size_align(rec.total, rec.align)
            .map_err(|e| Error::runtime(format!("corrupt allocation record: {e}")))?;
        // SAFETY: the block starts `prefix` bytes before the body and was allocated with
        // exactly this layout.
        unsafe { std::alloc::dealloc(ptr.cast::<u8>().sub(rec.prefix), layout) };
        Ok(())
    })
}

/// The built-in object allocator (what `TVMFFIGetCustomAllocator` returns until another is
/// set): a body of `size` bytes aligned to `max(alignment, 16)`, preceded by an initialized
/// `TVMFFIObjectAllocHeader` whose `delete_space` frees the whole block. NULL with the error
/// raised on a bad alignment or size.
///
/// # Safety
/// Callable from any thread.
unsafe extern "C" fn builtin_allocate(
    size: usize,
    alignment: usize,
    _type_index: i32,
    _context: *mut c_void,
) -> *mut c_void {
    run_or(
        "TVMFFICustomAllocator.allocate",
        std::ptr::null_mut(),
        || {
            if !alignment.is_power_of_two() && alignment != 0 {
                return Err(Error::value(format!(
                    "allocate: alignment {alignment} is not a power of two"
                )));
            }
            let align = alignment.max(16);
            let prefix = BLOCK_META.div_ceil(align) * align;
            let total = prefix
                .checked_add(size)
                .ok_or_else(|| Error::value(format!("allocate: size {size} is too large")))?;
            let layout = Layout::from_size_align(total, align).map_err(|e| {
                Error::value(format!("allocate: size {size}, alignment {align}: {e}"))
            })?;
            // SAFETY: `total >= BLOCK_META > 0`.
            let base = unsafe { std::alloc::alloc(layout) };
            if base.is_null() {
                return Err(Error::runtime(format!(
                    "allocate: out of memory for {size} bytes"
                )));
            }
            // SAFETY: `prefix >= BLOCK_META` bytes precede the body inside the block; the record
            // and the header are pointer-aligned since `prefix` is a multiple of 16.
            unsafe {
                let body = base.add(prefix);
                body.sub(BLOCK_META)
                    .cast::<BlockRecord>()
                    .write(BlockRecord {
                        prefix,
                        total,
                        align,
                    });
                body.sub(std::mem::size_of::<usize>())
                    .cast::<TVMFFIObjectAllocHeader>()
                    .write(TVMFFIObjectAllocHeader {
                        delete_space: Some(builtin_delete_space),
                    });
                Ok(body.cast())
            }
        },
    )
}

/// Storage of the built-in allocator entry (C gets a mutable pointer to it, as in tvm-ffi).
struct BuiltinAllocator(UnsafeCell<TVMFFICustomAllocator>);
// SAFETY: tvmrt never writes the entry; a C caller that writes through the returned pointer
// takes on the synchronization, as tvm-ffi documents for its own entry.
unsafe impl Sync for BuiltinAllocator {}

static BUILTIN_ALLOCATOR: BuiltinAllocator =
    BuiltinAllocator(UnsafeCell::new(TVMFFICustomAllocator {
        allocate: Some(builtin_allocate),
        context: std::ptr::null_mut(),
    }));

/// The installed allocator; NULL means the built-in one.
static CUSTOM_ALLOCATOR: AtomicPtr<TVMFFICustomAllocator> = AtomicPtr::new(std::ptr::null_mut());

/// The process-wide object allocator (never NULL).
///
/// tvmrt's own objects are Rust allocations and do not go through it; it is kept for C and C++
/// code that allocates tvm-ffi objects itself and asks the runtime for the allocator in effect.
#[no_mangle]
pub extern "C" fn TVMFFIGetCustomAllocator() -> *mut TVMFFICustomAllocator {
    let builtin = BUILTIN_ALLOCATOR.0.get();
    run_or("TVMFFIGetCustomAllocator", builtin, || {
        let p = CUSTOM_ALLOCATOR.load(Ordering::Acquire);
        Ok(if p.is_null() { builtin } else { p })
    })
}

/// Installs the process-wide object allocator; NULL restores the built-in one. The allocator
/// must stay alive for the life of the process and have a non-NULL `allocate`.
///
/// # Safety
/// `allocator` is NULL or points to an entry that outlives the process's use of it.
#[no_mangle]
pub unsafe extern "C" fn TVMFFISetCustomAllocator(allocator: *mut TVMFFICustomAllocator) -> c_int {
    ffi_try!("TVMFFISetCustomAllocator", {
        // SAFETY: per the contract.
        if !allocator.is_null() && unsafe { (*allocator).allocate.is_none() } {
            return Err(Error::value(
                "TVMFFISetCustomAllocator: allocator->allocate is NULL",
            ));
        }
        CUSTOM_ALLOCATOR.store(allocator, Ordering::Release);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Errors and backtraces
// ---------------------------------------------------------------------------------------------

/// Text of an optional byte array (NULL is empty).
///
/// # Safety
/// `p` is null or a valid byte array.
unsafe fn lossy_bytes(p: *const TVMFFIByteArray) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: per the contract.
        String::from_utf8_lossy(unsafe { (*p).as_slice() }).into_owned()
    }
}

/// Creates an error object holding a cause (an error object) and an extra context (any
/// object); the new error takes its own references to both, which may be NULL.
///
/// # Safety
/// The byte arrays are null or valid; `cause_chain` and `extra_context` are null or live
/// objects; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIErrorCreateWithCauseAndExtraContext(
    kind: *const TVMFFIByteArray,
    message: *const TVMFFIByteArray,
    backtrace: *const TVMFFIByteArray,
    cause_chain: *mut c_void,
    extra_context: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    ffi_try!("TVMFFIErrorCreateWithCauseAndExtraContext", {
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let cause = unsafe { ObjectRef::from_raw_borrowed(cause_chain) };
        if let Some(c) = &cause {
            if c.type_index() != ti::ERROR {
                return Err(Error::type_error(format!(
                    "cause_chain must be an ffi.Error object, got type index {}",
                    c.type_index()
                )));
            }
        }
        // SAFETY: per the contract.
        let extra = unsafe { ObjectRef::from_raw_borrowed(extra_context) };
        // SAFETY: per the contract.
        let (kind, message, bt) = unsafe {
            (
                lossy_bytes(kind),
                lossy_bytes(message),
                lossy_bytes(backtrace),
            )
        };
        let mut err = Error::new(kind, message);
        err.backtrace = bt;
        let obj = new_error_with_cause(&err, cause, extra);
        // SAFETY: checked non-null above.
        unsafe { write_out(out, obj.into_raw(), "out") }
    })
}

thread_local! {
    static BACKTRACE_TEXT: RefCell<String> = const { RefCell::new(String::new()) };
    static BACKTRACE_ARRAY: Cell<TVMFFIByteArray> = const {
        Cell::new(TVMFFIByteArray { data: std::ptr::null(), size: 0 })
    };
}

/// The frame text `TVMFFIBacktrace` returns: tvm-ffi's fallback format without libbacktrace
/// (`src/ffi/backtrace.cc`), `  File "<filename>", line <lineno>, in <func>\n`, or empty when
/// either name is missing. tvmrt has no unwinder, so this is the caller's frame only.
pub fn backtrace_frame(filename: Option<&str>, lineno: i32, func: Option<&str>) -> String {
    match (filename, func) {
        (Some(file), Some(func)) => format!("  File \"{file}\", line {lineno}, in {func}\n"),
        _ => String::new(),
    }
}

/// The backtrace at the caller: a pointer to a thread-local byte array (the same address on
/// every call from a thread), whose data stays valid until the next call on the thread.
///
/// # Safety
/// `filename` and `func` are null or C strings.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBacktrace(
    filename: *const c_char,
    lineno: c_int,
    func: *const c_char,
    _cross_ffi_boundary: c_int,
) -> *const TVMFFIByteArray {
    let text = |p: *const c_char| {
        // SAFETY: per the contract.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    let frame = backtrace_frame(text(filename).as_deref(), lineno, text(func).as_deref());
    BACKTRACE_TEXT.with(|t| {
        let mut t = t.borrow_mut();
        *t = frame;
        let array = TVMFFIByteArray::from_slice(t.as_bytes());
        BACKTRACE_ARRAY.with(|a| {
            a.set(array);
            a.as_ptr().cast_const()
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Big integers
// ---------------------------------------------------------------------------------------------

/// Offset of the words in a big-int object: the header, then a `size_t` word count
/// (tvm-ffi `big_int.h`, `BigIntObj` and `BigIntUnsafe::GetArrayView`).
use crate::object::containers::key::BIG_INT_WORDS_OFFSET;

fn big_int_layout(words: usize) -> Result<Layout> {
    words
        .checked_mul(8)
        .and_then(|n| n.checked_add(BIG_INT_WORDS_OFFSET))
        .and_then(|n| Layout::from_size_align(n, 8).ok())
        .ok_or_else(|| Error::value(format!("big integer of {words} words is too large")))
}

/// Deleter of tvmrt's big-int objects (plain words: only the weak flag frees memory).
///
/// # Safety
/// Called by the reference-count protocol with a block from [`new_big_int`].
unsafe extern "C" fn big_int_deleter(ptr: *mut c_void, flags: i32) {
    run_or("big int deleter", (), || {
        if flags & deleter_flag::WEAK != 0 {
            // SAFETY: the word count sits right after the header and is never changed.
            let words = unsafe { ptr.cast::<u8>().add(24).cast::<usize>().read() };
            let layout = big_int_layout(words)?;
            // SAFETY: allocated by `new_big_int` with this layout.
            unsafe { std::alloc::dealloc(ptr.cast(), layout) };
        }
        Ok(())
    })
}

/// Allocates a big-int object holding `words` (already in minimal form, more than one word).
fn new_big_int(words: &[i64]) -> Result<ObjectRef> {
    let layout = big_int_layout(words.len())?;
    // SAFETY: the layout is non-zero sized.
    let block = unsafe { std::alloc::alloc(layout) };
    if block.is_null() {
        return Err(Error::runtime("out of memory for a big integer"));
    }
    // SAFETY: the block holds the header, the count and the words, 8-byte aligned.
    unsafe {
        block.cast::<ObjectHeader>().write(ObjectHeader {
            // One strong and one weak reference, as every new object (object.h).
            combined_ref_count: AtomicU64::new(1 | (1 << 32)),
            type_index: static_index::BIG_INT,
            padding: 0,
            deleter: Some(big_int_deleter),
        });
        block.add(24).cast::<usize>().write(words.len());
        std::ptr::copy_nonoverlapping(
            words.as_ptr(),
            block.add(BIG_INT_WORDS_OFFSET).cast::<i64>(),
            words.len(),
        );
        ObjectRef::from_raw_owned(block.cast()).ok_or_else(|| Error::runtime("null big-int block"))
    }
}

/// Builds an integer value from two's-complement words, least significant first: an `int` when
/// it fits 64 bits, else a `ffi.BigInt` object (index 78) in minimal form (redundant sign
/// words dropped, as tvm-ffi's `BigIntUnsafe::Normalize`).
pub fn big_int_from_words(words: &[i64]) -> Result<TVMFFIAny> {
    let mut n = words.len();
    while n > 1 && words[n - 1] == if words[n - 2] < 0 { -1 } else { 0 } {
        n -= 1;
    }
    if n <= 1 {
        let v = words.first().copied().unwrap_or(0);
        return Ok(TVMFFIAny {
            type_index: ti::INT,
            small_str_len: 0,
            payload: AnyPayload { v_int64: v },
        });
    }
    let obj = new_big_int(&words[..n])?;
    Ok(TVMFFIAny {
        type_index: static_index::BIG_INT,
        small_str_len: 0,
        payload: AnyPayload::ptr(obj.into_raw()),
    })
}

/// Makes an integer from native-endian int64 words, least significant first (`input->size`
/// a multiple of 8; empty is zero). `*out` owns the result.
///
/// # Safety
/// `input` is a valid byte array; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBigIntFromByteArray(
    input: *const TVMFFIByteArray,
    out: *mut TVMFFIAny,
) -> c_int {
    ffi_try!("TVMFFIBigIntFromByteArray", {
        non_null(input, "input")?;
        non_null(out, "out")?;
        // SAFETY: per the contract.
        let bytes = unsafe { (*input).as_slice() };
        if bytes.len() % 8 != 0 {
            return Err(Error::value(format!(
                "BigInt content must contain whole 64-bit words, got {} bytes",
                bytes.len()
            )));
        }
        let words: Vec<i64> = bytes
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().expect("8-byte chunk")))
            .collect();
        let value = big_int_from_words(&words)?;
        // SAFETY: checked non-null; writable per the contract.
        unsafe { write_out(out, value, "out") }
    })
}

/// Borrows the words of an `int` or `ffi.BigInt` value, least significant first; valid while
/// the value lives. Any other kind gives `{NULL, 0}` with a TypeError raised.
///
/// # Safety
/// `value` is null or a valid value that outlives the use of the result.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIBigIntGetContentByteArray(
    value: *const TVMFFIAny,
) -> TVMFFIByteArray {
    let empty = TVMFFIByteArray {
        data: std::ptr::null(),
        size: 0,
    };
    run_or("TVMFFIBigIntGetContentByteArray", empty, || {
        non_null(value, "value")?;
        // SAFETY: per the contract.
        let v = unsafe { &*value };
        match v.type_index {
            ti::INT => Ok(TVMFFIByteArray {
                // The payload's address, not its value: no read of the union.
                data: std::ptr::addr_of!(v.payload.v_int64).cast(),
                size: 8,
            }),
            static_index::BIG_INT => {
                // SAFETY: a big-int object: header, word count, words (big_int.h).
                unsafe {
                    let obj = v.payload.v_obj.cast::<u8>();
                    non_null(obj, "value->v_obj")?;
                    let words = obj.add(24).cast::<usize>().read();
                    Ok(TVMFFIByteArray {
                        data: obj.add(BIG_INT_WORDS_OFFSET).cast(),
                        size: words * 8,
                    })
                }
            }
            other => Err(Error::type_error(format!(
                "TVMFFIBigIntGetContentByteArray: expected int or ffi.BigInt, got {}",
                crate::value::type_name(other)
            ))),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Host-environment C functions
// ---------------------------------------------------------------------------------------------

/// Names the host environment may provide. tvm-ffi accepts the first three
/// (`extra/env_c_api.cc`), classic TVM also the Python reference-count pair (TVM 0.19
/// `src/runtime/registry.cc`, `EnvCAPIRegistry`); anything else is an error in both.
pub const ENV_CAPI_NAMES: &[&str] = &[
    "PyErr_CheckSignals",
    "PyGILState_Ensure",
    "PyGILState_Release",
    "Py_IncRef",
    "Py_DecRef",
];

static ENV_CAPI: Lazy<RwLock<HashMap<&'static str, usize>>> =
    Lazy::new(|| RwLock::new(HashMap::new()));

/// Records the host's C function `name` (one of [`ENV_CAPI_NAMES`]); a later call replaces it,
/// NULL removes it.
pub fn register_env_capi(name: &str, symbol: *mut c_void) -> Result<()> {
    let key = ENV_CAPI_NAMES.iter().find(|&&n| n == name).ok_or_else(|| {
        Error::value(format!(
            "unknown env API `{name}` (known: {})",
            ENV_CAPI_NAMES.join(", ")
        ))
    })?;
    let mut table = ENV_CAPI.write();
    if symbol.is_null() {
        table.remove(key);
    } else {
        table.insert(key, symbol as usize);
    }
    Ok(())
}

/// The host's C function `name`, if registered.
pub fn env_capi(name: &str) -> Option<*mut c_void> {
    ENV_CAPI.read().get(name).map(|&p| p as *mut c_void)
}

/// Runs `f` holding the host's interpreter lock when the host registered
/// `PyGILState_Ensure`/`PyGILState_Release` (classic TVM's `WithGIL`); otherwise runs it as is.
pub fn with_host_lock<R>(f: impl FnOnce() -> R) -> R {
    let (Some(ensure), Some(release)) = (
        env_capi("PyGILState_Ensure"),
        env_capi("PyGILState_Release"),
    ) else {
        return f();
    };
    // SAFETY: the host registered these under their Python C API names, with those signatures.
    let (ensure, release) = unsafe {
        (
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *mut c_void>(ensure),
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(release),
        )
    };
    // SAFETY: a host lock acquire/release pair around `f`.
    let state = unsafe { ensure() };
    let r = f();
    // SAFETY: releases what `ensure` returned.
    unsafe { release(state) };
    r
}

/// Polls the host for pending signals (`PyErr_CheckSignals` under the host lock): an error when
/// one is pending, nothing when the host registered no check.
pub fn env_check_signals() -> Result<()> {
    let Some(check) = env_capi("PyErr_CheckSignals") else {
        return Ok(());
    };
    // SAFETY: registered under the Python C API name, with its signature `int (*)(void)`.
    let check =
        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(check) };
    // SAFETY: the host's own check, called under its lock.
    let status = with_host_lock(|| unsafe { check() });
    if status != 0 {
        return Err(Error::new(
            "KeyboardInterrupt",
            "the host environment reported a pending signal",
        ));
    }
    Ok(())
}

/// Provides a host-environment C function under `name` (see [`ENV_CAPI_NAMES`]).
///
/// # Safety
/// `name` is a C string; `symbol` is NULL or a function with the signature its name implies.
#[no_mangle]
pub unsafe extern "C" fn TVMFFIEnvRegisterCAPI(name: *const c_char, symbol: *mut c_void) -> c_int {
    ffi_try!("TVMFFIEnvRegisterCAPI", {
        // SAFETY: per the contract.
        let name = unsafe { c_str(name, "name")? };
        register_env_capi(name, symbol)
    })
}
