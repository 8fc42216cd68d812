#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Cold start (issue 35): a fresh process that loads a small Relax model and calls `main` once,
# tvmrt against Apache TVM 0.27's runtime in the same run. Builds benches/cold_start/cold_start.c
# twice (benches/ab_rounds.sh: against target/release/libtvmrt.so, and against libtvm_ffi.so +
# libtvm_runtime.so of the pinned apache-tvm wheel), then:
#   - wall time: SAMPLES fresh processes per runtime, alternating (median and minimum, fork to
#     exit);
#   - CPU time: SAMPLES more processes per runtime under `perf stat -e task-clock` (the mean
#     CPU time of the process, user and kernel: less disturbed by other load than wall time;
#     skipped when perf cannot count);
#   - instructions: one process per runtime under callgrind (user-space instructions of the
#     whole process, the dynamic linker included; deterministic, unlike wall time on a shared
#     machine).
#
# Usage: benches/cold_start/run.sh [--no-build] [SAMPLES] [MODEL]
#   SAMPLES  processes per runtime (default 200)
#   MODEL    a fixture of tests/fixtures with data/MODEL.main.in0.npy (default mlp)
# Environment: TVM_NUM_THREADS (default 1, same for both), CC, OUT (default target/cold_start),
#              TVMRT_LIB_DIR (default target/release).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD=1
if [[ "${1:-}" == --no-build ]]; then BUILD=0; shift; fi
SAMPLES="${1:-200}"
MODEL="${2:-mlp}"
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-1}"
OUT="${OUT:-$ROOT/target/cold_start}"
LIBDIR="${TVMRT_LIB_DIR:-$ROOT/target/release}"
FIX="$ROOT/tests/fixtures"
PYTHON="$("$ROOT/.ci/venv.sh" onnx)"
mkdir -p "$OUT"

if [[ $BUILD == 1 ]]; then
  (cd "$ROOT" && cargo build --release -p tvmrt --lib)
fi
# shellcheck source=benches/ab_rounds.sh
source "$ROOT/benches/ab_rounds.sh"
ab_build "$ROOT/benches/cold_start/cold_start.c" CS_RUNTIME "$OUT/cs_tvmrt" "$OUT/cs_tvm" \
  "$LIBDIR" "$PYTHON"

LIB="$FIX/$MODEL.so"
IN="$FIX/data/$MODEL.main.in0.npy"
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# model $MODEL, SAMPLES=$SAMPLES TVM_NUM_THREADS=$TVM_NUM_THREADS, tvmrt $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo ' + uncommitted changes') ($LIBDIR/libtvmrt.so), apache-tvm $("$PYTHON" -c 'import tvm; print(tvm.__version__)')"
# Both must run the model and agree on its output.
a=$("$OUT/cs_tvm" "$LIB" "$IN" | awk '{print $NF}')
b=$("$OUT/cs_tvmrt" "$LIB" "$IN" | awk '{print $NF}')
if [[ "$a" != "$b" ]]; then
  echo "cold_start: outputs differ: TVM $a, tvmrt $b" >&2
  exit 1
fi

declare -A WALL_MED WALL_MIN INSNS CPU
while read -r _ bin _ med min; do
  WALL_MED[$bin]=$med
  WALL_MIN[$bin]=$min
done < <("$OUT/cs_tvm" --spawn "$SAMPLES" "$OUT/cs_tvm" "$OUT/cs_tvmrt" "$LIB" "$IN" | grep '^RESULT')
for bin in "$OUT/cs_tvm" "$OUT/cs_tvmrt"; do
  INSNS[$bin]=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$LIB" "$IN" 2>&1 >/dev/null |
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p')
done
for bin in "$OUT/cs_tvm" "$OUT/cs_tvmrt"; do
  CPU[$bin]=$(perf stat -x, -r "$SAMPLES" -e task-clock "$bin" "$LIB" "$IN" 2>&1 >/dev/null |
    awk -F, '/task-clock/ { printf "%.0f", $1 * 1000 }') || true
  CPU[$bin]=${CPU[$bin]:-n/a}
done
t=$OUT/cs_tvm r=$OUT/cs_tvmrt
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| runtime | wall median (us) | wall min (us) | CPU time, mean (us) | instructions (callgrind) |"
echo "|---|---:|---:|---:|---:|"
echo "| Apache TVM 0.27 (libtvm_ffi.so + libtvm_runtime.so) | ${WALL_MED[$t]} | ${WALL_MIN[$t]} | ${CPU[$t]} | ${INSNS[$t]} |"
echo "| tvmrt | ${WALL_MED[$r]} | ${WALL_MIN[$r]} | ${CPU[$r]} | ${INSNS[$r]} |"
awk -v a="${WALL_MED[$r]}" -v b="${WALL_MED[$t]}" -v e="${WALL_MIN[$r]}" -v f="${WALL_MIN[$t]}" \
  -v g="${CPU[$r]}" -v h="${CPU[$t]}" -v c="${INSNS[$r]}" -v d="${INSNS[$t]}" \
  'BEGIN { printf "tvmrt/TVM: wall median %.2fx, wall min %.2fx, CPU time %s, instructions %.2fx\n",
           a / b, e / f, (h > 0 ? sprintf("%.2fx", g / h) : "n/a"), c / d }'
