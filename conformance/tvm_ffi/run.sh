#!/usr/bin/env bash
# tvm-ffi's own Python test suite on tvm-ffi's library and on tvmrt (issue 12).
#
#   conformance/tvm_ffi/run.sh          both libraries: .venv/tvm_ffi has apache-tvm-ffi as
#                                       released, .venv/tvm_ffi_tvmrt the same packages with
#                                       tvm_ffi/lib/libtvm_ffi.so a symlink to libtvmrt.so
#   conformance/tvm_ffi/run.sh --ci     tvmrt only; fails when fewer tests pass than the figure
#                                       recorded in conformance/tvm_ffi/expected_passes
#
# Both modes then run relax_vm.py with tvmrt: the TVM-compiled Relax models of tests/fixtures
# through tvm_ffi.load_module and the VM on numpy arrays (DLPack), checked against TVM's outputs.
#
# libtvmrt.so is $TVMRT_LIBRARY if set, else target/debug/libtvmrt.so (built here with
# .ci/build.sh). The suite is tests/python of the release's sdist, downloaded once into
# .venv/tvm_ffi_suite (sdist.sh). Each test file runs in its own process; a file whose process
# dies is re-run one test per process (run.py). Extra arguments go to run.py (e.g. -v).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/conformance/tvm_ffi"
cd "$root"
# shellcheck source=../../.ci/venv.sh
source .ci/venv.sh
# shellcheck source=sdist.sh
source "$here/sdist.sh"

ci=0
if [ "${1:-}" = "--ci" ]; then
  ci=1
  shift
fi

if ! diff <(grep -v '^#' .ci/requirements/tvm_ffi.txt) \
  <(grep -v '^#' .ci/requirements/tvm_ffi_tvmrt.txt) >/dev/null; then
  echo "run.sh: .ci/requirements/tvm_ffi.txt and tvm_ffi_tvmrt.txt must list the same packages" >&2
  exit 1
fi

# The suite: tests/python of the sdist (the wheel has no tests).
suite=$(tvm_ffi_sdist)

# run_suite NAME LABEL [run.py args...]: runs the suite with .venv/NAME's python; the passing
# count lands in $passes.
run_suite() {
  local name=$1 label=$2
  shift 2
  local py
  py=$(venv_python "$name")
  local log
  log=$(mktemp)
  # The venv's bin first on PATH: the JIT tests look for ninja there.
  PATH="$(dirname "$py"):$PATH" "$py" "$here/run.py" --python "$py" --tests "$suite/tests/python" \
    --label "$label" "$@" 2>"$log" || {
    cat "$log" >&2
    rm -f "$log"
    return 1
  }
  grep -v '^PASSED=' "$log" >&2 || true
  passes=$(sed -n 's/^PASSED=//p' "$log")
  rm -f "$log"
}

# swap_in_tvmrt: the tvmrt venv's libtvm_ffi.so replaced by a link to libtvmrt.so, as
# README says (no copy, no patchelf), with tvmrt's libtvm_ffi.so alias built beside
# libtvmrt.so for the libraries built against tvm-ffi that the suite loads.
swap_in_tvmrt() {
  local lib=${TVMRT_LIBRARY:-}
  if [ -z "$lib" ]; then
    "$root/.ci/build.sh" --quiet
    lib="$root/target/debug/libtvmrt.so"
  fi
  lib=$(realpath "$lib")
  "$root/cmake/tvm_ffi_alias.sh" "$(dirname "$lib")"
  local py
  py=$(venv_python tvm_ffi_tvmrt)
  local pkg
  pkg=$("$py" -c 'import importlib.util as u; print(u.find_spec("tvm_ffi").submodule_search_locations[0])')
  # A hard link where it can (same file system), else a symlink: tvm_ffi.libinfo resolves
  # links to find its library directory, and the Rust static-init test links tvm-ffi's own
  # libtvm_ffi_testing.so from there, which only the package's directory has.
  ln -f "$lib" "$pkg/lib/libtvm_ffi.so" 2>/dev/null || ln -sf "$lib" "$pkg/lib/libtvm_ffi.so"
}

expected=$(grep -v '^#' "$here/expected_passes" | tr -d '[:space:]')
swap_in_tvmrt
if [ "$ci" = 0 ]; then
  run_suite tvm_ffi "libtvm_ffi.so" "$@"
  orig=$passes
fi
# CI bounds the per-test re-runs of files that crash (each is a fresh interpreter).
budget=0
if [ "$ci" = 1 ]; then budget=${TVM_FFI_RERUN_BUDGET:-120}; fi
run_suite tvm_ffi_tvmrt "tvmrt" --rerun-budget "$budget" --test-timeout 30 "$@"
tvmrt=$passes

vm_ok=1
"$(venv_python tvm_ffi_tvmrt)" "$here/relax_vm.py" || vm_ok=0

if [ "$ci" = 0 ]; then
  echo "passes: libtvm_ffi.so $orig, tvmrt $tvmrt (recorded for tvmrt: $expected)"
fi
if [ "$tvmrt" -lt "$expected" ]; then
  echo "tvm-ffi suite on tvmrt: $tvmrt passed, below the $expected recorded in conformance/tvm_ffi/expected_passes" >&2
  exit 1
fi
if [ "$vm_ok" = 0 ]; then
  echo "Relax models through tvm_ffi on tvmrt: a model failed (relax_vm.py above)" >&2
  exit 1
fi
if [ "$tvmrt" -gt "$expected" ]; then
  echo "tvm-ffi suite on tvmrt: $tvmrt passed, above the recorded $expected: raise conformance/tvm_ffi/expected_passes"
fi
