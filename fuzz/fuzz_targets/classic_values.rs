//! Fuzz target: classic values at the C boundary.
//!
//! `TVMFuncCall` is called with fuzzed type codes and values on two registered functions: a
//! Rust echo (classic -> tvm-ffi conversion, then the return value back to classic) and a C
//! callback made with `TVMFuncCreateFromCFunc` (classic -> tvm-ffi -> classic again, then
//! `TVMCFuncSetReturn` and `TVMCbArgToReturn` on its arguments).
//!
//! Scalar codes (int, uint, float, bool, dtype, device, null, opaque handle) and unknown codes
//! carry fuzzed bits. Codes whose value is dereferenced (DLTensor*, objects, modules,
//! functions, NDArray handles, rvalue refs, C strings, TVMByteArray*) must hold valid pointers
//! by contract: the fuzzer picks which of the harness's own live objects, strings or arrays they
//! point to (string and byte contents are fuzzed). Every returned handle is released, and the
//! harness's objects must end with the reference counts they started with.
#![no_main]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tvmrt::abi::{
    type_code as tc, DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, TVMFFIByteArray, TVMValue,
};
use tvmrt::capi::classic_error::{TVMGetLastError, TVMObjectFree};
use tvmrt::capi::classic_func::{
    TVMCFuncSetReturn, TVMCbArgToReturn, TVMFuncCall, TVMFuncCreateFromCFunc, TVMFuncGetGlobal,
};
use tvmrt::capi::tensor::TVMArrayFree;
use tvmrt::contrib::examplejson::ExampleJsonModule;
use tvmrt::function::{registry, Function};
use tvmrt::object::ObjectRef;
use tvmrt::tensor::Tensor;
use tvmrt::value::{Any, AnyView};

/// Long-lived objects the pointer-typed codes may refer to.
struct Pool {
    objects: Vec<ObjectRef>,
    tensor: Tensor,
    echo: *mut c_void,
    callback: *mut c_void,
}

// SAFETY: only used from the fuzzing thread; the handles are process-lifetime references.
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

/// The C callback: sets its return value from argument `sel % n` and turns every argument
/// into an owned value (and releases it), as a C frontend would.
unsafe extern "C" fn callback(
    args: *mut TVMValue,
    codes: *mut c_int,
    n: c_int,
    ret: *mut c_void,
    _resource: *mut c_void,
) -> c_int {
    for i in 0..n.max(0) as usize {
        // SAFETY: `n` arguments per the calling convention.
        let (mut v, mut c) = unsafe { (*args.add(i), *codes.add(i)) };
        // SAFETY: one valid argument of this call.
        if unsafe { TVMCbArgToReturn(&mut v, &mut c) } == 0 {
            // SAFETY: an owned value from TVMCbArgToReturn.
            unsafe { release(v, c) };
        }
    }
    if n > 0 {
        // SAFETY: argument 0 of this call; `ret` is the handle we were given.
        return unsafe { TVMCFuncSetReturn(ret, args, codes, 1) };
    }
    0
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        registry::register(
            "fuzz.echo",
            Function::from_fn(|args: &[AnyView<'_>]| {
                Ok(match args.last() {
                    Some(v) => v.to_owned_any(),
                    None => Any::none(),
                })
            }),
            true,
        )
        .expect("registering the echo");
        let mut echo = std::ptr::null_mut();
        let name = CString::new("fuzz.echo").unwrap();
        // SAFETY: valid name and out pointer.
        assert_eq!(unsafe { TVMFuncGetGlobal(name.as_ptr(), &mut echo) }, 0);
        let mut cb = std::ptr::null_mut();
        // SAFETY: `callback` is callable from any thread; no resource, no finalizer.
        assert_eq!(
            unsafe { TVMFuncCreateFromCFunc(Some(callback), std::ptr::null_mut(), None, &mut cb) },
            0
        );
        let f32 = DLDataType {
            code: DLDataTypeCode::FLOAT,
            bits: 32,
            lanes: 1,
        };
        let cpu = DLDevice {
            device_type: DLDeviceType::CPU,
            device_id: 0,
        };
        let tensor = Tensor::empty(&[2, 3], f32, cpu).unwrap();
        let module = ExampleJsonModule::new("subgraph_0\ninput 0 2\nadd 1 inputs: 0 0 shape: 2\n")
            .unwrap()
            .into_module();
        let objects = vec![
            tvmrt::object::string::new_str("a string long enough to be an object"),
            tvmrt::object::string::new_bytes(b"bytes that are an object, not inline"),
            tvmrt::object::shape::new_shape(&[1, 2, 3]),
            tensor.object().clone(),
            module.into_object(),
            Function::from_fn(|_| Ok(Any::from(7i64))).into_object(),
        ];
        Pool {
            objects,
            tensor,
            echo,
            callback: cb,
        }
    })
}

/// Releases a value a call returned to us.
///
/// # Safety
/// `(v, c)` is a return value the caller owns.
unsafe fn release(v: TVMValue, c: c_int) {
    // SAFETY: per the contract, each arm reads the member the code names.
    unsafe {
        match c {
            tc::OBJECT_HANDLE | tc::MODULE_HANDLE | tc::PACKED_FUNC_HANDLE => {
                if !v.v_handle.is_null() {
                    assert_eq!(TVMObjectFree(v.v_handle), 0);
                }
            }
            tc::NDARRAY_HANDLE => {
                if !v.v_handle.is_null() {
                    assert_eq!(TVMArrayFree(v.v_handle.cast()), 0);
                }
            }
            tc::STR => {
                if !v.v_str.is_null() {
                    let _ = CStr::from_ptr(v.v_str).to_bytes().len();
                }
            }
            tc::BYTES => {
                let arr = v.v_handle.cast::<TVMFFIByteArray>();
                if !arr.is_null() && (*arr).size > 0 {
                    let bytes = std::slice::from_raw_parts((*arr).data.cast::<u8>(), (*arr).size);
                    let _ = bytes.iter().map(|&b| b as usize).sum::<usize>();
                }
            }
            _ => {}
        }
    }
}

