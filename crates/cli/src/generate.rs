//! `tvmrt generate`: greedy generation from prompt token ids with a language model TVM
//! compiled with a paged KV cache, its weights read from a tensor cache.

use std::path::PathBuf;

use tvmrt::llm::generate::{CacheOptions, LanguageModel};

use crate::bench::human;

/// Arguments of `tvmrt generate`.
#[derive(clap::Args, Debug)]
#[command(after_help = "The model exports embed, prefill, decode and \
create_tir_paged_kv_cache (as tvm.relax.frontend.nn's LLM examples and MLC-LLM build them); \
the weight directory holds tensor-cache.json and its shards, the parameters in the order the \
model takes them.\n\nExample:\n  tvmrt generate tests/fixtures/llm/model.so \
--weights tests/fixtures/llm/weights --prompt 1,5,9,33 --max-tokens 32")]
pub struct Args {
    /// The model library (exported by TVM).
    pub model: PathBuf,

    /// Directory with tensor-cache.json and its shards.
    #[arg(long, value_name = "DIR")]
    pub weights: PathBuf,

    /// Prompt token ids, comma separated.
    #[arg(long, value_name = "IDS", value_delimiter = ',', required = true)]
    pub prompt: Vec<i32>,

    /// Tokens to generate (the first comes from the prompt's forward).
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_tokens: usize,

    /// Stop after this token id.
    #[arg(long, value_name = "ID")]
    pub stop: Option<i32>,

    /// KV cache page size (tokens).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub page_size: i64,

    /// KV cache capacity (tokens).
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub context: i64,

    /// Most tokens in one forward.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub prefill_chunk: i64,

    /// Print the result as JSON (times in nanoseconds).
    #[arg(long)]
    pub json: bool,
}

pub fn main(a: Args) -> tvmrt::Result<()> {
    let model = LanguageModel::load(&a.model, &a.weights)?;
    if a.prompt.len() as i64 > a.prefill_chunk {
        tvmrt::bail_value!(
            "the prompt has {} tokens, more than --prefill-chunk {}",
            a.prompt.len(),
            a.prefill_chunk
        );
    }
    if a.max_tokens == 0 {
        tvmrt::bail_value!("--max-tokens must be at least 1");
    }
    let opts = CacheOptions {
        max_batch_size: 1,
        max_total_seq_len: a.context,
        prefill_chunk_size: a.prefill_chunk,
        page_size: a.page_size,
        support_sliding_window: 0,
    };
    let cache = model.create_cache(&opts)?;
    let g = model.generate_greedy(&cache, 0, &a.prompt, a.max_tokens, a.stop)?;
    let tps = g.decode_tokens_per_second();
    if a.json {
        let v = serde_json::json!({
            "tokens": g.tokens,
            "prompt_tokens": a.prompt.len(),
            "prefill_ns": g.prefill.as_nanos() as u64,
            "decode_ns": g.decode_steps.iter().map(|d| d.as_nanos() as u64).collect::<Vec<_>>(),
            "decode_tokens_per_second": tps,
        });
        println!("{v}");
        return Ok(());
    }
    let tokens: Vec<String> = g.tokens.iter().map(i32::to_string).collect();
    println!("{}", tokens.join(","));
    let prompt_tps = a.prompt.len() as f64 / g.prefill.as_secs_f64().max(1e-12);
    eprintln!(
        "prompt: {} tokens in {} ({prompt_tps:.0} tokens/s); generated: {} tokens, decode \
         {tps:.1} tokens/s",
        a.prompt.len(),
        human(g.prefill),
        g.tokens.len()
    );
    Ok(())
}
