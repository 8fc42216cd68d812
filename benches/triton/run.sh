#!/usr/bin/env bash
# The Triton benchmark (benches/triton/run.py): release builds of the backend and libtvmrt.so,
# then both servers, one after the other, in the pinned venv with TVM 0.27 and PyTriton.
#
#   benches/triton/run.sh [run.py options, e.g. --seconds 4 --threads 1 --json out.json]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cargo build --release --quiet -p tvmrt --lib
cargo build --release --quiet -p tvmrt-triton
python=$(.ci/venv.sh triton_bench)
exec "$python" benches/triton/run.py \
  --backend target/release/libtriton_tvmrt.so --runtime target/release/libtvmrt.so "$@"
