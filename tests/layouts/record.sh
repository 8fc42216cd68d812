#!/usr/bin/env bash
# Records what each CPU's C++ compiler makes of the layouts tvmrt shares with C and C++
# (layouts.cc, compiled against the C++ headers of the pinned apache-tvm-ffi wheel, run under
# qemu-user for the other CPUs) into tests/layouts/<cpu>.txt, which the Rust unit test
# `abi::layout_tests` checks tvmrt against.
#
#   tests/layouts/record.sh [--out DIR] [CPU...]   (x86_64 aarch64 armv7 riscv64 by default)
#
# Needs g++ and, per other CPU, Debian's g++-<gnu triple> and qemu-user-static (.ci/cross.sh
# installs them); the headers come from the tvm_ffi venv (.ci/venv.sh tvm_ffi).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=tests/layouts
if [ "${1:-}" = --out ]; then
  out=$2
  shift 2
fi
cpus=("$@")
[ ${#cpus[@]} -gt 0 ] || cpus=(x86_64 aarch64 armv7 riscv64)
py=$(.ci/venv.sh tvm_ffi)
inc=$("$py" -c 'import os, tvm_ffi; print(os.path.join(os.path.dirname(tvm_ffi.__file__), "include"))')
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for cpu in "${cpus[@]}"; do
  case $cpu in
  x86_64) cxx=g++ run=() ;;
  aarch64) cxx=aarch64-linux-gnu-g++ run=(qemu-aarch64-static -L /usr/aarch64-linux-gnu) ;;
  armv7) cxx=arm-linux-gnueabihf-g++ run=(qemu-arm-static -L /usr/arm-linux-gnueabihf) ;;
  riscv64) cxx=riscv64-linux-gnu-g++ run=(qemu-riscv64-static -L /usr/riscv64-linux-gnu) ;;
  *) echo "record.sh: unknown CPU $cpu" >&2; exit 2 ;;
  esac
  # tvm-ffi's headers first: include/ supplies only the classic header (TVMValue).
  "$cxx" -std=c++17 -Wall -Wno-invalid-offsetof -I "$inc" -I include \
    -o "$work/layouts-$cpu" tests/layouts/layouts.cc
  "${run[@]}" "$work/layouts-$cpu" >"$out/$cpu.txt"
  echo "$out/$cpu.txt: $(wc -l <"$out/$cpu.txt") facts"
done
