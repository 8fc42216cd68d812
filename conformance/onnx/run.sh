#!/usr/bin/env bash
# The ONNX backend test suites (node, simple, pytorch-converted, pytorch-operator, as the pinned
# onnx package ships them), each case compiled by Apache TVM 0.27 and run on TVM's Relax VM and
# on tvmrt in separate child processes. Prints `onnx: N passed, N failed` with TVM's figure
# beside tvmrt's; exits 1 if a case that passes on TVM fails, crashes or hangs on tvmrt.
#
#   conformance/onnx/run.sh                 every case (about 1750; an hour or more on 2 cores)
#   conformance/onnx/run.sh --subset 160    a deterministic subset (every k-th case), as CI runs
#   conformance/onnx/run.sh --verbose       one line per case
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python=$(.ci/venv.sh onnx)
.ci/build.sh --quiet
export TVMRT_LIBRARY=$PWD/target/debug/libtvmrt.so
exec "$python" conformance/onnx/run.py "$@"
