//! `tvmrt inspect`.

/// Arguments of `tvmrt inspect`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tvmrt inspect`.
pub fn main(_args: Args) -> tvmrt::Result<()> {
    Err(tvmrt::Error::runtime("`tvmrt inspect` is being written"))
}
