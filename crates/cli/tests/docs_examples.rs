//! Every `tvmrt` example in the guide (`docs/*.md`) and the README runs as shown.
//!
//! trycmd reads the ```` ```console ```` blocks of those pages: a `$ tvmrt ...` line is run
//! with the tool built here, from the repository root (the examples name the shipped fixtures
//! by their paths there), and what it prints must match the lines below it (`...` elides lines,
//! `[..]` part of a line: timings and addresses). Other blocks (`sh`, `c`, `python`) are not
//! run here; .ci/docs_check.py checks that quoted files match their sources.

use std::path::Path;

#[test]
fn guide_and_readme_examples_print_what_they_show() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // The test binary runs only this test: its working directory is the examples' one.
    std::env::set_current_dir(&root).expect("the repository root");
    trycmd::TestCases::new()
        .register_bin("tvmrt", trycmd::cargo::cargo_bin!("tvmrt"))
        // Logs stay off, whatever the caller's environment says.
        .env("TVMRT_LOG", "off")
        .case("README.md")
        .case("docs/*.md")
        .case("docs/*/*.md");
}
