#!/usr/bin/env bash
# Packs what proving `KIND_GPU` on a real GPU needs into one folder, carried to a GPU machine
# that has no Rust, no pip and no network (only bash, python3, numpy): run here, then
# `benches/triton/gpu_run.sh DIR` there.
#
#   benches/triton/gpu_pack.sh DIR        e.g. .devrun/triton (git-ignored)
#
# DIR gets:
#   tritonserver.tar.xz  Triton 2.51's server from the pinned nvidia-pytriton wheel
#                        (.ci/requirements/triton.txt): bin/tritonserver and only the libraries
#                        of nvidia_pytriton.libs it links (ldd), laid out as its RPATH
#                        (${ORIGIN}/../../../nvidia_pytriton.libs) expects; and
#                        backends/tvmrt/libtriton_tvmrt.so, the release backend, stripped
#   models/              mlp_gpu (tests/fixtures/cuda/mlp_ptx.so, a Relax MLP with a PTX payload,
#                        KIND_GPU x2 on GPU 0), add_gpu (elementwise_ptx.so's `add` kernel,
#                        KIND_GPU), mlp_cpu (tests/fixtures/mlp.so, the same MLP built for llvm,
#                        KIND_CPU), mul_batched (elementwise_ptx.so's `mul_2d` kernel on rows
#                        of 70, max_batch_size 8 with dynamic batching, KIND_GPU: batches
#                        joined from single rows), broken (a corrupt model.so: its load fails)
#   models_rehearse/     the same with KIND_CPU instances and `device: cuda:0`, for a machine
#                        without a GPU (Triton refuses KIND_GPU when CUDA sees no device)
#   libfake_cuda.so      tests/cuda_double/fake_cuda.c, the driver's test double (rehearsal)
#   data/                the MLP's input and expected output (tests/fixtures/cuda/data)
#   gpu_run.py, gpu_run.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
cd "$ROOT"

cargo build --release --quiet -p tvmrt-triton
python=$(.ci/venv.sh triton)
site=$("$python" -c 'import os, pytriton; print(os.path.dirname(os.path.dirname(pytriton.__file__)))')
server="$site/pytriton/tritonserver/bin/tritonserver"
[ -x "$server" ] || { echo "no tritonserver at $server" >&2; exit 1; }

rm -rf "$DIR"/{backends,models,models_rehearse,data,stage} "$DIR"/tritonserver.tar.xz
stage="$DIR/stage/tritonserver"
mkdir -p "$stage/pytriton/tritonserver/bin" "$stage/nvidia_pytriton.libs"
cp "$server" "$stage/pytriton/tritonserver/bin/"
# The libraries the server links, found by ldd in the wheel's nvidia_pytriton.libs (the rest of
# that folder, libpython and the Python backend's stubs among them, is loaded by nothing here);
# the system's own (libc, libstdc++, libz) stay the target's.
libs=$(realpath "$site/nvidia_pytriton.libs")
ldd "$server" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | xargs -r realpath \
  | awk -v libs="$libs/" 'index($0, libs) == 1' | sort -u \
  | while read -r lib; do cp "$lib" "$stage/nvidia_pytriton.libs/"; done
if ldd "$stage/pytriton/tritonserver/bin/tritonserver" | grep -q "not found"; then
  ldd "$stage/pytriton/tritonserver/bin/tritonserver" | grep "not found" >&2
  exit 1
