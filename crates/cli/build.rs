//! The `tvmrt` tool embeds the runtime as an rlib. TVM-compiled kernels import runtime
//! functions (`TVMFFIErrorSetRaisedFromCStrParts`, ...) from the global symbol scope and
//! declare no DT_NEEDED, so the executable (and its tests, which load models the same way)
//! must export them: link with -rdynamic.
//!
//! Release builds on x86-64 Linux also lay the functions a server runs (start-up, model
//! loading, the request path) side by side in `.text`, in the order of `link_order/tvmrt.order`
//! (recorded by `link_order/record.sh`): the pages a server touches are then a few hundred
//! contiguous ones instead of one in every few across the whole tool, which is most of its
//! resident memory (BENCHMARKS.md, "Serving tensor models").

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    if env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux") {
        for kind in ["bins", "tests"] {
            println!("cargo:rustc-link-arg-{kind}=-rdynamic");
        }
    }
    order_hot_code();
}

/// Passes the symbol ordering file to the linker where the linker is LLD: rustc's own on
/// x86_64-unknown-linux-gnu from 1.90 on, unless the build names another linker.
/// `TVMRT_LINK_ORDER=0` turns it off. Symbols the file names that a build lacks (another
/// toolchain, other features) are skipped silently: the order only costs its gain.
fn order_hot_code() {
    let order = Path::new(env!("CARGO_MANIFEST_DIR")).join("link_order/tvmrt.order");
    println!("cargo:rerun-if-changed={}", order.display());
    println!("cargo:rerun-if-env-changed=TVMRT_LINK_ORDER");
    let wanted = env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu")
        && env::var("PROFILE").is_ok_and(|p| p == "release")
        && env::var("TVMRT_LINK_ORDER").map_or(true, |v| v != "0")
        && order.is_file();
    if wanted && links_with_rust_lld() {
        println!(
            "cargo:rustc-link-arg-bin=tvmrt=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=tvmrt=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether rustc links this target with its bundled LLD: its default from 1.90, kept unless
/// the build chooses a linker or linker features of its own.
fn links_with_rust_lld() -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let chosen = [
        "linker",
        "link-self-contained",
        "linker-flavor",
        "linker-features",
    ]
    .iter()
    .any(|f| flags.contains(f))
        || env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some();
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let minor = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| {
            v.split(['.', ' '])
                .nth(2)
                .and_then(|m| m.parse::<u32>().ok())
        });
    !chosen && minor.is_some_and(|m| m >= 90)
}
