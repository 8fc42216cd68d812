#!/usr/bin/env bash
# Instructions per call, counted by valgrind's callgrind: a deterministic companion to
# run_call_overhead.sh (wall-clock figures on a shared 2-core machine are noisy). Run that
# script first; it builds the two binaries this one profiles.
#
#   benches/callgrind_call_overhead.sh [iterations]     (default 10000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ITERS=${1:-10000}
OUT=${CARGO_TARGET_DIR:-$PWD/target}/bench
CASES=(direct_c_call TVMFFIFunctionCall-\>ffi_callback TVMFuncCall-\>ffi_callback
  TVMFuncCall-\>classic_callback TVMFFIFunctionCall-\>classic_callback)
# Calls per case: 9 timed runs plus a warm-up of a tenth.
CALLS=$((ITERS * 9 + ITERS / 10))

printf '| %-37s | %9s | %9s |\n' "instructions per call" tvmrt tvm-ffi
printf '|%s|%s|%s|\n' "---------------------------------------" "-----------" "-----------"
for c in "${CASES[@]}"; do
  row=()
  for lib in tvmrt tvm_ffi; do
    bin=$OUT/call_overhead_$lib
    ir=-
    if [ -x "$bin" ]; then
      prof=$(mktemp)
      if valgrind --tool=callgrind --callgrind-out-file="$prof" "$bin" "$ITERS" "$c" 2>/dev/null |
        grep -q RESULT; then
        # Inclusive cost of the benchmark loop function, divided by the number of calls.
        total=$(callgrind_annotate --inclusive=yes "$prof" 2>/dev/null |
          grep -E 'loop_(direct|ffi|classic)' | head -1 | awk '{gsub(",", "", $1); print $1}')
        [ -n "$total" ] && ir=$(awk -v t="$total" -v n="$CALLS" 'BEGIN { printf "%.0f", t / n }')
      fi
      rm -f "$prof"
    fi
    row+=("$ir")
  done
  printf '| %-37s | %9s | %9s |\n' "$c" "${row[0]}" "${row[1]}"
done
