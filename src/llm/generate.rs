//! A small serving driver: a model compiled by TVM with a paged KV cache (as
//! `tvm.relax.frontend.nn` and MLC-LLM build them), its weights from a tensor cache, and
//! greedy generation, calling the model and the `vm.builtin.*` globals in the order TVM's
//! and MLC-LLM's drivers do: `kv_state_add_sequence`, then per forward `kv_state_begin_forward`,
//! the model's `prefill` or `decode`, `kv_state_end_forward`.
//!
//! The model library exports `embed(token_ids, params)`, `prefill(embeddings[1, n, hidden],
//! cache, params)` and `decode(embeddings[batch, 1, hidden], cache, params)` returning
//! `(logits, cache)` (logits of the last or of every token), and
//! `create_tir_paged_kv_cache(...)`, whose arguments are given by name ([`CacheOptions`]).
//! The tensor cache holds the parameters in the order the model takes them.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::dtype::dtypes;
use crate::error::{Error, Result};
use crate::function::{registry, Function};
use crate::module::{load_from_file, Module};
use crate::object::ObjectRef;
use crate::tensor::Tensor;
use crate::value::{Any, AnyView};

/// The arguments of the model's cache constructor, by parameter name.
#[derive(Clone, Debug)]
pub struct CacheOptions {
    pub max_batch_size: i64,
    pub max_total_seq_len: i64,
    pub prefill_chunk_size: i64,
    pub page_size: i64,
    pub support_sliding_window: i64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            max_batch_size: 4,
            max_total_seq_len: 2048,
            prefill_chunk_size: 512,
            page_size: 16,
            support_sliding_window: 0,
        }
    }
}

/// A loaded model with its weights.
pub struct LanguageModel {
    _exec: Module,
    vm: Module,
    /// The parameters, an `ffi.Array` of tensors.
    params: ObjectRef,
    embed: Function,
    prefill: Function,
    decode: Function,
    create_cache: Function,
    create_params: Vec<String>,
    /// Rows of the embedding table, when a parameter named `*embed*` shows it.
    vocab: Option<i64>,
}

fn global(name: &str) -> Result<Function> {
    registry::get(name).ok_or_else(|| Error::runtime(format!("missing global {name}")))
}

/// The names of a tensor cache's records, in file order.
pub fn tensor_cache_names(dir: &Path) -> Result<Vec<(String, Vec<i64>)>> {
    let path = dir.join("tensor-cache.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::value(format!("cannot read {}: {e}", path.display())))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for shard in json["records"].as_array().into_iter().flatten() {
        for r in shard["records"].as_array().into_iter().flatten() {
            let name = r["name"]
                .as_str()
                .ok_or_else(|| Error::value(format!("{}: a record has no name", path.display())))?;
            let shape = r["shape"]
                .as_array()
                .map(|s| s.iter().filter_map(|d| d.as_i64()).collect())
                .unwrap_or_default();
            out.push((name.to_string(), shape));
        }
    }
    Ok(out)
}

impl LanguageModel {
    /// Loads the model library and its weights (`weights` holds `tensor-cache.json`).
    pub fn load(library: &Path, weights: &Path) -> Result<LanguageModel> {
        let lib = library
            .to_str()
            .ok_or_else(|| Error::value("the library path is not UTF-8"))?;
        let exec = load_from_file(lib, "")?;
        let vm = crate::vm::interp::load_vm(&exec)?;
        let init = vm
            .get_function("vm_initialization", false)?
            .ok_or_else(|| Error::runtime("the VM has no vm_initialization"))?;
        // CPU, device 0, the pooled allocator (as TVM's Python VirtualMachine).
        init.call(&[
            AnyView::from(1i64),
            AnyView::from(0i64),
            AnyView::from(2i64),
        ])?;
        let names = tensor_cache_names(weights)?;
        crate::llm::tensor_cache::load(weights, crate::tensor::layout::cpu())?;
        let params = crate::llm::tensor_cache::params_by_name(
            &names.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        )?;
        let params = crate::object::containers::array::new_array(
            params.into_iter().map(Any::from).collect(),
        );
        let vocab = names
            .iter()
            .find(|(n, s)| n.contains("embed") && s.len() == 2)
            .map(|(_, s)| s[0]);
        let func = |name: &str| -> Result<Function> {
            vm.get_function(name, false)?.ok_or_else(|| {
                Error::value(format!(
                    "{}: the model has no function `{name}` (expected embed, prefill, decode and \
                     create_tir_paged_kv_cache)",
                    library.display()
                ))
            })
        };
        let exec_inner = exec
            .downcast::<crate::vm::exec::ExecutableModule>()
            .ok_or_else(|| Error::value(format!("{} is not a Relax model", library.display())))?
            .executable()
            .clone();
        let create_params = exec_inner
            .func("create_tir_paged_kv_cache")
            .map(|(_, f)| f.param_names.clone())
            .unwrap_or_default();
        Ok(LanguageModel {
            embed: func("embed")?,
            prefill: func("prefill")?,
            decode: func("decode")?,
            create_cache: func("create_tir_paged_kv_cache")?,
            create_params,
            _exec: exec,
            vm,
            params,
            vocab,
        })
    }

