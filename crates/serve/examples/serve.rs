//! `tvmrt serve` without the rest of the tool: the same arguments and server.
//!
//!     cargo run -p tvmrt-serve --example serve -- tests/fixtures/mlc/model \
//!         --model-lib tests/fixtures/mlc/model/lib.so

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: tvmrt_serve::cli::Args,
}

fn main() {
    if let Err(e) = tvmrt_serve::cli::main(Cli::parse().args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
