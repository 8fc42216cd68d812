#!/usr/bin/env bash
# gotvm, TVM v0.20.0's Go binding (golang/, kept unchanged here: SOURCE), runs its own test
# suite on tvmrt, compared test by test with what the same suite gave on TVM v0.20.0's runtime
# (expected_v0.20.txt) (issue 33).
#
#   conformance/gotvm/run.sh                       the suite on tvmrt, checked
#   conformance/gotvm/run.sh --record TVM_SOURCE   the suite on TVM's runtime, from a TVM
#                                                  v0.20.0 source tree with its dmlc-core and
#                                                  dlpack submodules: rewrites the expectations
#
# gotvm's package compiles TVM's C++ runtime into itself through tvm_runtime_pack.cc; on tvmrt
# the package is built without that one file and linked with -ltvmrt instead (cgo, GOPATH mode,
# as golang/Makefile builds it). Its tests load `deploy.so`, TVM's `myadd`: made here from
# conformance/common/myadd.c with the C compiler. Go comes from Debian (golang-go, Go 1.19),
# installed when missing.
#
# libtvmrt.so is $TVMRT_LIBRARY if set, else target/debug/libtvmrt.so (built here with
# .ci/build.sh). Fails if a test that passed on TVM's runtime does not pass on tvmrt;
# prints one closing line.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/conformance/gotvm"
expected="$here/expected_v0.20.txt"
cd "$root"
# shellcheck source=../../.ci/lib.sh
. .ci/lib.sh

record=""
if [ "${1:-}" = "--record" ]; then
  record=$(cd "$2" && pwd)
fi

if ! command -v go >/dev/null; then
  apt_install golang-go
fi

work="$root/target/gotvm"
pkg="$work/gopath/src/gotvm"
rm -rf "$work/gopath"
mkdir -p "$pkg"
cp "$here"/golang/src/*.go "$here/golang/src/gotvm.cc" "$here/golang/src/gotvm.h" "$pkg/"
cc -shared -fPIC -O2 -o "$pkg/deploy.so" "$root/conformance/common/myadd.c"

export GO111MODULE=off GOPATH="$work/gopath" GOCACHE="$work/gocache" GOFLAGS=
if [ -n "$record" ]; then
  # As golang/Makefile builds it: TVM's runtime compiled into the package.
  cp "$here/golang/src/tvm_runtime_pack.cc" "$pkg/"
  export CGO_CPPFLAGS="-I. -I$record -I$record/3rdparty/dmlc-core/include -I$record/include -I$record/3rdparty/dlpack/include"
  export CGO_CXXFLAGS="-std=c++17 -DDMLC_USE_LOGGING_LIBRARY=<tvm/runtime/logging.h> -DTVM_USE_LIBBACKTRACE=0"
  export CGO_CFLAGS="-I$record"
  export CGO_LDFLAGS="-ldl -lm"
  label="TVM v0.20.0's runtime"
else
  lib=${TVMRT_LIBRARY:-}
  if [ -z "$lib" ]; then
    "$root/.ci/build.sh" --quiet
    lib="$root/target/debug/libtvmrt.so"
  fi
  libdir=$(dirname "$(realpath "$lib")")
  # tvmrt's drop-in TVM headers (tvm/runtime/c_runtime_api.h, dlpack/dlpack.h).
  export CGO_CPPFLAGS="-I$root/include"
  export CGO_CXXFLAGS="-std=c++17"
  export CGO_CFLAGS=""
  export CGO_LDFLAGS="-L$libdir -ltvmrt -Wl,-rpath,$libdir -ldl -lm"
  label="tvmrt"
fi

log="$work/go_test.log"
# Bounded: a hang fails the step instead of stalling CI.
(cd "$pkg" && timeout 600 go test -v -count=1 . 2>&1) >"$log" || true
results="$work/results.txt"
sed -n 's/^ *--- \(PASS\|FAIL\|SKIP\): \([^ ]*\).*/\2 \1/p' "$log" | sort >"$results"
if ! [ -s "$results" ]; then
  tail -40 "$log" >&2
  echo "gotvm (TVM v0.20.0): the suite did not run on $label (log: $log)"
  exit 1
fi
total=$(wc -l <"$results")
passes=$(grep -c ' PASS$' "$results" || true)

if [ -n "$record" ]; then
  {
    echo "# gotvm's tests (TVM v0.20.0 golang/) on TVM v0.20.0's own runtime (tvm_runtime_pack.cc,"
    echo "# built from source), recorded by: conformance/gotvm/run.sh --record TVM_SOURCE"
    cat "$results"
  } >"$expected"
  echo "gotvm (TVM v0.20.0): $passes/$total tests pass on $label; recorded in $expected"
  exit 0
fi

want_pass=$(sed -n '/^#/d; s/ PASS$//p' "$expected" | sort)
regressions=$(comm -23 <(echo "$want_pass") <(sed -n 's/ PASS$//p' "$results"))
ref_passes=$(echo "$want_pass" | grep -c . || true)
ref_total=$(sed '/^#/d' "$expected" | wc -l)
if [ -n "$regressions" ]; then
  echo "passing on TVM v0.20.0's runtime, not on tvmrt:"
  echo "$regressions" | sed 's/^/  /'
  grep -B2 -A8 -- '--- FAIL' "$log" | head -60 || true
  echo "gotvm (TVM v0.20.0): $passes/$total tests pass on tvmrt, $ref_passes/$ref_total on TVM v0.20.0's runtime: $(echo "$regressions" | wc -l) regression(s)"
  exit 1
fi
echo "gotvm (TVM v0.20.0): $passes/$total tests pass on tvmrt, $ref_passes/$ref_total on TVM v0.20.0's runtime; every test passing there passes on tvmrt"
