#!/bin/sh
# Runs the tests of the tvmrt Python package against libtvmrt.so: $TVMRT_LIBRARY if set, else
# the newest target/{release,debug}/libtvmrt.so of this repository (build it first with
# `cargo build --release`), with the python of the pinned venv .venv/python (numpy; made by
# .ci/venv.sh on first use). Exits non-zero when a test fails or when no test ran; with
# `--no-skips` (as CI runs it) also when a test was skipped.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python=$("$here/../.ci/venv.sh" python)
exec "$python" "$here/run_tests.py" "$@"
