#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Instructions per decode step of the tiny Llama (tests/fixtures/llm), counted by valgrind's
# callgrind for both runtimes: a deterministic companion to run.sh (wall-clock figures on a
# shared 2-core machine are noisy). Runs `llm_bench --steps N` for N = 10 and 110 and divides
# the difference by 100, so loading and the prompt cancel out; splits the count into the
# model's kernels (model.so and the libm calls they make) and everything else (the runtime:
# VM, KV cache, allocation). Run run.sh first; it builds the two binaries.
#
#   benches/llm/callgrind.sh [CONTEXT]      (prompt length, default 64)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/target/llm_bench}"
CTX="${1:-64}"
FIX="$ROOT/tests/fixtures/llm"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

for rt in tvm tvmrt; do
  for n in 10 110; do
    valgrind --tool=callgrind --callgrind-out-file="$TMP/$rt.$n" \
      "$OUT/llm_$rt" --steps "$n" "$FIX/model.so" "$FIX/weights" "$CTX" >/dev/null 2>&1
  done
done
python3 - "$TMP" <<'PY'
import re, subprocess, sys
tmp = sys.argv[1]

def split(path):
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    total = kernels = 0
    started = False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
        if not started or not m:
            if started and line.startswith("--") and total:
                break
            continue
        n = int(m.group(1).replace(",", ""))
        total += n
        name = m.group(2)
        fn = re.sub(r"\s*\[.*\]$", "", name.split(":", 1)[-1])
        if (fn.endswith("_compute_") or fn.startswith("__tvm_ffi_")
                or "libm.so" in name or "/math/" in name or fn.endswith("_fma")):
            kernels += n
    return total, kernels

print("| instructions per decode step | TVM 0.27 | tvmrt | tvmrt/TVM |")
print("|---|---:|---:|---:|")
rows = {}
for rt in ("tvm", "tvmrt"):
    t10, k10 = split(f"{tmp}/{rt}.10")
    t110, k110 = split(f"{tmp}/{rt}.110")
    rows[rt] = ((t110 - t10) / 100, (k110 - k10) / 100)
for i, label in enumerate(("total", "kernels (model.so, libm)")):
    a, b = rows["tvm"][i], rows["tvmrt"][i]
    print(f"| {label} | {a:,.0f} | {b:,.0f} | {b / a:.3f} |")
a = rows["tvm"][0] - rows["tvm"][1]
b = rows["tvmrt"][0] - rows["tvmrt"][1]
print(f"| runtime (VM, KV cache, allocation) | {a:,.0f} | {b:,.0f} | {b / a:.3f} |")
PY