    /// The VM module.
    pub fn vm(&self) -> &Module {
        &self.vm
    }

    /// A new paged KV cache for this model.
    pub fn create_cache(&self, opts: &CacheOptions) -> Result<ObjectRef> {
        let mut args = Vec::new();
        for name in &self.create_params {
            // MLC-LLM's libraries name them with a trailing underscore (`max_batch_size_`).
            let v = match name.trim_end_matches('_') {
                "max_batch_size" => opts.max_batch_size,
                "max_total_seq_len" => opts.max_total_seq_len,
                "prefill_chunk_size" => opts.prefill_chunk_size,
                "page_size" => opts.page_size,
                "support_sliding_window" => opts.support_sliding_window,
                other => {
                    crate::bail_value!(
                        "create_tir_paged_kv_cache takes `{other}`, unknown to tvmrt"
                    )
                }
            };
            args.push(Any::from_object(crate::object::shape::new_shape(&[v])));
        }
        self.create_cache
            .call_values(&args)?
            .view()
            .expect_object("the KV cache")
    }

    fn check_tokens(&self, tokens: &[i32]) -> Result<()> {
        if let Some(vocab) = self.vocab {
            if let Some(t) = tokens.iter().find(|&&t| t < 0 || t as i64 >= vocab) {
                crate::bail_value!("token id {t} is outside the vocabulary of {vocab} tokens");
            }
        }
        Ok(())
    }

    fn embeddings(&self, tokens: &[i32], shape: [i64; 2]) -> Result<Tensor> {
        self.check_tokens(tokens)?;
        let ids = crate::llm::transfer::tensor_from_i32(tokens, crate::tensor::layout::cpu())?;
        let e = self
            .embed
            .call_values(&[Any::from(ids), Any::from_object(self.params.clone())])?;
        let e = Tensor::from_any_view(&e.view(), "embed result")?;
        let hidden = *e.shape().last().unwrap_or(&0);
        e.view(&[shape[0], shape[1], hidden], e.dtype(), 0)
    }

    /// `vm.builtin.kv_state_begin_forward` for `tokens[i]` new tokens of `seq_ids[i]`.
    pub fn begin_forward(
        &self,
        cache: &ObjectRef,
        seq_ids: &[i64],
        lengths: &[i64],
        tree: Option<&[i64]>,
    ) -> Result<()> {
        let shape = |v: &[i64]| Any::from_object(crate::object::shape::new_shape(v));
        let mut args = vec![
            Any::from_object(cache.clone()),
            shape(seq_ids),
            shape(lengths),
        ];
        if let Some(t) = tree {
            args.push(shape(t));
        }
        global("vm.builtin.kv_state_begin_forward")?.call_values(&args)?;
        Ok(())
    }

    /// `vm.builtin.kv_state_end_forward`.
    pub fn end_forward(&self, cache: &ObjectRef) -> Result<()> {
        global("vm.builtin.kv_state_end_forward")?
            .call_values(&[Any::from_object(cache.clone())])?;
        Ok(())
    }

