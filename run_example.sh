#!/usr/bin/env bash
# The main job on a fresh machine: builds the `tvmrt` tool (release) and runs it on the shipped
# examples:
#   1. a Relax MLP compiled and exported by Apache TVM 0.27 (tests/fixtures/mlp.so): inspect it,
#      then run its `main` on an input through tvmrt's Relax VM;
#   2. the BYOC example from TVM's "Bring Your Own Codegen" guide: pack the guide's generated
#      C++ (gcc_0), a plain-C kernel (gcc_1) and an ExampleJSON graph (subgraph_0) into one
#      deployable library with `tvmrt pack`, then run the guide's subgraph from it;
#   3. the C API example examples/hello.c (a C function called through both of TVM's ABIs).
# Installs a C/C++ compiler with apt-get when none is present (tvmrt pack and the example need one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
OUT=$TARGET_DIR/example
mkdir -p "$OUT"

if ! command -v cc >/dev/null || ! command -v c++ >/dev/null; then
  sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq gcc g++
fi

cargo build --release -p tvmrt --lib -p tvmrt-cli --bin tvmrt
TVMRT=$TARGET_DIR/release/tvmrt

echo "== tvmrt inspect tests/fixtures/mlp.so"
"$TVMRT" inspect tests/fixtures/mlp.so
echo
echo "== tvmrt run tests/fixtures/mlp.so main (TVM's own output for this input is in tests/fixtures/data/mlp.main.out0.npy)"
"$TVMRT" run tests/fixtures/mlp.so main --input tests/fixtures/data/mlp.main.in0.npy
echo
echo "== tvmrt pack: the BYOC guide's subgraph as generated C++ and as an ExampleJSON graph"
"$TVMRT" pack --output "$OUT/byoc.so" \
  --c-source examples/byoc/gcc_0_guide.cc --c-source examples/byoc/gcc_1_plain.c \
  --module examplejson=examples/byoc/subgraph_0.examplejson
IN=(--input examples/byoc/data/in0.npy --input examples/byoc/data/in1.npy
  --input examples/byoc/data/in2.npy --input examples/byoc/data/in3.npy)
echo "== tvmrt run byoc.so subgraph_0 (ExampleJSON runtime) and gcc_0 (the guide's generated code)"
"$TVMRT" run "$OUT/byoc.so" subgraph_0 "${IN[@]}" --output-shape float32:10x10 --save "$OUT/json"
"$TVMRT" run "$OUT/byoc.so" gcc_0 "${IN[@]}" --output-shape float32:10x10 --save "$OUT/gcc"
cmp "$OUT/json/output0.npy" "$OUT/gcc/output0.npy" &&
  echo "subgraph_0 and gcc_0 agree: (in0 + in1 - in2) * in3"
"$TVMRT" run "$OUT/byoc.so" subgraph_0 "${IN[@]}" --output-shape float32:10x10
echo
echo "== examples/hello.c: a C function through the classic and the tvm-ffi C API"
"${CC:-cc}" -std=c11 -O2 -Wall -Wextra -Iinclude examples/hello.c -o "$OUT/hello" \
  -L"$TARGET_DIR/release" -ltvmrt -Wl,-rpath,"$TARGET_DIR/release"
"$OUT/hello"
