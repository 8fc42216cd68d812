//! The object types of LLM serving state, under the keys TVM registers them with
//! (`kv_state.h`, `paged_kv_cache.cc`, `rnn_state.cc`, `lm_support.cc`), so a program that
//! asks an object for its type key (tvm-ffi's Python package, `TVMFFIGetTypeInfo`) sees what
//! TVM's runtime would show:
//!
//! ```text
//! ffi.Object
//! ├── relax.vm.KVState
//! │   ├── relax.vm.AttentionKVCache
//! │   │   └── relax.vm.PagedAttentionKVCache
//! │   └── relax.vm.RNNState
//! │       └── relax.vm.RNNStateImp
//! └── relax.vm.AttentionKVCacheLegacy
//! ```
//!
//! Indexes are dynamic, taken from the type table the first time each type is used.

use once_cell::sync::Lazy;

use crate::abi::type_index;
use crate::object::type_registry;

/// Registers `key` under `parent` (an index already registered), or finds it.
fn register(key: &str, parent: i32) -> i32 {
    let depth = type_registry::ancestors(parent)
        .map(|(depth, _)| depth + 1)
        .unwrap_or(1);
    type_registry::get_or_alloc_index(key, -1, depth, 0, true, parent)
        .unwrap_or_else(|e| panic!("registering object type `{key}`: {e}"))
}

static KV_STATE: Lazy<i32> = Lazy::new(|| register("relax.vm.KVState", type_index::OBJECT));
static ATTENTION_KV_CACHE: Lazy<i32> =
    Lazy::new(|| register("relax.vm.AttentionKVCache", *KV_STATE));
static PAGED_KV_CACHE: Lazy<i32> =
    Lazy::new(|| register("relax.vm.PagedAttentionKVCache", *ATTENTION_KV_CACHE));
static RNN_STATE: Lazy<i32> = Lazy::new(|| register("relax.vm.RNNState", *KV_STATE));
static RNN_STATE_IMP: Lazy<i32> = Lazy::new(|| register("relax.vm.RNNStateImp", *RNN_STATE));
static LEGACY_KV_CACHE: Lazy<i32> =
    Lazy::new(|| register("relax.vm.AttentionKVCacheLegacy", type_index::OBJECT));

/// `relax.vm.PagedAttentionKVCache`.
pub fn paged_kv_cache() -> i32 {
    *PAGED_KV_CACHE
}

/// `relax.vm.RNNStateImp`.
pub fn rnn_state() -> i32 {
    *RNN_STATE_IMP
}

/// `relax.vm.AttentionKVCacheLegacy`.
pub fn legacy_kv_cache() -> i32 {
    *LEGACY_KV_CACHE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_derive_as_in_tvm() {
        let paged = paged_kv_cache();
        let rnn = rnn_state();
        let kv_state = type_registry::key_to_index("relax.vm.KVState").unwrap();
        let attn = type_registry::key_to_index("relax.vm.AttentionKVCache").unwrap();
        assert!(type_registry::derived_from(paged, attn).unwrap());
        assert!(type_registry::derived_from(paged, kv_state).unwrap());
        assert!(type_registry::derived_from(rnn, kv_state).unwrap());
        assert!(!type_registry::derived_from(rnn, attn).unwrap());
        assert_eq!(
            type_registry::index_to_key(legacy_kv_cache()).unwrap(),
            "relax.vm.AttentionKVCacheLegacy"
        );
        assert_eq!(paged, paged_kv_cache(), "stable for the process");
    }
}
