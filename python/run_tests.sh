#!/bin/sh
# Runs the tests of the tvmrt Python package against libtvmrt.so: $TVMRT_LIBRARY if set, else
# the newest target/{release,debug}/libtvmrt.so of this repository (build it first with
# `cargo build --release`), with the python of the pinned venv .venv/python (numpy; made by
# .ci/venv.sh on first use). The package's C extension is built first (python/build_ext.sh)
# and the suite runs twice: through the extension, then through ctypes alone
# (TVMRT_PYTHON_EXTENSION=0). Exits non-zero when a test fails or when no test ran; with
# `--no-skips` (as CI runs it) also when a test was skipped.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python=$("$here/../.ci/venv.sh" python)
"$here/build_ext.sh" --python "$python" >/dev/null
echo "python: with the C extension"
"$python" "$here/run_tests.py" "$@"
echo "python: through ctypes only"
TVMRT_PYTHON_EXTENSION=0 exec "$python" "$here/run_tests.py" "$@"
