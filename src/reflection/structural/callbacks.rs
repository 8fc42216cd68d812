//! The typed callbacks of `ffi.StructuralWalk` and `ffi.StructuralMap`: `(type_index,
//! callback)` entries, tried in order, the first whose type matches a value taking it.

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::list::seq_items;
use crate::object::type_registry;
use crate::value::{Any, AnyView};

use super::equal::content_kind;

/// The type index that matches every value (`typing.Any`).
const ANY_TYPE: i64 = -1;
/// `WalkResult.SKIP`.
pub(super) const SKIP: i64 = 1;
/// `WalkOrder.PREORDER`, `WalkOrder.POSTORDER`.
pub(super) const PREORDER: i64 = 0;
pub(super) const POSTORDER: i64 = 1;

/// A callback for the values of one type; `with_kind` ones also get the def-region kind.
pub(super) struct Entry {
    pub type_index: i64,
    pub f: Function,
    /// Also gets the def-region kind (walk and map entries given as such).
    pub with_kind: bool,
    /// A third entry item: the callback takes the in-place mode (`ffi.StructuralMutate`).
    pub takes_mode: bool,
}

/// Reads the `[(type_index, callback[, takes_mode]), ...]` list an entry argument holds.
pub(super) fn entries(v: &AnyView<'_>, with_kind: bool, what: &str) -> Result<Vec<Entry>> {
    let list = v
        .as_object()
        .and_then(|o| seq_items(&o))
        .ok_or_else(|| v.type_mismatch(what, "a list of (type_index, callback) pairs"))?;
    list.iter()
        .map(|pair| {
            let items = pair
                .view()
                .as_object()
                .and_then(|o| seq_items(&o))
                .filter(|p| p.len() == 2 || p.len() == 3)
                .ok_or_else(|| {
                    Error::type_error(format!(
                        "{what}: each entry is a (type_index, callback) pair"
                    ))
                })?;
            // A third item (`ffi.StructuralMutate`): whether the callback takes the mode.
            let takes_mode = match items.get(2) {
                None => false,
                Some(m) => m
                    .view()
                    .as_bool()
                    .ok_or_else(|| m.view().type_mismatch("accepts_inplace_mode", "bool"))?,
            };
            Ok(Entry {
                type_index: items[0].view().expect_i64("type_index")?,
                f: items[1].view().expect_function("callback")?,
                with_kind,
                takes_mode,
            })
        })
        .collect()
}

/// Whether a value of type `t` matches an entry for `want`.
pub(super) fn matches(want: i64, t: i32) -> bool {
    if want == ANY_TYPE {
        return true;
    }
    let Ok(want) = i32::try_from(want) else {
        return false;
    };
    let t = content_kind(t);
    if t < ti::STATIC_OBJECT_BEGIN || want < ti::STATIC_OBJECT_BEGIN {
        return t == want;
    }
    t == want || type_registry::derived_from(t, want).unwrap_or(false)
}

/// The callbacks of a walk or map call: `args[1]` plain, `args[2]` with the def-region kind,
/// and whether `args[3]` asks for pre-order.
pub(super) fn parse(args: &[AnyView<'_>], what: &str) -> Result<(Vec<Entry>, bool)> {
    if args.len() != 4 {
        return Err(Error::type_error(format!(
            "{what} expects 4 arguments (root, entries, entries_with_def_region_kind, order), \
             got {}",
            args.len()
        )));
    }
    let mut all = entries(&args[1], false, what)?;
    all.extend(entries(&args[2], true, what)?);
    let order = args[3].expect_i64("order")?;
    if order != PREORDER && order != POSTORDER {
        return Err(Error::value(format!(
            "{what}: order must be 0 (pre-order) or 1 (post-order), got {order}"
        )));
    }
    Ok((all, order == PREORDER))
}

/// The first entry whose type matches a value of type `t`.
pub(super) fn first_match(entries: &[Entry], t: i32) -> Option<&Entry> {
    entries.iter().find(|e| matches(e.type_index, t))
}

/// Calls the first callback matching `v` (with the def-region kind `region` for those that
/// take it); `None` when none matches.
pub(super) fn call_first(entries: &[Entry], v: &AnyView<'_>, region: i32) -> Result<Option<Any>> {
    let Some(e) = first_match(entries, v.type_index()) else {
        return Ok(None);
    };
    let r = if e.with_kind {
        e.f.call(&[*v, Any::from(i64::from(region)).view()])?
    } else {
        e.f.call(std::slice::from_ref(v))?
    };
    failed_if_error(r).map(Some)
}

/// A callback result that is an error object is the callback's failure (tvm-ffi's
/// `CallExpected`: returning an `Error` is failing with it).
pub(super) fn failed_if_error(r: Any) -> Result<Any> {
    if r.view().type_index() != crate::abi::type_index::ERROR {
        return Ok(r);
    }
    let obj = r.view().as_object().expect("an error value is an object");
    Err(crate::object::error_obj::error_from_object(&obj)
        .unwrap_or_else(|| Error::runtime("a callback returned an unreadable error")))
}
