//! Equality of container keys as tvm-ffi's `AnyEqual` defines it (`any.h`): strings and bytes by
//! content (inline small strings equal string objects), big integers by value (their
//! `__any_equal__`), objects of a type that registered a key equality (tvm-ffi's
//! `__any_equal__`, e.g. `ffi.StructuralKey`) by it, other objects by identity, POD values by
//! kind and bits (so `1`, `True` and `1.0` are different keys).

use std::ffi::c_void;

use parking_lot::RwLock;

use crate::abi::{type_index as ti, TVMFFIAny};
use crate::error::Error;
use crate::object::type_registry::static_index;
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

/// The 64-bit words of a big integer object (header, `size_t` count, then the words).
pub fn big_int_words(o: &ObjectRef) -> &[u64] {
    let obj = o.as_ptr().cast::<u8>().cast_const();
    // SAFETY: a big integer object has its word count after the header and that many words at
    // `BIG_INT_WORDS_OFFSET`, alive while `o` is.
    unsafe {
        let n = *o.cell_ptr().cast::<usize>();
        std::slice::from_raw_parts(
            obj.add(crate::object::big_int::BIG_INT_WORDS_OFFSET)
                .cast::<u64>(),
            n,
        )
    }
}

/// A key equality for the objects of one type (both arguments are of that type).
pub type KeyEquality = fn(&ObjectRef, &ObjectRef) -> bool;
/// The hash that goes with a [`KeyEquality`] (equal keys hash alike).
pub type KeyHash = fn(&ObjectRef) -> u64;

static KEY_TYPES: RwLock<Vec<(i32, KeyEquality, KeyHash)>> = RwLock::new(Vec::new());

/// Makes keys of `type_index` compare with `eq` and hash with `hash` instead of by identity
/// (a type's `__any_equal__` and `__any_hash__`; set by the module that defines the type).
pub fn register_key_type(type_index: i32, eq: KeyEquality, hash: KeyHash) {
    let mut all = KEY_TYPES.write();
    all.retain(|(t, _, _)| *t != type_index);
    all.push((type_index, eq, hash));
}

fn key_type(type_index: i32) -> Option<(KeyEquality, KeyHash)> {
    KEY_TYPES
        .read()
        .iter()
        .find(|(t, _, _)| *t == type_index)
        .map(|&(_, eq, hash)| (eq, hash))
}

fn key_equality(type_index: i32) -> Option<KeyEquality> {
    key_type(type_index).map(|(eq, _)| eq)
}

/// tvm-ffi's `StableHashBytes` (`base_detail.h`) over 64-bit words: a platform-independent
/// hash, which `BigInt::hash()` (inline in C++ code) applies to a big integer's words.
pub fn stable_hash_words(words: &[u64]) -> u64 {
    const MULTIPLIER: u64 = 1_099_511_628_211;
    const MODULUS: u64 = 2_147_483_647;
    words.iter().fold(0u64, |acc, &w| {
        acc.wrapping_mul(MULTIPLIER).wrapping_add(w) % MODULUS
    })
}

/// The hash of a key whose type compares by value (big integers, registered key types), as
/// that type's `__any_hash__` gives it; `None` for every other key.
pub fn value_key_hash(v: &AnyView<'_>) -> Option<u64> {
    let obj = v.as_object()?;
    match v.type_index() {
        static_index::BIG_INT => Some(stable_hash_words(big_int_words(&obj))),
        t => key_type(t).map(|(_, hash)| hash(&obj)),
    }
}

