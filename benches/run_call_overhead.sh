#!/usr/bin/env bash
# Call-overhead benchmark: builds benches/call_overhead.c against tvmrt (release) and against
# Apache TVM's libtvm_ffi.so (PyPI apache-tvm-ffi, if importable by python3), runs both and
# prints a side-by-side table of ns per call.
#
#   benches/run_call_overhead.sh [iterations] [rounds]
#
# The two programs run alternately, ROUNDS times each (default 7), pinned to one core when
# taskset exists, so that drift of a shared machine hits both alike. Each run prints, per case,
# the median of 9 timed loops; the table gives the median over the rounds and, in brackets,
# the best round.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ITERS=${1:-2000000}
ROUNDS=${2:-7}
CC=${CC:-cc}
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
OUT=$TARGET_DIR/bench
mkdir -p "$OUT"
CFLAGS=(-std=c11 -O2 -Wall -Wextra)

echo "building tvmrt (cargo build --release -p tvmrt --lib)" >&2
cargo build --release -p tvmrt --lib --quiet
"$CC" "${CFLAGS[@]}" -Iinclude benches/call_overhead.c -o "$OUT/call_overhead_tvmrt" \
  -L"$TARGET_DIR/release" -ltvmrt -Wl,-rpath,"$TARGET_DIR/release"

TVM_FFI_DIR=$(python3 -c 'import os, tvm_ffi; print(os.path.dirname(tvm_ffi.__file__))' \
  2>/dev/null || true)
if [ -n "$TVM_FFI_DIR" ] && [ -f "$TVM_FFI_DIR/lib/libtvm_ffi.so" ]; then
  # tvm-ffi's own headers; it exports no classic TVMFuncCall.
  "$CC" "${CFLAGS[@]}" -DBENCH_NO_CLASSIC -I"$TVM_FFI_DIR/include" benches/call_overhead.c \
    -o "$OUT/call_overhead_tvm_ffi" -L"$TVM_FFI_DIR/lib" -ltvm_ffi \
    -Wl,-rpath,"$TVM_FFI_DIR/lib"
  TVM_FFI_VERSION=$(python3 -c 'import tvm_ffi; print(tvm_ffi.__version__)' 2>/dev/null || echo "?")
else
  echo "apache-tvm-ffi not importable by python3: tvmrt column only" >&2
  TVM_FFI_VERSION="not installed"
fi

PIN=()
if command -v taskset >/dev/null; then PIN=(taskset -c "$(($(nproc) - 1))"); fi
: >"$OUT/tvmrt.txt"
: >"$OUT/tvm_ffi.txt"
for ((r = 0; r < ROUNDS; r++)); do
  "${PIN[@]}" "$OUT/call_overhead_tvmrt" "$ITERS" >>"$OUT/tvmrt.txt"
  if [ -x "$OUT/call_overhead_tvm_ffi" ] && [ "$TVM_FFI_VERSION" != "not installed" ]; then
    "${PIN[@]}" "$OUT/call_overhead_tvm_ffi" "$ITERS" >>"$OUT/tvm_ffi.txt"
  fi
done

echo "ns per call: median over $ROUNDS alternating rounds (best round), each the median of 9"
echo "runs of $ITERS calls; $(nproc) cores; $(uname -m)${PIN[*]:+; pinned: ${PIN[*]}}"
echo "tvm-ffi: apache-tvm-ffi $TVM_FFI_VERSION (libtvm_ffi.so)"
awk '
  function median(list,    a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n + 1) / 2)]
  }
  function best(list,    a, n, i, m) {
    n = split(list, a, " "); m = a[1]
    for (i = 2; i <= n; i++) if (a[i] + 0 < m + 0) m = a[i]
    return m
  }
  FNR == 1 { file++ }
  $1 == "RESULT" {
    if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 }
    runs[file, $2] = runs[file, $2] " " $3
  }
  END {
    printf "| %-37s | %15s | %15s | %7s |\n", "call", "tvmrt", "tvm-ffi", "ratio"
    printf "|%s|%s|%s|%s|\n", "---------------------------------------", "-----------------",
      "-----------------", "---------"
    for (i = 0; i < n; i++) {
      k = order[i]
      a = ((1, k) in runs) ? median(runs[1, k]) : ""
      b = ((2, k) in runs) ? median(runs[2, k]) : ""
      sa = (a == "") ? "-" : sprintf("%.2f (%.2f)", a, best(runs[1, k]))
      sb = (b == "") ? "-" : sprintf("%.2f (%.2f)", b, best(runs[2, k]))
      r = (a != "" && b != "" && b > 0) ? sprintf("%.2fx", a / b) : "-"
      printf "| %-37s | %15s | %15s | %7s |\n", k, sa, sb, r
    }
  }' "$OUT/tvmrt.txt" "$OUT/tvm_ffi.txt"
