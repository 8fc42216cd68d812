#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Prepares the GPU machine's run (issues 32, 30, 34) HERE, where cargo and the registries are:
# the device tool's machine has the NVIDIA driver, CUDA's toolkit and a python3 with numpy,
# PyTorch and CuPy, but no Rust toolchain and no network. Writes DIR (default .devrun, which
# .git/info/exclude must ignore; the device tool's `carry` then names it):
#   lib/libtvmrt.so, bin/tvmrt.xz         release builds, stripped (bin/tvmrt also serves run.sh's
#                                         rpc_cuda and oip parts, with the tracked tests/fixtures/cuda)
#   bin/cuda, bin/device_relax            c_tests/cuda.c and c_tests/device_relax.c
#   bin/cuda_launch                       benches/cuda/cuda_launch.c (per-launch cost)
#   lib/libfake_cuda.so                   the driver's test double, for the rehearsal (--fake)
#   python/_core.abi3.so                  the Python package's C extension
#   bin/serve_bench.xz                    crates/serve/benches/serve.rs (tvmrt serve on cuda:0, opencl:0)
#   bin/structured_bench.xz               crates/serve/benches/structured.rs (structured output on cuda:0)
#                                         (the .xz files: unpacked by run.sh)
#   lib/ocl/libOpenCL.so.1                an OpenCL ICD loader (Debian's ocl-icd), for opencl:0
#   triton/, vk/                          the Triton and Vulkan parts, where their pack scripts exist
#   triton_bench/                         the models of benches/triton/compute_bench.py
# Then: benches/gpu/run.sh DIR --fake (rehearsal here) and, on the GPU machine,
# benches/gpu/run.sh DIR.
#
# Usage: benches/gpu/pack.sh [DIR]
# Environment: PACK_PARTS (default "triton vulkan"): which of the other parts to (re)build; a
# part left out keeps what DIR already holds for it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="$(realpath -m "${1:-$ROOT/.devrun}")"
CC="${CC:-cc}"
cd "$ROOT"
rm -rf "$DIR/lib" "$DIR/bin" "$DIR/python"
mkdir -p "$DIR/lib" "$DIR/bin" "$DIR/python"

cargo build --release -p tvmrt --lib -p tvmrt-cli --bin tvmrt --quiet
cp target/release/libtvmrt.so "$DIR/lib/"
cp target/release/tvmrt "$DIR/bin/"
strip "$DIR/lib/libtvmrt.so" "$DIR/bin/tvmrt"

link=(-I include -I c_tests -L "$DIR/lib" -ltvmrt -ldl -Wl,-rpath,'$ORIGIN/../lib')
"$CC" -O2 -o "$DIR/bin/cuda" c_tests/cuda.c "${link[@]}"
"$CC" -O2 -o "$DIR/bin/device_relax" c_tests/device_relax.c "${link[@]}"
"$CC" -O2 -o "$DIR/bin/cuda_launch" benches/cuda/cuda_launch.c "${link[@]}"
"$CC" -shared -fPIC -O2 -o "$DIR/lib/libfake_cuda.so" tests/cuda_double/fake_cuda.c
python/build_ext.sh --out "$DIR/python" >/dev/null
# The serve benchmarks (issues 31 and 49) as binaries: cargo names them NAME-HASH.
for bench in serve structured; do
  exe=$(cargo bench -p tvmrt-serve --bench "$bench" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for m in map(json.loads, sys.stdin):
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$bench" | tail -1)
  cp "$exe" "$DIR/bin/${bench}_bench"
  strip "$DIR/bin/${bench}_bench"
done
# An OpenCL ICD loader for the OpenCL serve part, where the GPU machine has none (Debian's
# ocl-icd: libc only).
ocl=$(ldconfig -p | awk '/libOpenCL\.so\.1 .*x86-64/ { print $NF; exit }')
[[ -n $ocl ]] || { echo "pack.sh: no libOpenCL.so.1 to carry (apt-get install ocl-icd-libopencl1)" >&2; exit 1; }
mkdir -p "$DIR/lib/ocl"
cp -L "$ocl" "$DIR/lib/ocl/libOpenCL.so.1"

for part in ${PACK_PARTS-triton vulkan}; do
  if [[ $part == triton ]]; then
    # benches/triton/compute_bench.py's models, built by TVM 0.27 as benches/triton/run.py's.
    mkdir -p "$DIR/triton_bench"
    (cd crates/triton/tests/models && "$(cd "$ROOT" && .ci/venv.sh onnx)" -c "
import generate
generate.build(generate.mlp(256, 1024, 16, seed=1), '$DIR/triton_bench/mlp.so')
generate.build(generate.cnn(3, 32, 10, seed=2), '$DIR/triton_bench/cnn.so')")
  fi
  if [[ -x benches/$part/gpu_pack.sh ]]; then
    dest="$DIR/$part"
    [[ $part == vulkan ]] && dest="$DIR/vk"
    benches/$part/gpu_pack.sh "$dest"
  fi
done
# The largest binaries travel compressed (about 3.5x; the device tool carries 64 MiB in all,
# Vulkan's and Triton's parts included); run.sh unpacks them.
xz -T2 -6 -f "$DIR/bin/tvmrt" "$DIR/bin/serve_bench" "$DIR/bin/structured_bench"
du -sh "$DIR"
du -sh "$DIR"/* | sort -h
