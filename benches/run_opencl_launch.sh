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
  (cd "$ROOT" && cargo build --release --lib --bin tvmrt --quiet)
fi
LIB="$ROOT/target/release"
"$CC" -O2 -I "$ROOT/include" -I "$ROOT/benches" "$ROOT/benches/opencl_launch.c" \
  -o "$OUT/opencl_launch" -L "$LIB" -ltvmrt -lOpenCL -Wl,-rpath,"$LIB"

echo "== per-launch cost (median of $ROUNDS rounds of $LAUNCHES launches, alternating)"
"$OUT/opencl_launch" "$FIX/elementwise.so" "$LAUNCHES" "$ROUNDS"

if [[ $CALLGRIND == 1 ]]; then
  echo
  echo "== instructions per launch, calling thread (callgrind; 3000 minus 1000 launches)"
  count() { # FUNCTION LAUNCHES -> instructions of the main thread inside FUNCTION
    local out="$OUT/cg.$1.$2"
    rm -f "$out"*
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$1" --separate-threads=yes \
      --callgrind-out-file="$out" "$OUT/opencl_launch" "$FIX/elementwise.so" "$2" 1 >/dev/null 2>&1
    grep '^summary' "$out-01" | cut -d' ' -f2
  }
  declare -A per
  for f in loop_floor loop_direct loop_host; do
    per[$f]=$(( ($(count "$f" 3000) - $(count "$f" 1000)) / 2000 ))
  done
  printf '%-34s %8s %8s\n' "" "instr" "vs floor"
  printf '%-34s %8d %8s\n' "floor: hand-written OpenCL host" "${per[loop_floor]}" "1.00x"
  for f in loop_direct loop_host; do
    label=$([[ $f == loop_direct ]] && echo "tvmrt: kernel function directly" ||
      echo "tvmrt: TVM's host launcher \`add\`")
    printf '%-34s %8d %7sx\n' "$label" "${per[$f]}" \
      "$(python3 -c "print(f'{${per[$f]}/${per[loop_floor]}:.2f}')")"
  done
fi

echo
echo "== Relax models, main on OpenCL (tvmrt bench, input on the device, waits for the queue)"
for m in mlp cnn; do
  "$LIB/tvmrt" bench "$FIX/$m.so" main -i "$FIX/data/$m.main.in0.npy" --device opencl \
    --repeat 200
done
