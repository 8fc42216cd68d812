//! `ffi.StructuralWalk`: a stateless walk of a value as a tree, calling the first callback whose
//! type matches each node, before or after its children ([`super::children`]).
//!
//! A callback returns `None` (go on), `WalkResult.SKIP` (1: in pre-order, leave this node's
//! children out) or an `ffi.VisitInterrupt`, which ends the walk and is its result.

use crate::abi::type_index as ti;
use crate::error::Result;
use crate::function::Function;
use crate::object::type_registry::static_index;
use crate::value::{Any, AnyView};

use super::callbacks::{self, Entry, SKIP};
use super::children::each_child;
use super::{region, StackBase};

/// What a node's callback asked for.
enum Step {
    Advance,
    Skip,
    Stop(Any),
}

struct Walk {
    entries: Vec<Entry>,
    preorder: bool,
    stack: StackBase,
}

/// `ffi.StructuralWalk(root, entries, entries_with_def_region_kind, order)`.
pub fn structural_walk(args: &[AnyView<'_>]) -> Result<Any> {
    let (entries, preorder) = callbacks::parse(args, "ffi.StructuralWalk")?;
    let walk = Walk {
        entries,
        preorder,
        stack: StackBase::here(),
    };
    Ok(walk.visit(&args[0], region::NONE)?.unwrap_or_default())
}

impl Walk {
    /// Visits `v` (met in region `met_in`) and its children; `Some` is an interrupt that ends
    /// the walk.
    fn visit(&self, v: &AnyView<'_>, met_in: i32) -> Result<Option<Any>> {
        self.stack.check("StructuralWalk")?;
        if self.preorder {
            match self.call(v, met_in)? {
                Step::Stop(i) => return Ok(Some(i)),
                Step::Skip => return Ok(None),
                Step::Advance => {}
            }
        }
        if let Some(i) = each_child(v, met_in, &mut |c, r| self.visit(c, r))? {
            return Ok(Some(i));
        }
        if !self.preorder {
            if let Step::Stop(i) = self.call(v, met_in)? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Calls the first matching callback.
    fn call(&self, v: &AnyView<'_>, met_in: i32) -> Result<Step> {
        let Some(r) = callbacks::call_first(&self.entries, v, met_in)? else {
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
}

/// The walk's global function.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![("ffi.StructuralWalk", Function::from_fn(structural_walk))]
}
