#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The GPU machine's run (issue 32: CUDA on a real GPU; issue 30: Triton KIND_GPU; issue 34:
# Vulkan on the NVIDIA driver; issue 31: tvmrt serve on CUDA and OpenCL; issue 48: tvmrt
# rpc-server's remote CUDA tensors and kernels, driven by a raw client; issue 49: structured
# output with the mask applied on the device; issue 50: tvmrt serve's KIND_GPU instances and
# batches on cuda:0), from the folder
# benches/gpu/pack.sh wrote, with nothing but what that machine has (bash, python3 with
# numpy/torch/cupy, the driver, compute-sanitizer). Each part runs under a time limit;
# everything printed goes to OUT/run.log, the verdicts to OUT/summary.txt, and the parts' own
# files (OUT of the Triton and Vulkan scripts) to OUT/parts.tar.gz (the device tool returns at
# most 8 files).
#
# Usage: benches/gpu/run.sh [DIR] [--fake]
#   DIR     what pack.sh wrote (default .devrun)
#   --fake  rehearsal on a machine without a GPU: the driver's test double stands in for
#           libcuda.so.1 (values of whole models are not compared there; the parts that need
#           PyTorch/CuPy, compute-sanitizer, Triton's GPU instances or a Vulkan GPU are left out)
# Environment: OUT (default /tmp/gpu_run), PYTHON (default python3), ONLY (names of the parts
# to run, e.g. "triton_kind_gpu vulkan"; default all). The open issues' parts, first where
# device time is short: ONLY="rpc_cuda structured_cuda oip_kind_gpu" (48, 49, 50).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR=""
FAKE=0
for a in "$@"; do
  case $a in
    --fake) FAKE=1 ;;
    *) DIR=$a ;;
  esac
