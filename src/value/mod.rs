//! The one value type: [`Any`] (owning) and [`AnyView`] (borrowed), both exactly a `TVMFFIAny`.
//!
//! Keeping tvm-ffi's 16-byte layout as the in-memory form means arguments arriving through the
//! tvm-ffi door are used in place (no conversion per call), and a slice of [`AnyView`] can be
//! handed to a compiled kernel as `const TVMFFIAny*`. The classic door converts each
//! `TVMValue` + type code to and from this form (see [`classic`]).

pub mod classic;

use std::ffi::{c_void, CStr};
use std::marker::PhantomData;

use crate::abi::TVMFFIByteArray;
use crate::abi::{type_index as ti, AnyPayload, DLDataType, DLDevice, DLTensor, TVMFFIAny};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::string::{new_bytes, new_str, object_bytes};
use crate::object::{dec_ref_raw, inc_ref_raw, ObjectRef};

/// A human-readable name for a tvm-ffi type index, for error messages.
pub fn type_name(index: i32) -> &'static str {
    match index {
        ti::NONE => "None",
        ti::INT => "int",
        ti::BOOL => "bool",
        ti::FLOAT => "float",
        ti::OPAQUE_PTR => "void*",
        ti::DATA_TYPE => "DataType",
        ti::DEVICE => "Device",
        ti::DL_TENSOR_PTR => "DLTensor*",
        ti::RAW_STR => "const char*",
        ti::BYTE_ARRAY_PTR => "TVMFFIByteArray*",
        ti::OBJECT_RVALUE_REF => "ObjectRValueRef",
        ti::SMALL_STR | ti::STR => "ffi.String",
        ti::SMALL_BYTES | ti::BYTES => "ffi.Bytes",
        ti::ERROR => "ffi.Error",
        ti::FUNCTION => "ffi.Function",
        ti::SHAPE => "ffi.Shape",
        ti::TENSOR => "ffi.Tensor",
        ti::ARRAY => "ffi.Array",
        ti::MAP => "ffi.Map",
        ti::MODULE => "ffi.Module",
        i if i >= ti::STATIC_OBJECT_BEGIN => "Object",
        _ => "<unknown type index>",
    }
}

/// A borrowed value: a `TVMFFIAny` whose objects are owned by someone else for `'a`.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct AnyView<'a> {
    raw: TVMFFIAny,
    _borrow: PhantomData<&'a ()>,
}

/// An owned value: a `TVMFFIAny` holding one strong reference when it is an object.
#[repr(transparent)]
pub struct Any(TVMFFIAny);

fn pod(index: i32, payload: AnyPayload) -> TVMFFIAny {
    TVMFFIAny {
        type_index: index,
        small_str_len: 0,
        payload,
    }
}

impl<'a> AnyView<'a> {
    /// Views a raw `TVMFFIAny`.
    ///
    /// # Safety
    /// Objects, strings and tensors the value points to stay alive for `'a`.
    pub unsafe fn from_raw(raw: TVMFFIAny) -> Self {
        AnyView {
            raw,
            _borrow: PhantomData,
        }
    }

