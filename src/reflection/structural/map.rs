//! `ffi.StructuralMap`: rebuilds a value with typed callbacks replacing the nodes they match,
//! sharing every part that does not change ([`super::children::rebuild`]).
//!
//! In pre-order a node's callback runs first and the children of what it returns are mapped;
//! in post-order the children are mapped first and the callback gets the rebuilt node. A root
//! moved in (an rvalue reference) may be changed in place. Free-variable and DAG objects are
//! rebuilt once per def region their fields are walked in, so every use of a variable maps to
//! the same new variable; callback results are not shared. A callback result equal to its input
//! (the same object, or the same string, bytes or scalar) keeps the input.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::error::Result;
use crate::function::Function;
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::callbacks::{self, Entry};
use super::children::{fields_region, kind_of, rebuild, reflected, unchanged};
use super::{kind, region, StackBase};
use crate::reflection::visit_error::{record_visit, with_visit_frame};

/// `ffi.StructuralMap(root, entries, entries_with_def_region_kind, order)`.
pub fn structural_map(args: &[AnyView<'_>]) -> Result<Any> {
    let (entries, preorder) = callbacks::parse(args, "ffi.StructuralMap")?;
    let m = Mapper {
        entries,
        preorder,
        stack: StackBase::here(),
        rebuilt: RefCell::new(HashMap::new()),
    };
    // A root moved in (an rvalue reference) is ours alone: it may be changed in place.
    let root = match args[0].take_rvalue_object() {
        Some(obj) => Any::from_object(obj),
        None => args[0].to_owned_any(),
    };
    m.map(root, region::NONE)
}

struct Mapper {
    entries: Vec<Entry>,
    preorder: bool,
    stack: StackBase,
    /// Free-variable and DAG objects already rebuilt, by address and the region their fields
    /// were walked in (the originals are kept alive so addresses stay theirs).
    rebuilt: RefCell<HashMap<(usize, i32), (ObjectRef, Any)>>,
}

impl Mapper {
    fn map(&self, v: Any, met_in: i32) -> Result<Any> {
        self.stack.check("StructuralMap")?;
        if self.preorder {
            let v = self.call(v, met_in)?;
            self.children(v, met_in)
        } else {
            let v = self.children(v, met_in)?;
            self.call(v, met_in)
        }
    }

    /// The first matching callback's result, or `v` when none matches or the result is `v` (or
    /// the `Unchanged` marker).
    /// A failing callback names `v` in the error's visit context (one frame per node, as
    /// tvm-ffi's engines add).
    fn call(&self, v: Any, met_in: i32) -> Result<Any> {
        let r = callbacks::call_first(&self.entries, &v.view(), met_in)
            .map_err(|e| record_visit(e, &v.view()))?;
        match r {
            Some(r) if !unchanged(&v.view(), &r.view()) => Ok(r),
            _ => Ok(v),
        }
    }

    /// `v` with its children mapped; a variable or DAG node once per region.
    fn children(&self, v: Any, met_in: i32) -> Result<Any> {
        with_visit_frame(v, |v| self.children_of(v, met_in))
    }

    fn children_of(&self, v: Any, met_in: i32) -> Result<Any> {
        let Some((obj, info)) = reflected(&v.view()) else {
            return rebuild(v, met_in, &mut |c, r| self.map(c, r));
        };
        let k = kind_of(info);
        if k != kind::FREE_VAR && k != kind::DAG_NODE {
            return rebuild(v, met_in, &mut |c, r| self.map(c, r));
        }
        let key = (obj.as_ptr() as usize, fields_region(info, met_in));
        if let Some((_, done)) = self.rebuilt.borrow().get(&key) {
            return Ok(done.clone());
        }
        let r = rebuild(v, met_in, &mut |c, r| self.map(c, r))?;
        self.rebuilt.borrow_mut().insert(key, (obj, r.clone()));
        Ok(r)
    }
}

/// The map's global function.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![("ffi.StructuralMap", Function::from_fn(structural_map))]
}
