//! What `run` and `bench` share: the command-line description of a call, loading the library,
//! finding the function (a compiled kernel, or a Relax function run by the VM), reading the
//! inputs, allocating the outputs, checking them against the kernel's signature, and calling.
//!
//! The parts: `args` (the call as the command line gives it), `callee` (finding the function:
//! a kernel, a Relax VM function or a graph executor), `prepared` (inputs read, outputs
//! allocated, the call and its results), `signature` (checking the arguments against a
//! kernel's signature) and `messages` (errors on one line, naming the argument at fault).

mod args;
mod callee;
mod messages;
mod prepared;
mod signature;

pub use args::CallArgs;
pub use messages::one_line;
pub use prepared::{Prepared, Value};

use std::path::Path;

use tvmrt::abi::DLDataType;

use crate::npyio::dtype_name;

/// The path to hand to the loader: `dlopen` searches the library path, not the current
/// directory, for a name without a slash, so `tvmrt run model.so` means `./model.so`.
pub fn loadable_path(path: &str) -> String {
    if path.contains('/') {
        path.to_string()
    } else {
        format!("./{path}")
    }
}

/// `float32[4, 4]`.
pub fn describe(dtype: DLDataType, shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("{}[{}]", dtype_name(dtype), dims.join(", "))
}

/// `Path` of the n-th output file under `dir`.
pub fn output_path(dir: &Path, n: usize) -> std::path::PathBuf {
    dir.join(format!("output{n}.npy"))
}