    /// Views a C array of `TVMFFIAny` (`args`, `num_args`) as a slice.
    ///
    /// # Safety
    /// `args` points to `num_args` values valid for `'a` (or `num_args` is 0).
    pub unsafe fn slice_from_raw(args: *const TVMFFIAny, num_args: usize) -> &'a [AnyView<'a>] {
        if num_args == 0 || args.is_null() {
            return &[];
        }
        // SAFETY: `AnyView` is `repr(transparent)` over `TVMFFIAny`; the caller guarantees
        // the array is readable for `'a`.
        unsafe { std::slice::from_raw_parts(args.cast::<AnyView<'a>>(), num_args) }
    }

    /// A view of a plain value that owns nothing (ints, floats, pointers, dtypes, devices).
    fn plain(raw: TVMFFIAny) -> AnyView<'static> {
        AnyView {
            raw,
            _borrow: PhantomData,
        }
    }

    /// The underlying `TVMFFIAny`.
    pub fn raw(&self) -> &TVMFFIAny {
        &self.raw
    }

    /// The tvm-ffi type index.
    pub fn type_index(&self) -> i32 {
        self.raw.type_index
    }

    /// The name of this value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        type_name(self.raw.type_index)
    }

    /// Whether the value is `None`.
    pub fn is_none(&self) -> bool {
        self.raw.type_index == ti::NONE
    }

    /// An int (bools convert, as in tvm-ffi).
    pub fn as_i64(&self) -> Option<i64> {
        match self.raw.type_index {
            // SAFETY: the payload of an int or bool is `v_int64`.
            ti::INT | ti::BOOL => Some(unsafe { self.raw.payload.v_int64 }),
            _ => None,
        }
    }

    /// A float (ints convert, as in tvm-ffi).
    pub fn as_f64(&self) -> Option<f64> {
        match self.raw.type_index {
            // SAFETY: the payload of a float is `v_float64`.
            ti::FLOAT => Some(unsafe { self.raw.payload.v_float64 }),
            // SAFETY: the payload of an int is `v_int64`.
            ti::INT => Some(unsafe { self.raw.payload.v_int64 } as f64),
            _ => None,
        }
    }

    /// A bool (ints convert: non-zero is true).
    pub fn as_bool(&self) -> Option<bool> {
        self.as_i64().map(|v| v != 0)
    }

    /// A data type.
    pub fn as_dtype(&self) -> Option<DLDataType> {
        match self.raw.type_index {
            // SAFETY: the payload of a dtype is `v_dtype`.
            ti::DATA_TYPE => Some(unsafe { self.raw.payload.v_dtype }),
            _ => None,
        }
    }

    /// A device.
    pub fn as_device(&self) -> Option<DLDevice> {
        match self.raw.type_index {
            // SAFETY: the payload of a device is `v_device`.
            ti::DEVICE => Some(unsafe { self.raw.payload.v_device }),
            _ => None,
        }
    }

    /// An opaque pointer (`None` converts to null, as in tvm-ffi).
    pub fn as_opaque_ptr(&self) -> Option<*mut c_void> {
        match self.raw.type_index {
            // SAFETY: the payload of an opaque pointer is `v_ptr`.
            ti::OPAQUE_PTR => Some(unsafe { self.raw.payload.v_ptr }),
            ti::NONE => Some(std::ptr::null_mut()),
            _ => None,
        }
    }

    /// The `DLTensor*` of a bare tensor pointer (index 7) or of a tensor object (index 70,
    /// whose `DLTensor` follows the header).
    pub fn as_dltensor(&self) -> Option<*mut DLTensor> {
        match self.raw.type_index {
            // SAFETY: the payload of a DLTensor pointer is `v_ptr`.
            ti::DL_TENSOR_PTR => Some(unsafe { self.raw.payload.v_ptr }.cast()),
            ti::TENSOR => {
                // SAFETY: a tensor object's DLTensor starts right after its 24-byte header.
                let obj = unsafe { self.raw.payload.v_obj };
                Some(obj.cast::<u8>().wrapping_add(24).cast())
            }
            _ => None,
        }
    }

    /// For an object rvalue reference (`ObjectRValueRef`, what a caller passes to give up its
    /// reference), takes the object out of the caller's slot: the caller's handle becomes
    /// null and the returned reference is the one it held. `None` for other values.
    pub fn take_rvalue_object(&self) -> Option<ObjectRef> {
        if self.raw.type_index != ti::OBJECT_RVALUE_REF {
            return None;
        }
        // SAFETY: an rvalue ref's payload points at the caller's slot holding the object handle,
        // writable for the call: passing it hands the reference it holds to the callee.
        unsafe {
            let slot = self.raw.payload.v_ptr.cast::<*mut c_void>();
            if slot.is_null() {
                return None;
            }
            let obj = std::mem::replace(&mut *slot, std::ptr::null_mut());
            ObjectRef::from_raw_owned(obj)
        }
    }

    /// The object this value holds (a new strong reference), for object type indexes and
    /// object rvalue references.
    pub fn as_object(&self) -> Option<ObjectRef> {
        let idx = self.raw.type_index;
        if idx >= ti::STATIC_OBJECT_BEGIN {
            // SAFETY: the view guarantees the object lives for `'a`; we take our own reference.
            unsafe { ObjectRef::from_raw_borrowed(self.raw.payload.v_obj) }
        } else if idx == ti::OBJECT_RVALUE_REF {
            // SAFETY: an rvalue ref's payload points at a slot holding the object handle.
            let slot = unsafe { self.raw.payload.v_ptr }.cast::<*mut c_void>();
            if slot.is_null() {
                return None;
            }
            // SAFETY: as above; the slot is readable for the view's lifetime.
            unsafe { ObjectRef::from_raw_borrowed(*slot) }
        } else {
            None
        }
    }

    /// A function object.
    pub fn as_function(&self) -> Option<Function> {
        self.as_object().and_then(|o| Function::from_object(o).ok())
    }

    /// The bytes of any string or bytes form (raw C string, byte array pointer, small string or
    /// bytes, string or bytes object).
    pub fn as_byte_slice(&self) -> Option<&[u8]> {
        match self.raw.type_index {
            ti::RAW_STR => {
                // SAFETY: the payload of a raw string is a NUL-terminated C string alive for 'a.
                let p = unsafe { self.raw.payload.v_c_str };
                if p.is_null() {
                    return None;
                }
                // SAFETY: as above.
                Some(unsafe { CStr::from_ptr(p) }.to_bytes())
            }
            ti::BYTE_ARRAY_PTR => {
                // SAFETY: the payload points to a `TVMFFIByteArray` alive for 'a.
                let p = unsafe { self.raw.payload.v_ptr }.cast::<TVMFFIByteArray>();
                if p.is_null() {
                    return None;
                }
                // SAFETY: as above.
                Some(unsafe { (*p).as_slice() })
            }
            ti::SMALL_STR | ti::SMALL_BYTES => {
                let len = (self.raw.small_str_len as usize).min(8);
                // SAFETY: small strings keep their bytes inline in the payload.
                Some(unsafe { &self.raw.payload.v_bytes[..len] })
            }
            ti::STR | ti::BYTES => {
                // SAFETY: the object lives for 'a; its cell views bytes it owns.
                let obj = unsafe { self.raw.payload.v_obj };
                let cell = obj.cast::<u8>().wrapping_add(24).cast::<TVMFFIByteArray>();
                // SAFETY: as above.
                Some(unsafe { (*cell).as_slice() })
            }
            _ => None,
        }
    }

    /// A string (any string form), if it is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        match self.raw.type_index {
            ti::RAW_STR | ti::SMALL_STR | ti::STR => {
                std::str::from_utf8(self.as_byte_slice()?).ok()
            }
            _ => None,
        }
    }

    /// Converts to an owned value (`TVMFFIAnyViewToOwnedAny`): raw strings and byte arrays are
    /// copied into objects, objects gain a reference.
    pub fn to_owned_any(&self) -> Any {
        match self.raw.type_index {
            ti::RAW_STR => match self.as_byte_slice() {
                Some(b) => Any::from_object(new_str(&String::from_utf8_lossy(b))),
                None => Any::none(),
            },
            ti::BYTE_ARRAY_PTR => Any::from_object(new_bytes(self.as_byte_slice().unwrap_or(&[]))),
            ti::OBJECT_RVALUE_REF => self.as_object().map(Any::from_object).unwrap_or_default(),
            idx if idx >= ti::STATIC_OBJECT_BEGIN => {
                // SAFETY: the object is alive for 'a; the new Any owns the added reference.
                unsafe { inc_ref_raw(self.raw.payload.v_obj) };
                Any(self.raw)
            }
            _ => Any(self.raw),
        }
    }

    /// `TypeError` naming what was expected and what came, for argument `what`.
    pub fn type_mismatch(&self, what: &str, expected: &str) -> Error {
        Error::type_error(format!(
            "{what}: expected {expected}, got {}",
            self.type_name()
        ))
    }

    /// The int, or a `TypeError` naming `what`.
    pub fn expect_i64(&self, what: &str) -> Result<i64> {
        self.as_i64().ok_or_else(|| self.type_mismatch(what, "int"))
    }

    /// The string, or a `TypeError` naming `what`.
    pub fn expect_str(&self, what: &str) -> Result<&str> {
        self.as_str().ok_or_else(|| self.type_mismatch(what, "str"))
    }

    /// The function, or a `TypeError` naming `what`.
    pub fn expect_function(&self, what: &str) -> Result<Function> {
        self.as_function()
            .ok_or_else(|| self.type_mismatch(what, "ffi.Function"))
    }

    /// The object, or a `TypeError` naming `what`.
    pub fn expect_object(&self, what: &str) -> Result<ObjectRef> {
        self.as_object()
            .ok_or_else(|| self.type_mismatch(what, "Object"))
    }
}

