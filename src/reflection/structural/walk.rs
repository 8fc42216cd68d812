//! `ffi.StructuralWalk`: a stateless walk of a value as a tree, calling the first callback whose
//! type matches each node, before or after its children.
//!
//! Children are array and list items, map and dict values (keys are not visited) and the
//! fields of reflected objects (skipping `SEqHashIgnore` ones), each walked in the def region
//! its field flags give, as structural equality does. A callback returns `None` (go on),
//! `WalkResult.SKIP` (1: in pre-order, leave this node's children out) or an
//! `ffi.VisitInterrupt`, which ends the walk and is its result.

use crate::abi::type_index as ti;
use crate::error::Result;
use crate::function::Function;
use crate::object::containers::list::seq_items;
use crate::object::containers::map::map_entries;
use crate::object::type_registry::static_index;
use crate::object::ObjectRef;
use crate::reflection::fields;
use crate::value::{Any, AnyView};

use super::callbacks::{self, Entry, SKIP};
use super::{field_region, kind, region, StackBase, SEQ_HASH_IGNORE};

/// What a node's callback asked for.
enum Step {
    Advance,
    Skip,
    Stop(Any),
}

struct Walk {
    entries: Vec<Entry>,
    preorder: bool,
    region: i32,
    stack: StackBase,
}

/// `ffi.StructuralWalk(root, entries, entries_with_def_region_kind, order)`.
pub fn structural_walk(args: &[AnyView<'_>]) -> Result<Any> {
    let (entries, preorder) = callbacks::parse(args, "ffi.StructuralWalk")?;
    let mut walk = Walk {
        entries,
        preorder,
        region: region::NONE,
        stack: StackBase::here(),
    };
    Ok(walk.visit(&args[0])?.unwrap_or_default())
}

impl Walk {
    /// Visits `v` and its children; `Some` is an interrupt that ends the walk.
    fn visit(&mut self, v: &AnyView<'_>) -> Result<Option<Any>> {
        self.stack.check("StructuralWalk")?;
        if self.preorder {
            match self.call(v)? {
                Step::Stop(i) => return Ok(Some(i)),
                Step::Skip => return Ok(None),
                Step::Advance => {}
            }
        }
        if let Some(i) = self.children(v)? {
            return Ok(Some(i));
        }
        if !self.preorder {
            if let Step::Stop(i) = self.call(v)? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Calls the first matching callback.
    fn call(&self, v: &AnyView<'_>) -> Result<Step> {
        let Some(r) = callbacks::call_first(&self.entries, v, self.region)? else {
            return Ok(Step::Advance);
        };
        let r = r.view();
        if r.type_index() == static_index::VISIT_INTERRUPT {
            return Ok(Step::Stop(r.to_owned_any()));
        }
        if r.type_index() == ti::INT && r.as_i64() == Some(SKIP) {
            return Ok(Step::Skip);
        }
        Ok(Step::Advance)
    }

    fn children(&mut self, v: &AnyView<'_>) -> Result<Option<Any>> {
        let Some(obj) = v.as_object() else {
            return Ok(None);
        };
        match obj.type_index() {
            ti::ARRAY | static_index::LIST => {
                for item in seq_items(&obj).unwrap_or_default() {
                    if let Some(i) = self.visit(&item.view())? {
                        return Ok(Some(i));
                    }
                }
                Ok(None)
            }
            ti::MAP | static_index::DICT => {
                for e in map_entries(&obj).unwrap_or_else(|| Ok(Vec::new()))? {
                    if let Some(i) = self.visit(&e.value.view())? {
                        return Ok(Some(i));
                    }
                }
                Ok(None)
            }
            t if t >= ti::DYN_OBJECT_BEGIN => self.fields(&obj),
            _ => Ok(None),
        }
    }

    /// The reflected fields of an object, in their def regions; a free variable's own fields
    /// are uses inside a simple region.
    fn fields(&mut self, obj: &ObjectRef) -> Result<Option<Any>> {
        let info = fields::type_info(obj.type_index())?;
        let is_var = !info.metadata.is_null()
            // SAFETY: registered metadata lives as long as the type table.
            && unsafe { (*info.metadata).structural_eq_hash_kind } == kind::FREE_VAR;
        let outer = self.region;
        if is_var && outer == region::SIMPLE {
            self.region = region::NONE;
        }
        let base = self.region;
        let found = (|| {
            for f in fields::all_fields(info) {
                if f.flags & SEQ_HASH_IGNORE != 0 {
                    continue;
                }
                let value = fields::read_field(obj, &f)?;
                self.region = field_region(base, f.flags);
                if let Some(i) = self.visit(&value.view())? {
                    return Ok(Some(i));
                }
            }
            Ok(None)
        })();
        self.region = outer;
        found
    }
}

/// The walk's global function.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![("ffi.StructuralWalk", Function::from_fn(structural_walk))]
}
