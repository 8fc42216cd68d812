#!/usr/bin/env bash
# tvmrt rpc-server's end-to-end tests: apache-tvm 0.27's unchanged RPC client, tracker and
# compiler (the pinned venv .ci/requirements/rpc.txt) against target/debug/tvmrt rpc-server
# (tests/rpc/test_rpc.py, run by pytest). Servers listen on 127.0.0.1 on free ports and are
# stopped by their process ids. Remote CUDA (tests/rpc/test_cuda_double.py) runs on the CUDA
# driver's test double (tests/cuda_double/fake_cuda.c, built with cc), as does a rehearsal of
# the GPU machine's rpc_cuda part (benches/gpu/rpc_cuda.py). RPC_TEST_SERVER=tvm runs the
# same tests against TVM's own python -m tvm.exec.rpc_server, to check the tests themselves.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
# Up to date with the sources (a no-op after `cargo test`, which builds it).
.ci/build.sh --quiet
python=$(.ci/venv.sh rpc)
status=0
timeout 900 "$python" -m pytest -q -p no:cacheprovider -p no:logging tests/rpc "$@" || status=$?
exit "$status"