#[path = "../common/input.rs"]
mod input;
use input::Input;

impl Input<'_> {
    fn bytes(&mut self) -> Vec<u8> {
        let n = (self.u8() % 40) as usize;
        (0..n).map(|_| self.u8()).collect()
    }
}

fuzz_target!(|data: &[u8]| {
    let pool = pool();
    let counts_before: Vec<u32> = pool.objects.iter().map(ObjectRef::strong_count).collect();
    let mut inp = Input(data);
    let target = if inp.u8() & 1 == 0 {
        pool.echo
    } else {
        pool.callback
    };
    let raw_n = inp.u8();
    let num_args: c_int = if raw_n >= 250 {
        -(raw_n as c_int)
    } else {
        (raw_n % 9) as c_int
    };

    // Storage the pointer-typed values point into; it outlives the call.
    let mut strings: Vec<CString> = Vec::new();
    let mut byte_data: Vec<Vec<u8>> = Vec::new();
    let mut arrays: Vec<Box<TVMFFIByteArray>> = Vec::new();
    let mut rvalue_slots: Vec<Box<*mut c_void>> = Vec::new();
    let mut values = Vec::new();
    let mut codes = Vec::new();
    let mut dl_shape = [2i64, 3];
    let mut bare_dl = *pool.tensor.dl();
    bare_dl.shape = dl_shape.as_mut_ptr();
    bare_dl.strides = std::ptr::null_mut();

    for _ in 0..num_args.max(0) {
        let tag = inp.u8();
        let code: c_int = if tag >= 0xF0 {
            inp.u32() as c_int
        } else {
            (tag % 17) as c_int
        };
        let pick = inp.u8() as usize;
        let value = match code {
            tc::DL_TENSOR_HANDLE => TVMValue {
                v_handle: if pick.is_multiple_of(5) {
                    std::ptr::null_mut()
                } else if pick.is_multiple_of(2) {
                    pool.tensor.dltensor().cast()
                } else {
                    (&mut bare_dl as *mut tvmrt::abi::DLTensor).cast()
                },
            },
            tc::OBJECT_HANDLE | tc::MODULE_HANDLE | tc::PACKED_FUNC_HANDLE => TVMValue {
                v_handle: if pick % 8 == 7 {
                    std::ptr::null_mut()
                } else {
                    pool.objects[pick % pool.objects.len()].as_ptr()
                },
            },
            tc::NDARRAY_HANDLE => TVMValue {
                v_handle: if pick.is_multiple_of(4) {
                    std::ptr::null_mut()
                } else {
                    pool.tensor.dltensor().cast()
                },
            },
            tc::OBJECT_RVALUE_REF_ARG => {
                // A slot holding a reference of our own; a callee may move it out.
                let obj = pool.objects[pick % pool.objects.len()].clone().into_raw();
                rvalue_slots.push(Box::new(obj));
                let slot: *mut *mut c_void = &mut **rvalue_slots.last_mut().unwrap();
                TVMValue {
                    v_handle: slot.cast(),
                }
            }
            tc::STR => {
                if pick.is_multiple_of(6) {
                    TVMValue {
                        v_str: std::ptr::null(),
                    }
                } else {
                    let mut b = inp.bytes();
                    b.retain(|&x| x != 0);
                    strings.push(CString::new(b).unwrap());
                    TVMValue {
                        v_str: strings.last().unwrap().as_ptr() as *const c_char,
                    }
                }
            }
            tc::BYTES => {
                if pick.is_multiple_of(6) {
                    TVMValue {
                        v_handle: std::ptr::null_mut(),
                    }
                } else {
                    byte_data.push(inp.bytes());
                    let d = byte_data.last().unwrap();
                    arrays.push(Box::new(TVMFFIByteArray::from_slice(d)));
                    let p: *mut TVMFFIByteArray = &mut **arrays.last_mut().unwrap();
                    TVMValue { v_handle: p.cast() }
                }
            }
            // Scalars, null, opaque handles (never dereferenced) and unknown codes.
            _ => TVMValue {
                v_int64: inp.u64() as i64,
            },
        };
        values.push(value);
        codes.push(code);
    }
    let mut ret = TVMValue::default();
    let mut ret_code: c_int = -1;
    // SAFETY: a live function handle; `num_args` entries in both arrays when positive (the
    // vectors hold exactly that many); every pointer-typed value points to live storage above.
    let rc = unsafe {
        TVMFuncCall(
            target,
            values.as_mut_ptr(),
            codes.as_mut_ptr(),
            num_args,
            &mut ret,
            &mut ret_code,
        )
    };
    if rc == 0 {
        // SAFETY: a return value we own.
        unsafe { release(ret, ret_code) };
    } else {
        // SAFETY: TVMGetLastError returns a NUL-terminated string, valid until the next call.
        let msg = unsafe { CStr::from_ptr(TVMGetLastError()) };
        assert!(!msg.to_bytes().is_empty(), "error without a message");
    }
    for slot in rvalue_slots {
        if !slot.is_null() {
            // SAFETY: the reference we put there was not moved out.
            unsafe { tvmrt::object::dec_ref_raw(*slot) };
        }
    }
    drop((strings, byte_data, arrays));
    let counts_after: Vec<u32> = pool.objects.iter().map(ObjectRef::strong_count).collect();
    assert_eq!(
        counts_before, counts_after,
        "reference counts changed (leak or double free)"
    );
});
