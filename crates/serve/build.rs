//! Model libraries TVM compiles import runtime functions (`TVMFFIErrorSetRaisedFromCStrParts`)
//! from the global symbol scope and declare no DT_NEEDED: executables that embed tvmrt as an
//! rlib (this crate's tests and benches; the `tvmrt` tool does the same in its own build.rs)
//! must export them.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux") {
        for kind in ["tests", "benches"] {
            println!("cargo:rustc-link-arg-{kind}=-rdynamic");
        }
    }
}
