#!/usr/bin/env bash
# Call-overhead benchmark: builds benches/call_overhead.c against tvmrt (release) and against
# Apache TVM's libtvm_ffi.so (PyPI apache-tvm-ffi, if importable by python3), runs both and
# prints a side-by-side table of ns per call. Usage: benches/run_call_overhead.sh [iterations]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ITERS=${1:-2000000}
CC=${CC:-cc}
TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
OUT=$TARGET_DIR/bench
mkdir -p "$OUT"
CFLAGS=(-std=c11 -O2 -Wall -Wextra)

echo "building tvmrt (cargo build --release --lib)" >&2
cargo build --release --lib --quiet
"$CC" "${CFLAGS[@]}" -Iinclude benches/call_overhead.c -o "$OUT/call_overhead_tvmrt" \
  -L"$TARGET_DIR/release" -ltvmrt -Wl,-rpath,"$TARGET_DIR/release"
"$OUT/call_overhead_tvmrt" "$ITERS" >"$OUT/tvmrt.txt"

TVM_FFI_DIR=$(python3 -c 'import os, tvm_ffi; print(os.path.dirname(tvm_ffi.__file__))' \
  2>/dev/null || true)
if [ -n "$TVM_FFI_DIR" ] && [ -f "$TVM_FFI_DIR/lib/libtvm_ffi.so" ]; then
  # tvm-ffi's own headers; it exports no classic TVMFuncCall.
  "$CC" "${CFLAGS[@]}" -DBENCH_NO_CLASSIC -I"$TVM_FFI_DIR/include" benches/call_overhead.c \
    -o "$OUT/call_overhead_tvm_ffi" -L"$TVM_FFI_DIR/lib" -ltvm_ffi \
    -Wl,-rpath,"$TVM_FFI_DIR/lib"
  "$OUT/call_overhead_tvm_ffi" "$ITERS" >"$OUT/tvm_ffi.txt"
  TVM_FFI_VERSION=$(python3 -c 'import tvm_ffi; print(tvm_ffi.__version__)' 2>/dev/null || echo "?")
else
  echo "apache-tvm-ffi not importable by python3: tvmrt column only" >&2
  : >"$OUT/tvm_ffi.txt"
  TVM_FFI_VERSION="not installed"
fi

echo "ns per call, median of 9 runs of $ITERS calls; $(nproc) cores; $(uname -m)"
echo "tvm-ffi: apache-tvm-ffi $TVM_FFI_VERSION (libtvm_ffi.so)"
awk '
  FNR == 1 { file++ }
  $1 == "RESULT" { if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } ns[file, $2] = $3 }
  END {
    printf "| %-37s | %9s | %9s | %7s |\n", "call", "tvmrt", "tvm-ffi", "ratio"
    printf "|%s|%s|%s|%s|\n", "---------------------------------------", "-----------",
      "-----------", "---------"
    for (i = 0; i < n; i++) {
      k = order[i]; a = ns[1, k]; b = ns[2, k]
      r = (a != "" && b != "" && b > 0) ? sprintf("%.2fx", a / b) : "-"
      printf "| %-37s | %9s | %9s | %7s |\n", k, (a == "" ? "-" : a), (b == "" ? "-" : b), r
    }
  }' "$OUT/tvmrt.txt" "$OUT/tvm_ffi.txt"
