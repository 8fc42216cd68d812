//! Helpers shared by the `cli_*` tests: the fixtures directory and the built `tvmrt` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root (this crate is `crates/cli`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/fixtures`.
pub fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures")
}

/// Runs the built `tvmrt` binary with `args` (and no `TVMRT_LOG` from the environment).
pub fn tvmrt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tvmrt"))
        .args(args)
        .env_remove("TVMRT_LOG")
        .output()
        .expect("spawn tvmrt")
}

/// Runs a command expected to succeed; returns its standard output.
pub fn ok(args: &[&str]) -> String {
    succeeded(tvmrt(args), args)
}

/// The standard output of a run that must have succeeded.
pub fn succeeded(o: Output, args: &[&str]) -> String {
    assert!(
        o.status.success(),
        "tvmrt {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs a command expected to fail (exit code 1); returns its one line of error.
pub fn fails(args: &[&str]) -> String {
    failed(tvmrt(args), args)
}

/// The one line of error of a run that must have failed (exit code 1).
pub fn failed(o: Output, args: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).trim_end().to_string();
    assert_eq!(o.status.code(), Some(1), "tvmrt {args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "not one line: {err:?}");
    assert!(err.starts_with("tvmrt: "), "{err}");
    err
}

/// A fresh output directory for test `name` of test file `group`, under cargo's temp dir.
pub fn out_dir(group: &str, name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(group)
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The float32 elements of a `.npy` file.
pub fn npy_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    f.into_vec::<f32>().unwrap()
}
