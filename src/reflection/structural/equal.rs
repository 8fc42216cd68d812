//! Structural equality, and the first mismatch as a pair of access paths.

use std::collections::HashMap;

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::key::big_int_words;
use crate::object::containers::list::seq_items;
use crate::object::containers::map::{self, map_entries};
use crate::object::shape::shape_dims;
use crate::object::type_registry::{static_index, TVMFFITypeInfo};
use crate::object::ObjectRef;
use crate::reflection::access_path::{self, kind as step};
use crate::reflection::fields;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

use super::{
    callback_region, field_region, hook, kind, object_kind, region, Reentry, StackBase,
    SEQ_HASH_IGNORE,
};

/// The kind a value's content compares as: inline and borrowed strings and bytes count as
/// their object kinds.
pub(super) fn content_kind(t: i32) -> i32 {
    match t {
        ti::SMALL_STR | ti::RAW_STR => ti::STR,
        ti::SMALL_BYTES | ti::BYTE_ARRAY_PTR => ti::BYTES,
        other => other,
    }
}

/// Objects paired by the comparison (DAG nodes and bound free variables), both ways; the
/// references keep the pointers valid.
#[derive(Default)]
struct Pairing {
    lhs_to_rhs: HashMap<usize, (ObjectRef, ObjectRef)>,
    rhs_to_lhs: HashMap<usize, (ObjectRef, ObjectRef)>,
}

impl Pairing {
    fn bind(&mut self, l: &ObjectRef, r: &ObjectRef) {
        let (lk, rk) = (l.as_ptr() as usize, r.as_ptr() as usize);
        self.lhs_to_rhs.insert(lk, (l.clone(), r.clone()));
        self.rhs_to_lhs.insert(rk, (r.clone(), l.clone()));
    }
}

/// The steps to the first mismatch, innermost first, on each side.
type ReversePaths = (Vec<ObjectRef>, Vec<ObjectRef>);

/// One structural comparison.
pub(super) struct Equal {
    region: i32,
    skip_tensor_content: bool,
    paths: Option<ReversePaths>,
    pairing: Pairing,
    stack: StackBase,
}

/// Whether `a` and `b` are structurally equal.
pub fn structural_equal(
    a: &AnyView<'_>,
    b: &AnyView<'_>,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<bool> {
    Equal::new(map_free_vars, skip_tensor_content, false).compare(a, b)
}

/// The access paths (left, right) to the first place `a` and `b` differ, or `None` when they
/// are structurally equal.
pub fn first_mismatch(
    a: &AnyView<'_>,
    b: &AnyView<'_>,
    map_free_vars: bool,
    skip_tensor_content: bool,
) -> Result<Option<(ObjectRef, ObjectRef)>> {
    let mut eq = Equal::new(map_free_vars, skip_tensor_content, true);
    if eq.compare(a, b)? {
        return Ok(None);
    }
    let (l, r) = eq.paths.take().unwrap_or_default();
    let build = |steps: Vec<ObjectRef>| -> Result<ObjectRef> {
        steps
            .into_iter()
            .rev()
            .try_fold(access_path::root()?, |p, s| access_path::extend(&p, s))
    };
    Ok(Some((build(l)?, build(r)?)))
}

impl Equal {
    fn new(map_free_vars: bool, skip_tensor_content: bool, trace: bool) -> Equal {
        Equal {
            region: if map_free_vars {
                region::PATTERN
            } else {
                region::NONE
            },
            skip_tensor_content,
            paths: trace.then(ReversePaths::default),
            pairing: Pairing::default(),
            stack: StackBase::here(),
        }
    }

    /// Records one step of the mismatch path on each side (when tracing).
    fn record(&mut self, lhs: (i32, Any), rhs: (i32, Any)) -> Result<()> {
        if let Some((l, r)) = &mut self.paths {
            l.push(access_path::new_step(lhs.0, lhs.1)?);
            r.push(access_path::new_step(rhs.0, rhs.1)?);
        }
        Ok(())
    }

    fn attr_step(&mut self, name: &str) -> Result<()> {
        self.record((step::ATTR, Any::from(name)), (step::ATTR, Any::from(name)))
    }