fi
# ICU's data (29 MB, 7 MB packed) is linked through libxml2, which Triton uses for cloud
# storage repositories only and which converts no encoding through ICU at start: a stand-in of
# the same name exports the data symbol, zeroed (ICU would refuse it as data, never crash).
for icu in "$stage"/nvidia_pytriton.libs/libicudata-*.so*; do
  [ -e "$icu" ] || continue
  sym=$(readelf -W --dyn-syms "$icu" | awk '$7 != "UND" && $8 ~ /^icudt[0-9]+_dat$/ { print $8 }')
  soname=$(readelf -d "$icu" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
  [ -n "$sym" ] && [ -n "$soname" ] || { echo "cannot read $icu" >&2; exit 1; }
  echo "const unsigned char ${sym}[64] __attribute__((aligned(16))) = {0};" > "$DIR/stage/icu.c"
  cc -shared -fPIC -Wl,-soname,"$soname" -o "$icu" "$DIR/stage/icu.c"
  rm "$DIR/stage/icu.c"
done
# The backend, stripped (the release profile keeps line tables), travels in the archive too.
mkdir -p "$DIR/stage/backends/tvmrt"
strip --strip-unneeded -o "$DIR/stage/backends/tvmrt/libtriton_tvmrt.so" \
  target/release/libtriton_tvmrt.so
tar -C "$DIR/stage" -cf - tritonserver backends | xz -T2 -9 > "$DIR/tritonserver.tar.xz"
rm -rf "$DIR/stage"

cu=tests/fixtures/cuda
model() { # repo name library config
  mkdir -p "$DIR/$1/$2/1"
  [ -z "$3" ] || cp "$3" "$DIR/$1/$2/1/model.so"
  printf '%s\n' "$4" > "$DIR/$1/$2/config.pbtxt"
}
# The kernel's inputs and output: a symbolic length each (see crates/triton/tests).
add_io='max_batch_size: 0
input [{ name: "A" data_type: TYPE_FP32 dims: [-1] }, { name: "B" data_type: TYPE_FP32 dims: [-1] }]
output [{ name: "output0" data_type: TYPE_FP32 dims: [-1] }]
parameters { key: "function" value { string_value: "add" } }'
# mul_2d(A[m, n], B[m, n]) -> C: m is the batch, rows of 70 (the requests' own batch of 1).
mul_io='max_batch_size: 8
input [{ name: "A" data_type: TYPE_FP32 dims: [70] }, { name: "B" data_type: TYPE_FP32 dims: [70] }]
output [{ name: "output0" data_type: TYPE_FP32 dims: [70] }]
parameters { key: "function" value { string_value: "mul_2d" } }
dynamic_batching { max_queue_delay_microseconds: 20000 }'
for repo in models models_rehearse; do
  if [ $repo = models ]; then
    gpu2='instance_group [{ kind: KIND_GPU, count: 2, gpus: [0] }]'
    gpu1='instance_group [{ kind: KIND_GPU, count: 1, gpus: [0] }]'
  else
    dev='parameters { key: "device" value { string_value: "cuda:0" } }'
    gpu2="instance_group [{ kind: KIND_CPU, count: 2 }]
$dev"
    gpu1="instance_group [{ kind: KIND_CPU, count: 1 }]
$dev"
  fi
  model $repo mlp_gpu $cu/mlp_ptx.so "backend: \"tvmrt\"
$gpu2"
  model $repo add_gpu $cu/elementwise_ptx.so "backend: \"tvmrt\"
$add_io
$gpu1"
  model $repo mul_batched $cu/elementwise_ptx.so "backend: \"tvmrt\"
$mul_io
$gpu1"
  model $repo mlp_cpu tests/fixtures/mlp.so 'backend: "tvmrt"
instance_group [{ kind: KIND_CPU, count: 1 }]'
  model $repo broken "" 'backend: "tvmrt"'
  # An ELF header and then noise: not a library anything can load.
  "$python" -c 'import random, sys; sys.stdout.buffer.write(b"\x7fELF" + random.Random(30).randbytes(4096))' \
    > "$DIR/$repo/broken/1/model.so"
done

mkdir -p "$DIR/data"
cp $cu/data/mlp.main.in0.npy $cu/data/mlp.main.out0.npy "$DIR/data/"
cc -shared -fPIC -O2 -o "$DIR/libfake_cuda.so" tests/cuda_double/fake_cuda.c -lm -lpthread
cp benches/triton/gpu_run.py benches/triton/gpu_run.sh "$DIR/"

echo "packed $DIR:"
(cd "$DIR" && find . -type f -printf '%s %p\n' | sort -k2 | awk '{ printf "  %9d  %s\n", $1, $2 }')
echo "total $(du -sb "$DIR" | cut -f1) bytes ($(du -sh "$DIR" | cut -f1))"
