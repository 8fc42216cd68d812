#!/usr/bin/env bash
# Runs the tvmrt backend's KIND_GPU check from a folder benches/triton/gpu_pack.sh wrote
# (python3 with numpy, nothing else): see gpu_run.py.
#
#   benches/triton/gpu_run.sh DIR [--rehearse]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# PYTHON: another interpreter with numpy (here: "$(.ci/venv.sh triton)").
exec "${PYTHON:-python3}" "$here/gpu_run.py" "$@"
