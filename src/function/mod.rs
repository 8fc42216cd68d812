//! Packed functions: objects whose cell is `{safe_call, cpp_call}` (tvm-ffi `TVMFFIFunctionCell`).
//!
//! Every function, whatever made it (a Rust closure, a tvm-ffi C callback, a classic
//! `TVMPackedCFunc`, a compiled kernel, another library's function object), is called the same
//! way: `safe_call(self, args, num_args, result)`. Callers in C may read the cell and call it
//! directly, so the cell is the only entry point and the payload behind it is ours.

pub mod registry;
pub mod trampoline;

use std::ffi::c_void;

use crate::abi::{
    type_index, TVMFFIAny, TVMFFIFunctionCell, TVMFFISafeCallType, TVMPackedCFunc,
    TVMPackedCFuncFinalizer,
};
use crate::error::{Error, Result};
use crate::object::{new_object, ObjectPayload, ObjectRef};
use crate::value::{Any, AnyView};

/// The Rust signature of a packed function.
pub type RustPackedFn = dyn Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync;

/// What a function object runs when called.
pub enum FunctionImpl {
    /// A Rust closure.
    Rust(Box<RustPackedFn>),
    /// A tvm-ffi C callback (`TVMFFIFunctionCreate`) with its own `self` and deleter.
    ExternC {
        handle: *mut c_void,
        safe_call: TVMFFISafeCallType,
        deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    },
    /// A tvm-ffi C callback created with a null `self` and no deleter: the cell calls it
    /// directly with the function object as `self`, as tvm-ffi does.
    ExternCNullHandle,
    /// A classic `TVMPackedCFunc` (`TVMFuncCreateFromCFunc`).
    Classic {
        func: TVMPackedCFunc,
        resource_handle: *mut c_void,
        finalizer: Option<TVMPackedCFuncFinalizer>,
    },
}

/// Payload of a function object (type index 68): the public cell, then the implementation.
#[repr(C)]
pub struct FunctionObj {
    cell: TVMFFIFunctionCell,
    /// The implementation behind the cell.
    pub imp: FunctionImpl,
}

// SAFETY: the cell is the prefix tvm-ffi defines. C callbacks are required by TVM's API to be
// callable from any thread; Rust closures are `Send + Sync`.
unsafe impl ObjectPayload for FunctionObj {
    const TYPE_INDEX: i32 = type_index::FUNCTION;
}

impl Drop for FunctionObj {
    fn drop(&mut self) {
        // The C resource's release runs exactly once, when the last reference goes.
        match &self.imp {
            FunctionImpl::ExternC {
                handle,
                deleter: Some(d),
                ..
            } => {
                // SAFETY: the creator handed us `handle` with this deleter to release it once.
                unsafe { d(*handle) }
            }
            FunctionImpl::Classic {
                resource_handle,
                finalizer: Some(f),
                ..
            } => {
                // SAFETY: as above, with the classic finalizer.
                unsafe { f(*resource_handle) }
            }
            _ => {}
        }
    }
}

/// A function borrowed from a C handle for the length of a call (no reference-count traffic).
pub struct BorrowedFunction<'a> {
    f: std::mem::ManuallyDrop<Function>,
    _borrow: std::marker::PhantomData<&'a ()>,
}

impl std::ops::Deref for BorrowedFunction<'_> {
    type Target = Function;
    fn deref(&self) -> &Function {
        &self.f
    }
}

/// A reference to a function object (ours or another library's).
#[derive(Clone, Debug)]
pub struct Function(ObjectRef);

impl Function {
    fn new(safe_call: TVMFFISafeCallType, imp: FunctionImpl) -> Function {
        Function(new_object(FunctionObj {
            cell: TVMFFIFunctionCell {
                safe_call,
                cpp_call: std::ptr::null_mut(),
            },
            imp,
        }))
    }

