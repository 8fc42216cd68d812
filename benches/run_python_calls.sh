#!/usr/bin/env bash
# Python per-call time (issue 27): tvmrt's wheel (release build, installed in a fresh venv
# with the pinned numpy) against apache-tvm 0.27 (the onnx venv), same models, alternating
# processes (benches/python_calls.py).
#
#   benches/run_python_calls.sh [ROUNDS]      (default 9)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS=${1:-9}
OUT=$ROOT/target/python_calls
mkdir -p "$OUT"
wheel=$("$ROOT/python/build_wheel.sh" --out "$OUT/dist" | tail -1)
rm -rf "$OUT/venv"
python3 -m venv "$OUT/venv"
"$OUT/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  -r "$ROOT/.ci/requirements/python.txt" "$wheel"
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# tvmrt $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo ' + uncommitted changes'): $(basename "$wheel")"
"$ROOT/.venv/onnx/bin/python" "$ROOT/benches/python_calls.py" "$ROOT/.venv/onnx/bin/python" \
  "$OUT/venv/bin/python" "$ROUNDS" "$OUT"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
