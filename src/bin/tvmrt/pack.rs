//! `tvmrt pack`.

/// Arguments of `tvmrt pack`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tvmrt pack`.
pub fn main(_args: Args) -> tvmrt::Result<()> {
    Err(tvmrt::Error::runtime("`tvmrt pack` is being written"))
}
