//! `tvmrt serve`: one command for both servers. What is served is told by what is named:
//! `--model-repository DIR`, a model library file (`model.so`), or a directory without
//! `mlc-chat-config.json` are TVM models behind KServe's Open Inference Protocol
//! (tvmrt-oip); a directory holding `mlc-chat-config.json` (with `--model-lib`) is an MLC-LLM
//! model behind OpenAI's API (tvmrt-serve).

use std::path::Path;

use tvmrt::{Error, Result};
use tvmrt_oip::repository::Source;

/// The arguments of both servers (`--host` and `--port` are shared).
#[derive(clap::Args)]
#[group(skip)]
pub struct Args {
    #[command(flatten)]
    llm: tvmrt_serve::cli::Args,
    #[command(flatten)]
    oip: tvmrt_oip::cli::Args,
}

/// An MLC-LLM model directory: it holds `mlc-chat-config.json`.
fn is_mlc_model(dir: &Path) -> bool {
    dir.join("mlc-chat-config.json").is_file()
}

/// Serves what the arguments name until SIGTERM or SIGINT.
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
    if a.llm.model_lib.is_some() {
        return Err(Error::value(
            "--model-lib goes with an MLC-LLM model directory (one holding mlc-chat-config.json)",
        ));
    }
    tvmrt_oip::cli::serve(&a.oip, source, &host, port)
}
