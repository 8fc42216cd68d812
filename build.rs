//! Generates `include/tvmrt.h` from the Rust sources with cbindgen (configured by
//! `cbindgen.toml`).
//!
//! Generation never fails an ordinary build: while someone is mid-edit, a file cbindgen cannot
//! parse leaves the previous header in place with a warning. CI sets `TVMRT_HEADER_STRICT=1`,
//! which turns any generation failure into a build error, and then checks that the header in
//! the tree is exactly what the sources give (`.ci/test.sh`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TVMRT_HEADER_STRICT");
    let strict = env::var("TVMRT_HEADER_STRICT").is_ok_and(|v| !v.is_empty() && v != "0");

    // The exact target triple, for `tvmrt::pack`'s compiler search at run time (`cc` picks
    // ABI flags from it: armv7 hard-float is not plain `arm`).
    if let Ok(target) = env::var("TARGET") {
        println!("cargo:rustc-env=TVMRT_TARGET_TRIPLE={target}");
    }

    // A SONAME, so that programs linked against target/*/libtvmrt.so record `libtvmrt.so`
    // rather than the path they were linked with.
    if env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvmrt.so");
        // TVM-compiled kernels import runtime functions (`TVMFFIErrorSetRaisedFromCStrParts`)
        // from the global symbol scope and declare no DT_NEEDED: Rust executables that embed
        // tvmrt as an rlib (tests, benches; the `tvmrt` tool in crates/cli says so itself)
        // must export them.
        for kind in ["tests", "benches"] {
            println!("cargo:rustc-link-arg-{kind}=-rdynamic");
        }
    }

    build_cxx_part();
    export_ffi_version(&root);

    // cbindgen may also panic on source it does not understand; that is a failure like any
    // other here.
    let outcome = std::panic::catch_unwind(|| generate_header(&root))
        .unwrap_or_else(|_| Err("cbindgen panicked (see the message above)".to_string()));
    if let Err(message) = outcome {
        if strict {
            panic!("include/tvmrt.h: {message}");
        }
        println!("cargo:warning=include/tvmrt.h not regenerated (kept as it was): {message}");
    }
}

/// Passes the tvm-ffi version of `include/tvm/ffi/c_api.h` (`TVM_FFI_VERSION_*`) to the crate,
/// for `TVMFFIGetVersion`: the header and the library cannot disagree.
fn export_ffi_version(root: &Path) {
    let header = root.join("include").join("tvm").join("ffi").join("c_api.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let text = fs::read_to_string(&header)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", header.display()));
    for part in ["MAJOR", "MINOR", "PATCH"] {
        let macro_name = format!("TVM_FFI_VERSION_{part}");
        let value = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("#define "))
            .find_map(|l| l.strip_prefix(macro_name.as_str()))
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .unwrap_or_else(|| panic!("{} defines no numeric {macro_name}", header.display()));
        println!("cargo:rustc-env=TVMRT_FFI_VERSION_{part}={value}");
    }
}

/// The C++ part (src/cxx/: tvm-ffi's non-inline C++ functions and the module vtables), on the
/// platforms whose C++ ABI src/cxx/ knows: Linux (Itanium C++ ABI, libstdc++) on the
/// architectures src/capi/cxx_abi.rs has a tail jump for. Elsewhere tvmrt builds without it
/// (C and Rust users only).
fn build_cxx_part() {
    println!("cargo:rustc-check-cfg=cfg(tvmrt_cxx)");
    // The `cxx` feature (default): without it, C and Rust users only, and no libstdc++.
    if env::var_os("CARGO_FEATURE_CXX").is_none() {
        return;
    }
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let known = matches!(
        arch.as_str(),
        "x86_64" | "x86" | "aarch64" | "arm" | "riscv64"
    );
    if os != "linux" || !known {
        println!("cargo:warning=tvmrt: no C++ part for {arch}-{os} (C and Rust users only)");
        return;
    }
    println!("cargo:rustc-cfg=tvmrt_cxx");
    // The C++ runtime (exceptions, typeinfo vtables, guards): src/cxx/runtime.c binds the
    // process's libstdc++ at first use, so that programs that never reach the C++ part (C
    // programs) do not load libstdc++ at all (BENCHMARKS.md, "Cold start"). Not on 32-bit Arm,
    // whose exception ABI runtime.c does not forward: libstdc++ is linked there, as
    // libtvm_ffi.so does.
    let lazy_runtime = arch != "arm";
    if lazy_runtime {
        println!("cargo:rerun-if-changed=src/cxx/runtime.c");
        cc::Build::new()
            .file("src/cxx/runtime.c")
            .flag_if_supported("-Wall")
            .flag_if_supported("-Wextra")
            .warnings_into_errors(true)
            .compile("tvmrt_cxx_runtime");
    }
    cc::Build::new()
        .cpp(true)
        .cpp_link_stdlib(if lazy_runtime { None } else { Some("stdc++") })
        .std("c++17")
        .file("src/cxx/shim.cc")
        .include("include")
        // Nothing of the C++ part is exported by itself (src/capi/cxx_abi.rs exports what
        // must be), and its inline functions never interpose on a program's own.
        .flag("-fvisibility=hidden")
        .flag("-fvisibility-inlines-hidden")
        .flag_if_supported("-Wall")
        .flag_if_supported("-Wextra")
        .warnings_into_errors(true)
        .compile("tvmrt_cxx");
}

/// Writes `include/tvmrt.h` when its content changes; the old file stays on any failure.
fn generate_header(root: &Path) -> Result<(), String> {
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml"))
        .map_err(|e| format!("cannot read cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        // The crate's own sources, parsed without `cargo metadata`: no nested cargo run.
        .with_src(root.join("src").join("lib.rs"))
        .generate()
        .map_err(|e| format!("cbindgen failed: {e}"))?;
    let mut raw = Vec::new();
    bindings.write(&mut raw);
    let text = unwrap_nullable_typedefs(&String::from_utf8_lossy(&raw)).into_bytes();

    let path = root.join("include").join("tvmrt.h");
    if fs::read(&path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    // Write then rename, so that concurrent builds (cargo test next to the CMake build) never
    // leave a half-written header for a compiler to read.
    let tmp = path.with_extension(format!("h.tmp{}", std::process::id()));
    fs::write(&tmp, &text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    fs::rename(&tmp, &path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        format!("cannot replace {}: {e}", path.display())
    })
}

/// Rewrites `Option<Name>` as `Name`.
///
/// The exports take C callbacks as `Option<TVMPackedCFunc>` and the like, so that a NULL from C
/// is an error rather than undefined behaviour. cbindgen lowers `Option` only around a literal
/// `fn` or pointer type, not around a type alias, and prints the Rust spelling. In C a nullable
/// function-pointer typedef is just the typedef (rustc rejects `Option` of anything that is not
/// pointer-like in an `extern "C"` signature), so dropping the wrapper is exact.
fn unwrap_nullable_typedefs(text: &str) -> String {
    const OPEN: &str = "Option<";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0 && after[name_len..].starts_with('>') {
            out.push_str(&rest[..at]);
            out.push_str(&after[..name_len]);
            rest = &after[name_len + 1..];
        } else {
            out.push_str(&rest[..at + OPEN.len()]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}