done
DIR="$(realpath "${DIR:-$ROOT/.devrun}")"
OUTD="${OUT:-/tmp/gpu_run}"
PARTS_OUT="$(mktemp -d)"
PY="${PYTHON:-python3}"
FIX="$ROOT/tests/fixtures/cuda"
mkdir -p "$OUTD"
cd "$ROOT"
# pack.sh compresses the largest binaries (the device tool carries 64 MiB at most); Python's
# lzma, as the machine may have no xz.
for packed in "$DIR"/bin/*.xz; do
  [[ -e $packed ]] || continue
  "$PY" -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as i, open(sys.argv[1][:-3], "wb") as o:
    shutil.copyfileobj(i, o)' "$packed" && chmod +x "${packed%.xz}" && rm "$packed"
done
cp "$DIR/python/_core.abi3.so" python/tvmrt/_core.abi3.so 2>/dev/null || true
export TVMRT_LIBRARY="$DIR/lib/libtvmrt.so" PYTHONUNBUFFERED=1
SUITE=() RELAX=() DEVICES=1 TRITON_BENCH_ARGS=()
if [[ $FAKE == 1 ]]; then
  export TVMRT_CUDA_LIBRARY="$DIR/lib/libfake_cuda.so" FAKE_CUDA_DEVICES=1
  SUITE=(--fake) RELAX=(--no-values) TRITON_BENCH_ARGS=(--seconds 1 --concurrency 1,4)
  echo "(rehearsal: the driver's test double; timings are not a GPU's)"
  # NVRTC from the pinned `cuda` venv (.ci/venv.sh cuda), as run_suite.sh --fake takes it.
  if [[ -z ${TVMRT_NVRTC_LIBRARY:-} ]]; then
    TVMRT_NVRTC_LIBRARY=$(ls "$ROOT"/.venv/cuda/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 2>/dev/null | head -1)
  fi
else
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  # NVRTC: CUDA's toolkit, else the pip package the machine's Python has (tvmrt's own search
  # looks in both too; naming it makes every part use the same one, and the log say which).
  if [[ -z ${TVMRT_NVRTC_LIBRARY:-} ]]; then
    TVMRT_NVRTC_LIBRARY=$(ls /usr/local/cuda/lib64/libnvrtc.so.1[0-9]* 2>/dev/null | grep -v builtins | sort -V | tail -1)
  fi
  if [[ -z $TVMRT_NVRTC_LIBRARY ]]; then
    TVMRT_NVRTC_LIBRARY=$("$PY" -c 'import sys; sys.path.insert(0, "python"); from tvmrt._ffi import find_pip_nvrtc; print(find_pip_nvrtc() or "")')
  fi
fi
if [[ -n ${TVMRT_NVRTC_LIBRARY:-} ]]; then export TVMRT_NVRTC_LIBRARY; else unset TVMRT_NVRTC_LIBRARY; fi
echo "NVRTC: ${TVMRT_NVRTC_LIBRARY:-none found}"
export DIR FIX PY FAKE

declare -a SUMMARY=()
# part NAME SECONDS CMD...: runs CMD with a time limit, its output to the terminal and OUT/NAME.log
part() {
  local name=$1 limit=$2 rc
  shift 2
  if [[ -n ${ONLY:-} && " $ONLY " != *" $name "* ]]; then
    return 0
  fi
  echo
  echo "== $name" | tee -a "$OUTD/run.log"
  local t0=$SECONDS
  mkdir -p "$PARTS_OUT/$name"
  OUT="$PARTS_OUT/$name" timeout --kill-after=5 "$limit" "$@" 2>&1 | tee -a "$OUTD/run.log"
  rc=${PIPESTATUS[0]}
  local verdict=PASS
  [[ $rc == 0 ]] || verdict="FAIL (exit $rc)"
  [[ $rc == 124 || $rc == 137 ]] && verdict="FAIL (over ${limit}s)"
  SUMMARY+=("$verdict $name ($((SECONDS - t0)) s)")
}

tool_models() {
  # The tool on cuda:0 against TVM's CPU output: the MLP and the CNN, PTX and source payloads.
  local lib m tmp
  for lib in mlp_ptx:mlp mlp:mlp cnn_ptx:cnn cnn:cnn; do
    m=${lib#*:}
    lib=${lib%%:*}
    tmp=$(mktemp -d)
    "$DIR/bin/tvmrt" run "$FIX/$lib.so" main -i "$FIX/data/$m.main.in0.npy" --device cuda \
      --save "$tmp" || return 1
    "$PY" - "$tmp/output0.npy" "$FIX/data/$m.main.out0.npy" "$lib" "$FAKE" <<'PYEOF' || return 1
import sys, numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
if sys.argv[4] == "1":
    print(f"PASS tvmrt run {sys.argv[3]}.so --device cuda: ran, shape {got.shape} (values not compared)")
else:
    err = float(np.max(np.abs(got - want)))
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4), f"max abs diff {err}"
    print(f"PASS tvmrt run {sys.argv[3]}.so --device cuda: max abs diff {err:.2e}")
PYEOF
    rm -rf "$tmp"
  done
}

# opencl_env CMD...: runs CMD on opencl:0 through an OpenCL ICD loader (the machine's own
# libOpenCL.so.1, or the one pack.sh carries: Debian's ocl-icd, needing only libc) and NVIDIA's
# OpenCL driver. The H200 machine's /etc/OpenCL/vendors lists only POCL's CPU driver; its
# environment names both drivers in OCL_ICD_FILENAMES (read by ocl-icd and Khronos' loader),
# and tvmrt takes GPUs first (seen 2026-11-28). Where that variable is unset, NVIDIA's driver is
# named by its path; the benchmark prints the device's own name.
opencl_env() {
  if ! ldconfig -p | grep -q 'libOpenCL\.so\.1 '; then
    export TVMRT_OPENCL_LIBRARY="$DIR/lib/ocl/libOpenCL.so.1"
  fi
  local d nv=""
  for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -e $d/libnvidia-opencl.so.1 ]] && { nv=$d/libnvidia-opencl.so.1; break; }
  done
  if [[ -n $nv && -z ${OCL_ICD_FILENAMES:-} ]]; then
    export OCL_ICD_FILENAMES=$nv
  fi
  echo "OpenCL: loader ${TVMRT_OPENCL_LIBRARY:-libOpenCL.so.1}, driver ${OCL_ICD_FILENAMES:-as the vendor files say}"
  TVMRT_SERVE_DEVICE=opencl:0 "$@"
}

tool_bench() {
  local m
  for m in mlp_ptx mlp; do
    echo "-- $m.so"
    "$DIR/bin/tvmrt" bench "$FIX/$m.so" main -i "$FIX/data/mlp.main.in0.npy" --device cuda \
      --repeat 200 || return 1
  done
}

part cuda_suite 240 "$PY" benches/cuda/suite.py --library "$TVMRT_LIBRARY" "${SUITE[@]}"
part c_cuda 60 "$DIR/bin/cuda" "$FIX" "$DEVICES"
CUDA_MODELS=(mlp_ptx.so:mlp.main mlp.so:mlp.main cnn_ptx.so:cnn.main cnn.so:cnn.main)
part c_cuda_relax 120 "$DIR/bin/device_relax" cuda "$FIX" "${CUDA_MODELS[@]}" "${RELAX[@]}"
export -f tool_models tool_bench opencl_env
part tool_run 120 bash -c tool_models
if [[ -f benches/cuda/llm.py ]]; then
  part llm 180 "$PY" benches/cuda/llm.py --library "$TVMRT_LIBRARY" "${SUITE[@]}"
fi
if [[ $FAKE == 0 ]]; then
  part interop 120 "$PY" benches/cuda/interop.py --library "$TVMRT_LIBRARY"
fi
# tvmrt rpc-server on 127.0.0.1 with remote tensors and kernels on cuda:0 (issue 48), driven by
# benches/rpc/raw_client.py (no TVM here): copies exact (64 MiB timed), elementwise_ptx.so run.
part rpc_cuda 120 "$PY" benches/gpu/rpc_cuda.py --tool "$DIR/bin/tvmrt" "${SUITE[@]}"
part launch_cost 120 "$DIR/bin/cuda_launch" "$FIX" 20000 9
part mlp_bench 120 bash -c tool_bench
if [[ $FAKE == 0 ]]; then
  part sanitizer 240 compute-sanitizer --tool memcheck --error-exitcode 9 --leak-check full \
    "$DIR/bin/device_relax" cuda "$FIX" "${CUDA_MODELS[@]}"
fi
if [[ -x $DIR/bin/serve_bench && $FAKE == 0 ]]; then
  # tvmrt serve's engine and HTTP front on cuda:0 with the MLC fixture built for CUDA (issue
  # 31): greedy tokens against TVM's first, then tokens/s at concurrency 1, 4, 16 against one
  # stream, time per output token against the bare decode step.
  part serve_cuda 300 env TVMRT_SERVE_DEVICE=cuda:0 "$DIR/bin/serve_bench" \
    tests/fixtures/mlc/model tests/fixtures/mlc/model/lib_cuda.so --check
  # The same through NVIDIA's OpenCL driver (the fixture MLC-LLM compiles for OpenCL): on a GPU
  # the attention kernels' work-items run in lockstep, which TVM's merge kernel needs and a CPU
  # OpenCL device does not give (BENCHMARKS.md, OpenCL serving).
  part serve_opencl 300 bash -c 'opencl_env "$@"' opencl_env "$DIR/bin/serve_bench" \
    tests/fixtures/mlc/model tests/fixtures/mlc/model/lib_opencl.so --check
fi
if [[ -x $DIR/bin/structured_bench && $FAKE == 0 ]]; then
  # Structured output on cuda:0 (issue 49): every constrained answer checked first (it
  # validates, the mask applied by the library's kernel on the device), then the figures of
  # the CPU's run: time per output token against free text, 16 constrained streams against
  # 16 free ones, with the jump-forward on and off.
  part structured_cuda 300 env TVMRT_SERVE_DEVICE=cuda:0 "$DIR/bin/structured_bench" \
    tests/fixtures/mlc/model tests/fixtures/mlc/model/lib_cuda.so --check
fi
if [[ -f benches/triton/gpu_run.sh && -d $DIR/triton ]]; then
  # oip_*: the same repository, requests and checks against `tvmrt serve --model-repository`
  # (issue 50): KIND_GPU instances on cuda:0, batches joined from single rows there.
  if [[ $FAKE == 1 ]]; then
    part triton 120 bash benches/triton/gpu_run.sh "$DIR/triton" --rehearse
    part oip 120 bash benches/triton/gpu_run.sh "$DIR/triton" --rehearse \
      --server tvmrt --tool "$DIR/bin/tvmrt"
  else
    part triton_kind_gpu 120 bash benches/triton/gpu_run.sh "$DIR/triton"
    part triton_device_param 120 bash benches/triton/gpu_run.sh "$DIR/triton" --device-param
    part oip_kind_gpu 120 bash benches/triton/gpu_run.sh "$DIR/triton" \
      --server tvmrt --tool "$DIR/bin/tvmrt"
  fi
  if [[ -d $DIR/triton_bench ]]; then
    # Server-side compute against a direct call, on this machine's cores (issue 30).
    part triton_compute 180 "$PY" benches/triton/compute_bench.py "$DIR/triton" \
      "$DIR/triton_bench" "$TVMRT_LIBRARY" "${TRITON_BENCH_ARGS[@]}"
  fi
fi
if [[ -f benches/vulkan/gpu_run.sh && -d $DIR/vk && $FAKE == 0 ]]; then
  part vulkan 150 bash benches/vulkan/gpu_run.sh "$DIR/vk"
  # After gpu_run.sh has put the Vulkan loader in place: the Relax models from C.
  part c_vulkan_relax 60 "$DIR/bin/device_relax" vulkan tests/fixtures/vulkan \
    cnn.so:cnn.main mlp.so:mlp.main
fi

echo
echo "== summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$OUTD/summary.txt"
tar czf "$OUTD/parts.tar.gz" -C "$PARTS_OUT" .
grep -qv '^PASS' "$OUTD/summary.txt" && exit 1
exit 0
