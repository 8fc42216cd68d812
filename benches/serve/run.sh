#!/usr/bin/env bash
# tvmrt serve's benchmark (results in BENCHMARKS.md): output tokens/s at concurrency 1, 4, 16,
# time to first token and per output token (p50/p99) over HTTP streaming, the bare decode step,
# and TVM's runtime driving the same MLC-LLM library one request after another.
#
#   benches/serve/run.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
model="$root/tests/fixtures/mlc/model"   # absolute: cargo bench runs in the crate's folder
prompts=$(mktemp)
trap 'rm -f "$prompts"' EXIT
cargo bench -p tvmrt-serve --bench serve -- "$model" "$model/lib.so" "$prompts"
python=$(.ci/venv.sh onnx)   # apache-tvm 0.27.0.post1
# One thread, as benches/llm does: on the shared 2-core VM TVM's spinning pool only loses.
TVM_NUM_THREADS=1 "$python" benches/serve/tvm_reference.py "$model" "$model/lib.so" "$prompts"
