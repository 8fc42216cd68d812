#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds benches/kernel_bench.c twice -- against tvmrt (libtvmrt.so) and
# against Apache TVM's runtime (libtvm_ffi.so + libtvm_runtime.so from the
# apache-tvm wheel) -- runs both on the same TVM-compiled fixtures in the same
# run, and prints a side-by-side table.
#
# Usage: benches/run_kernel_bench.sh [--no-build] [--callgrind] [ROUNDS] [LOAD_SAMPLES]
#   --callgrind   also count instructions (valgrind --tool=callgrind) per
#                 TVMFFIFunctionCall and per workspace alloc/free pair on both
#                 runtimes: exact and immune to machine load (takes ~2 min).
#   ROUNDS        --bench runs per runtime, alternated tvm/tvmrt (default 3);
#                 the table shows the median and the lowest of the per-round
#                 medians, and the lowest single sample.
#   LOAD_SAMPLES  fresh processes per runtime for load-to-first-result
#                 (default 30), alternated between the two binaries.
# Environment: TVM_NUM_THREADS (default 2, same for both runtimes),
#              PYTHON (default python3) to locate the apache-tvm wheel,
#              CC (default cc), OUT (build dir, default target/kernel_bench).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=1
CALLGRIND=0
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --callgrind) CALLGRIND=1 ;;
    *) echo "unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
ROUNDS="${1:-3}"
LOAD_SAMPLES="${2:-30}"
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-2}"
PYTHON="${PYTHON:-python3}"
CC="${CC:-cc}"
OUT="${OUT:-$ROOT/target/kernel_bench}"
FIX="$ROOT/tests/fixtures"
SRC="$ROOT/benches/kernel_bench.c"
mkdir -p "$OUT"

# shellcheck source=benches/ab_rounds.sh
source "$ROOT/benches/ab_rounds.sh"
if [[ $BUILD == 1 ]]; then
  (cd "$ROOT" && cargo build --release -p tvmrt --lib)
  ab_build "$SRC" KB_RUNTIME "$OUT/kernel_bench_tvmrt" "$OUT/kernel_bench_tvm" \
    "$ROOT/target/release" "$PYTHON"
fi

TVM_BIN="$OUT/kernel_bench_tvm"
RT_BIN="$OUT/kernel_bench_tvmrt"
RES="$OUT/results.txt"
ab_header "$ROOT" "$PYTHON"
echo "# libtvmrt.so built $(date -u -r "$ROOT/target/release/libtvmrt.so" '+%H:%M:%S UTC')"
ab_run "$TVM_BIN" "$RT_BIN" "$FIX" "$RES" add matmul
ab_table "$RES"

if [[ $CALLGRIND == 1 ]]; then
  # Instructions (Ir) per call of a runtime entry point, from callgrind's call
  # edges: the inclusive cost of the busiest edge into the function divided by
  # that edge's call count (so warm-up and one-off calls need no bookkeeping).
  per_call() {  # per_call <annotated tree file> <function name>
    awk -v f="$2" '
      $2 == ">" && index($3, ":" f) == length($3) - length(f) && match($0, /\(([0-9,]+)x\)/) {
        n = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", n); c = $1; gsub(",", "", c)
        if (n + 0 > best) { best = n + 0; cost = c + 0 } }
      END { if (best > 0) printf "%.1f", cost / best; else printf "n/a" }' "$1"
  }
  declare -A IR
  for rt in tvm tvmrt; do
    bin="$OUT/kernel_bench_$rt"
    for sec in add workspace; do
      valgrind --tool=callgrind --callgrind-out-file="$OUT/cg_${sec}_$rt.out" \
        "$bin" --only "$sec" "$FIX" > /dev/null 2>&1
      callgrind_annotate --threshold=100 --tree=calling --auto=no --show-percs=no "$OUT/cg_${sec}_$rt.out" \
        > "$OUT/cg_${sec}_$rt.tree" 2>/dev/null
    done
    IR[$rt,call]=$(per_call "$OUT/cg_add_$rt.tree" TVMFFIFunctionCall)
    IR[$rt,kern]=$(per_call "$OUT/cg_add_$rt.tree" __tvm_ffi_add)
    IR[$rt,over]=$(awk -v a="${IR[$rt,call]}" -v k="${IR[$rt,kern]}" 'BEGIN { printf "%.1f", a - k }')
    IR[$rt,alloc]=$(per_call "$OUT/cg_workspace_$rt.tree" TVMBackendAllocWorkspace)
    IR[$rt,free]=$(per_call "$OUT/cg_workspace_$rt.tree" TVMBackendFreeWorkspace)
  done
  echo
  echo "| instructions per call (callgrind Ir, inclusive) | TVM | tvmrt |"
  echo "|---|---:|---:|"
  echo "| TVMFFIFunctionCall(add, n=16), kernel included | ${IR[tvm,call]} | ${IR[tvmrt,call]} |"
  echo "| __tvm_ffi_add (the kernel's own entry) | ${IR[tvm,kern]} | ${IR[tvmrt,kern]} |"
  echo "| runtime overhead per call (difference) | ${IR[tvm,over]} | ${IR[tvmrt,over]} |"
  echo "| TVMBackendAllocWorkspace(1, 0, 4096, 2, 32) | ${IR[tvm,alloc]} | ${IR[tvmrt,alloc]} |"
  echo "| TVMBackendFreeWorkspace | ${IR[tvm,free]} | ${IR[tvmrt,free]} |"
fi
