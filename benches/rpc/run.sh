#!/usr/bin/env bash
# tvmrt rpc-server against TVM's own Python RPC server (benches/rpc/bench.py): builds the
# release tool, makes the pinned venv (.ci/requirements/rpc.txt), prints a Markdown table.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cargo build --release -p tvmrt-cli --quiet
# The no-work floor server for the tiny calls (floor.c).
cc -O2 -o target/rpc_floor benches/rpc/floor.c
python=$(.ci/venv.sh rpc)
exec "$python" benches/rpc/bench.py "$@"
