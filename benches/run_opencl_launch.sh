#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# OpenCL benchmarks (issue 22), on whatever OpenCL driver the machine has (POCL on the CI VM):
#  1. per-launch cost of a tiny kernel through tvmrt against a minimal hand-written OpenCL host
#     program, same run, same device, same kernel source (benches/opencl_launch.c);
#  2. the Relax models of tests/fixtures/opencl, `main` on OpenCL through `tvmrt bench`.
#
# Usage: benches/run_opencl_launch.sh [--no-build] [--callgrind] [LAUNCHES [ROUNDS]]
#   --callgrind  also count the instructions one launch costs the calling thread (valgrind
#                --tool=callgrind, main thread only, runs of 1000 and 3000 launches subtracted
#                so setup and kernel builds cancel out): exact where wall clock is not (~3 min).
# Needs the OpenCL headers and libOpenCL.so to link the floor (Debian: opencl-c-headers and
# ocl-icd-opencl-dev). Environment: CC (default cc), OUT (default target/opencl_bench).
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
LAUNCHES="${1:-20000}"
ROUNDS="${2:-9}"
CC="${CC:-cc}"
OUT="${OUT:-$ROOT/target/opencl_bench}"
FIX="$ROOT/tests/fixtures/opencl"
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$ROOT/target/pocl-cache}"
mkdir -p "$OUT"

if [[ $BUILD == 1 ]]; then
  (cd "$ROOT" && cargo build --release -p tvmrt --lib -p tvmrt-cli --bin tvmrt --quiet)
fi
LIB="$ROOT/target/release"
"$CC" -O2 -I "$ROOT/include" -I "$ROOT/benches" "$ROOT/benches/opencl_launch.c" \
  -o "$OUT/opencl_launch" -L "$LIB" -ltvmrt -lOpenCL -Wl,-rpath,"$LIB"

echo "== per-launch cost (median of $ROUNDS rounds of $LAUNCHES launches, alternating)"
"$OUT/opencl_launch" "$FIX/elementwise.so" "$LAUNCHES" "$ROUNDS"

if [[ $CALLGRIND == 1 ]]; then
  echo
  echo "== instructions per launch, calling thread (callgrind; 3000 minus 1000 launches)"
  # Each variant's instructions split into the OpenCL calls (clSetKernelArg and
  # clEnqueueNDRangeKernel, inclusive: the ICD loader and POCL) and the rest (the host
  # program's own work: for tvmrt, its call path and TVM's generated launcher). POCL's share
  # moves by several hundred instructions from run to run with its queue's state, so the ratio
  # puts every variant's own work on top of the floor's OpenCL share.
  for f in loop_floor loop_direct loop_host; do
    for n in 1000 3000; do
      rm -f "$OUT/cg.$f.$n"*
      valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$f" \
        --separate-threads=yes --callgrind-out-file="$OUT/cg.$f.$n" \
        "$OUT/opencl_launch" "$FIX/elementwise.so" "$n" 1 >/dev/null 2>&1
      total=$(grep '^summary' "$OUT/cg.$f.$n-01" | cut -d' ' -f2)
      cl=$(callgrind_annotate --inclusive=yes "$OUT/cg.$f.$n-01" 2>/dev/null |
        grep -E '^ *[0-9,]+ \([^)]*\) +\?\?\?:(clSetKernelArg|clEnqueueNDRangeKernel) ' |
        awk '{gsub(",", "", $1); s += $1} END {print s + 0}')
      echo "$f $n $total $cl"
    done
  done >"$OUT/callgrind.txt"
  python3 - "$OUT/callgrind.txt" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    f, n, total, cl = line.split()
    rows.setdefault(f, {})[int(n)] = (int(total), int(cl))
per = {f: tuple((r[3000][i] - r[1000][i]) / 2000 for i in (0, 1)) for f, r in rows.items()}
floor_cl = per["loop_floor"][1]
base = floor_cl + per["loop_floor"][0] - per["loop_floor"][1]
labels = {"loop_floor": "floor: hand-written OpenCL host",
          "loop_direct": "tvmrt: kernel function directly",
          "loop_host": "tvmrt: TVM's host launcher `add`"}
print(f"{'':34} {'OpenCL':>8} {'own':>6} {'total':>7} {'own + floor OpenCL':>19} {'vs floor':>8}")
for f in ("loop_floor", "loop_direct", "loop_host"):
    total, cl = per[f]
    own = total - cl
    print(f"{labels[f]:34} {cl:8.0f} {own:6.0f} {total:7.0f} {floor_cl + own:19.0f} "
          f"{(floor_cl + own) / base:7.2f}x")
PY
fi

echo
echo "== Relax models, main on OpenCL (tvmrt bench, input on the device, waits for the queue)"
for m in mlp cnn; do
  "$LIB/tvmrt" bench "$FIX/$m.so" main -i "$FIX/data/$m.main.in0.npy" --device opencl \
    --repeat 200
done
