//! `tvmrt`: look inside TVM-compiled libraries, run and time their functions, and pack
//! deployable libraries, generate with and serve language models, on the tvmrt runtime.
//!
//! Set `TVMRT_LOG=debug` to see the loader's decisions on standard error.

mod bench;
mod generate;
mod inspect;
mod invoke;
mod npyio;
mod pack;
mod rpc_server;
mod run;
mod serve;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tvmrt",
    version = short_version(),
    long_version = long_version(),
    about = "Run what Apache TVM compiles",
    after_help = "Set TVMRT_LOG=debug to log the loader's decisions to standard error."
)]
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
    /// Generate tokens greedily with a language model and its tensor-cache weights.
    Generate(generate::Args),
    /// Serve TVM models over KServe's Open Inference Protocol (HTTP and gRPC; a Triton-layout
    /// repository or one model file), or an MLC-LLM model behind OpenAI's API. (Boxed: its
    /// arguments are the largest by far.)
    Serve(Box<serve::Args>),
    /// Serve TVM's RPC (upload, run, time, tune from a host), as TVM's `rpc_server`.
    RpcServer(rpc_server::Args),
}

/// `0.1.0 (tvm-ffi ABI 0.1, classic TVM C ABI)`.
fn short_version() -> &'static str {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (ABIs: tvm-ffi 0.1, classic TVM 0.7-0.20)"
    )
}

/// The version and every interface version tvmrt speaks (`tvmrt --version`).
fn long_version() -> &'static str {
    let ffi = tvmrt::capi::ffi_core::FFI_VERSION;
    let text = format!(
        "{}\n\
         tvm-ffi C ABI {}.{}.{} (libraries built by TVM 0.21 and later: __tvm_ffi_* symbols)\n\
         classic TVM C runtime and backend API (libraries built by TVM 0.7 to 0.20)\n\
         DLPack {}.{}",
        env!("CARGO_PKG_VERSION"),
        ffi.major,
        ffi.minor,
        ffi.patch,
        dlpark::ffi::DLPACK_MAJOR_VERSION,
        dlpark::ffi::DLPACK_MINOR_VERSION,
    );
    // Built once per process, for clap, which wants a 'static string.
    Box::leak(text.into_boxed_str())
}

fn main() {
    tvmrt::logging::init_from_env();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(a) => inspect::main(a),
        Command::Run(a) => run::main(a),
        Command::Bench(a) => bench::main(a),
        Command::Pack(a) => pack::main(a),
        Command::Generate(a) => generate::main(a),
        Command::Serve(a) => serve::main(*a),
        Command::RpcServer(a) => rpc_server::main(a),
    };
    if let Err(e) = result {
        // One line: kernels' messages span several.
        eprintln!("tvmrt: {}", invoke::one_line(&e.to_string()));
        std::process::exit(1);
    }
}
