#!/usr/bin/env bash
# Classic-ABI kernel call overhead: TVMFuncCall of a TVM <= 0.20 style library's `add_one`
# (tests/classic_libs/classic_kernels.c), in ns per call and in instructions per call
# (callgrind, when valgrind is installed). No runtime that loads classic libraries is on PyPI
# (apache-tvm starts at 0.25), so there is no reference column: compare commits instead.
#
#   benches/run_classic_kernel_call.sh [calls]      (default 2000000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CALLS=${1:-2000000}
CC=${CC:-cc}
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
OUT=$TARGET_DIR/bench
mkdir -p "$OUT"

cargo build --release -p tvmrt --lib --quiet
"$CC" -O2 -shared -fPIC tests/classic_libs/classic_kernels.c -o "$OUT/classic_kernels.so"
"$CC" -std=c11 -O2 -Wall -Wextra -Iinclude benches/classic_kernel_call.c \
  -o "$OUT/classic_kernel_call" -L"$TARGET_DIR/release" -ltvmrt \
  -Wl,-rpath,"$TARGET_DIR/release"

PIN=()
if command -v taskset >/dev/null; then PIN=(taskset -c "$(($(nproc) - 1))"); fi
"${PIN[@]}" "$OUT/classic_kernel_call" "$OUT/classic_kernels.so" "$CALLS"
if command -v valgrind >/dev/null; then
  prof=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$prof" "$OUT/classic_kernel_call" \
    "$OUT/classic_kernels.so" 10000 >/dev/null 2>&1
  total=$(callgrind_annotate --inclusive=yes "$prof" 2>/dev/null | grep -E 'loop_kernel' |
    head -1 | awk '{gsub(",", "", $1); print $1}')
  rm -f "$prof"
  # 9 timed loops and a warm-up of a tenth.
  awk -v t="$total" -v n=$((10000 * 9 + 1000)) \
    'BEGIN { printf "instructions per call (callgrind, incl. loop and kernel): %.0f\n", t / n }'
fi
