//! `ffi.VisitErrorContext.FindAccessPaths(root, context, allow_prefix_match)`: where in `root`
//! the objects an error's visit context recorded lie (tvm-ffi's `visit_error_context.cc`).
//!
//! The context's `reverse_visit_pattern` lists the objects a visitor was inside when it raised,
//! innermost first (consecutive repeats and nulls are dropped). Every access path from `root`
//! that meets those objects, outermost first, in order and ending at the innermost one, is a
//! match. Descent follows array and list items, map and dict values, and every reflected field
//! of objects whose type has metadata (the root too: a bare array as root leads nowhere). With `allow_prefix_match`, a path that matched part of
//! the pattern and found nothing below is reported too (ending at its last matched object).

use crate::abi::type_index as ti;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::object::containers::list::seq_items;
use crate::object::containers::map::map_entries;
use crate::object::type_registry::static_index;
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

use super::access_path::{self, kind};
use super::fields;

/// Names `node` in `err`'s visit context, as the next frame out (tvm-ffi's
/// `UpdateVisitErrorContext`): a traversal adds one frame per node it was inside when an error
/// came up, innermost first, so `FindAccessPaths` can later say where it happened. An error
/// already carrying an `ffi.VisitErrorContext` gets the node appended to its pattern; otherwise
/// a new context takes the node, keeping the error's previous extra context. Nodes that are not
/// objects have no identity to name and add nothing.
pub fn record_visit(mut err: Error, node: &AnyView<'_>) -> Error {
    if let Some(node) = node.as_object() {
        // Recording is best effort: a failure to record keeps the error as it was.
        let _ = push_frame(&mut err, node);
    }
    err
}

fn push_frame(err: &mut Error, node: ObjectRef) -> Result<()> {
    let t = crate::object::type_registry::key_to_index("ffi.VisitErrorContext")?;
    let info = fields::type_info(t)?;
    let field = |name: &str| {
        fields::all_fields(info)
            .into_iter()
            .find(|f| fields::field_name(f) == name)
            .ok_or_else(|| Error::type_error(format!("ffi.VisitErrorContext has no `{name}`")))
    };
    let pattern = field("reverse_visit_pattern")?;
    if let Some(ctx) = err.extra_context.as_ref().filter(|c| c.type_index() == t) {
        let list = fields::read_field(ctx, &pattern)?;
        let list = list.view().as_object();
        let appended = list.as_ref().is_some_and(|l| {
            crate::object::containers::list::modify(l, |items| {
                items.push(Any::from_object(node.clone()));
                Ok(())
            })
            .is_ok()
        });
        if !appended {
            // A list tvmrt did not make: the pattern is replaced by a longer copy.
            let mut items = list.and_then(|l| seq_items(&l)).unwrap_or_default();
            items.push(Any::from_object(node));
            let longer = Any::from_object(crate::object::containers::list::new_list(items));
            fields::set_field(ctx, &pattern, longer.view())?;
        }
        return Ok(());
    }
    let ctx = fields::create_empty(info)?;
    let first = Any::from_object(crate::object::containers::list::new_list(vec![
        Any::from_object(node),
    ]));
    fields::set_field(&ctx, &pattern, first.view())?;
    if let Some(previous) = err.extra_context.take() {
        fields::set_field(
            &ctx,
            &field("prev_error_context")?,
            Any::from_object(previous).view(),
        )?;
    }
    err.extra_context = Some(ctx);
    Ok(())
}

/// Runs `f(v)` and names `v` in the visit context of an error it returns. `v` is watched through
/// a weak reference, so `f` sees the reference counts it would see without the watch (in-place
/// rebuilds depend on them); a node `f` released entirely has no identity left to name.
pub fn with_visit_frame<T>(v: Any, f: impl FnOnce(Any) -> Result<T>) -> Result<T> {
    let watch = v.view().as_object().map(|o| o.downgrade());
    f(v).map_err(|e| match watch.as_ref().and_then(|w| w.upgrade()) {
        Some(node) => record_visit(e, &Any::from_object(node).view()),
        None => e,
    })
}

struct Finder {
    /// The pattern, innermost first.
    records: Vec<ObjectRef>,
    allow_prefix: bool,
    /// How many records (from the outermost) the current path has met.
    matched: usize,
    /// The steps from `root` to the current value: (kind, key).
    steps: Vec<(i32, Any)>,
    results: Vec<ObjectRef>,
    depth: usize,
}

/// Deepest nesting followed (a cycle stops here instead of exhausting the stack).
const MAX_DEPTH: usize = 1 << 10;

impl Finder {
    fn path(&self) -> Result<ObjectRef> {
        self.steps
            .iter()
            .try_fold(access_path::root()?, |p, (k, key)| {
                access_path::extend(&p, access_path::new_step(*k, key.clone())?)
            })
    }

