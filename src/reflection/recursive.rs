//! Recursive equality, ordering and hashing over values and reflected objects
//! (`ffi.RecursiveEq/Lt/Le/Gt/Ge`, `ffi.RecursiveHash`), with tvm-ffi's rules
//! (`src/ffi/extra/dataclass.cc`):
//! - `None` sorts first; strings and bytes compare by content (small and object forms alike);
//!   values of different kinds are unequal, and ordering them is a `TypeError`;
//! - floats: NaN equals NaN for equality, ordering a NaN is a `TypeError`; hashing maps NaN to one
//!   value and `-0.0` to `0.0`;
//! - arrays and lists compare item by item then by length; maps and dicts are equal when they
//!   have the same keys with equal values, and cannot be ordered;
//! - shapes compare dimension by dimension; other objects are equal when identical, else by
//!   their reflected fields in order (skipping `CompareOff` fields, and `HashOff` ones for the
//!   hash), unless the type sets the `__ffi_eq__`, `__ffi_compare__` or `__ffi_hash__` hook;
//! - a cycle compares equal for equality (ordering it is a `ValueError`) and hashes to the
//!   type's key hash.
//!
//! The hash values are tvmrt's own (stable within a process and across runs), not tvm-ffi's.

use std::collections::{HashMap, HashSet};

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::key::big_int_words;
use crate::object::containers::list::seq_items;
use crate::object::containers::map::{self, map_entries};
use crate::object::shape::shape_dims;
use crate::object::type_registry::static_index;
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::fields;

/// `kTVMFFIFieldFlagBitMaskCompareOff`.
pub const COMPARE_OFF: i64 = 1 << 7;
/// `kTVMFFIFieldFlagBitMaskHashOff`.
pub const HASH_OFF: i64 = 1 << 8;
/// `kTVMFFIStaticObjectEnd`: first index of types registered at run time.
const STATIC_OBJECT_END: i32 = ti::DYN_OBJECT_BEGIN;
/// Deepest nesting followed before giving up with a `ValueError`.
const MAX_DEPTH: usize = 1 << 12;

fn is_str(t: i32) -> bool {
    t == ti::STR || t == ti::SMALL_STR
}
fn is_bytes(t: i32) -> bool {
    t == ti::BYTES || t == ti::SMALL_BYTES
}

/// The type key of an index, for messages.
fn key_of(t: i32) -> String {
    fields::type_info(t)
        .map(fields::type_key)
        .unwrap_or_else(|_| crate::value::type_name(t).to_string())
}

fn sign(o: std::cmp::Ordering) -> i32 {
    o as i32
}

/// The reflected field values of `obj` whose flags have none of `skip`.
pub fn field_values(obj: &ObjectRef, skip: i64) -> Result<Vec<Any>> {
    let info = fields::type_info(obj.type_index())?;
    fields::all_fields(info)
        .iter()
        .filter(|f| f.flags & skip == 0)
        .map(|f| fields::read_field(obj, f))
        .collect()
}

/// Three-way comparer; `eq_only` selects equality semantics.
pub struct Comparer {
    eq_only: bool,
    on_stack: HashSet<(usize, usize)>,
    depth: usize,
}

impl Comparer {
    /// A comparer for equality (`eq_only`) or ordering.
    pub fn new(eq_only: bool) -> Comparer {
        Comparer {
            eq_only,
            on_stack: HashSet::new(),
            depth: 0,
        }
    }

    fn unordered(&self, what: &str) -> Result<i32> {
        if self.eq_only {
            Ok(1)
        } else {
            Err(Error::type_error(what.to_string()))
        }
    }

