#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds benches/vm_bench.c twice -- against tvmrt (libtvmrt.so) and against Apache TVM's
# runtime (libtvm_ffi.so + libtvm_runtime.so from the apache-tvm wheel) -- and runs both on the
# same Relax model libraries (tests/fixtures/mlp.so, cnn.so) in the same run: `main` latency
# and load-to-first-result. Prints a markdown table (recorded in benches/vm_results.md).
#
# Usage: benches/vm_bench.sh [--no-build] [ROUNDS] [LOAD_SAMPLES]
#   ROUNDS        --bench runs per runtime, alternated tvm/tvmrt (default 3)
#   LOAD_SAMPLES  fresh processes per runtime and model for load-to-first-result (default 30)
# Environment: TVM_NUM_THREADS (default 1, same for both), PYTHON, CC, OUT (default
#              target/vm_bench), TVMRT_LIB_DIR (default target/release).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=1
if [[ "${1:-}" == --no-build ]]; then BUILD=0; shift; fi
ROUNDS="${1:-3}"
LOAD_SAMPLES="${2:-30}"
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-1}"
PYTHON="${PYTHON:-python3}"
CC="${CC:-cc}"
OUT="${OUT:-$ROOT/target/vm_bench}"
LIBDIR="${TVMRT_LIB_DIR:-$ROOT/target/release}"
FIX="$ROOT/tests/fixtures"
SRC="$ROOT/benches/vm_bench.c"
CFLAGS=(-O2 -std=c11 -Wall -Wextra -Werror)

SP="$("$PYTHON" -c 'import os, tvm_ffi; print(os.path.dirname(os.path.dirname(tvm_ffi.__file__)))')"
mkdir -p "$OUT"

if [[ $BUILD == 1 ]]; then
  if [[ -z "${TVMRT_LIB_DIR:-}" ]]; then (cd "$ROOT" && cargo build --release --lib); fi
  "$CC" "${CFLAGS[@]}" -DVB_RUNTIME='"tvmrt"' -I"$ROOT/include" "$SRC" -o "$OUT/vm_bench_tvmrt" \
    -L"$LIBDIR" -Wl,--no-as-needed -ltvmrt -Wl,--as-needed -Wl,-rpath,"$LIBDIR"
  # libtvm_runtime.so is linked --no-as-needed: the program names none of its symbols, but its
  # static initializers register the Relax VM and its builtins.
  "$CC" "${CFLAGS[@]}" -DVB_RUNTIME='"apache-tvm"' \
    -I"$SP/tvm/include" -I"$SP/tvm_ffi/include" -I"$SP/tvm_ffi/3rdparty/dlpack/include" \
    "$SRC" -o "$OUT/vm_bench_tvm" \
    -Wl,--no-as-needed "$SP/tvm_ffi/lib/libtvm_ffi.so" "$SP/tvm/lib/libtvm_runtime.so" \
    -Wl,--as-needed -Wl,-rpath,"$SP/tvm_ffi/lib:$SP/tvm/lib"
fi

TVM_BIN="$OUT/vm_bench_tvm"
RT_BIN="$OUT/vm_bench_tvmrt"
RES="$OUT/results.txt"
# shellcheck source=benches/ab_rounds.sh
source "$ROOT/benches/ab_rounds.sh"
ab_header "$ROOT" "$PYTHON"
ab_run "$TVM_BIN" "$RT_BIN" "$FIX" "$RES" mlp cnn
ab_table "$RES"