    fn visit_any(&mut self, v: &AnyView<'_>) -> Result<()> {
        if v.type_index() < ti::STATIC_OBJECT_BEGIN || self.depth >= MAX_DEPTH {
            return Ok(());
        }
        let Some(obj) = v.as_object() else {
            return Ok(());
        };
        self.depth += 1;
        let r = match obj.type_index() {
            ti::ARRAY | static_index::LIST => self.visit_items(&obj),
            ti::MAP | static_index::DICT => self.visit_entries(&obj),
            _ => self.visit_object(&obj),
        };
        self.depth -= 1;
        r
    }

    fn descend(&mut self, step: (i32, Any), v: &AnyView<'_>) -> Result<()> {
        self.steps.push(step);
        let r = self.visit_any(v);
        self.steps.pop();
        r
    }

    fn visit_items(&mut self, obj: &ObjectRef) -> Result<()> {
        for (i, item) in seq_items(obj).unwrap_or_default().iter().enumerate() {
            if !item.view().is_none() {
                self.descend((kind::ARRAY_ITEM, Any::from(i as i64)), &item.view())?;
            }
        }
        Ok(())
    }

    fn visit_entries(&mut self, obj: &ObjectRef) -> Result<()> {
        for e in map_entries(obj).unwrap_or_else(|| Ok(Vec::new()))? {
            if !e.key.view().is_none() && !e.value.view().is_none() {
                self.descend((kind::MAP_ITEM, e.key.clone()), &e.value.view())?;
            }
        }
        Ok(())
    }

    fn visit_object(&mut self, obj: &ObjectRef) -> Result<()> {
        let Ok(info) = fields::type_info(obj.type_index()) else {
            return Ok(());
        };
        if info.metadata.is_null() {
            return Ok(());
        }
        let n = self.records.len();
        let hit = self.matched < n && self.records[n - 1 - self.matched].as_ptr() == obj.as_ptr();
        if hit {
            self.matched += 1;
            if self.matched == n {
                let p = self.path()?;
                self.results.push(p);
                self.matched -= 1;
                return Ok(());
            }
        }
        let before = self.results.len();
        for f in fields::all_fields(info) {
            let value = fields::read_field(obj, &f)?;
            self.descend(
                (kind::ATTR, Any::from(fields::field_name(&f))),
                &value.view(),
            )?;
        }
        // A partial match with nothing found below: report where it stopped.
        if self.allow_prefix
            && self.matched > 0
            && self.matched < n
            && !self.steps.is_empty()
            && self.results.len() == before
        {
            let p = self.path()?;
            self.results.push(p);
        }
        if hit {
            self.matched -= 1;
        }
        Ok(())
    }
}

/// The access paths in `root` that a visit error context's pattern leads to.
pub fn find_access_paths(
    root: &AnyView<'_>,
    context: &ObjectRef,
    allow_prefix: bool,
) -> Result<Vec<ObjectRef>> {
    let info = fields::type_info(context.type_index())?;
    let pattern = fields::all_fields(info)
        .into_iter()
        .find(|f| fields::field_name(f) == "reverse_visit_pattern")
        .ok_or_else(|| Error::type_error("expected an ffi.VisitErrorContext"))?;
    let raw = fields::read_field(context, &pattern)?;
    let mut records: Vec<ObjectRef> = Vec::new();
    for entry in raw
        .view()
        .as_object()
        .and_then(|o| seq_items(&o))
        .unwrap_or_default()
    {
        let Some(o) = entry.view().as_object() else {
            continue;
        };
        if records
            .last()
            .is_some_and(|last| last.as_ptr() == o.as_ptr())
        {
            continue;
        }
        records.push(o);
    }
    let mut finder = Finder {
        records,
        allow_prefix,
        matched: 0,
        steps: Vec::new(),
        results: Vec::new(),
        depth: 0,
    };
    // The root is visited as an object (as tvm-ffi does): a root without type metadata, such
    // as a bare array, leads nowhere.
    if let Some(obj) = root.as_object() {
        finder.visit_object(&obj)?;
    }
    Ok(finder.results)
}

/// The global function.
pub fn builtins() -> Vec<(&'static str, Function)> {
    vec![(
        "ffi.VisitErrorContext.FindAccessPaths",
        Function::from_fn(|args| {
            const WHAT: &str = "ffi.VisitErrorContext.FindAccessPaths";
            if args.len() < 2 || args.len() > 3 {
                return Err(Error::type_error(format!(
                    "{WHAT} expects 2 or 3 arguments (root, visit_context, allow_prefix_match), \
                     got {}",
                    args.len()
                )));
            }
            let context = args[1]
                .as_object()
                .filter(|o| {
                    crate::object::type_registry::lookup("ffi.VisitErrorContext")
                        == Some(o.type_index())
                })
                .ok_or_else(|| args[1].type_mismatch(WHAT, "ffi.VisitErrorContext"))?;
            let allow_prefix = match args.get(2) {
                None => false,
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| v.type_mismatch("allow_prefix_match", "bool"))?,
            };
            let paths = find_access_paths(&args[0], &context, allow_prefix)?;
            Ok(Any::from_object(
                crate::object::containers::array::new_array(
                    paths.into_iter().map(Any::from_object).collect(),
                ),
            ))
        }),
    )]
}