    /// -1, 0 or 1.
    pub fn compare(&mut self, a: &AnyView<'_>, b: &AnyView<'_>) -> Result<i32> {
        let (lt, rt) = (a.type_index(), b.type_index());
        if lt == ti::NONE || rt == ti::NONE {
            return Ok(sign((lt != ti::NONE).cmp(&(rt != ti::NONE))));
        }
        if (is_str(lt) && is_str(rt)) || (is_bytes(lt) && is_bytes(rt)) {
            return Ok(sign(a.as_byte_slice().cmp(&b.as_byte_slice())));
        }
        if lt != rt {
            if self.eq_only {
                return Ok(1);
            }
            // An int orders against a big integer by value (one word holds any int64).
            let words = |v: &AnyView<'_>| match v.type_index() {
                ti::INT => v.as_i64().map(|i| vec![i as u64]),
                static_index::BIG_INT => v.as_object().map(|o| big_int_words(&o).to_vec()),
                _ => None,
            };
            if let (Some(x), Some(y)) = (words(a), words(b)) {
                return Ok(compare_big_ints(&x, &y));
            }
            return Err(Error::type_error(format!(
                "Cannot compare values of different types: {} vs {}",
                key_of(lt),
                key_of(rt)
            )));
        }
        if lt < ti::STATIC_OBJECT_BEGIN {
            return self.compare_pod(a, b, lt);
        }
        let (Some(lo), Some(ro)) = (a.as_object(), b.as_object()) else {
            return Ok(0);
        };
        if lo.as_ptr() == ro.as_ptr() {
            return Ok(0);
        }
        if lt == ti::SHAPE {
            let (x, y) = (
                shape_dims(&lo).unwrap_or(&[]),
                shape_dims(&ro).unwrap_or(&[]),
            );
            return Ok(sign(x.cmp(y)));
        }
        if lt == static_index::BIG_INT {
            let (x, y) = (big_int_words(&lo), big_int_words(&ro));
            return Ok(if self.eq_only {
                i32::from(x != y)
            } else {
                compare_big_ints(x, y)
            });
        }
        let pair = (lo.as_ptr() as usize, ro.as_ptr() as usize);
        if self.on_stack.contains(&pair) {
            if self.eq_only {
                return Ok(0);
            }
            return Err(Error::value(
                "RecursiveCompare: cyclic reference detected in ordering",
            ));
        }
        if self.depth >= MAX_DEPTH {
            return Err(Error::value(format!(
                "RecursiveCompare: maximum stack depth ({MAX_DEPTH}) exceeded"
            )));
        }
        self.on_stack.insert(pair);
        self.depth += 1;
        let r = self.compare_objects(&lo, &ro, lt);
        self.depth -= 1;
        self.on_stack.remove(&pair);
        r
    }

    fn compare_pod(&self, a: &AnyView<'_>, b: &AnyView<'_>, t: i32) -> Result<i32> {
        // SAFETY: every POD payload is 8 readable bytes.
        let (x, y) = (a.raw().payload, b.raw().payload);
        // SAFETY (the reads below): the payload is of the kind `t` says.
        Ok(match t {
            ti::BOOL => sign((unsafe { x.v_int64 } != 0).cmp(&(unsafe { y.v_int64 } != 0))),
            ti::INT => sign(unsafe { x.v_int64.cmp(&y.v_int64) }),
            ti::FLOAT => {
                let (p, q) = unsafe { (x.v_float64, y.v_float64) };
                if p.is_nan() || q.is_nan() {
                    if !self.eq_only {
                        return Err(Error::type_error("Cannot order NaN values"));
                    }
                    return Ok(if p.is_nan() && q.is_nan() { 0 } else { 1 });
                }
                sign(p.partial_cmp(&q).unwrap_or(std::cmp::Ordering::Equal))
            }
            ti::DATA_TYPE => {
                let (p, q) = unsafe { (x.v_dtype, y.v_dtype) };
                sign((p.code.0, p.bits, p.lanes).cmp(&(q.code.0, q.bits, q.lanes)))
            }
            ti::DEVICE => {
                let (p, q) = unsafe { (x.v_device, y.v_device) };
                sign((p.device_type.0, p.device_id).cmp(&(q.device_type.0, q.device_id)))
            }
            _ => {
                if unsafe { x.v_int64 == y.v_int64 }
                    && a.raw().small_str_len == b.raw().small_str_len
                {
                    0
                } else {
                    return self.unordered(&format!("Cannot order values of type {}", key_of(t)));
                }
            }
        })
    }

    fn compare_objects(&mut self, lo: &ObjectRef, ro: &ObjectRef, t: i32) -> Result<i32> {
        if t == ti::ARRAY || t == static_index::LIST {
            let (x, y) = (
                seq_items(lo).unwrap_or_default(),
                seq_items(ro).unwrap_or_default(),
            );
            for (p, q) in x.iter().zip(&y) {
                let c = self.compare(&p.view(), &q.view())?;
                if c != 0 {
                    return Ok(c);
                }
            }
            return Ok(sign(x.len().cmp(&y.len())));
        }
        if t == ti::MAP || t == static_index::DICT {
            let x = map_entries(lo).unwrap_or_else(|| Ok(Vec::new()))?;
            let y = map_entries(ro).unwrap_or_else(|| Ok(Vec::new()))?;
            if x.len() != y.len() {
                return self.unordered("Cannot order Map/Dict values");
            }
            for e in &x {
                let Some(v) = map::lookup(&y, &e.key.view()) else {
                    return self.unordered("Cannot order Map/Dict values");
                };
                let c = self.compare(&e.value.view(), &v.view())?;
                if c != 0 {
                    return if self.eq_only {
                        Ok(c)
                    } else {
                        Err(Error::type_error("Cannot order Map/Dict values"))
                    };
                }
            }
            return Ok(0);
        }
        if t >= STATIC_OBJECT_END {
            if let Some(r) = self.custom_hook(lo, ro)? {
                return Ok(r);
            }
        }
        let (x, y) = (
            field_values(lo, COMPARE_OFF)?,
            field_values(ro, COMPARE_OFF)?,
        );
        for (p, q) in x.iter().zip(&y) {
            let c = self.compare(&p.view(), &q.view())?;
            if c != 0 {
                return Ok(c);
            }
        }
        Ok(0)
    }

    fn custom_hook(&mut self, lo: &ObjectRef, ro: &ObjectRef) -> Result<Option<i32>> {
        let t = lo.type_index();
        let hook = |name| fields::type_attr(name, t).and_then(|v| v.view().as_function());
        let (lhs, rhs) = (Any::from_object(lo.clone()), Any::from_object(ro.clone()));
        if self.eq_only {
            if let Some(eq) = hook("__ffi_eq__") {
                let r = eq.call(&[lhs.view(), rhs.view(), Any::from(callback(true)).view()])?;
                let equal = r.view().as_bool().unwrap_or(false);
                return Ok(Some(if equal { 0 } else { 1 }));
            }
        }
        if let Some(cmp) = hook("__ffi_compare__") {
            let r = cmp.call(&[
                lhs.view(),
                rhs.view(),
                Any::from(callback(self.eq_only)).view(),
            ])?;
            return Ok(Some(r.view().as_i64().unwrap_or(0).signum() as i32));
        }
        Ok(None)
    }
}

