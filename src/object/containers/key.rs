//! Equality of container keys as tvm-ffi's `AnyEqual` defines it (`any.h`): strings and bytes by
//! content (inline small strings equal string objects), big integers by value (their
//! `__any_equal__`), objects of a type that registered a key equality (tvm-ffi's
//! `__any_equal__`, e.g. `ffi.StructuralKey`) by it, other objects by identity, POD values by
//! kind and bits (so `1`, `True` and `1.0` are different keys).

use parking_lot::RwLock;

use crate::abi::type_index as ti;
use crate::object::type_registry::static_index;
use crate::object::ObjectRef;
use crate::value::AnyView;

/// Where a big integer's words start: `sizeof(BigIntObj)`, the header and a `size_t` count
/// rounded to 8 bytes (32 on 32-bit targets too; `big_int.h` reads them at `obj + 1`).
pub const BIG_INT_WORDS_OFFSET: usize = (std::mem::size_of::<crate::object::ObjectHeader>()
    + std::mem::size_of::<usize>())
.next_multiple_of(8);

/// The 64-bit words of a big integer object (header, `size_t` count, then the words).
pub fn big_int_words(o: &ObjectRef) -> &[u64] {
    let obj = o.as_ptr().cast::<u8>().cast_const();
    // SAFETY: a big integer object has its word count after the header and that many words at
    // `BIG_INT_WORDS_OFFSET`, alive while `o` is.
    unsafe {
        let n = *o.cell_ptr().cast::<usize>();
        std::slice::from_raw_parts(obj.add(BIG_INT_WORDS_OFFSET).cast::<u64>(), n)
    }
}

/// A key equality for the objects of one type (both arguments are of that type).
pub type KeyEquality = fn(&ObjectRef, &ObjectRef) -> bool;

static KEY_EQUALITIES: RwLock<Vec<(i32, KeyEquality)>> = RwLock::new(Vec::new());

/// Makes keys of `type_index` compare with `eq` instead of by identity (a type's
/// `__any_equal__`; set by the module that defines the type).
pub fn register_key_equality(type_index: i32, eq: KeyEquality) {
    let mut all = KEY_EQUALITIES.write();
    all.retain(|(t, _)| *t != type_index);
    all.push((type_index, eq));
}

fn key_equality(type_index: i32) -> Option<KeyEquality> {
    KEY_EQUALITIES
        .read()
        .iter()
        .find(|(t, _)| *t == type_index)
        .map(|&(_, eq)| eq)
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
