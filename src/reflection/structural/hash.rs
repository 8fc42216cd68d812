//! Structural hash: equal values (by [`super::structural_equal`]) hash alike.

use std::collections::HashMap;

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::key::big_int_words;
use crate::object::containers::list::seq_items;
use crate::object::containers::map::map_entries;
use crate::object::shape::shape_dims;
use crate::object::type_registry::{static_index, TVMFFITypeInfo};
use crate::object::ObjectRef;
use crate::reflection::fields;
use crate::reflection::recursive::{combine, hash_bytes, type_key_hash};
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

use super::equal::content_kind;
use super::{
    callback_region, field_region, hook, kind, object_kind, region, Reentry, StackBase,
    SEQ_HASH_IGNORE,
};

/// The structural hash of `v`.
pub fn structural_hash(
    v: &AnyView<'_>,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<u64> {
    let mut h = Hash {
        region: if map_free_vars {
            region::PATTERN
        } else {
            region::NONE
        },
        skip_tensor_content,
        memo: HashMap::new(),
        free_vars: 0,
        dag_nodes: 0,
        stack: StackBase::here(),
    };
    h.hash(v)
}

/// The bytes of a compact CPU tensor, for comparing or hashing its content.
pub(super) fn tensor_bytes(t: &Tensor, what: &str) -> Result<Vec<u8>> {
    if t.device().device_type.0 != 1 {
        return Err(Error::value(format!("can only {what} CPU tensors")));
    }
    if !t.is_contiguous() {
        return Err(Error::value(format!("can only {what} contiguous tensors")));
    }
    t.to_vec()
}

/// One structural hash computation.
struct Hash {
    region: i32,
    skip_tensor_content: bool,
    /// Objects hashed so far (kept alive so their addresses stay theirs).
    memo: HashMap<usize, (ObjectRef, u64)>,
    free_vars: u64,
    dag_nodes: u64,
    stack: StackBase,
}

/// A big integer's hash: its type and its words.
fn big_int_hash(obj: &ObjectRef) -> u64 {
    big_int_words(obj)
        .iter()
        .fold(type_key_hash(static_index::BIG_INT), |h, &w| combine(h, w))
}

impl Hash {
    /// The hash of a value that needs no walk: strings, bytes, big integers (by value, so
    /// they also anchor map entries as keys) and POD values.
    fn leaf(v: &AnyView<'_>) -> Option<u64> {
        let t = content_kind(v.type_index());
        if t == ti::STR || t == ti::BYTES {
            return Some(combine(
                t as u64,
                hash_bytes(v.as_byte_slice().unwrap_or(&[])),
            ));
        }
        if t == static_index::BIG_INT {
            return v.as_object().map(|o| big_int_hash(&o));
        }
        if t >= ti::STATIC_OBJECT_BEGIN {
            return None;
        }
        let raw = v.raw();
        // SAFETY: every POD payload is 8 readable bytes, a float's is `v_float64`.
        let bits = if t == ti::FLOAT && unsafe { raw.payload.v_float64 }.is_nan() {
            f64::NAN.to_bits()
        } else {
            // SAFETY: as above.
            unsafe { raw.payload.v_uint64 }
        };
        Some(combine(t as u64, bits))
    }

    fn hash(&mut self, v: &AnyView<'_>) -> Result<u64> {
        if let Some(h) = Self::leaf(v) {
            return Ok(h);
        }
        let Some(obj) = v.as_object() else {
            return Ok(combine(0, 0));
        };
        self.stack.check("StructuralHash")?;
        self.hash_object(&obj)
    }

    fn hash_object(&mut self, obj: &ObjectRef) -> Result<u64> {
        let t = obj.type_index();
        let seed = type_key_hash(t);
        match t {
            ti::ARRAY | static_index::LIST => {
                let items = seq_items(obj).unwrap_or_default();
                let mut h = combine(seed, items.len() as u64);
                for item in &items {
                    h = combine(h, self.hash(&item.view())?);
                }
                Ok(h)
            }
            ti::MAP | static_index::DICT => self.hash_map(obj, seed),
            ti::SHAPE => Ok(shape_dims(obj).unwrap_or(&[]).iter().fold(
                combine(seed, shape_dims(obj).map_or(0, |d| d.len()) as u64),
                |h, &d| combine(h, d as u64),
            )),
            ti::TENSOR => self.hash_tensor(obj, seed),
            static_index::BIG_INT => Ok(big_int_hash(obj)),
            _ => self.hash_reflected(obj),
        }
    }

