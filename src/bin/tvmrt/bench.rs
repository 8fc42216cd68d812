//! `tvmrt bench`.

/// Arguments of `tvmrt bench`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `tvmrt bench`.
pub fn main(_args: Args) -> tvmrt::Result<()> {
    Err(tvmrt::Error::runtime("`tvmrt bench` is being written"))
}
