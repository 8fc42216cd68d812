#!/usr/bin/env bash
# KServe against `tvmrt serve` (a step of .ci/test.sh; issue 50): KServe's own v2 REST and
# gRPC clients (tests/kserve/test_kserve_client.py) and the check of the KServe runtime
# manifest against KServe's CRD schema (tests/kserve/check_manifest.py), in the pinned venv
# .ci/requirements/kserve.txt (about 50 s to build the first time, 450 MB).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
.ci/build.sh --quiet
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
python=$(.ci/venv.sh kserve)
"$python" tests/kserve/check_manifest.py "$target_dir/debug/tvmrt"
timeout 300 "$python" tests/kserve/test_kserve_client.py "$target_dir/debug/tvmrt"