    /// Compares two values.
    pub(super) fn compare(&mut self, a: &AnyView<'_>, b: &AnyView<'_>) -> Result<bool> {
        let (lt, rt) = (content_kind(a.type_index()), content_kind(b.type_index()));
        if lt != rt {
            return Ok(false);
        }
        if lt == ti::STR || lt == ti::BYTES {
            return Ok(a.as_byte_slice() == b.as_byte_slice());
        }
        if lt < ti::STATIC_OBJECT_BEGIN {
            let (x, y) = (a.raw(), b.raw());
            // SAFETY: every POD payload is 8 readable bytes, a float's is `v_float64`.
            if lt == ti::FLOAT && unsafe { x.payload.v_float64 }.is_nan() {
                return Ok(unsafe { y.payload.v_float64 }.is_nan());
            }
            // SAFETY: as above.
            return Ok(x.small_str_len == y.small_str_len
                && unsafe { x.payload.v_int64 == y.payload.v_int64 });
        }
        let (Some(lo), Some(ro)) = (a.as_object(), b.as_object()) else {
            return Ok(false);
        };
        self.stack.check("StructuralEqual")?;
        self.compare_objects(&lo, &ro, lt)
    }

    fn compare_objects(&mut self, lo: &ObjectRef, ro: &ObjectRef, t: i32) -> Result<bool> {
        match t {
            ti::ARRAY | static_index::LIST => {
                let x = seq_items(lo).unwrap_or_default();
                let y = seq_items(ro).unwrap_or_default();
                self.compare_sequences(&x, &y)
            }
            ti::MAP | static_index::DICT => self.compare_maps(lo, ro),
            ti::SHAPE => Ok(shape_dims(lo) == shape_dims(ro)),
            ti::TENSOR => self.compare_tensors(lo, ro),
            static_index::BIG_INT => Ok(big_int_words(lo) == big_int_words(ro)),
            _ => self.compare_reflected(lo, ro),
        }
    }

