#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Vulkan launch cost (issue 34), on whatever Vulkan driver the machine has (lavapipe on the CI
# VM): a tiny kernel through tvmrt (TVM's host launcher and the kernel function directly)
# against a minimal hand-written Vulkan program recording the same dispatches, same run, same
# device, same SPIR-V (benches/vulkan_launch.c).
#
# Usage: benches/run_vulkan_launch.sh [--no-build] [LAUNCHES [ROUNDS]]
# Needs the Vulkan headers and libvulkan.so to link the floor (Debian: libvulkan-dev) and
# glslangValidator (glslang-tools). Environment: CC (default cc), OUT (default
# target/vulkan_bench).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=1
if [[ "${1:-}" == --no-build ]]; then
  BUILD=0
  shift
fi
LAUNCHES="${1:-10000}"
ROUNDS="${2:-9}"
CC="${CC:-cc}"
OUT="${OUT:-$ROOT/target/vulkan_bench}"
FIX="$ROOT/tests/fixtures/vulkan"
mkdir -p "$OUT"

if [[ $BUILD == 1 ]]; then
  (cd "$ROOT" && cargo build --release -p tvmrt --lib --quiet)
fi
LIB="$ROOT/target/release"
glslangValidator -V --target-env vulkan1.1 -e add_scale_kernel --source-entrypoint main \
  -o "$OUT/add_scale_kernel.spv" "$FIX/host/add_scale_kernel.comp" >/dev/null
"$CC" -O2 -I "$ROOT/include" -I "$ROOT/benches" "$ROOT/benches/vulkan_launch.c" \
  -o "$OUT/vulkan_launch" -L "$LIB" -ltvmrt -lvulkan -Wl,-rpath,"$LIB"
"$OUT/vulkan_launch" "$FIX/add_scale.so" "$OUT/add_scale_kernel.spv" "$LAUNCHES" "$ROUNDS"
