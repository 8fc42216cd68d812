//! What the engine benchmarks share: the model they run, from the command line or the MLC-LLM
//! fixture.

use std::path::PathBuf;

/// The positional arguments (flags that cargo passes, `--bench` among them, skipped) and the
/// model directory and library they name first: `cargo bench --bench NAME -- [MODEL_DIR
/// [LIB]] ...`, by default the MLC-LLM fixture.
pub fn model_args() -> (Vec<String>, PathBuf, PathBuf) {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mlc/model");
    let dir = args.first().map(PathBuf::from).unwrap_or(root.clone());
    let lib = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or(root.join("lib.so"));
    (args, dir, lib)
}
