#!/usr/bin/env bash
# Builds tvmrt's C extension, python/tvmrt/_core.c, for CPython's stable ABI (one binary for
# CPython 3.10 and later): tvmrt/_core.abi3.so next to its source, or in --out DIR. The package
# works without it (through ctypes, several times slower per call); build_wheel.sh ships it and
# run_tests.sh tests both.
#
#   python/build_ext.sh [--python PYTHON] [--out DIR]   (default: the pinned venv's python)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=""
out=python/tvmrt
while [ $# -gt 0 ]; do
  case $1 in
    --python) python=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--python PYTHON] [--out DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$python" ] || python=$(.ci/venv.sh python)
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$include/Python.h" ] || { echo "build_ext: no Python.h in $include" >&2; exit 1; }
mkdir -p "$out"
"${CC:-cc}" -O2 -g0 -shared -fPIC -fvisibility=hidden -std=c11 -Wall -Wextra -Werror \
  -I"$include" -Iinclude python/tvmrt/_core.c -o "$out/_core.abi3.so.tmp"
mv "$out/_core.abi3.so.tmp" "$out/_core.abi3.so"
echo "$out/_core.abi3.so"
