#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The CUDA fixture suite and benchmarks (issue 23), for a machine with an NVIDIA GPU and driver:
#  1. correctness: every library of tests/fixtures/cuda in every format (TVM 0.27's CUDA source
#     compiled by tvmrt with NVRTC, NVRTC's PTX, cubin and fatbin) and the Relax MLP, on cuda:0
#     through the Python package, compared with numpy's answers as TVM's CPU runtime recorded
#     them (benches/cuda/suite.py; an sm_80 cubin must be refused on other architectures);
#     then the tiny LLM of tests/fixtures/llm built for CUDA, greedy decoding on cuda:0 and on
#     the CPU in one run: tokens equal to TVM's and the CPU's, logits within 1e-3 of max |logit|
#     (benches/cuda/llm.py);
#  2. per-launch cost of a tiny kernel: a minimal hand-written driver-API program
#     (cuLaunchKernel, the floor), tvmrt's kernel function, and the library's host launcher,
#     same process, same device, alternating rounds (benches/cuda/cuda_launch.c);
#  3. the Relax MLP's `main` on cuda:0 through `tvmrt bench` (PTX payload, and TVM's source
#     compiled by NVRTC at first use), the input on the device, waiting for the device.
#
# Usage: benches/cuda/run_suite.sh [--fake] [--dev] [LAUNCHES [ROUNDS]]
#   --fake  use the test double of the driver (tests/cuda_double/fake_cuda.c) instead of
#           libcuda.so.1: checks the script on a machine without a GPU (its timings are not a
#           GPU's; the double computes the elementwise kernels and the matmul only)
#   --dev   use the dev-profile build (target/debug) instead of building release
# Needs cargo, a C compiler and python3 (the pinned venvs `python` and `cuda` are made by
# .ci/venv.sh on first use; `cuda` brings NVRTC from PyPI). Environment: CC (default cc),
# OUT (default target/cuda_bench).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FAKE=0
PROFILE=release
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --fake) FAKE=1 ;;
    --dev) PROFILE=debug ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
LAUNCHES="${1:-20000}"
ROUNDS="${2:-9}"
CC="${CC:-cc}"
OUT="${OUT:-$ROOT/target/cuda_bench}"
FIX="$ROOT/tests/fixtures/cuda"
LIB="$ROOT/target/$PROFILE"
mkdir -p "$OUT"

if [[ $PROFILE == release ]]; then
  (cd "$ROOT" && cargo build --release -p tvmrt --lib -p tvmrt-cli --bin tvmrt --quiet)
else
  (cd "$ROOT" && cargo build -p tvmrt --lib -p tvmrt-cli --bin tvmrt --quiet)
fi
PY="$("$ROOT/.ci/venv.sh" python)"
CUDA_PY="$("$ROOT/.ci/venv.sh" cuda)"
NVRTC="$(ls "$(dirname "$CUDA_PY")"/../lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12)"
export TVMRT_NVRTC_LIBRARY="${TVMRT_NVRTC_LIBRARY:-$NVRTC}"
export TVMRT_LIBRARY="$LIB/libtvmrt.so"
SUITE_ARGS=()
if [[ $FAKE == 1 ]]; then
  "$CC" -shared -fPIC -O2 -o "$OUT/libfake_cuda.so" "$ROOT/tests/cuda_double/fake_cuda.c"
  export TVMRT_CUDA_LIBRARY="$OUT/libfake_cuda.so" FAKE_CUDA_DEVICES=1
  SUITE_ARGS+=(--fake)
  echo "(test double of the driver: timings are not a GPU's)"
elif ! command -v nvidia-smi >/dev/null; then
  echo "note: no nvidia-smi; the driver must still be loadable as libcuda.so.1" >&2
else
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
echo "tvmrt $(git -C "$ROOT" rev-parse --short HEAD) ($PROFILE), NVRTC $TVMRT_NVRTC_LIBRARY"

echo
echo "== fixture suite (cuda:0, compared with numpy / TVM's CPU outputs)"
"$PY" "$ROOT/benches/cuda/suite.py" --library "$LIB/libtvmrt.so" "${SUITE_ARGS[@]}"

echo
echo "== tiny LLM (tests/fixtures/llm) greedy decoding on cuda:0 and the CPU, same run"
"$PY" "$ROOT/benches/cuda/llm.py" --library "$LIB/libtvmrt.so" "${SUITE_ARGS[@]}"

echo
echo "== per-launch cost (median of $ROUNDS rounds of $LAUNCHES launches, alternating)"
"$CC" -O2 -I "$ROOT/include" "$ROOT/benches/cuda/cuda_launch.c" -o "$OUT/cuda_launch" \
  -L "$LIB" -ltvmrt -ldl -Wl,-rpath,"$LIB"
"$OUT/cuda_launch" "$FIX" "$LAUNCHES" "$ROUNDS"

echo
echo "== Relax MLP, main on cuda:0 (tvmrt bench, input on the device, waits for the device)"
for m in mlp_ptx mlp; do
  echo "-- $m.so"
  "$LIB/tvmrt" bench "$FIX/$m.so" main -i "$FIX/data/mlp.main.in0.npy" --device cuda \
    --repeat 200
done
