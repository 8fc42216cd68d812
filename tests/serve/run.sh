#!/usr/bin/env bash
# tvmrt serve's end-to-end tests (a step of .ci/test.sh; the engine's Rust tests run with
# `cargo test`): `tvmrt serve` on the MLC-LLM fixture driven by OpenAI's Python client and plain HTTP (test_serve.py, in the
# pinned venv .ci/requirements/serve.txt; structured output in test_structured.py), and by lm-evaluation-harness (test_lm_eval.py, in
# .ci/requirements/lm_eval.txt). The server listens on 127.0.0.1 on a free port and
# is stopped by its process id.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
.ci/build.sh
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
python=$(.ci/venv.sh serve)
timeout 600 "$python" tests/serve/test_serve.py "$target_dir/debug/tvmrt"
# Tool calling (tools, tool_choice) with the same client and jsonschema (test_tools.py).
timeout 300 "$python" tests/serve/test_tools.py "$target_dir/debug/tvmrt"
# Structured output (response_format, vLLM's guided fields) on the same fixture and venv.
timeout 300 "$python" tests/serve/test_structured.py "$target_dir/debug/tvmrt"
# lm-evaluation-harness, unchanged, on tasks of local documents (.ci/requirements/lm_eval.txt).
python=$(.ci/venv.sh lm_eval)
timeout 600 "$python" tests/serve/test_lm_eval.py "$target_dir/debug/tvmrt"