impl Any {
    /// `None`.
    pub fn none() -> Any {
        Any(TVMFFIAny::NONE)
    }

    /// Takes ownership of a raw `TVMFFIAny` (its object reference, if any, moves in).
    ///
    /// # Safety
    /// If `raw` is an object, the caller gives up one strong reference to it. Non-owning kinds
    /// (raw strings, byte-array and tensor pointers) must outlive the returned value.
    pub unsafe fn from_raw(raw: TVMFFIAny) -> Any {
        Any(raw)
    }

    /// Gives up ownership as a raw `TVMFFIAny` (the receiver releases its object reference).
    pub fn into_raw(self) -> TVMFFIAny {
        let raw = self.0;
        std::mem::forget(self);
        raw
    }

    /// The underlying `TVMFFIAny`, still owned by `self`.
    pub fn raw(&self) -> &TVMFFIAny {
        &self.0
    }

    /// A borrowed view of this value.
    pub fn view(&self) -> AnyView<'_> {
        AnyView {
            raw: self.0,
            _borrow: PhantomData,
        }
    }

    /// Wraps an object reference.
    pub fn from_object(obj: ObjectRef) -> Any {
        let index = obj.type_index();
        Any(pod(index, AnyPayload::ptr(obj.into_raw())))
    }

    /// An opaque pointer (`void*`).
    pub fn opaque_ptr(ptr: *mut c_void) -> Any {
        Any(pod(ti::OPAQUE_PTR, AnyPayload::ptr(ptr)))
    }

    /// A bare `DLTensor*` (not owned: the tensor must outlive every use of the value).
    pub fn dltensor_ptr(ptr: *mut DLTensor) -> Any {
        Any(pod(ti::DL_TENSOR_PTR, AnyPayload::ptr(ptr.cast())))
    }

    /// A bytes object.
    pub fn bytes(b: &[u8]) -> Any {
        Any::from_object(new_bytes(b))
    }

    /// A string as tvm-ffi's `String` stores it: inline (`SmallStr`) up to 7 bytes, else an
    /// object.
    pub fn string_compact(s: &str) -> Any {
        Any::small(ti::SMALL_STR, s.as_bytes()).unwrap_or_else(|| Any::from(s))
    }

    /// Bytes as tvm-ffi's `Bytes` stores them: inline (`SmallBytes`) up to 7 bytes, else an
    /// object.
    pub fn bytes_compact(b: &[u8]) -> Any {
        Any::small(ti::SMALL_BYTES, b).unwrap_or_else(|| Any::bytes(b))
    }

    /// An inline small string or bytes value when `b` fits (7 bytes and a NUL).
    fn small(index: i32, b: &[u8]) -> Option<Any> {
        if b.len() > 7 {
            return None;
        }
        let mut bytes = [0u8; 8];
        bytes[..b.len()].copy_from_slice(b);
        Some(Any(TVMFFIAny {
            type_index: index,
            small_str_len: b.len() as u32,
            payload: AnyPayload { v_bytes: bytes },
        }))
    }

    /// The string's bytes if this holds a string object.
    pub fn str_bytes(&self) -> Option<&[u8]> {
        let obj = self.view().as_object()?;
        // The bytes live as long as `self` holds the object.
        let b = object_bytes(&obj)?;
        // SAFETY: `self` keeps a strong reference to the same object, so the storage outlives
        // the temporary `obj` for the lifetime of `&self`.
        Some(unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) })
    }
}

