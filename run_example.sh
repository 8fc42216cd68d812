#!/usr/bin/env bash
# Builds libtvmrt (release) and runs the example program examples/hello.c, which registers a
# C function and calls it through both of TVM's C ABIs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
LIB_DIR=$TARGET_DIR/release

cargo build --release --lib
mkdir -p "$TARGET_DIR/example"
"${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Iinclude examples/hello.c -o "$TARGET_DIR/example/hello" \
  -L"$LIB_DIR" -ltvmrt -Wl,-rpath,"$LIB_DIR"
"$TARGET_DIR/example/hello"
