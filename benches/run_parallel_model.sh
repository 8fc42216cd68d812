#!/usr/bin/env bash
# Parallel kernels inside a classic model (issue 27): tests/fixtures/graph/parallel_conv.so
# (three parallel launches per `run`: workspaces inside the tasks, barriers, host work between)
# on TVM 0.19's runtime and on tvmrt, one C program (benches/parallel_model.c) dlopening each
# in turn, alternating rounds in the same run; `run` back to back, after 200 us of busy
# application work, after 2 ms of sleep, and the CPU each burns while the application sleeps.
#
#   benches/run_parallel_model.sh /path/to/tvm-0.19/build/libtvm_runtime.so [RUNS] [ROUNDS]
#
# RUNS timed `run` calls per measurement (default 2000), ROUNDS alternations (default 7), each
# a fresh process per runtime reporting the median of 3 measurements. TVM_NUM_THREADS (default
# 2) sets both pools. TVM 0.19's runtime is not on PyPI: build its `tvm_runtime` target from
# the v0.19.0 tag (runtime only, USE_LLVM=OFF, USE_GRAPH_EXECUTOR=ON) outside this repository.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TVM_RUNTIME=${1:?usage: $0 /path/to/libtvm_runtime.so [runs] [rounds]}
RUNS=${2:-2000}
ROUNDS=${3:-7}
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-2}"
LOAD_SAMPLES=0
CC=${CC:-cc}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=$TARGET_DIR/bench
mkdir -p "$OUT"
(cd "$ROOT" && cargo build --release -p tvmrt --lib --quiet)
"$CC" -std=c11 -O2 -Wall -Wextra "$ROOT/benches/parallel_model.c" -o "$OUT/parallel_model" -ldl
MODEL=$ROOT/tests/fixtures/graph/parallel_conv.so
RT=$TARGET_DIR/release/libtvmrt.so
RES=$OUT/parallel_model.txt
: >"$RES"
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# TVM_NUM_THREADS=$TVM_NUM_THREADS RUNS=$RUNS ROUNDS=$ROUNDS"
echo "# tvmrt: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo ' + uncommitted changes'); TVM: $TVM_RUNTIME"
sums=()
for i in $(seq "$ROUNDS"); do
  # Alternate which runtime goes first, so a drift in the machine's load hits both alike.
  if ((i % 2)); then order=("$TVM_RUNTIME" "$RT"); else order=("$RT" "$TVM_RUNTIME"); fi
  for lib in "${order[@]}"; do
    name=tvm
    [[ $lib == "$RT" ]] && name=tvmrt
    out=$("$OUT/parallel_model" "$lib" "$MODEL" "$RUNS" 3 2>/dev/null)
    sums+=("$(sed -n 's/^CHECKSUM //p' <<<"$out")")
    sed -n "s/^RESULT /$name /p" <<<"$out" >>"$RES"
  done
done
if [[ $(printf '%s\n' "${sums[@]}" | sort -u | wc -l) != 1 ]]; then
  echo "the runtimes' outputs differ: ${sums[*]}" >&2
  exit 1
fi
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg); outputs agree (checksum ${sums[0]})"
# shellcheck source=benches/ab_rounds.sh
source "$ROOT/benches/ab_rounds.sh"
ab_table "$RES"