    fn compare_sequences(&mut self, x: &[Any], y: &[Any]) -> Result<bool> {
        if x.len() != y.len() && self.paths.is_none() {
            return Ok(false);
        }
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            if !self.compare(&p.view(), &q.view())? {
                let at = Any::from(i as i64);
                self.record((step::ARRAY_ITEM, at.clone()), (step::ARRAY_ITEM, at))?;
                return Ok(false);
            }
        }
        if x.len() == y.len() {
            return Ok(true);
        }
        let at = Any::from(x.len().min(y.len()) as i64);
        if x.len() > y.len() {
            self.record(
                (step::ARRAY_ITEM, at.clone()),
                (step::ARRAY_ITEM_MISSING, at),
            )?;
        } else {
            self.record(
                (step::ARRAY_ITEM_MISSING, at.clone()),
                (step::ARRAY_ITEM, at),
            )?;
        }
        Ok(false)
    }

    /// A key of one side as the other side knows it: a paired object stands for its partner.
    fn mapped_key(&self, key: &Any, lhs_to_rhs: bool) -> Any {
        let Some(o) = key.view().as_object() else {
            return key.clone();
        };
        let table = if lhs_to_rhs {
            &self.pairing.lhs_to_rhs
        } else {
            &self.pairing.rhs_to_lhs
        };
        match table.get(&(o.as_ptr() as usize)) {
            Some((_, partner)) => Any::from_object(partner.clone()),
            None => key.clone(),
        }
    }

    fn compare_maps(&mut self, lo: &ObjectRef, ro: &ObjectRef) -> Result<bool> {
        let x = map_entries(lo).unwrap_or_else(|| Ok(Vec::new()))?;
        let y = map_entries(ro).unwrap_or_else(|| Ok(Vec::new()))?;
        if x.len() != y.len() && self.paths.is_none() {
            return Ok(false);
        }
        for e in &x {
            let rhs_key = self.mapped_key(&e.key, true);
            let Some(v) = map::lookup(&y, &rhs_key.view()) else {
                self.record(
                    (step::MAP_ITEM, e.key.clone()),
                    (step::MAP_ITEM_MISSING, rhs_key),
                )?;
                return Ok(false);
            };
            if !self.compare(&e.value.view(), &v.view())? {
                self.record((step::MAP_ITEM, e.key.clone()), (step::MAP_ITEM, rhs_key))?;
                return Ok(false);
            }
        }
        if x.len() == y.len() {
            return Ok(true);
        }
        // The right side has a key the left lacks: find it for the path.
        for e in &y {
            let lhs_key = self.mapped_key(&e.key, false);
            if map::lookup(&x, &lhs_key.view()).is_none() {
                self.record(
                    (step::MAP_ITEM_MISSING, lhs_key),
                    (step::MAP_ITEM, e.key.clone()),
                )?;
                return Ok(false);
            }
        }
        Ok(false)
    }

    fn compare_tensors(&mut self, lo: &ObjectRef, ro: &ObjectRef) -> Result<bool> {
        if lo.as_ptr() == ro.as_ptr() {
            return Ok(true);
        }
        let (x, y) = (
            Tensor::from_object(lo.clone())?,
            Tensor::from_object(ro.clone())?,
        );
        if x.shape() != y.shape() || x.dtype() != y.dtype() {
            return Ok(false);
        }
        if self.skip_tensor_content {
            return Ok(true);
        }
        Ok(super::hash::tensor_bytes(&x, "compare")? == super::hash::tensor_bytes(&y, "compare")?)
    }

    fn compare_reflected(&mut self, lo: &ObjectRef, ro: &ObjectRef) -> Result<bool> {
        let (k, info) = object_kind(lo)?;
        if k == kind::UNIQUE_INSTANCE {
            return Ok(lo.as_ptr() == ro.as_ptr());
        }
        if k == kind::CONST_TREE_NODE && lo.as_ptr() == ro.as_ptr() {
            return Ok(true);
        }
        if k == kind::DAG_NODE || k == kind::FREE_VAR {
            if let Some((_, partner)) = self.pairing.lhs_to_rhs.get(&(lo.as_ptr() as usize)) {
                return Ok(partner.as_ptr() == ro.as_ptr());
            }
            if self
                .pairing
                .rhs_to_lhs
                .contains_key(&(ro.as_ptr() as usize))
            {
                return Ok(false);
            }
        }
        if k != kind::FREE_VAR {
            let equal = self.compare_fields(lo, ro, info)?;
            if equal && k == kind::DAG_NODE {
                self.pairing.bind(lo, ro);
            }
            return Ok(equal);
        }
        // A free variable: in a simple region its own fields are uses.
        let saved = self.region;
        if self.region == region::SIMPLE {
            self.region = region::NONE;
        }
        let equal = self.compare_fields(lo, ro, info);
        self.region = saved;
        if !equal? {
            return Ok(false);
        }
        if lo.as_ptr() == ro.as_ptr() || self.region != region::NONE {
            self.pairing.bind(lo, ro);
            return Ok(true);
        }
        Ok(false)
    }

    fn compare_fields(
        &mut self,
        lo: &ObjectRef,
        ro: &ObjectRef,
        info: &'static TVMFFITypeInfo,
    ) -> Result<bool> {
        if let Some(hook) = hook("__s_equal__", info)? {
            return self.call_hook(&hook, lo, ro);
        }
        for f in fields::all_fields(info) {
            if f.flags & SEQ_HASH_IGNORE != 0 {
                continue;
            }
            let (x, y) = (fields::read_field(lo, &f)?, fields::read_field(ro, &f)?);
            let saved = self.region;
            self.region = field_region(saved, f.flags);
            let equal = self.compare(&x.view(), &y.view());
            self.region = saved;
            if !equal? {
                self.attr_step(&fields::field_name(&f))?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Calls a type's `__s_equal__(lhs, rhs, eq_cb)`; `eq_cb(l, r, def_region_kind,
    /// field_name)` compares sub-values within this comparison.
    fn call_hook(&mut self, hook: &Function, lo: &ObjectRef, ro: &ObjectRef) -> Result<bool> {
        let this = Reentry::new(self);
        let cb = {
            let this = this.clone();
            Function::from_fn(move |args| {
                if args.len() != 4 {
                    return Err(Error::type_error(format!(
                        "structural equal callback expects 4 arguments (lhs, rhs, \
                         def_region_kind, field_name), got {}",
                        args.len()
                    )));
                }
                this.with("structural equal", |eq| {
                    let saved = eq.region;
                    eq.region = callback_region(saved, &args[2])?;
                    let equal = eq.compare(&args[0], &args[1]);
                    eq.region = saved;
                    let equal = equal?;
                    if !equal && eq.paths.is_some() {
                        let name = args[3].as_str().unwrap_or_default().to_string();
                        eq.attr_step(&name)?;
                    }
                    Ok(Any::from(equal))
                })
            })
        };
        let r = hook.call(&[
            Any::from_object(lo.clone()).view(),
            Any::from_object(ro.clone()).view(),
            Any::from(cb).view(),
        ]);
        this.end();
        let r = r?;
        r.view()
            .as_bool()
            .ok_or_else(|| r.view().type_mismatch("the __s_equal__ result", "bool"))
    }
}
