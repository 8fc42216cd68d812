//! `ffi.BigInt` (type index 78): tvm-ffi's arbitrary-precision integers (`big_int.h`). A value
//! that fits 64 bits is an `int`; a wider one an object holding its two's-complement 64-bit
//! words, least significant first, in minimal form: the header, a `size_t` word count, then the
//! words (`BigIntObj`, `BigIntUnsafe::GetArrayView`).
//!
//! Also the decimal form tvm-ffi prints and reads (`operator<<`, `operator>>`): repr, and the
//! `__data_to_json__` / `__data_from_json__` hooks of JSON graphs.

use std::alloc::Layout;
use std::ffi::c_void;
use std::sync::atomic::AtomicU64;

use crate::abi::deleter_flag;
use crate::error::{Error, Result};
use crate::object::containers::key::big_int_words;
use crate::object::type_registry::static_index;
use crate::object::{ObjectHeader, ObjectRef};
use crate::value::{Any, AnyView};

/// Where a big integer's word count sits: right after the object header (tvm-ffi
/// `big_int.h`, `BigIntObj`).
const BIG_INT_COUNT_OFFSET: usize = std::mem::size_of::<ObjectHeader>();

/// Where a big integer's words start: `sizeof(BigIntObj)`, the header and a `size_t` count
/// rounded to 8 bytes (32 on 32-bit targets too; `BigIntUnsafe::GetArrayView` reads them at
/// `obj + 1`).
pub const BIG_INT_WORDS_OFFSET: usize =
    (BIG_INT_COUNT_OFFSET + std::mem::size_of::<usize>()).next_multiple_of(8);

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
    crate::unwind_guard::run_or("big int deleter", (), || {
        if flags & deleter_flag::WEAK != 0 {
            // SAFETY: the word count sits right after the header and is never changed.
            let words = unsafe {
                ptr.cast::<u8>()
                    .add(BIG_INT_COUNT_OFFSET)
                    .cast::<usize>()
                    .read()
            };
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
        block
            .add(BIG_INT_COUNT_OFFSET)
            .cast::<usize>()
            .write(words.len());
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
pub fn big_int_from_words(words: &[i64]) -> Result<Any> {
    let mut n = words.len();
    while n > 1 && words[n - 1] == if words[n - 2] < 0 { -1 } else { 0 } {
        n -= 1;
    }
    if n <= 1 {
        return Ok(Any::from(words.first().copied().unwrap_or(0)));
    }
    Ok(Any::from_object(new_big_int(&words[..n])?))
}

/// The words of an `int` or `ffi.BigInt` value (an `int` as one word), or `None`.
pub fn integer_words(v: &AnyView<'_>) -> Option<Vec<i64>> {
    if let Some(i) = v
        .as_i64()
        .filter(|_| v.type_index() == crate::abi::type_index::INT)
    {
        return Some(vec![i]);
    }
    if v.type_index() != static_index::BIG_INT {
        return None;
    }
    let obj = v.as_object()?;
    Some(big_int_words(&obj).iter().map(|&w| w as i64).collect())
}

/// 10^19, the largest power of ten in a 64-bit limb.
const TEN_19: u64 = 10_000_000_000_000_000_000;

/// The decimal form of two's-complement words (least significant first): `-` for negative
/// values, no leading zeros.
pub fn words_to_decimal(words: &[i64]) -> String {
    let negative = words.last().is_some_and(|&w| w < 0);
    // The magnitude, as unsigned limbs (two's complement negated when negative).
    let mut limbs: Vec<u64> = words.iter().map(|&w| w as u64).collect();
    if negative {
        let mut carry = true;
        for l in &mut limbs {
            let (v, c) = (!*l).overflowing_add(u64::from(carry));
            *l = v;
            carry = c;
        }
    }
    let mut chunks: Vec<u64> = Vec::new();
    while limbs.iter().any(|&l| l != 0) {
        let mut rem: u128 = 0;
        for l in limbs.iter_mut().rev() {
            let cur = (rem << 64) | u128::from(*l);
            *l = (cur / u128::from(TEN_19)) as u64;
            rem = cur % u128::from(TEN_19);
        }
        chunks.push(rem as u64);
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    match chunks.split_last() {
        None => out.push('0'),
        Some((top, rest)) => {
            out.push_str(&top.to_string());
            for c in rest.iter().rev() {
                out.push_str(&format!("{c:019}"));
            }
        }
    }
    out
}

/// Reads a decimal integer as tvm-ffi's `operator>>` does when the whole text must be one
/// number: an optional `+` or `-`, then at least one digit, nothing else (no spaces). The
/// result is an `int` when it fits 64 bits, else an `ffi.BigInt`.
pub fn parse_decimal(text: &str) -> Result<Any> {
    let bad = || Error::value(format!("Invalid decimal string for ffi.BigInt: `{text}`"));
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    // Magnitude in unsigned limbs: multiply by ten and add, one digit at a time.
    let mut limbs: Vec<u64> = vec![0];
    for d in digits.bytes() {
        let mut carry = u128::from(d - b'0');
        for l in &mut limbs {
            let cur = u128::from(*l) * 10 + carry;
            *l = cur as u64;
            carry = cur >> 64;
        }
        if carry != 0 {
            limbs.push(carry as u64);
        }
    }
    // Two's complement with room for the sign, then negated when negative.
    limbs.push(0);
    if negative {
        let mut carry = true;
        for l in &mut limbs {
            let (v, c) = (!*l).overflowing_add(u64::from(carry));
            *l = v;
            carry = c;
        }
    }
    let words: Vec<i64> = limbs.into_iter().map(|l| l as i64).collect();
    big_int_from_words(&words)
}

/// The JSON-graph hooks of `ffi.BigInt` (tvm-ffi `container.cc`): `__data_to_json__` writes the
/// decimal form, `__data_from_json__` reads it back (a value that fits 64 bits comes back an
/// `int`, as tvm-ffi's `BigInt` stores it).
pub fn json_hooks() -> [(&'static str, crate::function::Function); 2] {
    use crate::function::Function;
    let to_json = Function::from_fn(|args| {
        let v = args
            .first()
            .ok_or_else(|| Error::type_error("__data_to_json__ expects a value"))?;
        let words = integer_words(v).ok_or_else(|| v.type_mismatch("value", "ffi.BigInt"))?;
        Ok(Any::from(words_to_decimal(&words)))
    });
    let from_json = Function::from_fn(|args| {
        let data = args
            .first()
            .ok_or_else(|| Error::type_error("__data_from_json__ expects the node's data"))?;
        let text = data
            .as_str()
            .filter(|_| data.type_index() != crate::abi::type_index::RAW_STR)
            .ok_or_else(|| {
                Error::value(format!(
                    "Invalid decimal string for ffi.BigInt: got {}",
                    data.type_name()
                ))
            })?;
        parse_decimal(text)
    });
    [
        ("__data_to_json__", to_json),
        ("__data_from_json__", from_json),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_round_trips() {
        for text in [
            "0",
            "1",
            "-1",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "-9223372036854775809",
            "1267650600228229401496703205376",
            "-1267650600228229401496703205376",
            "57896044618658097711785492504343953926634992332820282019728792003956564819968",
        ] {
            let v = parse_decimal(text).unwrap();
            let words = integer_words(&v.view()).unwrap();
            assert_eq!(words_to_decimal(&words), text);
        }
        assert_eq!(parse_decimal("+0007").unwrap().view().as_i64(), Some(7));
        assert_eq!(parse_decimal("-0").unwrap().view().as_i64(), Some(0));
        assert_eq!(
            parse_decimal("9223372036854775808")
                .unwrap()
                .view()
                .type_index(),
            static_index::BIG_INT
        );
        for bad in ["", "+", "-", "x", "12x", " 1", "1 ", "1.0", "12\0x"] {
            assert!(parse_decimal(bad).is_err(), "{bad:?}");
        }
    }
}