impl Default for Any {
    fn default() -> Self {
        Any::none()
    }
}

impl Clone for Any {
    fn clone(&self) -> Self {
        self.view().to_owned_any()
    }
}

impl Drop for Any {
    fn drop(&mut self) {
        if self.0.type_index >= ti::STATIC_OBJECT_BEGIN {
            // SAFETY: an owned object value holds one strong reference.
            let obj = unsafe { self.0.payload.v_obj };
            if !obj.is_null() {
                // SAFETY: as above.
                unsafe { dec_ref_raw(obj) };
            }
        }
    }
}

impl std::fmt::Debug for Any {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.view().fmt(f)
    }
}

impl std::fmt::Debug for AnyView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(v) = self.as_i64() {
            return write!(f, "{}({v})", self.type_name());
        }
        if let Some(v) = self.as_f64() {
            return write!(f, "float({v})");
        }
        if let Some(s) = self.as_str() {
            return write!(f, "str({s:?})");
        }
        write!(f, "{}", self.type_name())
    }
}

macro_rules! any_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Any {
            fn from(v: $t) -> Any {
                Any(pod(ti::INT, AnyPayload { v_int64: v as i64 }))
            }
        }
    )*};
}
any_from_int!(i64, i32, u32, usize, u8, i8, i16, u16);

