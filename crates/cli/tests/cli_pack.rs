//! `tvmrt pack`: the BYOC guide's C sources and its ExampleJSON subgraph packed into one
//! library from the command line, and the tool's errors for bad arguments.

#[path = "../../../tests/examplejson_common/mod.rs"]
mod examplejson_common;

use std::path::PathBuf;
use std::process::Command;

use examplejson_common::{check_guide_library, examples};
use tvmrt::module::load_from_file;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tvmrt-cli-pack-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn tvmrt_cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tvmrt"))
}

#[test]
fn command_line_pack() {
    let dir = scratch("cli");
    let out = dir.join("cli.so");
    let e = examples();
    let status = tvmrt_cli()
        .arg("pack")
        .arg("--output")
        .arg(&out)
        .arg("--c-source")
        .arg(e.join("gcc_0_guide.cc"))
        .arg("--c-source")
        .arg(e.join("gcc_1_plain.c"))
        .arg("--module")
        .arg(format!(
            "examplejson={}",
            e.join("subgraph_0.examplejson").display()
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(stdout.contains("modules: _lib, examplejson"), "{stdout}");
    assert!(stdout.contains("verified: loads with tvmrt"), "{stdout}");
    check_guide_library(&load_from_file(out.to_str().unwrap(), "").unwrap());

    for (args, want) in [
        (vec!["--module", "examplejson"], "expected KIND=FILE"),
        (vec!["--blob-format", "v2"], "unknown --blob-format `v2`"),
        (
            vec!["--module", "examplejson=/nonexistent.examplejson"],
            "cannot read ExampleJSON file",
        ),
    ] {
        let o = tvmrt_cli()
            .arg("pack")
            .arg("-o")
            .arg(dir.join("y.so"))
            .args(&args)
            .output()
            .unwrap();
        assert!(!o.status.success());
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
