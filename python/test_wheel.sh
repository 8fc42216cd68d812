#!/usr/bin/env bash
# Builds the wheel (dev profile unless --profile is given), installs it into a fresh venv with
# the pinned test requirements, and runs the Python tests against the installed package from
# outside the checkout (cwd a temporary directory, no PYTHONPATH, no TVMRT_LIBRARY), skips
# failing: run_tests.py --installed fails unless the package is the venv's and the library the
# bundled one; the tests run the console script and the bundled tool too. About 25 s on 2
# cores when the crate is already built (most of it the venv and its numpy).
#
#   python/test_wheel.sh [--profile release|dev]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
profile=dev
if [ "${1:-}" = "--profile" ]; then profile=$2; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wheel=$(python/build_wheel.sh --profile "$profile" --out "$tmp/dist" | tail -1)
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r .ci/requirements/python.txt "$wheel"
cd "$tmp"
env -u PYTHONPATH -u TVMRT_LIBRARY "$tmp/venv/bin/python" "$repo/python/run_tests.py" \
  --installed --no-skips
# And the same installed package without its extension (the ctypes path).
env -u PYTHONPATH -u TVMRT_LIBRARY TVMRT_PYTHON_EXTENSION=0 "$tmp/venv/bin/python" \
  "$repo/python/run_tests.py" --installed --no-skips
# The bundled libtvm_ffi.so alias resolves tvm-ffi's symbols to the bundled libtvmrt.so itself.
"$tmp/venv/bin/python" - <<'PY'
import ctypes, os, tvmrt
runtime = ctypes.CDLL(tvmrt.library_path())
alias = ctypes.CDLL(os.path.join(os.path.dirname(tvmrt.library_path()), "libtvm_ffi.so"))
address = lambda lib: ctypes.cast(lib.TVMFFIGetVersion, ctypes.c_void_p).value
assert address(alias) == address(runtime), "the alias resolves to another library"
print("wheel: libtvm_ffi.so binds to the bundled libtvmrt.so")
PY
info=$("$tmp/venv/bin/tvmrt" inspect "$repo/tests/fixtures/graph/mlp.so")
grep -q "graph: 7 nodes" <<<"$info" || { echo "the bundled tvmrt tool failed: $info"; exit 1; }
echo "wheel: $(basename "$wheel") installed and tested ($(du -h "$wheel" | cut -f1))"
