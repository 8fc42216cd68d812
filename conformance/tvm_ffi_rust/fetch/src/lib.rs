//! Nothing: this package only names tvm-ffi's crates for `cargo fetch`.
