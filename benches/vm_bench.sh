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
mkdir -p "$OUT"

# shellcheck source=benches/ab_rounds.sh
source "$ROOT/benches/ab_rounds.sh"
if [[ $BUILD == 1 ]]; then
  if [[ -z "${TVMRT_LIB_DIR:-}" ]]; then (cd "$ROOT" && cargo build --release -p tvmrt --lib); fi
  ab_build "$SRC" VB_RUNTIME "$OUT/vm_bench_tvmrt" "$OUT/vm_bench_tvm" "$LIBDIR" "$PYTHON"
fi

TVM_BIN="$OUT/vm_bench_tvm"
RT_BIN="$OUT/vm_bench_tvmrt"
RES="$OUT/results.txt"
ab_header "$ROOT" "$PYTHON"
ab_run "$TVM_BIN" "$RT_BIN" "$FIX" "$RES" mlp cnn
ab_table "$RES"
