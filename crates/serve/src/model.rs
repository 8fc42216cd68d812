//! A model library MLC-LLM compiled, driven as MLC-LLM's engine drives it
//! (`cpp/serve/model.cc`): `_metadata()` for the limits and the parameters in order, the weights
//! through the tensor cache (`vm.builtin.tensor_cache.load` then the parameters by name), the
//! paged KV cache from `create_tir_paged_kv_cache`, and per forward
//! `kv_state_begin_forward`, `embed` + `batch_prefill` or `batch_decode`,
//! `kv_state_end_forward`. Sampling uses the model's own `softmax_with_temperature`.
//!
//! The model runs on one device (the CPU, or a GPU back end tvmrt has: `opencl:0`, `cuda:0`,
//! `vulkan:0`), with the host as the VM's second device, as MLC's engine sets it up: weights,
//! KV cache, token ids and logit processing there; logits come back to the host for sampling.
//!
//! Everything here calls into tvmrt's public API; a [`Model`] is not `Send` (it holds runtime
//! objects) and lives on the engine's thread.

use std::cell::RefCell;
use std::path::Path;

use tvmrt::abi::DLDevice;
use tvmrt::dtype::dtypes;
use tvmrt::function::registry;
use tvmrt::module::{load_from_file, Module};
use tvmrt::object::containers::array::{array_get, new_array};
use tvmrt::object::shape::new_shape;
use tvmrt::object::ObjectRef;
use tvmrt::tensor::layout::cpu;
use tvmrt::tensor::Tensor;
use tvmrt::{Any, AnyView, Error, Function, Result};

use crate::staging::{Staged, Staging};

/// The staged arguments of the logit-bias kernel (row, token, value, count) and of the
/// penalty kernel (sequence ids, row, token, count, penalties, count), each where it has work.
type StagedLogitArgs = (
    Option<(Staged, Staged, Staged, usize)>,
    Option<(Staged, Staged, Staged, Staged, Staged, usize)>,
);

/// What `_metadata()` says about the compiled model.
#[derive(Clone, Debug)]
pub struct Metadata {
    pub model_type: String,
    pub context_window_size: i64,
    pub prefill_chunk_size: i64,
    pub max_batch_size: i64,
    /// The parameter names, in the order the model takes them.
    pub params: Vec<String>,
}

impl Metadata {
    /// Parses `_metadata()`'s JSON text.
    pub fn parse(text: &str) -> Result<Metadata> {
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::value(format!("_metadata() is not JSON: {e}")))?;
        let int = |k: &str| {
            v[k].as_i64()
                .ok_or_else(|| Error::value(format!("_metadata() has no integer `{k}`")))
        };
        let params = v["params"]
            .as_array()
            .ok_or_else(|| Error::value("_metadata() has no `params` list"))?
            .iter()
            .map(|p| {
                p["name"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| Error::value("a parameter of _metadata() has no name"))
            })
            .collect::<Result<Vec<_>>>()?;
        if int("context_window_size")? <= 0 {
            tvmrt::bail_value!(
                "the model has no bounded context window (context_window_size {}: a \
                 sliding-window model); tvmrt serve drives models with one",
                v["context_window_size"]
            );
        }
        if v["kv_state_kind"].as_str().unwrap_or("kv_cache") != "kv_cache" {
            tvmrt::bail_value!(
                "the model keeps its state as `{}`; tvmrt serve drives paged KV caches only",
                v["kv_state_kind"]
            );
        }
        Ok(Metadata {
            model_type: v["model_type"].as_str().unwrap_or("").to_string(),
            context_window_size: int("context_window_size")?,
            prefill_chunk_size: int("prefill_chunk_size")?,
            max_batch_size: int("max_batch_size")?,
            params,
        })
    }
}

/// A loaded model library with its weights.
pub struct Model {
    _exec: Module,
    _vm: Module,
    params: ObjectRef,
    embed: Function,
    batch_prefill: Function,
    /// `batch_verify`: a prefill that returns every position's logits (for prompt
    /// log-probabilities); MLC-LLM compiles it for speculative decoding.
    batch_verify: Option<Function>,
    batch_decode: Function,
    create_cache: Function,
    softmax: Function,
    apply_logit_bias: Function,
    apply_penalty: Function,
    /// `apply_bitmask_inplace` (a grammar's allowed tokens), where the library has it.
    apply_bitmask: Option<Function>,
    begin_forward: Function,
    end_forward: Function,
    add_sequence: Function,
    remove_sequence: Function,
    fork_sequence: Function,
    available_pages: Function,
    /// The logit kernels' arguments, in device buffers reused from token to token.
    staging: RefCell<Staging>,
    /// Where the weights, the KV cache and the forward passes live.
    pub device: DLDevice,
    pub metadata: Metadata,
    pub hidden_size: i64,
    pub vocab_size: i64,
}

