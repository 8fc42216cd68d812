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
: > "$RES"

echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# TVM_NUM_THREADS=$TVM_NUM_THREADS ROUNDS=$ROUNDS LOAD_SAMPLES=$LOAD_SAMPLES"
echo "# apache-tvm $("$PYTHON" -c 'import tvm; print(tvm.__version__)'), tvm-ffi $("$PYTHON" -c 'import tvm_ffi; print(tvm_ffi.__version__)')"

for _ in $(seq 1 "$ROUNDS"); do
  "$TVM_BIN" --bench "$FIX" | sed -n 's/^RESULT /tvm /p' >> "$RES"
  "$RT_BIN" --bench "$FIX" | sed -n 's/^RESULT /tvmrt /p' >> "$RES"
done
for m in mlp cnn; do
  "$TVM_BIN" --spawn "$LOAD_SAMPLES" "$m" "$FIX" "$TVM_BIN" "$RT_BIN" \
    | sed -n 's/^RESULT //p' \
    | sed -e "s|^$TVM_BIN:|tvm |" -e "s|^$RT_BIN:|tvmrt |" >> "$RES"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# results.txt lines: <runtime> <metric> <median> <min> <unit>
awk '
  { key = $2; unit[key] = $5; if (!(key in seen)) { order[n++] = key; seen[key] = 1 }
    m = $1 SUBSEP key; cnt[m]++; med[m, cnt[m]] = $3
    if (!((m) in mn) || $4 < mn[m]) mn[m] = $4 }
  function median(m,    i, j, t, k, a) {
    k = cnt[m]; for (i = 1; i <= k; i++) a[i] = med[m, i]
    for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
  END {
    printf "| measurement | unit | TVM median | TVM min | tvmrt median | tvmrt min | tvmrt/TVM (median) |\n"
    printf "|---|---|---:|---:|---:|---:|---:|\n"
    for (i = 0; i < n; i++) {
      k = order[i]; t = "tvm" SUBSEP k; r = "tvmrt" SUBSEP k
      if (!(t in cnt) || !(r in cnt)) continue
      tm = median(t); rm = median(r)
      printf "| %s | %s | %.4g | %.4g | %.4g | %.4g | %.2f |\n", k, unit[k], tm, mn[t], rm, mn[r], rm / tm
    }
  }' "$RES"
