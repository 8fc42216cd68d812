//! `tvmrt serve MODEL_DIR --model-lib LIB`: the arguments of the tool's subcommand (the tool
//! embeds [`Args`] and calls [`main`]) and the server's start: the engine, then the HTTP front
//! on a multi-threaded tokio runtime until SIGINT or SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;

use tvmrt::{Error, Result};

use crate::config::ChatConfig;
use crate::engine::{Engine, EngineConfig, PAGE_SIZE};
use crate::http::{self, App};
use crate::structured::GrammarLimits;

/// Arguments of `tvmrt serve`. The engine limits carry MLC-LLM's names (its `EngineConfig`).
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Serves a model directory MLC-LLM built (mlc-chat-config.json, \
tensor-cache.json and its shards, tokenizer.json) with the library MLC-LLM compiled for it, \
behind OpenAI's API: /v1/models, /v1/completions, /v1/chat/completions (streamed as server-sent \
events with \"stream\": true), /health and /metrics (Prometheus).\n\nExample:\n  tvmrt serve \
tests/fixtures/mlc/model --model-lib tests/fixtures/mlc/model/lib.so --port 8000\n  curl \
http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \\\n    -d '{\"prompt\": \
\"hello\", \"max_tokens\": 16}'"
)]
pub struct Args {
    /// The model: an MLC-LLM model directory (it holds mlc-chat-config.json; served with
    /// --model-lib behind OpenAI's API), a model library TVM built (served alone over KServe's
    /// protocol, named after the file), or a model repository in Triton's layout.
    pub model: Option<PathBuf>,

    /// The model library of an MLC-LLM model directory (MLC-LLM's compile output).
    #[arg(long, value_name = "LIB")]
    pub model_lib: Option<PathBuf>,

    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,

    /// Port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,

    /// Require `Authorization: Bearer KEY` on /v1/ requests.
    #[arg(long, value_name = "KEY", env = "TVMRT_API_KEY")]
    pub api_key: Option<String>,

    /// The model id clients name (default: the model directory's name).
    #[arg(long, value_name = "ID")]
    pub served_model_name: Option<String>,

    /// Most sequences decoded together (default: the model's max_batch_size).
    #[arg(long, value_name = "N")]
    pub max_num_sequence: Option<usize>,

    /// KV cache capacity in tokens over all sequences (default: room for max_num_sequence
    /// full context windows).
    #[arg(long, value_name = "N")]
    pub max_total_seq_length: Option<i64>,

    /// Most prompt tokens in one prefill (default: the model's prefill_chunk_size).
    #[arg(long, value_name = "N")]
    pub prefill_chunk_size: Option<i64>,

    /// Most requests waiting for admission; more get 429 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_queue: usize,

    /// Finished sequences kept in the KV cache so that prompts starting with their tokens
    /// fork them instead of prefilling (default: max_num_sequence; 0: off).
    #[arg(long, value_name = "N")]
    pub prefix_cache_max_num_recycling_seqs: Option<usize>,

    /// Where the model runs: cpu, or opencl/cuda/vulkan[:ID] for a library MLC-LLM compiled
    /// for that device (`mlc_llm compile --device opencl`).
    #[arg(long, value_name = "DEVICE", default_value = "cpu")]
    pub device: String,

    /// Most symbols in a request's output grammar (`response_format` schemas, tool calls);
    /// a larger one is refused with a 400 (llguidance's max_grammar_size).
    #[arg(long, value_name = "N", default_value_t = GrammarLimits::default().max_grammar_size)]
    pub max_grammar_size: usize,

    /// Most lexer work to compile a request's output grammar, about 50k a millisecond; a
    /// grammar that needs more is refused with a 400 (llguidance's initial_lexer_fuel).
    #[arg(long, value_name = "FUEL", default_value_t = GrammarLimits::default().max_compile_fuel)]
    pub max_grammar_compile_fuel: u64,

    /// Most lexer work for one token's mask, about 14k a millisecond; a request whose grammar
    /// needs more fails (llguidance's step_lexer_fuel).
    #[arg(long, value_name = "FUEL", default_value_t = GrammarLimits::default().max_step_fuel)]
    pub max_grammar_step_fuel: u64,

    /// Longest output constraint, in bytes of its grammar (a schema, a regex, a Lark grammar,
    /// the tools of a forced call); a longer one is refused with a 400. It bounds the depth
    /// of the grammar compiler's recursion.
    #[arg(long, value_name = "BYTES", default_value_t = GrammarLimits::default().max_grammar_bytes)]
    pub max_grammar_bytes: usize,

