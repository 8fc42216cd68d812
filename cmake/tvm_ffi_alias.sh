#!/usr/bin/env bash
# Writes DIR/libtvm_ffi.so: the name under which tvmrt stands in for tvm-ffi's library.
#
#   cmake/tvm_ffi_alias.sh DIR        (CC: the C compiler, default cc)
#
# The alias has no code of its own: its SONAME is libtvm_ffi.so and its one DT_NEEDED is
# libtvmrt.so, found beside it (RUNPATH $ORIGIN). A program or library built against tvm-ffi
# (DT_NEEDED libtvm_ffi.so) that finds it binds to tvmrt, which gets loaded once whatever
# name each user asks for. It is built against an empty stand-in for libtvmrt.so, so it does
# not depend on a particular build of the runtime. CMake (`cmake --install`) and
# python/build_wheel.sh install it beside libtvmrt.so.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
out=$1
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
printf '/* tvmrt: an empty library */\n' >"$tmp/empty.c"
"$cc" -shared -fPIC -nostdlib "$tmp/empty.c" -Wl,-soname,libtvmrt.so -o "$tmp/libtvmrt.so"
"$cc" -shared -fPIC -nostdlib "$tmp/empty.c" -Wl,-soname,libtvm_ffi.so \
  -Wl,--no-as-needed -L"$tmp" -ltvmrt -Wl,--enable-new-dtags,-rpath,'$ORIGIN' \
  -o "$tmp/libtvm_ffi.so"
mv "$tmp/libtvm_ffi.so" "$out/libtvm_ffi.so"