    /// Order-independent: entries sorted by their key's hash; keys that are objects not yet
    /// hashed (whose hash depends on the walk) are left out, and entries whose keys share a
    /// hash count by key only.
    fn hash_map(&mut self, obj: &ObjectRef, seed: u64) -> Result<u64> {
        let entries = map_entries(obj).unwrap_or_else(|| Ok(Vec::new()))?;
        let mut h = combine(seed, entries.len() as u64);
        let mut items: Vec<(u64, &Any)> = Vec::with_capacity(entries.len());
        for e in &entries {
            let key = e.key.view();
            let kh = match Self::leaf(&key) {
                Some(kh) => Some(kh),
                None => key
                    .as_object()
                    .and_then(|o| self.memo.get(&(o.as_ptr() as usize)).map(|m| m.1)),
            };
            if let Some(kh) = kh {
                items.push((kh, &e.value));
            }
        }
        crate::cold_sort::sort_by_key(&mut items, |item| item.0);
        let mut i = 0;
        while i < items.len() {
            let mut k = i + 1;
            while k < items.len() && items[k].0 == items[i].0 {
                k += 1;
            }
            h = combine(h, items[i].0);
            if k == i + 1 {
                h = combine(h, self.hash(&items[i].1.view())?);
            }
            i = k;
        }
        Ok(h)
    }

    fn hash_tensor(&mut self, obj: &ObjectRef, seed: u64) -> Result<u64> {
        let t = Tensor::from_object(obj.clone())?;
        let mut h = combine(seed, t.shape().len() as u64);
        for &d in t.shape() {
            h = combine(h, d as u64);
        }
        let d = t.dtype();
        h = combine(
            h,
            u64::from(d.code.0) | u64::from(d.bits) << 8 | u64::from(d.lanes) << 16,
        );
        if !self.skip_tensor_content {
            h = combine(h, hash_bytes(&tensor_bytes(&t, "hash")?));
        }
        Ok(h)
    }

    fn hash_reflected(&mut self, obj: &ObjectRef) -> Result<u64> {
        let (k, info) = object_kind(obj)?;
        let key = obj.as_ptr() as usize;
        if let Some((_, h)) = self.memo.get(&key) {
            return Ok(*h);
        }
        let mut h = if k == kind::UNIQUE_INSTANCE {
            // Equal only to itself: its address is its identity.
            combine(info.type_key_hash, key as u64)
        } else if k != kind::FREE_VAR {
            self.hash_fields(obj, info)?
        } else {
            let saved = self.region;
            if self.region == region::SIMPLE {
                self.region = region::NONE;
            }
            let fields_hash = self.hash_fields(obj, info);
            self.region = saved;
            let fields_hash = fields_hash?;
            if self.region != region::NONE {
                // Bound here: numbered by the order variables are first met.
                self.free_vars += 1;
                combine(fields_hash, self.free_vars)
            } else {
                combine(info.type_key_hash, key as u64)
            }
        };
        if k == kind::DAG_NODE {
            self.dag_nodes += 1;
            h = combine(h, self.dag_nodes);
        }
        self.memo.insert(key, (obj.clone(), h));
        Ok(h)
    }

    fn hash_fields(&mut self, obj: &ObjectRef, info: &'static TVMFFITypeInfo) -> Result<u64> {
        let seed = info.type_key_hash;
        if let Some(hook) = hook("__s_hash__", info)? {
            return self.call_hook(&hook, obj, seed);
        }
        let mut h = seed;
        for f in fields::all_fields(info) {
            if f.flags & SEQ_HASH_IGNORE != 0 {
                continue;
            }
            let value = fields::read_field(obj, &f)?;
            let saved = self.region;
            self.region = field_region(saved, f.flags);
            let fh = self.hash(&value.view());
            self.region = saved;
            h = combine(h, fh?);
        }
        Ok(h)
    }

    /// Calls a type's `__s_hash__(obj, init_hash, hash_cb)`; `hash_cb(value, init_hash,
    /// def_region_kind)` folds a sub-value's hash into `init_hash` within this computation.
    fn call_hook(&mut self, hook: &Function, obj: &ObjectRef, seed: u64) -> Result<u64> {
        let this = Reentry::new(self);
        let cb = {
            let this = this.clone();
            Function::from_fn(move |args| {
                if args.len() != 3 {
                    return Err(Error::type_error(format!(
                        "structural hash callback expects 3 arguments (value, init_hash, \
                         def_region_kind), got {}",
                        args.len()
                    )));
                }
                this.with("structural hash", |hs| {
                    let init = args[1].expect_i64("init_hash")? as u64;
                    let saved = hs.region;
                    hs.region = callback_region(saved, &args[2])?;
                    let vh = hs.hash(&args[0]);
                    hs.region = saved;
                    Ok(Any::from(combine(init, vh?) as i64))
                })
            })
        };
        let r = hook.call(&[
            Any::from_object(obj.clone()).view(),
            Any::from(seed as i64).view(),
            Any::from(cb).view(),
        ]);
        this.end();
        let r = r?;
        Ok(r.view().expect_i64("the __s_hash__ result")? as u64)
    }
}
