//! `tvmrt`: look inside TVM-compiled libraries, run and time their functions, and pack
//! deployable libraries, on the tvmrt runtime.

mod bench;
mod inspect;
mod pack;
mod run;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "tvmrt", version = tvmrt_version(), about = "Run what Apache TVM compiles")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a library's ABI, module tree, functions and blob.
    Inspect(inspect::Args),
    /// Run a function on .npy inputs.
    Run(run::Args),
    /// Time a function on .npy inputs.
    Bench(bench::Args),
    /// Compile C sources and modules into one deployable shared library.
    Pack(pack::Args),
}

fn tvmrt_version() -> &'static str {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (ABIs: tvm-ffi 0.1, classic TVM 0.7-0.20 backend and C runtime API)"
    )
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(a) => inspect::main(a),
        Command::Run(a) => run::main(a),
        Command::Bench(a) => bench::main(a),
        Command::Pack(a) => pack::main(a),
    };
    if let Err(e) = result {
        eprintln!("tvmrt: {e}");
        std::process::exit(1);
    }
}