fn global(name: &str) -> Result<Function> {
    registry::get(name).ok_or_else(|| Error::runtime(format!("missing global {name}")))
}

fn shape(v: &[i64]) -> Any {
    Any::from_object(new_shape(v))
}

/// A float32 host tensor of `shape` holding `values`.
pub fn tensor_f32(values: &[f32], shape: &[i64]) -> Result<Tensor> {
    tensor_f32_on(values, shape, cpu())
}

/// A float32 tensor of `shape` on `device` holding `values`.
pub fn tensor_f32_on(values: &[f32], shape: &[i64], device: DLDevice) -> Result<Tensor> {
    let t = Tensor::empty(shape, dtypes::FLOAT32, device)?;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    t.copy_from_bytes(&bytes)?;
    Ok(t)
}

/// The float32 values of a tensor (copied to the host where it lives on a device).
pub fn read_f32(t: &Tensor) -> Result<Vec<f32>> {
    if t.dtype() != dtypes::FLOAT32 {
        tvmrt::bail_type!("expected a float32 tensor");
    }
    Ok(t.to_vec()?
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Stages the logit-bias and penalty kernels' arguments (each only where it has work).
fn stage_logit_args(
    st: &mut Staging,
    n: i64,
    bias: &[(i32, i32, f32)],
    counts: &[(i32, i32, i32)],
    penalties: &[[f32; 3]],
) -> StagedLogitArgs {
    let bias_args = (!bias.is_empty()).then(|| {
        let pos: Vec<i32> = bias.iter().map(|b| b.0).collect();
        let tokens: Vec<i32> = bias.iter().map(|b| b.1).collect();
        let values = st.push_f32(bias.iter().map(|b| b.2));
        (st.push_i32(&pos), st.push_i32(&tokens), values, bias.len())
    });
    let penalty_args = (!counts.is_empty()).then(|| {
        let column = |f: fn(&(i32, i32, i32)) -> i32| counts.iter().map(f).collect::<Vec<_>>();
        (
            st.push_i32(&(0..n as i32).collect::<Vec<_>>()),
            st.push_i32(&column(|c| c.0)),
            st.push_i32(&column(|c| c.1)),
            st.push_i32(&column(|c| c.2)),
            st.push_f32(penalties.iter().flatten().copied()),
            counts.len(),
        )
    });
    (bias_args, penalty_args)
}

impl Model {
    /// Loads `library` (MLC's `compile` output, built for `device`'s kind) and the weights of
    /// `model_dir` (`tensor-cache.json` and its shards) onto `device`.
    pub fn load(library: &Path, model_dir: &Path, device: DLDevice) -> Result<Model> {
        Self::load_vm(library, model_dir, device, false)
    }

    /// [`Model::load`] on a profiling VM (`vm_profiler_load_executable`): for
    /// [`Model::profile_decode`].
    pub fn load_profiling(library: &Path, model_dir: &Path, device: DLDevice) -> Result<Model> {
        Self::load_vm(library, model_dir, device, true)
    }

    fn load_vm(
        library: &Path,
        model_dir: &Path,
        device: DLDevice,
        profiling: bool,
    ) -> Result<Model> {
        let lib = library
            .to_str()
            .ok_or_else(|| Error::value("the library path is not UTF-8"))?;
        let exec = load_from_file(lib, "")?;
        let vm = if profiling {
            tvmrt::vm::load_profiler_vm(&exec)?
        } else {
            tvmrt::vm::load_vm(&exec)?
        };
        let func = |name: &str| -> Result<Function> {
            vm.get_function(name, false)?.ok_or_else(|| {
                Error::value(format!(
                    "{}: the model has no function `{name}` (is it a library MLC-LLM compiled?)",
                    library.display()
                ))
            })
        };
        // The logit processors are TIR kernels of the library, not Relax functions: MLC's engine
        // finds them through the VM module's imports.
        let kernel = |name: &str| -> Result<Function> {
            exec.get_function(name, true)?.ok_or_else(|| {
                Error::value(format!(
                    "{}: the model has no kernel `{name}` (is it a library MLC-LLM compiled?)",
                    library.display()
                ))
            })
        };
        // The device, then the host, each with the pooled allocator (as MLC's engine and TVM's
        // Python VM); on the CPU the host alone.
        let pooled = AnyView::from(2i64);
        let mut init = vec![
            AnyView::from(device.device_type.0 as i64),
            AnyView::from(device.device_id as i64),
            pooled,
        ];
        if device != cpu() {
            init.extend([AnyView::from(1i64), AnyView::from(0i64), pooled]);
        }
        func("vm_initialization")?.call(&init)?;
        let meta_text = func("_metadata")?.call_values(&[])?;
        let meta_text = meta_text.view().expect_str("_metadata()")?.to_string();
        let metadata = Metadata::parse(&meta_text)?;
        tvmrt::llm::tensor_cache::load(model_dir, device)?;
        let weights = tvmrt::llm::tensor_cache::params_by_name(&metadata.params)?;
        // As MLC's engine: the hidden size from the embedding buffer the model allocates
        // (`[prefill chunk, hidden]`), the vocabulary from mlc-chat-config.json. A quantized
        // model's first parameter is a packed table, whose shape says neither.
        let embedding = func("alloc_embedding_tensor")?.call_values(&[])?;
        let hidden_size =
            match Tensor::from_any_view(&embedding.view(), "alloc_embedding_tensor")?.shape() {
                [_, h] if *h > 0 => *h,
                other => tvmrt::bail_value!(
                    "alloc_embedding_tensor() gave shape {other:?}, not [prefill chunk, hidden]"
                ),
            };
        let vocab_size = crate::config::ChatConfig::load(model_dir)?.vocab_size()?;
        let params = new_array(weights.into_iter().map(Any::from).collect());
        Ok(Model {
            embed: func("embed")?,
            batch_prefill: func("batch_prefill")?,
            batch_verify: vm.get_function("batch_verify", false)?,
            batch_decode: func("batch_decode")?,
            create_cache: func("create_tir_paged_kv_cache")?,
            softmax: func("softmax_with_temperature")?,
            apply_logit_bias: kernel("apply_logit_bias_inplace")?,
            apply_penalty: kernel("apply_penalty_inplace")?,
            apply_bitmask: exec.get_function("apply_bitmask_inplace", true)?,
            begin_forward: global("vm.builtin.kv_state_begin_forward")?,
            end_forward: global("vm.builtin.kv_state_end_forward")?,
            add_sequence: global("vm.builtin.kv_state_add_sequence")?,
            remove_sequence: global("vm.builtin.kv_state_remove_sequence")?,
            fork_sequence: global("vm.builtin.kv_state_fork_sequence")?,
            available_pages: global("vm.builtin.attention_kv_cache_get_num_available_pages")?,
            staging: RefCell::new(Staging::new(device)?),
            _exec: exec,
            _vm: vm,
            params,
            device,
            metadata,
            hidden_size,
            vocab_size,
        })
    }

    /// A paged KV cache as MLC's `CreateKVCache` makes it (each argument a one-element shape).
    pub fn create_cache(
        &self,
        max_batch_size: i64,
        max_total_seq_len: i64,
        prefill_chunk_size: i64,
        page_size: i64,
    ) -> Result<ObjectRef> {
        self.create_cache
            .call_values(&[
                shape(&[max_batch_size]),
                shape(&[max_total_seq_len]),
                shape(&[prefill_chunk_size]),
                shape(&[page_size]),
                shape(&[0]),
            ])?
            .view()
            .expect_object("the KV cache")
    }

    /// `kv_state_add_sequence`.
    pub fn add_sequence(&self, cache: &ObjectRef, seq: i64) -> Result<()> {
        self.add_sequence
            .call_values(&[Any::from_object(cache.clone()), Any::from(seq)])?;
        Ok(())
    }

    /// `kv_state_remove_sequence`: frees the sequence's pages.
    pub fn remove_sequence(&self, cache: &ObjectRef, seq: i64) -> Result<()> {
        self.remove_sequence
            .call_values(&[Any::from_object(cache.clone()), Any::from(seq)])?;
        Ok(())
    }

    /// `kv_state_fork_sequence(parent, child, pos)`: the child holds the parent's first `pos`
    /// tokens (-1: all), sharing its whole pages and copying the one `pos` falls in.
    pub fn fork_sequence(
        &self,
        cache: &ObjectRef,
        parent: i64,
        child: i64,
        pos: i64,
    ) -> Result<()> {
        self.fork_sequence.call_values(&[
            Any::from_object(cache.clone()),
            Any::from(parent),
            Any::from(child),
            Any::from(pos),
        ])?;
        Ok(())
    }

    /// Pages the cache has free.
    pub fn available_pages(&self, cache: &ObjectRef) -> Result<i64> {
        self.available_pages
            .call_values(&[Any::from_object(cache.clone())])?
            .view()
            .expect_i64("available pages")
    }

    fn embeddings(&self, tokens: &[i32], shape3: [i64; 3]) -> Result<Tensor> {
        if let Some(t) = tokens
            .iter()
            .find(|&&t| t < 0 || t as i64 >= self.vocab_size)
        {
            tvmrt::bail_value!(
                "token id {t} is outside the vocabulary of {} tokens",
                self.vocab_size
            );
        }
        let ids = tvmrt::llm::transfer::tensor_from_i32(tokens, self.device)?;
        let e = self
            .embed
            .call_values(&[Any::from(ids), Any::from_object(self.params.clone())])?;
        let e = Tensor::from_any_view(&e.view(), "embed result")?;
        e.view(&shape3, e.dtype(), 0)
    }

    fn logits_of(out: Any) -> Result<Tensor> {
        let out = out.view().expect_object("the model's result")?;
        let logits = array_get(&out, 0)?;
        Tensor::from_any_view(&logits.view(), "logits")
    }

    /// Whether the library can give every prompt position's logits ([`Model::prefill`] with
    /// `every_position`).
    pub fn has_every_position_logits(&self) -> bool {
        self.batch_verify.is_some()
    }

    /// One prefill forward: `chunks[i]` new tokens of `seqs[i]`. Returns the logits of each
    /// chunk's last token, one row per sequence (`batch_prefill`: `[1, n, vocab]`), or with
    /// `every_position` the logits of every token, the chunks' rows one after another
    /// (`batch_verify`: `[1, tokens, vocab]`; the same rows, bit for bit, where both give one).
    pub fn prefill(
        &self,
        cache: &ObjectRef,
        seqs: &[i64],
        chunks: &[&[i32]],
        every_position: bool,
    ) -> Result<Tensor> {
        let lengths: Vec<i64> = chunks.iter().map(|c| c.len() as i64).collect();
        let flat: Vec<i32> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        let embedded = || self.embeddings(&flat, [1, flat.len() as i64, self.hidden_size]);
        if every_position {
            let verify = self.batch_verify.as_ref().ok_or_else(|| {
                Error::value("the model library has no `batch_verify`, which prompt logprobs need")
            })?;
            return self.in_forward(cache, seqs, &lengths, || {
                Self::logits_of(verify.call_values(&[
                    Any::from(embedded()?),
                    Any::from_object(cache.clone()),
                    Any::from_object(self.params.clone()),
                ])?)
            });
        }
        let mut pos = Vec::with_capacity(chunks.len());
        let mut total = 0i32;
        for c in chunks {
            total += c.len() as i32;
            pos.push(total - 1);
        }
        self.in_forward(cache, seqs, &lengths, || {
            let pos = tvmrt::llm::transfer::tensor_from_i32(&pos, self.device)?;
            Self::logits_of(self.batch_prefill.call_values(&[
                Any::from(embedded()?),
                Any::from(pos),
                Any::from_object(cache.clone()),
                Any::from_object(self.params.clone()),
            ])?)
        })
    }

    /// Runs `step` between `kv_state_begin_forward(cache, seqs, lengths)` and
    /// `kv_state_end_forward(cache)`, as MLC's engine brackets every forward; the end runs
    /// whether or not `step` failed, so the cache is left consistent.
    fn in_forward<T>(
        &self,
        cache: &ObjectRef,
        seqs: &[i64],
        lengths: &[i64],
        step: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        self.begin_forward.call_values(&[
            Any::from_object(cache.clone()),
            shape(seqs),
            shape(lengths),
        ])?;
        let out = step();
        self.end_forward
            .call_values(&[Any::from_object(cache.clone())])?;
        out
    }

    /// One `batch_decode`: one new token per sequence. Returns `[n, 1, vocab]` logits.
    pub fn decode(&self, cache: &ObjectRef, seqs: &[i64], tokens: &[i32]) -> Result<Tensor> {
        let ones = vec![1i64; seqs.len()];
        self.in_forward(cache, seqs, &ones, || {
            let emb = self.embeddings(tokens, [tokens.len() as i64, 1, self.hidden_size])?;
            Self::logits_of(self.batch_decode.call_values(&[
                Any::from(emb),
                Any::from_object(cache.clone()),
                Any::from_object(self.params.clone()),
            ])?)
        })
    }

    /// One `batch_decode` as [`Model::decode`] runs it, every call timed by tvmrt's profiler
    /// (the model must come from [`Model::load_profiling`]): the report as a table, kernels
    /// summed by name, the slowest first.
    pub fn profile_decode(
        &self,
        cache: &ObjectRef,
        seqs: &[i64],
        tokens: &[i32],
    ) -> Result<String> {
        let profile = self
            ._vm
            .get_function("profile", false)?
            .ok_or_else(|| Error::value("the model was not loaded for profiling"))?;
        let ones = vec![1i64; seqs.len()];
        let started = std::time::Instant::now();
        self.in_forward(cache, seqs, &ones, || {
            // Nothing but begin_forward ran since `started`.
            let begin = started.elapsed();
            let emb = self.embeddings(tokens, [tokens.len() as i64, 1, self.hidden_size])?;
            let report = profile.call_values(&[
                Any::from("batch_decode"),
                Any::from(emb),
                Any::from_object(cache.clone()),
                Any::from_object(self.params.clone()),
            ])?;
            let json = report.view().expect_str("the profile report")?.to_string();
            let table = tvmrt::profiling::Report::from_json(&json)?.to_table(true, true, true);
            Ok(format!(
                "kv_state_begin_forward (before the call): {:.2} us\n{table}",
                begin.as_secs_f64() * 1e6
            ))
        })
    }

    /// The model's own logit processors on `rows` (`[n, vocab]`), as MLC's engine calls them:
    /// `apply_logit_bias_inplace` with `bias` entries (row, token, bias), then
    /// `apply_penalty_inplace` with `counts` entries (row, token, count) and per-row
    /// (presence, frequency, repetition) `penalties`.
    pub fn process_logits(
        &self,
        rows: &mut [Vec<f32>],
        bias: &[(i32, i32, f32)],
        counts: &[(i32, i32, i32)],
        penalties: &[[f32; 3]],
    ) -> Result<()> {
        if rows.is_empty() || (bias.is_empty() && counts.is_empty()) {
            return Ok(());
        }
        let n = rows.len() as i64;
        let mut st = self.staging.borrow_mut();
        st.reset();
        let staged = st.push_f32(rows.iter().flatten().copied());
        let args = stage_logit_args(&mut st, n, bias, counts, penalties);
        st.commit()?;
        let logits = st.tensor(staged, &[n, self.vocab_size])?;
        self.run_logit_kernels(&st, &logits, args, n)?;
        let out = read_f32(&logits)?;
        for (row, chunk) in rows.iter_mut().zip(out.chunks(self.vocab_size as usize)) {
            row.copy_from_slice(chunk);
        }
        Ok(())
    }

    /// [`Model::process_logits`] on logits where a forward left them (`[n, 1, vocab]` or
    /// `[n, vocab]`, on the model's device), changed in place: only the kernels' arguments
    /// travel.
    pub fn process_logits_in_place(
        &self,
        logits: &Tensor,
        bias: &[(i32, i32, f32)],
        counts: &[(i32, i32, i32)],
        penalties: &[[f32; 3]],
    ) -> Result<()> {
        if bias.is_empty() && counts.is_empty() {
            return Ok(());
        }
        let n = logits.shape().first().copied().unwrap_or(0);
        if logits.numel() as i64 != n * self.vocab_size || !logits.is_contiguous() {
            tvmrt::bail_value!(
                "logits of shape {:?} are not one compact row of {} per sequence",
                logits.shape(),
                self.vocab_size
            );
        }
        let mut st = self.staging.borrow_mut();
        st.reset();
        let args = stage_logit_args(&mut st, n, bias, counts, penalties);
        st.commit()?;
        let rows = logits.view(&[n, self.vocab_size], dtypes::FLOAT32, 0)?;
        self.run_logit_kernels(&st, &rows, args, n)
    }

    /// Whether the library has `apply_bitmask_inplace` ([`Model::apply_bitmask_in_place`]).
    pub fn has_bitmask_kernel(&self) -> bool {
        self.apply_bitmask.is_some()
    }

    /// The library's `apply_bitmask_inplace` on logits where a forward left them (`[n, 1,
    /// vocab]` or `[n, vocab]`, on the model's device): every token of row `rows[k]` whose bit
    /// is clear in `masks[k]` (`(vocab + 31) / 32` words) is set to the lowest float. Only the
    /// masks travel.
    pub fn apply_bitmask_in_place(
        &self,
        logits: &Tensor,
        rows: &[i32],
        masks: &[Vec<u32>],
    ) -> Result<()> {
        let Some(kernel) = &self.apply_bitmask else {
            tvmrt::bail_value!("the model library has no `apply_bitmask_inplace`");
        };
        if rows.is_empty() {
            return Ok(());
        }
        let n = logits.shape().first().copied().unwrap_or(0);
        let words = (self.vocab_size + 31) / 32;
        // The kernel reads row `rows[k]` of an `[n, words]` bitmask.
        let mut flat = vec![-1i32; (n * words) as usize];
        for (&r, m) in rows.iter().zip(masks) {
            let at = r as usize * words as usize;
            for (w, &bits) in m.iter().take(words as usize).enumerate() {
                flat[at + w] = bits as i32;
            }
        }
        let mut st = self.staging.borrow_mut();
        st.reset();
        let seq_ids = st.push_i32(rows);
        let bitmask = st.push_i32(&flat);
        st.commit()?;
        let view = logits.view(&[n, self.vocab_size], dtypes::FLOAT32, 0)?;
        kernel.call_values(&[
            Any::from(view),
            Any::from(st.tensor(seq_ids, &[rows.len() as i64])?),
            Any::from(st.tensor(bitmask, &[n, words])?),
        ])?;
        Ok(())
    }

    /// Runs `apply_logit_bias_inplace` and `apply_penalty_inplace` on `[n, vocab]` `logits`
    /// with the committed arguments.
    fn run_logit_kernels(
        &self,
        st: &Staging,
        logits: &Tensor,
        (bias_args, penalty_args): StagedLogitArgs,
        n: i64,
    ) -> Result<()> {
        let arg = |staged, len: usize| st.tensor(staged, &[len as i64]).map(Any::from);
        if let Some((pos, tokens, values, k)) = bias_args {
            self.apply_logit_bias.call_values(&[
                Any::from(logits.clone()),
                arg(pos, k)?,
                arg(tokens, k)?,
                arg(values, k)?,
            ])?;
        }
        if let Some((seq_ids, pos, tokens, cnt, pen, k)) = penalty_args {
            self.apply_penalty.call_values(&[
                Any::from(logits.clone()),
                arg(seq_ids, n as usize)?,
                arg(pos, k)?,
                arg(tokens, k)?,
                arg(cnt, k)?,
                Any::from(st.tensor(pen, &[n, 3])?),
            ])?;
        }
        Ok(())
    }

    /// The model's `softmax_with_temperature` on `[n, vocab]` logits rows, one temperature
    /// per row. Returns the probabilities, row by row.
    pub fn softmax(&self, rows: &[Vec<f32>], temperatures: &[f32]) -> Result<Vec<Vec<f32>>> {
        let n = rows.len() as i64;
        let v = self.vocab_size;
        let mut st = self.staging.borrow_mut();
        st.reset();
        let logits = st.push_f32(rows.iter().flatten().copied());
        let temps = st.push_f32(temperatures.iter().copied());
        st.commit()?;
        let probs = self.softmax.call_values(&[
            Any::from(st.tensor(logits, &[n, 1, v])?),
            Any::from(st.tensor(temps, &[n])?),
        ])?;
        let probs = Tensor::from_any_view(&probs.view(), "probabilities")?;
        Ok(read_f32(&probs)?
            .chunks(v as usize)
            .map(<[f32]>::to_vec)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::Metadata;

    fn metadata(context: i64, kind: &str) -> String {
        serde_json::json!({
            "model_type": "llama", "context_window_size": context, "prefill_chunk_size": 128,
            "max_batch_size": 16, "kv_state_kind": kind, "params": [{"name": "w"}]
        })
        .to_string()
    }

    #[test]
    fn metadata_without_a_bounded_context_or_a_kv_cache_is_refused() {
        let m = Metadata::parse(&metadata(512, "kv_cache")).unwrap();
        assert_eq!((m.context_window_size, m.params.len()), (512, 1));
        let e = Metadata::parse(&metadata(-1, "kv_cache")).unwrap_err();
        assert!(
            e.message.contains("context_window_size -1"),
            "{}",
            e.message
        );
        let e = Metadata::parse(&metadata(512, "rnn_state")).unwrap_err();
        assert!(e.message.contains("rnn_state"), "{}", e.message);
    }
}