impl From<f64> for Any {
    fn from(v: f64) -> Any {
        Any(pod(ti::FLOAT, AnyPayload { v_float64: v }))
    }
}
impl From<f32> for Any {
    fn from(v: f32) -> Any {
        Any::from(v as f64)
    }
}
impl From<bool> for Any {
    fn from(v: bool) -> Any {
        Any(pod(ti::BOOL, AnyPayload { v_int64: v as i64 }))
    }
}
impl From<&str> for Any {
    fn from(v: &str) -> Any {
        Any::from_object(new_str(v))
    }
}
impl From<String> for Any {
    fn from(v: String) -> Any {
        Any::from(v.as_str())
    }
}
impl From<DLDataType> for Any {
    fn from(v: DLDataType) -> Any {
        Any(pod(ti::DATA_TYPE, AnyPayload::dtype(v)))
    }
}
impl From<DLDevice> for Any {
    fn from(v: DLDevice) -> Any {
        Any(pod(ti::DEVICE, AnyPayload::device(v)))
    }
}
impl From<ObjectRef> for Any {
    fn from(v: ObjectRef) -> Any {
        Any::from_object(v)
    }
}
impl From<Function> for Any {
    fn from(v: Function) -> Any {
        Any::from_object(v.into_object())
    }
}
impl From<()> for Any {
    fn from(_: ()) -> Any {
        Any::none()
    }
}

