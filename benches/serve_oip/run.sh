#!/usr/bin/env bash
# `tvmrt serve --model-repository` against Triton 2.51 with the tvmrt backend, same models and
# clients (benches/serve_oip/run.py; issue 50). Release builds; the venv of benches/triton.
#
#   benches/serve_oip/run.sh [--seconds 4 --json out.json]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cargo build --release --quiet -p tvmrt-triton -p tvmrt-cli
python=$(.ci/venv.sh triton_bench)
exec "$python" benches/serve_oip/run.py \
  --backend target/release/libtriton_tvmrt.so --tool target/release/tvmrt "$@"
