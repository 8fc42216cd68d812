#!/usr/bin/env bash
# Graph executor overhead: `run` (6 nodes: 3 tiny kernels, a __nop, a __copy) and `set_input`
# (copy of 4 floats) of tests/fixtures/graph/shared_storage.so, in ns per call, through the
# classic C API; one C program (benches/graph_run.c) dlopens each runtime in turn, alternating,
# on the same library in the same run.
#
#   benches/run_graph_run.sh /path/to/tvm-0.19/build/libtvm_runtime.so [runs] [rounds]
#
# TVM's runtime is not on PyPI for 0.19: build its `tvm_runtime` target from the v0.19.0 tag
# (runtime only, USE_LLVM=OFF, USE_GRAPH_EXECUTOR=ON) outside this repository.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TVM_RUNTIME=${1:?usage: $0 /path/to/libtvm_runtime.so [runs] [rounds]}
RUNS=${2:-200000}
ROUNDS=${3:-3}
CC=${CC:-cc}
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
OUT=$TARGET_DIR/bench
mkdir -p "$OUT"
cargo build --release -p tvmrt --lib --quiet
"$CC" -std=c11 -O2 -Wall -Wextra benches/graph_run.c -o "$OUT/graph_run" -ldl
MODEL=tests/fixtures/graph/shared_storage.so
PIN=()
if command -v taskset >/dev/null; then PIN=(taskset -c "$(($(nproc) - 1))"); fi
for _ in $(seq "$ROUNDS"); do
  "${PIN[@]}" "$OUT/graph_run" "$TVM_RUNTIME" "$MODEL" "$RUNS"
  "${PIN[@]}" "$OUT/graph_run" "$TARGET_DIR/release/libtvmrt.so" "$MODEL" "$RUNS"
done
