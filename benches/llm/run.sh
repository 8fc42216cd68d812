#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Serving a language model with a paged KV cache, tvmrt against Apache TVM 0.27's runtime in
# the same run (issue 24): builds benches/llm/llm_bench.c twice (against libtvmrt.so, and
# against libtvm_ffi.so + libtvm_runtime.so of the apache-tvm wheel) and runs both,
# alternating, on the same model libraries and weights:
#   tiny    the test fixture (tests/fixtures/llm: 2 layers, hidden 64), where the runtime's
#           own work (VM, KV-cache bookkeeping, auxiliary arrays) is most of a step
#   medium  the same model code with hidden 256, 4 layers, head dim 64, vocabulary 4096
#           (~20 MB of weights), made by gen_model.py into $OUT on first use
# Per model: one decode step at a fixed context (prompt, then decode + popn repeated), one
# prefill of a new sequence, and the memory the cache takes when created (resident and
# virtual). The greedy tokens of both runtimes must agree (CHECK lines).
#
# Usage: benches/llm/run.sh [--no-build] [ROUNDS]
#   ROUNDS  alternating runs per runtime and model (default 3)
# Environment: TVM_NUM_THREADS (default 1, same for both), CC, OUT (default target/llm_bench).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD=1
if [[ "${1:-}" == --no-build ]]; then BUILD=0; shift; fi
ROUNDS="${1:-3}"
LOAD_SAMPLES=0
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-1}"
CC="${CC:-cc}"
OUT="${OUT:-$ROOT/target/llm_bench}"
PYTHON="$("$ROOT/.ci/venv.sh" onnx)"
mkdir -p "$OUT"

if [[ ! -f "$OUT/medium/model.so" ]]; then
  "$PYTHON" "$ROOT/benches/llm/gen_model.py" "$OUT/medium" >/dev/null
fi
# shellcheck source=benches/ab_rounds.sh
source "$ROOT/benches/ab_rounds.sh"
if [[ $BUILD == 1 ]]; then
  (cd "$ROOT" && cargo build --release -p tvmrt --lib)
  ab_build "$ROOT/benches/llm/llm_bench.c" LB_RUNTIME "$OUT/llm_tvmrt" "$OUT/llm_tvm" \
    "$ROOT/target/release" "$PYTHON"
fi

ab_header "$ROOT" "$PYTHON"
RES="$OUT/results.txt"
: >"$RES"
# name library weights context prefill samples
MODELS=(
  "tiny $ROOT/tests/fixtures/llm/model.so $ROOT/tests/fixtures/llm/weights 256 128 400"
  "medium $OUT/medium/model.so $OUT/medium/weights 256 64 40"
)
for spec in "${MODELS[@]}"; do
  read -r name lib weights ctx pre samples <<<"$spec"
  checks=()
  for _ in $(seq 1 "$ROUNDS"); do
    for rt in tvm tvmrt; do
      out="$("$OUT/llm_$rt" "$lib" "$weights" "$ctx" "$pre" "$samples")"
      sed -n "s/^RESULT \([a-z_]*\)/$rt ${name}_\1/p" <<<"$out" >>"$RES"
      checks+=("$(grep '^CHECK' <<<"$out")")
    done
  done
  if [[ "$(printf '%s\n' "${checks[@]}" | sort -u | wc -l)" != 1 ]]; then
    echo "the runtimes disagree on the greedy tokens of $name:" >&2
    printf '%s\n' "${checks[@]}" >&2
    exit 1
  fi
  echo "# $name: both runtimes generate ${checks[0]#CHECK }"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
ab_table "$RES"
