//! `tvmrt serve`: one command for both servers. What is served is told by what is named:
//! `--model-repository DIR`, a model library file (`model.so`), or a directory without
//! `mlc-chat-config.json` are TVM models behind KServe's Open Inference Protocol
//! (tvmrt-oip); a directory holding `mlc-chat-config.json` (with `--model-lib`) is an MLC-LLM
//! model behind OpenAI's API (tvmrt-serve). A repository may hold one MLC-LLM model directory
//! beside its tensor models: the same process serves it on the OpenAI routes.
//!
//! Without the `oip` feature `tvmrt serve` is the LLM server alone.

#[cfg(feature = "oip")]
use std::path::Path;

#[cfg(feature = "oip")]
use tvmrt::Error;
use tvmrt::Result;
#[cfg(feature = "oip")]
use tvmrt_oip::repository::{mlc_models, Source};

/// The arguments of both servers (`--host` and `--port` are shared).
#[derive(clap::Args)]
#[group(skip)]
pub struct Args {
    #[command(flatten)]
    llm: tvmrt_serve::cli::Args,
    #[cfg(feature = "oip")]
    #[command(flatten)]
    oip: tvmrt_oip::cli::Args,
}

/// Serves the MLC-LLM model the arguments name until SIGTERM or SIGINT.
#[cfg(not(feature = "oip"))]
pub fn main(a: Args) -> Result<()> {
    tvmrt_serve::cli::main(a.llm)
}

/// An MLC-LLM model directory: it holds `mlc-chat-config.json`.
#[cfg(feature = "oip")]
fn is_mlc_model(dir: &Path) -> bool {
    dir.join("mlc-chat-config.json").is_file()
}

/// Serves what the arguments name until SIGTERM or SIGINT.
#[cfg(feature = "oip")]
pub fn main(a: Args) -> Result<()> {
    let (host, port) = (a.llm.host.clone(), a.llm.port);
    let source = match (&a.oip.model_repository, &a.llm.model) {
        (Some(_), Some(m)) => {
            return Err(Error::value(format!(
                "name a model ({}) or --model-repository, not both",
                m.display()
            )))
        }
        (Some(repo), None) => Source::Directory(repo.clone()),
        // `--model-lib` names an MLC-LLM model's library: today's `tvmrt serve DIR
        // --model-lib LIB`, whose own checks say what is wrong with DIR.
        (None, Some(_)) if a.llm.model_lib.is_some() => return tvmrt_serve::cli::main(a.llm),
        (None, Some(m)) if m.is_dir() && is_mlc_model(m) => return tvmrt_serve::cli::main(a.llm),
        (None, Some(m)) if m.is_dir() => Source::Directory(m.clone()),
        (None, Some(m)) if m.is_file() => Source::File(m.clone()),
        (None, Some(m)) => return Err(Error::value(format!("`{}` does not exist", m.display()))),
        (None, None) => {
            return Err(Error::value(
                "name what to serve: --model-repository DIR, a model library (model.so), or an \
                 MLC-LLM model directory with --model-lib LIB",
            ))
        }
    };
    let other = match &source {
        Source::Directory(root) => llm_routes(&a.llm, root)?,
        Source::File(_) => None,
    };
    if other.is_none() && a.llm.model_lib.is_some() {
        return Err(Error::value(
            "--model-lib names the library of an MLC-LLM model directory, and the repository \
             holds none (a directory with mlc-chat-config.json)",
        ));
    }
    tvmrt_oip::cli::serve(&a.oip, source, &host, port, other)
}

/// The OpenAI routes of the MLC-LLM model directory in repository `root`, if it holds one:
/// served by the same process beside the tensor models, with `--model-lib` or the directory's
/// own `lib.so`. One language model per process.
#[cfg(feature = "oip")]
fn llm_routes(llm: &tvmrt_serve::cli::Args, root: &Path) -> Result<Option<axum::Router>> {
    let dirs = mlc_models(root);
    let dir = match dirs.as_slice() {
        [] => return Ok(None),
        [one] => one.clone(),
        _ => {
            let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            return Err(Error::value(format!(
                "the repository holds {} MLC-LLM model directories ({}): one process serves \
                 one language model",
                dirs.len(),
                names.join(", ")
            )));
        }
    };
    let lib = llm.model_lib.clone().unwrap_or_else(|| dir.join("lib.so"));
    if !lib.is_file() {
        return Err(Error::value(format!(
            "the MLC-LLM model directory `{}` needs its library: --model-lib LIB, or lib.so in it",
            dir.display()
        )));
    }
    let app = tvmrt_serve::cli::start_app(llm, dir.clone(), lib)?;
    eprintln!(
        "tvmrt serve: MLC-LLM model `{}` ({}) on OpenAI's routes (/v1/...)",
        app.model_id,
        dir.display()
    );
    Ok(Some(tvmrt_serve::http::router(app)))
}
