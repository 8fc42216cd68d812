#!/usr/bin/env bash
# Parallel kernels inside a Relax model (issue 27): benches/parallel_relax.py compiles a small
# CNN with Apache TVM 0.27 whose kernels run in parallel tasks; benches/vm_bench.c, built
# against tvmrt and against TVM 0.27's runtime (libtvm_ffi.so + libtvm_runtime.so of the
# apache-tvm wheel), runs its `main` back to back, after 2 ms of sleep, and measures the CPU
# each pool burns while the application is idle; the two alternate, ROUNDS times each.
#
#   benches/run_parallel_relax.sh [--no-build] [ROUNDS]     (default 7)
# Environment: TVM_NUM_THREADS (default 2, both pools), PYTHON (default the onnx venv's).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=1
if [[ "${1:-}" == --no-build ]]; then BUILD=0; shift; fi
ROUNDS="${1:-7}"
LOAD_SAMPLES=0
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-2}"
PYTHON="${PYTHON:-$ROOT/.venv/onnx/bin/python}"
OUT="${OUT:-$ROOT/target/parallel_relax}"
mkdir -p "$OUT"
# shellcheck source=benches/ab_rounds.sh
source "$ROOT/benches/ab_rounds.sh"
if [[ $BUILD == 1 ]]; then
  (cd "$ROOT" && cargo build --release -p tvmrt --lib --quiet)
  "$PYTHON" "$ROOT/benches/parallel_relax.py" "$OUT/model" >/dev/null
  ab_build "$ROOT/benches/vm_bench.c" VB_RUNTIME "$OUT/vm_bench_tvmrt" "$OUT/vm_bench_tvm" \
    "$ROOT/target/release" "$PYTHON"
fi
RES="$OUT/results.txt"
: >"$RES"
ab_header "$ROOT" "$PYTHON"
for i in $(seq "$ROUNDS"); do
  if ((i % 2)); then order=(tvm tvmrt); else order=(tvmrt tvm); fi
  for rt in "${order[@]}"; do
    "$OUT/vm_bench_$rt" --bench-pool pcnn "$OUT/model" | sed -n "s/^RESULT /$rt /p" >>"$RES"
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
ab_table "$RES"
