#!/usr/bin/env bash
# `tvmrt serve --model-repository` (crates/oip) under the Triton backend's client tests and its
# own (test_oip.py): builds the tool and libtvmrt.so (for the direct calls the outputs are
# compared with) and runs them with tritonclient in the Triton tests' pinned venv, the server
# on 127.0.0.1 on free ports.
#
#   crates/oip/tests/run.sh [test_oip.py options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
.ci/build.sh --quiet
target_dir=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
python=$(.ci/venv.sh triton)
exec timeout 600 "$python" crates/oip/tests/test_oip.py \
  --tool "$target_dir/debug/tvmrt" --runtime "$target_dir/debug/libtvmrt.so" "$@"