    /// A function running a Rust closure.
    pub fn from_fn<F>(f: F) -> Function
    where
        F: Fn(&[AnyView<'_>]) -> Result<Any> + Send + Sync + 'static,
    {
        Function::new(
            trampoline::rust_function_safe_call,
            FunctionImpl::Rust(Box::new(f)),
        )
    }

    /// A function calling a tvm-ffi C callback (`TVMFFIFunctionCreate`).
    pub fn from_extern_c(
        handle: *mut c_void,
        safe_call: TVMFFISafeCallType,
        deleter: Option<unsafe extern "C" fn(*mut c_void)>,
    ) -> Function {
        if handle.is_null() && deleter.is_none() {
            Function::new(safe_call, FunctionImpl::ExternCNullHandle)
        } else {
            Function::new(
                trampoline::extern_c_function_safe_call,
                FunctionImpl::ExternC {
                    handle,
                    safe_call,
                    deleter,
                },
            )
        }
    }

    /// A function calling a classic `TVMPackedCFunc` (`TVMFuncCreateFromCFunc`).
    pub fn from_classic_c(
        func: TVMPackedCFunc,
        resource_handle: *mut c_void,
        finalizer: Option<TVMPackedCFuncFinalizer>,
    ) -> Function {
        Function::new(
            trampoline::classic_function_safe_call,
            FunctionImpl::Classic {
                func,
                resource_handle,
                finalizer,
            },
        )
    }

    /// Borrows a function handle for the length of a C call, without touching its reference
    /// count; `None` when the handle is null or not a function.
    ///
    /// # Safety
    /// `handle` is null or a live object the caller keeps alive while the borrow is used.
    pub unsafe fn borrow_handle<'a>(handle: *mut c_void) -> Option<BorrowedFunction<'a>> {
        if handle.is_null() {
            return None;
        }
        // SAFETY: a live object per the contract.
        let index = unsafe { (*handle.cast::<crate::object::ObjectHeader>()).type_index };
        if index != type_index::FUNCTION {
            return None;
        }
        // SAFETY: non-null and live; `ManuallyDrop` keeps the count untouched on both ends.
        let obj = unsafe { ObjectRef::from_raw_owned(handle) }?;
        Some(BorrowedFunction {
            f: std::mem::ManuallyDrop::new(Function(obj)),
            _borrow: std::marker::PhantomData,
        })
    }

    /// The classic C callback behind this function, if it was made by
    /// `TVMFuncCreateFromCFunc` (callers holding classic arguments can pass them straight
    /// through, as TVM does).
    pub fn classic_callback(&self) -> Option<(TVMPackedCFunc, *mut c_void)> {
        match self.0.downcast_ref::<FunctionObj>() {
            Some(FunctionObj {
                imp:
                    FunctionImpl::Classic {
                        func,
                        resource_handle,
                        ..
                    },
                ..
            }) => Some((*func, *resource_handle)),
            _ => None,
        }
    }

    /// Wraps an object, checking that it is a function.
    pub fn from_object(obj: ObjectRef) -> Result<Function> {
        if obj.type_index() == type_index::FUNCTION {
            Ok(Function(obj))
        } else {
            Err(Error::type_error(format!(
                "expected ffi.Function, got {}",
                crate::value::type_name(obj.type_index())
            )))
        }
    }

    /// The underlying object.
    pub fn object(&self) -> &ObjectRef {
        &self.0
    }

    /// Gives up the wrapper, keeping the object reference.
    pub fn into_object(self) -> ObjectRef {
        self.0
    }

    /// The cell, as C callers see it.
    pub fn cell(&self) -> TVMFFIFunctionCell {
        // SAFETY: function objects (any producer) have a `TVMFFIFunctionCell` after the header.
        unsafe { *self.0.cell_ptr().cast::<TVMFFIFunctionCell>() }
    }

    /// Calls the function with tvm-ffi arguments. Errors raised by the callee (through
    /// `TVMFFIErrorSetRaised*` or the classic last error) come back as `Err`.
    pub fn call(&self, args: &[AnyView<'_>]) -> Result<Any> {
        // Fast path: our own Rust closures are called without the C round trip.
        if let Some(FunctionObj {
            imp: FunctionImpl::Rust(f),
            ..
        }) = self.0.downcast_ref::<FunctionObj>()
        {
            return f(args);
        }
        let mut result = TVMFFIAny::NONE;
        let cell = self.cell();
        // SAFETY: `args` is a valid array of `TVMFFIAny` (AnyView is transparent) for the call;
        // `result` is a writable slot; `self` keeps the function alive during the call.
        let ret = unsafe {
            (cell.safe_call)(
                self.0.as_ptr(),
                args.as_ptr().cast(),
                args.len() as i32,
                &mut result,
            )
        };
        if ret == 0 {
            // SAFETY: on success the callee moved an owned value into `result`.
            Ok(unsafe { Any::from_raw(result) })
        } else {
            Err(crate::raised::take_raised().unwrap_or_else(|| {
                Error::runtime(format!(
                    "function returned error code {ret} without setting an error"
                ))
            }))
        }
    }

    /// Calls with owned arguments (convenience for Rust callers).
    pub fn call_values(&self, args: &[Any]) -> Result<Any> {
        let views: Vec<AnyView<'_>> = args.iter().map(Any::view).collect();
        self.call(&views)
    }
}

/// The registry's own global functions (`ffi.FunctionRemoveGlobal`,
/// `ffi.FunctionListGlobalNames`).
pub(crate) fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        (
            "ffi.FunctionRemoveGlobal",
            Function::from_fn(|args| {
                let name = args
                    .first()
                    .ok_or_else(|| Error::value("expected 1 argument (name)"))?
                    .expect_str("name")?;
                Ok(Any::from(registry::remove(name)))
            }),
        ),
        (
            "ffi.FunctionListGlobalNames",
            Function::from_fn(|_| Ok(Any::from(registry::list_names().join("\n")))),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn rust_function_adds() {
        let f = Function::from_fn(|args| {
            let a = args[0].expect_i64("a")?;
            let b = args[1].expect_i64("b")?;
            Ok(Any::from(a + b))
        });
        let r = f.call_values(&[Any::from(2i64), Any::from(40i64)]).unwrap();
        assert_eq!(r.view().as_i64(), Some(42));
        let err = f
            .call_values(&[Any::from(2i64), Any::from("x")])
            .unwrap_err();
        assert_eq!(err.kind, "TypeError");
        assert!(
            err.message.contains("b: expected int, got ffi.String"),
            "{err}"
        );
    }

    static FINALIZED: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn count_finalize(_: *mut c_void) {
        FINALIZED.fetch_add(1, Ordering::SeqCst);
    }
    unsafe extern "C" fn ret_seven(
        _: *mut c_void,
        _: *const TVMFFIAny,
        _: i32,
        out: *mut TVMFFIAny,
    ) -> i32 {
        // SAFETY: the caller passes a writable result slot.
        unsafe { *out = Any::from(7i64).into_raw() };
        0
    }

    #[test]
    fn extern_c_function_deleter_runs_once() {
        let f = Function::from_extern_c(8usize as *mut c_void, ret_seven, Some(count_finalize));
        let g = f.clone();
        assert_eq!(f.call(&[]).unwrap().view().as_i64(), Some(7));
        drop(f);
        assert_eq!(FINALIZED.load(Ordering::SeqCst), 0);
        drop(g);
        assert_eq!(FINALIZED.load(Ordering::SeqCst), 1);
    }
}
