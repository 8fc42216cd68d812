#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What deploying a model costs, tvmrt against Apache TVM 0.27's runtime in the same run (issue
# 14): builds benches/model_memory/model_memory.c twice (against libtvmrt.so, and against
# libtvm_ffi.so + libtvm_runtime.so of the apache-tvm wheel) and runs both, alternating, each
# sample in a fresh process, on the same libraries and inputs:
#   resnet50  ResNet-50 v1 (ONNX, seeded random weights) compiled by TVM 0.27, ~100 MB of
#             weights; made by gen_resnet50.py into $OUT on first use (about 30 s)
#   mlp, cnn  the small Relax fixtures of tests/fixtures
# and prints, per model, the median of each figure: peak RSS above the ready runtime, load
# time, first `main`, steady `main`; every sample's output hash must agree across runtimes.
# Then the first and steady calls of the small models from Python (python_calls.py).
# For ResNet-50 it also prints the goal of issue 14: peak RSS against weights + planned
# activation storage (both read from `tvmrt inspect`).
#
# Usage: benches/model_memory/run.sh [--no-build] [ROUNDS] [SMALL_ROUNDS]
#   ROUNDS        processes per runtime for ResNet-50 (default 5)
#   SMALL_ROUNDS  processes per runtime for each small model, C and Python (default 30)
# Environment: TVM_NUM_THREADS (default 2, same for both), CC, OUT (default
#              target/model_memory).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD=1
if [[ "${1:-}" == --no-build ]]; then BUILD=0; shift; fi
ROUNDS="${1:-5}"
SMALL_ROUNDS="${2:-30}"
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-2}"
CC="${CC:-cc}"
OUT="${OUT:-$ROOT/target/model_memory}"
FIX="$ROOT/tests/fixtures"
SRC="$ROOT/benches/model_memory/model_memory.c"
PYTHON="$("$ROOT/.ci/venv.sh" onnx)"
mkdir -p "$OUT"

if [[ ! -f "$OUT/resnet50.so" ]]; then
  "$PYTHON" "$ROOT/benches/model_memory/gen_resnet50.py" "$OUT"
fi
if [[ $BUILD == 1 ]]; then
  (cd "$ROOT" && cargo build --release -p tvmrt --lib -p tvmrt-cli --bin tvmrt)
  # shellcheck source=benches/ab_rounds.sh
  source "$ROOT/benches/ab_rounds.sh"
  ab_build "$SRC" MM_RUNTIME "$OUT/mm_tvmrt" "$OUT/mm_tvm" "$ROOT/target/release" "$PYTHON"
fi

echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# TVM_NUM_THREADS=$TVM_NUM_THREADS ROUNDS=$ROUNDS SMALL_ROUNDS=$SMALL_ROUNDS, tvmrt $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo ' + uncommitted changes'), apache-tvm $("$PYTHON" -c 'import tvm; print(tvm.__version__)')"

RES="$OUT/results.txt"
: >"$RES"
# model library input steady_calls rounds
MODELS=(
  "resnet50 $OUT/resnet50.so $OUT/input.npy 3 $ROUNDS"
  "mlp $FIX/mlp.so $FIX/data/mlp.main.in0.npy 200 $SMALL_ROUNDS"
  "cnn $FIX/cnn.so $FIX/data/cnn.main.in0.npy 200 $SMALL_ROUNDS"
)
for spec in "${MODELS[@]}"; do
  read -r name lib input calls rounds <<<"$spec"
  for round in $(seq 1 "$rounds"); do
    # Alternate which runtime goes first, so drifts in machine load hit both alike.
    if ((round % 2)); then order="tvm tvmrt"; else order="tvmrt tvm"; fi
    for rt in $order; do
      "$OUT/mm_$rt" "$lib" "$input" "$calls" | sed "s|^|$name $rt |" >>"$RES"
    done
  done
done

INSPECT="$("$ROOT/target/release/tvmrt" inspect "$OUT/resnet50.so")"
"$PYTHON" - "$RES" "$INSPECT" <<'PY'
import re, statistics, sys
from collections import defaultdict

rows = defaultdict(list)
hashes = defaultdict(set)
for line in open(sys.argv[1]):
    model, rt, key, *rest = line.split()
    if key == "OUTPUT_HASH":
        hashes[model].add(rest[0])
    else:
        rows[(model, rt, key)].append(float(rest[0]))
for model, hs in hashes.items():
    if len(hs) != 1:
        sys.exit(f"{model}: the runtimes' outputs differ: {sorted(hs)}")

def med(model, rt, key):
    return statistics.median(rows[(model, rt, key)])

def above_start(model, rt):
    return statistics.median(
        p - s for p, s in zip(rows[(model, rt, "PEAK_KB")], rows[(model, rt, "RSS_START_KB")]))

print("| model | measurement | TVM 0.27 | tvmrt | tvmrt/TVM |")
print("|---|---|---:|---:|---:|")
for model in dict.fromkeys(m for m, _, _ in rows):
    figures = [
        ("runtime ready, RSS (KB)", lambda rt: med(model, rt, "RSS_START_KB")),
        ("peak RSS above ready (KB)", lambda rt: above_start(model, rt)),
        ("load (us)", lambda rt: med(model, rt, "LOAD_US")),
        ("first main (us)", lambda rt: med(model, rt, "FIRST_US")),
        ("steady main (us)", lambda rt: med(model, rt, "STEADY_US")),
    ]
    for label, f in figures:
        t, r = f("tvm"), f("tvmrt")
        print(f"| {model} | {label} | {t:,.1f} | {r:,.1f} | {r / t:.2f} |")
    print(f"| {model} | output (FNV-1a, both) | {next(iter(hashes[model]))} | same | |")

text = sys.argv[2]
weights = int(re.search(r"constants: \d+ tensors, (\d+) bytes", text).group(1))
planned = sum(int(b) for b in re.findall(r"allocates storage: (\d+) bytes planned", text))
budget_kb = (weights + planned) / 1024
for rt in ("tvm", "tvmrt"):
    used = above_start("resnet50", rt)
    print(f"resnet50 {rt}: peak RSS above ready {used:,.0f} KB = {used / budget_kb:.2f}x of "
          f"weights ({weights:,} B) + planned activations ({planned:,} B)")
PY

# The same small models called from Python (tvm.relax.VirtualMachine vs tvmrt.VirtualMachine).
TVMRT_LIBRARY="$ROOT/target/release/libtvmrt.so" "$PYTHON" \
  "$ROOT/benches/model_memory/python_calls.py" "$SMALL_ROUNDS" \
  "$FIX/mlp.so" "$FIX/data/mlp.main.in0.npy" "$FIX/cnn.so" "$FIX/data/cnn.main.in0.npy"
