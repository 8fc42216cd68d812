//! LLM serving state, as TVM 0.27's runtime provides it to models compiled by
//! `tvm.relax.frontend.nn` and MLC-LLM (`src/runtime/vm/`): the paged KV cache
//! ([`kv_cache`]), the RNN state ([`rnn_state`]), the KV-state calls a serving driver makes
//! around each forward ([`kv_state`]), the tensor cache of weights ([`tensor_cache`]), the
//! samplers ([`sampling`]) and the contiguous cache of early examples ([`legacy_kv_cache`]);
//! and a greedy generation driver over all of them ([`generate`]).
//!
//! Everything registers through [`builtins`], the one list the registry takes from here.

mod args;
pub mod generate;
mod guarded;
pub mod kv_cache;
pub mod kv_state;
pub mod legacy_kv_cache;
pub mod rnn_state;
pub mod sampling;
mod std_sort;
pub mod tensor_cache;
pub mod transfer;
mod types;

use crate::function::Function;

/// Every global function of the LLM state, by name.
pub fn builtins() -> Vec<(&'static str, Function)> {
    let mut v = kv_cache::builtins();
    v.extend(kv_state::builtins());
    v.extend(rnn_state::builtins());
    v.extend(tensor_cache::builtins());
    v.extend(sampling::builtins());
    v.extend(legacy_kv_cache::builtins());
    v
}