/// `__any_hash__` of the key types above, as tvm-ffi's C++ headers call it (`AnyHash`, the
/// `NativeFunction` convention `TVMFFIAny (*)(const Any&) noexcept`): an int, the hash bits.
///
/// # Safety
/// `key` points to a live value.
unsafe extern "C" fn native_any_hash(key: *const TVMFFIAny) -> TVMFFIAny {
    let out = crate::unwind_guard::run_or("__any_hash__", Any::none(), || {
        // SAFETY: per the contract.
        let view = unsafe { &*key.cast::<AnyView<'_>>() };
        let hash = value_key_hash(view).ok_or_else(|| {
            Error::type_error(format!(
                "__any_hash__: no value hash for {}",
                view.type_name()
            ))
        })?;
        Ok(Any::from(hash as i64))
    });
    error_or_value(out)
}

/// `__any_equal__` of the key types above (`TVMFFIAny (*)(const Any&, const Any&) noexcept`):
/// a bool.
///
/// # Safety
/// `a` and `b` point to live values.
unsafe extern "C" fn native_any_equal(a: *const TVMFFIAny, b: *const TVMFFIAny) -> TVMFFIAny {
    let out = crate::unwind_guard::run_or("__any_equal__", Any::none(), || {
        // SAFETY: per the contract.
        let (a, b) = unsafe { (&*a.cast::<AnyView<'_>>(), &*b.cast::<AnyView<'_>>()) };
        Ok(Any::from(any_equal(a, b)))
    });
    error_or_value(out)
}

/// The native-function result: the value, or (after a failure, which raised an error on the
/// thread) the error object, as tvm-ffi's callers expect.
fn error_or_value(out: Any) -> TVMFFIAny {
    if !out.view().is_none() {
        return out.into_raw();
    }
    match crate::raised::take_raised_object() {
        Some(err) => Any::from_object(err).into_raw(),
        None => out.into_raw(),
    }
}

/// The `__any_hash__` / `__any_equal__` values of the types whose keys compare by value, for
/// tvm-ffi's inline `AnyHash` / `AnyEqual` (and the hash maps C++ code builds with them): set
/// when the type table is created, before any C++ code can look the columns up.
pub fn builtin_key_attrs() -> [(&'static str, &'static str, Any); 4] {
    let hash = Any::opaque_ptr(native_any_hash as *mut c_void);
    let equal = Any::opaque_ptr(native_any_equal as *mut c_void);
    [
        ("ffi.BigInt", "__any_hash__", hash.clone()),
        ("ffi.BigInt", "__any_equal__", equal.clone()),
        ("ffi.StructuralKey", "__any_hash__", hash),
        ("ffi.StructuralKey", "__any_equal__", equal),
    ]
}

/// The kind a value compares as: small strings and bytes count as their object kinds.
fn kind(v: &AnyView<'_>) -> i32 {
    match v.type_index() {
        ti::SMALL_STR | ti::RAW_STR => ti::STR,
        ti::SMALL_BYTES | ti::BYTE_ARRAY_PTR => ti::BYTES,
        other => other,
    }
}

/// Whether two keys are the same key.
pub fn any_equal(a: &AnyView<'_>, b: &AnyView<'_>) -> bool {
    let (ka, kb) = (kind(a), kind(b));
    if ka != kb {
        return false;
    }
    match ka {
        ti::STR | ti::BYTES => a.as_byte_slice() == b.as_byte_slice(),
        static_index::BIG_INT => match (a.as_object(), b.as_object()) {
            (Some(x), Some(y)) => big_int_words(&x) == big_int_words(&y),
            _ => false,
        },
        k if k >= ti::STATIC_OBJECT_BEGIN => match (a.as_object(), b.as_object()) {
            (Some(x), Some(y)) => {
                x.as_ptr() == y.as_ptr() || key_equality(k).is_some_and(|eq| eq(&x, &y))
            }
            _ => false,
        },
        // SAFETY: every POD payload is 8 readable bytes.
        _ => unsafe { a.raw().payload.v_int64 == b.raw().payload.v_int64 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_hash_matches_tvm_ffi() {
        // Values of tvm-ffi's StableHashBytes over the same 64-bit words (little-endian).
        assert_eq!(stable_hash_words(&[]), 0);
        assert_eq!(stable_hash_words(&[1, 2]), 949);
        assert_eq!(stable_hash_words(&[u64::MAX, 0x1_2345_6789]), 591_753_892);
    }

    #[test]
    fn native_hooks_answer_for_big_integers() {
        let [(_, _, hash), (_, _, equal), ..] = builtin_key_attrs();
        let hash: unsafe extern "C" fn(*const TVMFFIAny) -> TVMFFIAny =
            // SAFETY: the value registered is `native_any_hash`.
            unsafe { std::mem::transmute(hash.view().as_opaque_ptr().unwrap()) };
        let equal: unsafe extern "C" fn(*const TVMFFIAny, *const TVMFFIAny) -> TVMFFIAny =
            // SAFETY: the value registered is `native_any_equal`.
            unsafe { std::mem::transmute(equal.view().as_opaque_ptr().unwrap()) };
        let big = crate::object::big_int::parse_decimal("18446744073709551616").unwrap();
        let same = crate::object::big_int::parse_decimal("18446744073709551616").unwrap();
        // SAFETY: live values; owned results.
        unsafe {
            let (h1, h2) = (
                Any::from_raw(hash(big.raw())),
                Any::from_raw(hash(same.raw())),
            );
            assert_eq!(h1.view().as_i64(), h2.view().as_i64());
            assert_eq!(
                Any::from_raw(equal(big.raw(), same.raw())).view().as_bool(),
                Some(true)
            );
            // A value of no such type is an error value, as tvm-ffi's callers expect.
            let e = Any::from_raw(hash(Any::from(1i64).raw()));
            assert_eq!(e.view().type_index(), ti::ERROR);
        }
    }
}