/// Orders two big integers given as minimal two's-complement words, least significant first.
fn compare_big_ints(a: &[u64], b: &[u64]) -> i32 {
    let negative = |w: &[u64]| w.last().is_some_and(|&top| top >> 63 == 1);
    match (negative(a), negative(b)) {
        (true, false) => return -1,
        (false, true) => return 1,
        _ => {}
    }
    if a.len() != b.len() {
        // Same sign: more words is a larger magnitude.
        let longer = if a.len() > b.len() { 1 } else { -1 };
        return if negative(a) { -longer } else { longer };
    }
    // Same sign and length: two's complement words order as unsigned, top word first.
    sign(a.iter().rev().cmp(b.iter().rev()))
}

/// The callback handed to `__ffi_eq__` (a bool) and `__ffi_compare__` (-1/0/1) hooks.
fn callback(eq: bool) -> Function {
    Function::from_fn(move |args| {
        if args.len() != 2 {
            return Err(Error::type_error("comparison callback expects 2 arguments"));
        }
        let c = Comparer::new(eq).compare(&args[0], &args[1])?;
        Ok(if eq {
            Any::from(c == 0)
        } else {
            Any::from(i64::from(c))
        })
    })
}

/// `StableHashCombine`-style mixing (splitmix64 of the pair).
pub fn combine(seed: u64, value: u64) -> u64 {
    let mut z = seed
        ^ value
            .wrapping_add(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(seed << 6)
            .wrapping_add(seed >> 2);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a 64 of bytes.
pub fn hash_bytes(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The type key hash of a type index (the index itself when it is not registered).
pub(crate) fn type_key_hash(t: i32) -> u64 {
    fields::type_info(t)
        .map(|i| i.type_key_hash)
        .unwrap_or(t as u64)
}

/// Recursive hasher with memo and cycle detection.
#[derive(Default)]
pub struct Hasher {
    on_stack: HashSet<usize>,
    memo: HashMap<usize, u64>,
    depth: usize,
}

impl Hasher {
    /// The hash of `v`.
    pub fn hash(&mut self, v: &AnyView<'_>) -> Result<u64> {
        let t = v.type_index();
        if t == ti::NONE {
            return Ok(combine(0, 0));
        }
        if is_str(t) {
            return Ok(combine(
                ti::STR as u64,
                hash_bytes(v.as_byte_slice().unwrap_or(&[])),
            ));
        }
        if is_bytes(t) {
            return Ok(combine(
                ti::BYTES as u64,
                hash_bytes(v.as_byte_slice().unwrap_or(&[])),
            ));
        }
        if t < ti::STATIC_OBJECT_BEGIN {
            // SAFETY: every POD payload is 8 readable bytes, of the kind `t` says.
            let p = v.raw().payload;
            let bits = match t {
                ti::BOOL => u64::from(unsafe { p.v_int64 } != 0),
                ti::FLOAT => {
                    let f = unsafe { p.v_float64 };
                    if f.is_nan() {
                        f64::NAN.to_bits()
                    } else if f == 0.0 {
                        0
                    } else {
                        f.to_bits()
                    }
                }
                ti::DATA_TYPE => {
                    let d = unsafe { p.v_dtype };
                    return Ok(combine(
                        combine(combine(t as u64, u64::from(d.code.0)), u64::from(d.bits)),
                        u64::from(d.lanes),
                    ));
                }
                ti::DEVICE => {
                    let d = unsafe { p.v_device };
                    return Ok(combine(
                        combine(t as u64, u64::from(d.device_type.0)),
                        d.device_id as u64,
                    ));
                }
                _ => unsafe { p.v_uint64 },
            };
            return Ok(combine(t as u64, bits));
        }
        let Some(obj) = v.as_object() else {
            return Ok(combine(0, 0));
        };
        let key = obj.as_ptr() as usize;
        if let Some(&h) = self.memo.get(&key) {
            return Ok(h);
        }
        if self.on_stack.contains(&key) {
            return Ok(type_key_hash(t));
        }
        if self.depth >= MAX_DEPTH {
            return Err(Error::value(format!(
                "RecursiveHash: maximum stack depth ({MAX_DEPTH}) exceeded"
            )));
        }
        self.on_stack.insert(key);
        self.depth += 1;
        let r = self.hash_object(&obj, t);
        self.depth -= 1;
        self.on_stack.remove(&key);
        let h = r?;
        self.memo.insert(key, h);
        Ok(h)
    }

    fn hash_object(&mut self, obj: &ObjectRef, t: i32) -> Result<u64> {
        if t == static_index::BIG_INT {
            let words = big_int_words(obj);
            return Ok(words
                .iter()
                .fold(combine(type_key_hash(t), words.len() as u64), |h, &w| {
                    combine(h, w)
                }));
        }
        if t == ti::SHAPE {
            let dims = shape_dims(obj).unwrap_or(&[]);
            let mut h = combine(type_key_hash(t), dims.len() as u64);
            for &d in dims {
                h = combine(h, d as u64);
            }
            return Ok(h);
        }
        if let Some(hook) =
            fields::type_attr("__ffi_hash__", t).and_then(|v| v.view().as_function())
        {
            let cb = Function::from_fn(|args| {
                let v = args
                    .first()
                    .ok_or_else(|| Error::type_error("hash callback expects 1 argument"))?;
                Ok(Any::from(Hasher::default().hash(v)? as i64))
            });
            let r = hook.call(&[Any::from_object(obj.clone()).view(), Any::from(cb).view()])?;
            return Ok(r.view().as_i64().unwrap_or(0) as u64);
        }
        if t >= STATIC_OBJECT_END
            && (fields::type_attr("__ffi_eq__", t).is_some()
                || fields::type_attr("__ffi_compare__", t).is_some())
        {
            return Err(Error::value(format!(
                "RecursiveHash: type '{}' defines __ffi_eq__ or __ffi_compare__ but not __ffi_hash__. \
                 Add a __ffi_hash__ hook to maintain the invariant \
                 RecursiveEq(a,b) => RecursiveHash(a)==RecursiveHash(b).",
                key_of(t)
            )));
        }
        let base = type_key_hash(t);
        if let Some(items) = seq_items(obj) {
            let mut h = combine(base, items.len() as u64);
            for (i, item) in items.iter().enumerate() {
                h = combine(h, combine(self.hash(&item.view())?, i as u64));
            }
            return Ok(h);
        }
        if let Some(entries) = map_entries(obj) {
            let entries = entries?;
            let mut h = combine(base, entries.len() as u64);
            let mut each = Vec::with_capacity(entries.len());
            for e in &entries {
                each.push(combine(
                    self.hash(&e.key.view())?,
                    self.hash(&e.value.view())?,
                ));
            }
            crate::cold_sort::sort(&mut each);
            for e in each {
                h = combine(h, e);
            }
            return Ok(h);
        }
        let mut h = base;
        for v in field_values(obj, HASH_OFF | COMPARE_OFF)? {
            h = combine(h, self.hash(&v.view())?);
        }
        Ok(h)
    }
}

/// The global functions of this module.
pub fn builtins() -> Vec<(&'static str, Function)> {
    fn two<'a>(name: &str, args: &'a [AnyView<'a>]) -> Result<(&'a AnyView<'a>, &'a AnyView<'a>)> {
        if args.len() != 2 {
            return Err(Error::type_error(format!(
                "`{name}` expects 2 arguments, got {}",
                args.len()
            )));
        }
        Ok((&args[0], &args[1]))
    }
    let cmp = |name: &'static str, test: fn(i32) -> bool| {
        (
            name,
            Function::from_fn(move |args| {
                let (a, b) = two(name, args)?;
                Ok(Any::from(test(Comparer::new(false).compare(a, b)?)))
            }),
        )
    };
    vec![
        (
            "ffi.RecursiveEq",
            Function::from_fn(|args| {
                let (a, b) = two("ffi.RecursiveEq", args)?;
                Ok(Any::from(Comparer::new(true).compare(a, b)? == 0))
            }),
        ),
        cmp("ffi.RecursiveLt", |c| c < 0),
        cmp("ffi.RecursiveLe", |c| c <= 0),
        cmp("ffi.RecursiveGt", |c| c > 0),
        cmp("ffi.RecursiveGe", |c| c >= 0),
        (
            "ffi.RecursiveHash",
            Function::from_fn(|args| {
                if args.len() != 1 {
                    return Err(Error::type_error("`ffi.RecursiveHash` expects 1 argument"));
                }
                Ok(Any::from(Hasher::default().hash(&args[0])? as i64))
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_integers_order_by_signed_value() {
        let neg = |w: &[u64]| w.to_vec();
        // 2^64 (two words) > 5 > -1 > -2^64 - 1 (two words, negative).
        let big = [0u64, 1];
        let five = [5u64];
        let minus_one = [u64::MAX];
        let big_neg = neg(&[u64::MAX, u64::MAX - 1]);
        assert_eq!(compare_big_ints(&big, &five), 1);
        assert_eq!(compare_big_ints(&five, &big), -1);
        assert_eq!(compare_big_ints(&minus_one, &five), -1);
        assert_eq!(compare_big_ints(&big_neg, &minus_one), -1);
        assert_eq!(compare_big_ints(&minus_one, &big_neg), 1);
        assert_eq!(compare_big_ints(&big, &big), 0);
    }
}
