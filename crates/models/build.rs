//! Model libraries TVM compiles import runtime functions (`TVMFFIErrorSetRaisedFromCStrParts`)
//! from the global symbol scope and declare no DT_NEEDED: this crate's unit-test executable,
//! which runs a real model (`batcher::model_tests`), embeds tvmrt as an rlib and must export
//! them. (`rustc-link-arg-tests` reaches integration tests only; link arguments of a library
//! crate's build script reach no crate that depends on it.)

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux") {
        println!("cargo:rustc-link-arg=-rdynamic");
    }
}
