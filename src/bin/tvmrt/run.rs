//! `tvmrt run`.

/// Arguments of `tvmrt run`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tvmrt run`.
pub fn main(_args: Args) -> tvmrt::Result<()> {
    Err(tvmrt::Error::runtime("`tvmrt run` is being written"))
}