    /// The model on the batch begun: `decode` (one token per sequence, `[batch, 1, hidden]`)
    /// or `prefill` (all tokens, `[1, n, hidden]`). Returns the logits.
    pub fn run(&self, cache: &ObjectRef, tokens: &[i32], decode: bool) -> Result<Tensor> {
        let n = tokens.len() as i64;
        let (f, emb) = if decode {
            (&self.decode, self.embeddings(tokens, [n, 1])?)
        } else {
            (&self.prefill, self.embeddings(tokens, [1, n])?)
        };
        let out = f.call_values(&[
            Any::from(emb),
            Any::from_object(cache.clone()),
            Any::from_object(self.params.clone()),
        ])?;
        let out = out.view().expect_object("the model's result")?;
        let logits = crate::object::containers::array::array_get(&out, 0)?;
        Tensor::from_any_view(&logits.view(), "logits")
    }

    /// One forward: `tokens[i]` new tokens of `seq_ids[i]` (a decode step when every
    /// sequence has one token and there is no tree), between `begin_forward` and
    /// `end_forward`. Returns the logits.
    pub fn forward(
        &self,
        cache: &ObjectRef,
        seq_ids: &[i64],
        tokens: &[Vec<i32>],
        tree: Option<&[i64]>,
    ) -> Result<Tensor> {
        let lengths: Vec<i64> = tokens.iter().map(|t| t.len() as i64).collect();
        let flat: Vec<i32> = tokens.iter().flatten().copied().collect();
        let decode = tree.is_none() && lengths.iter().all(|&l| l == 1);
        self.begin_forward(cache, seq_ids, &lengths, tree)?;
        let logits = self.run(cache, &flat, decode)?;
        self.end_forward(cache)?;
        Ok(logits)
    }

    /// Greedy generation of `max_new_tokens` after `prompt` for a new sequence `seq_id`.
    pub fn generate_greedy(
        &self,
        cache: &ObjectRef,
        seq_id: i64,
        prompt: &[i32],
        max_new_tokens: usize,
        stop: Option<i32>,
    ) -> Result<Generation> {
        if prompt.is_empty() {
            crate::bail_value!("the prompt is empty");
        }
        global("vm.builtin.kv_state_add_sequence")?
            .call_values(&[Any::from_object(cache.clone()), Any::from(seq_id)])?;
        let mut out = Generation::default();
        let start = Instant::now();
        let logits = self.forward(cache, &[seq_id], &[prompt.to_vec()], None)?;
        let mut token = last_argmax(&logits)?;
        out.prefill = start.elapsed();
        out.tokens.push(token);
        while out.tokens.len() < max_new_tokens && Some(token) != stop {
            let t = Instant::now();
            let logits = self.forward(cache, &[seq_id], &[vec![token]], None)?;
            token = last_argmax(&logits)?;
            out.decode_steps.push(t.elapsed());
            out.tokens.push(token);
        }
        Ok(out)
    }
}

/// What [`LanguageModel::generate_greedy`] produced and how long it took.
#[derive(Default, Debug)]
pub struct Generation {
    pub tokens: Vec<i32>,
    /// The prompt's forward (to the first token).
    pub prefill: Duration,
    /// Each later token's forward.
    pub decode_steps: Vec<Duration>,
}

impl Generation {
    /// Decoded tokens per second (after the first token).
    pub fn decode_tokens_per_second(&self) -> f64 {
        let total: Duration = self.decode_steps.iter().sum();
        if total.is_zero() {
            return 0.0;
        }
        self.decode_steps.len() as f64 / total.as_secs_f64()
    }
}

/// The highest logit of the last row (ties: the first), as `argmax` picks.
pub fn last_argmax(logits: &Tensor) -> Result<i32> {
    if logits.dtype() != dtypes::FLOAT32 {
        crate::bail_type!("logits must be float32");
    }
    let vocab = *logits.shape().last().unwrap_or(&0) as usize;
    if vocab == 0 {
        crate::bail_value!("the logits are empty");
    }
    let bytes = logits.to_vec()?;
    let row = &bytes[bytes.len() - vocab * 4..];
    let mut best = (f32::NEG_INFINITY, 0usize);
    for (i, c) in row.chunks_exact(4).enumerate() {
        let v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        if v > best.0 || i == 0 {
            best = (v, i);
        }
    }
    Ok(best.1 as i32)
}