    /// Compiled output grammars kept for requests that ask for the same one.
    #[arg(long, value_name = "N", default_value_t = GrammarLimits::default().cache_size)]
    pub grammar_cache_size: usize,

    /// Tokens an output grammar forces (a schema's property names) appended at once and fed to
    /// the next forward as a prefill chunk (`on`), or decoded one step each (`off`); `auto`: on
    /// a GPU only (on the CPU a prefill costs a decode step per token).
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub jump_forward: String,
}

/// Reads the model's limits from `mlc-chat-config.json` to fill in the defaults.
fn engine_config(a: &Args, chat: &ChatConfig, max_batch: Option<i64>) -> Result<EngineConfig> {
    let max_num_sequence = a
        .max_num_sequence
        .or(max_batch.map(|b| b as usize))
        .unwrap_or(16);
    if max_num_sequence == 0 {
        tvmrt::bail_value!("--max-num-sequence must be at least 1");
    }
    let window = chat.context_window_size.max(1);
    let total = a
        .max_total_seq_length
        .unwrap_or((window + 2 * PAGE_SIZE) * max_num_sequence as i64);
    if total < PAGE_SIZE * 4 {
        tvmrt::bail_value!("--max-total-seq-length {total} is too small");
    }
    let chunk = a.prefill_chunk_size.unwrap_or(chat.prefill_chunk_size);
    if a.prefill_chunk_size.is_some_and(|c| c <= 0) {
        tvmrt::bail_value!("--prefill-chunk-size must be at least 1");
    }
    Ok(EngineConfig {
        max_num_sequence,
        max_total_sequence_length: total,
        prefill_chunk_size: chunk,
        max_queue: a.max_queue,
        prefix_cache_max_num_recycling_seqs: a
            .prefix_cache_max_num_recycling_seqs
            .unwrap_or(max_num_sequence),
        device: tvmrt::device::parse_device(&a.device)?,
    })
}

/// Runs the server until SIGINT or SIGTERM.
pub fn main(a: Args) -> Result<()> {
    let (Some(model), Some(model_lib)) = (a.model.clone(), a.model_lib.clone()) else {
        tvmrt::bail_value!("an MLC-LLM model is served with its directory and --model-lib LIB");
    };
    let app = start_app(&a, model, model_lib)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::runtime(format!("cannot start the async runtime: {e}")))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((a.host.as_str(), a.port))
            .await
            .map_err(|e| Error::value(format!("cannot listen on {}:{}: {e}", a.host, a.port)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::runtime(e.to_string()))?;
        let info = &app.engine.info;
        eprintln!(
            "tvmrt serve: {} on {} at http://{addr} (context {}, max_num_sequence {}, \
             max_total_seq_length {}, prefill_chunk_size {})",
            app.model_id,
            tvmrt::device::device_name(info.config.device),
            info.context_window,
            info.config.max_num_sequence,
            info.config.max_total_sequence_length,
            info.config.prefill_chunk_size
        );
        // Tests and scripts read the address from this line.
        println!("listening on http://{addr}");
        http::serve(app, listener, shutdown_signal())
            .await
            .map_err(|e| Error::runtime(format!("the server failed: {e}")))
    })
}

/// Starts the engine of MLC-LLM model directory `model` with its library `model_lib`: the
/// server's state, for [`http::router`] (the tool also serves it beside other routes).
pub fn start_app(a: &Args, model: PathBuf, model_lib: PathBuf) -> Result<Arc<App>> {
    let chat = ChatConfig::load(&model)?;
    let max_batch = std::fs::read_to_string(model.join("mlc-chat-config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["model_config"]["max_batch_size"].as_i64());
    let config = engine_config(a, &chat, max_batch)?;
    let limits = GrammarLimits {
        max_grammar_size: a.max_grammar_size,
        max_compile_fuel: a.max_grammar_compile_fuel,
        max_step_fuel: a.max_grammar_step_fuel,
        max_grammar_bytes: a.max_grammar_bytes,
        cache_size: a.grammar_cache_size,
        jump_forward: match a.jump_forward.as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        },
    };
    let engine = Engine::start_with(model_lib, model.clone(), config, limits)?;
    let model_id = a.served_model_name.clone().unwrap_or_else(|| {
        let dir = model.canonicalize().unwrap_or_else(|_| model.clone());
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into())
    });
    Ok(Arc::new(App::new(
        engine,
        chat,
        model_id,
        a.api_key.clone(),
    )))
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
