//! Helpers shared by the `cli_*` tests: the fixtures directory and the built `tvmrt` binary.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// `tests/fixtures`.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs the built `tvmrt` binary with `args` (and no `TVMRT_LOG` from the environment).
pub fn tvmrt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(args)
        .env_remove("TVMRT_LOG")
        .output()
        .expect("spawn tvmrt")
}
