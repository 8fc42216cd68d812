//! The KV-state interface (TVM `kv_state.h`, `KVStateObj`) shared by the paged KV cache and
//! the RNN state, and its globals `vm.builtin.kv_state_*`: the calls a serving driver makes
//! around each forward of the model (add, remove, fork and trim sequences, then
//! `begin_forward(seq_ids, append_lengths[, token_tree_parent_ptr])` before the model runs and
//! `end_forward` after).

use super::args::Args;
use super::kv_cache::PagedKvCache;
use super::rnn_state::RnnState;
use crate::error::Result;
use crate::function::Function;
use crate::object::ObjectRef;
use crate::value::{Any, AnyView};

/// What every KV state does (TVM's `KVStateObj`). Each call either succeeds or fails with the
/// state unchanged.
pub trait KvState: Send + Sync {
    /// Drops every sequence.
    fn clear(&self) -> Result<()>;
    /// Adds an empty sequence under a new id.
    fn add_sequence(&self, seq_id: i64) -> Result<()>;
    /// Removes a sequence and frees what only it used.
    fn remove_sequence(&self, seq_id: i64) -> Result<()>;
    /// Makes `child` a copy of the first `fork_pos` tokens of `parent` (-1: all of them).
    fn fork_sequence(&self, parent: i64, child: i64, fork_pos: i64) -> Result<()>;
    /// Drops the last `n` tokens of a sequence.
    fn popn(&self, seq_id: i64, n: i32) -> Result<()>;
    /// Prepares the next forward: `append_lengths[i]` new tokens for `seq_ids[i]`, forming
    /// trees when `token_tree_parent_ptr` is given (the parent of each new token in the batch,
    /// -1 for a root).
    fn begin_forward(
        &self,
        seq_ids: &[i64],
        append_lengths: &[i64],
        token_tree_parent_ptr: Option<&[i64]>,
    ) -> Result<()>;
    /// Finishes the forward begun last.
    fn end_forward(&self) -> Result<()>;
}

/// The KV state an object is, if it is one.
pub fn kv_state_of(obj: &ObjectRef) -> Option<&dyn KvState> {
    if let Some(c) = obj.downcast_ref::<PagedKvCache>() {
        return Some(c);
    }
    obj.downcast_ref::<RnnState>().map(|s| s as &dyn KvState)
}

/// Argument `i` of `args` as a KV state.
fn state_arg<'o>(args: &Args<'_, '_>, obj: &'o ObjectRef) -> Result<&'o dyn KvState> {
    kv_state_of(obj).ok_or_else(|| {
        args.get(0).type_mismatch(
            &format!("{} argument 0 (state)", args.func()),
            "relax.vm.KVState",
        )
    })
}

/// A global taking the state as argument 0 and `count` arguments in all; `f` a function
/// pointer, so that the globals share one wrapper (as `kv_cache::globals::global`).
fn global(
    name: &'static str,
    count: usize,
    f: fn(&dyn KvState, &Args<'_, '_>) -> Result<()>,
) -> (&'static str, Function) {
    (
        name,
        Function::from_fn(move |raw: &[AnyView<'_>]| {
            let args = Args::exact(name, raw, count)?;
            let obj = args.object(0, "state")?;
            f(state_arg(&args, &obj)?, &args)?;
            Ok(Any::none())
        }),
    )
}

/// `vm.builtin.kv_state_*`.
pub(super) fn builtins() -> Vec<(&'static str, Function)> {
    vec![
        global("vm.builtin.kv_state_clear", 1, |s, _| s.clear()),
        global("vm.builtin.kv_state_add_sequence", 2, |s, a| {
            s.add_sequence(a.i64(1, "seq_id")?)
        }),
        global("vm.builtin.kv_state_remove_sequence", 2, |s, a| {
            s.remove_sequence(a.i64(1, "seq_id")?)
        }),
        global("vm.builtin.kv_state_fork_sequence", 4, |s, a| {
            s.fork_sequence(
                a.i64(1, "parent_seq_id")?,
                a.i64(2, "child_seq_id")?,
                a.i64(3, "fork_pos")?,
            )
        }),
        global("vm.builtin.kv_state_popn", 3, |s, a| {
            s.popn(a.i64(1, "seq_id")?, a.i32(2, "n")?)
        }),
        (
            "vm.builtin.kv_state_begin_forward",
            Function::from_fn(|raw: &[AnyView<'_>]| {
                let args = Args::between("vm.builtin.kv_state_begin_forward", raw, 3, 4)?;
                let obj = args.object(0, "state")?;
                let state = state_arg(&args, &obj)?;
                let seq_ids = args.shape(1, "seq_ids")?;
                let lengths = args.shape(2, "append_lengths")?;
                let tree = if args.len() == 4 {
                    args.opt_shape(3, "token_tree_parent_ptr")?
                } else {
                    None
                };
                state.begin_forward(&seq_ids, &lengths, tree.as_deref())?;
                Ok(Any::none())
            }),
        ),
        global("vm.builtin.kv_state_end_forward", 1, |s, _| s.end_forward()),
    ]
}