/// Views of plain values, handy for building argument lists in Rust.
impl From<i64> for AnyView<'static> {
    fn from(v: i64) -> Self {
        AnyView::plain(pod(ti::INT, AnyPayload { v_int64: v }))
    }
}
impl From<f64> for AnyView<'static> {
    fn from(v: f64) -> Self {
        AnyView::plain(pod(ti::FLOAT, AnyPayload { v_float64: v }))
    }
}
impl From<bool> for AnyView<'static> {
    fn from(v: bool) -> Self {
        AnyView::plain(pod(ti::BOOL, AnyPayload { v_int64: v as i64 }))
    }
}
impl<'a> From<&'a Any> for AnyView<'a> {
    fn from(v: &'a Any) -> Self {
        v.view()
    }
}
/// A view of an object, borrowed (no reference-count change): the borrow keeps it alive.
impl<'a> From<&'a ObjectRef> for AnyView<'a> {
    fn from(obj: &'a ObjectRef) -> Self {
        AnyView {
            raw: pod(
                obj.type_index(),
                AnyPayload {
                    v_obj: obj.as_ptr(),
                },
            ),
            _borrow: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `byte` over a stretch of stack, then runs `make`, whose frame lands on it: a
    /// value built there with unset bytes would carry the garbage.
    #[inline(never)]
    fn built_on_garbage<T>(byte: u8, make: impl Fn() -> T) -> T {
        #[inline(never)]
        fn dirty_stack(byte: u8) {
            let mut junk = [byte; 4096];
            std::hint::black_box(&mut junk);
        }
        dirty_stack(byte);
        make()
    }

    /// A data type fills 4 of the payload's 8 bytes and a pointer 4 on 32-bit targets; map keys,
    /// key equality and structural hashing compare all 8, so the rest must be zero (as tvm-ffi
    /// clears them), whatever the memory held before. Run under valgrind too
    /// (`.ci/valgrind_unit.sh`), which reports any unset byte read here.
    #[test]
    fn payloads_are_zeroed_in_full() {
        use crate::abi::{DLDataTypeCode, DLDeviceType, TVMValue};
        use crate::object::containers::key::any_equal;
        use crate::object::containers::map::{lookup, set};
        let f32x4 = DLDataType {
            code: DLDataTypeCode::FLOAT,
            bits: 32,
            lanes: 4,
        };
        // SAFETY: every payload is 8 bytes; reading all of them is what this test checks.
        let bytes = |a: &Any| unsafe { a.raw().payload.v_uint64 };
        let a = built_on_garbage(0xa5, || Any::from(f32x4));
        let b = built_on_garbage(0x5a, || Any::from(f32x4));
        // code 2, bits 32, lanes 4 (little-endian u16), then four zero bytes.
        assert_eq!(bytes(&a), 0x0004_2002);
        assert_eq!(bytes(&b), 0x0004_2002);
        assert!(any_equal(&a.view(), &b.view()));
        let mut entries = Vec::new();
        set(&mut entries, a.clone(), Any::from(7i64));
        let found = lookup(&entries, &b.view()).and_then(|v| v.view().as_i64());
        assert_eq!(
            found,
            Some(7),
            "a data-type key is found by an equal data type"
        );

        let mut slot = 0u8;
        let ptr = (&mut slot as *mut u8).cast::<c_void>();
        let p = built_on_garbage(0xa5, || Any::opaque_ptr(ptr));
        assert_eq!(bytes(&p), ptr as usize as u64);
        let gpu = DLDevice {
            device_type: DLDeviceType::CUDA,
            device_id: 1,
        };
        let d = built_on_garbage(0xa5, || Any::from(gpu));
        assert_eq!(bytes(&d), 2 | (1 << 32));

        // The classic door: a TVMValue whose unused bytes hold garbage converts to a zeroed
        // payload, and the TVMValue constructors zero what they do not fill.
        let mut garbage = TVMValue {
            v_int64: 0x5a5a_5a5a_5a5a_5a5a,
        };
        garbage.v_type = f32x4;
        // SAFETY: a data type with valid bytes under its type code.
        let raw = unsafe { classic::classic_to_raw(garbage, crate::abi::type_code::DATA_TYPE) }
            .expect("a data type");
        assert_eq!(unsafe { raw.payload.v_uint64 }, 0x0004_2002);
        let v = built_on_garbage(0xa5, || TVMValue::dtype(f32x4));
        assert_eq!(unsafe { v.v_int64 }, 0x0004_2002);
        let h = built_on_garbage(0xa5, || TVMValue::handle(ptr));
        assert_eq!(unsafe { h.v_int64 } as u64, ptr as usize as u64);
        let mut garbage = TVMValue {
            v_int64: 0x5a5a_5a5a_5a5a_5a5a,
        };
        garbage.v_handle = ptr;
        // SAFETY: a pointer that is never dereferenced.
        let raw = unsafe { classic::classic_to_raw(garbage, crate::abi::type_code::OPAQUE_HANDLE) }
            .expect("a handle");
        assert_eq!(unsafe { raw.payload.v_uint64 }, ptr as usize as u64);
    }

    #[test]
    fn pod_values_round_trip() {
        assert_eq!(Any::from(42i64).view().as_i64(), Some(42));
        assert_eq!(Any::from(true).view().as_bool(), Some(true));
        assert_eq!(Any::from(true).view().as_i64(), Some(1));
        assert_eq!(Any::from(2.5f64).view().as_f64(), Some(2.5));
        assert_eq!(Any::from(3i64).view().as_f64(), Some(3.0));
        assert!(Any::none().view().is_none());
        assert_eq!(Any::from(1.5f64).view().as_i64(), None);
    }

    #[test]
    fn strings_in_every_form() {
        let s = Any::from("hello");
        assert_eq!(s.view().type_index(), ti::STR);
        assert_eq!(s.view().as_str(), Some("hello"));
        let c = std::ffi::CString::new("raw").unwrap();
        let raw = TVMFFIAny {
            type_index: ti::RAW_STR,
            small_str_len: 0,
            payload: AnyPayload::c_str(c.as_ptr()),
        };
        // SAFETY: `c` outlives the view.
        let v = unsafe { AnyView::from_raw(raw) };
        assert_eq!(v.as_str(), Some("raw"));
        let owned = v.to_owned_any();
        assert_eq!(owned.view().type_index(), ti::STR);
        assert_eq!(owned.view().as_str(), Some("raw"));
        let mut small = TVMFFIAny {
            type_index: ti::SMALL_STR,
            small_str_len: 3,
            payload: AnyPayload { v_bytes: [0; 8] },
        };
        // SAFETY: writing the inline bytes of a small string.
        unsafe { small.payload.v_bytes[..3].copy_from_slice(b"abc") };
        // SAFETY: small strings own nothing.
        assert_eq!(unsafe { AnyView::from_raw(small) }.as_str(), Some("abc"));
    }

    #[test]
    fn object_values_count_references() {
        let obj = new_str("x");
        assert_eq!(obj.strong_count(), 1);
        let a = Any::from_object(obj.clone());
        assert_eq!(obj.strong_count(), 2);
        let b = a.clone();
        assert_eq!(obj.strong_count(), 3);
        drop(a);
        drop(b);
        assert_eq!(obj.strong_count(), 1);
    }
}
