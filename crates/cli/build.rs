//! The `tvmrt` tool embeds the runtime as an rlib. TVM-compiled kernels import runtime
//! functions (`TVMFFIErrorSetRaisedFromCStrParts`, ...) from the global symbol scope and
//! declare no DT_NEEDED, so the executable (and its tests, which load models the same way)
//! must export them: link with -rdynamic.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux") {
        for kind in ["bins", "tests"] {
            println!("cargo:rustc-link-arg-{kind}=-rdynamic");
        }
    }
}
