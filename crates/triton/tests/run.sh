#!/usr/bin/env bash
# The Triton backend's tests: builds the backend (and libtvmrt.so, for the direct calls the
# outputs are compared with), then runs test_triton.py against the real Triton server of the
# pinned nvidia-pytriton wheel (.ci/requirements/triton.txt), on 127.0.0.1.
#
#   crates/triton/tests/run.sh [--profile dev|release] [test_triton.py options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."

profile=dev
if [ "${1:-}" = --profile ]; then
  profile=$2
  shift 2
fi
dir=debug
[ "$profile" = release ] && dir=release
.ci/build.sh --profile "$profile" --quiet -p tvmrt-triton
python=$(.ci/venv.sh triton)
exec "$python" crates/triton/tests/test_triton.py \
  --backend "target/$dir/libtriton_tvmrt.so" --runtime "target/$dir/libtvmrt.so" "$@"
