#!/bin/sh
# Runs the tests of the tvmrt Python package against libtvmrt.so: $TVMRT_LIBRARY if set, else
# the newest target/{release,debug}/libtvmrt.so of this repository (build it first with
# `cargo build --release`). Exits non-zero when a test fails or when no test ran.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/run_tests.py" "$@"
