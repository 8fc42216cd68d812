#!/usr/bin/env bash
# Installs the tvmrt build tree BUILD_DIR into a temporary prefix with `cmake --install`, then
# builds a separate consumer project against it twice: with find_package(tvmrt) (shared and
# static) and with pkg-config, and runs each program; and loads a library built against the
# installed libtvm_ffi.so alias only (as a tvm-ffi extension is) from a program that links
# nothing of TVM.
#   c_tests/install_consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in lib/libtvmrt.so lib/libtvmrt.a lib/libtvm_ffi.so include/tvmrt.h include/tvm/runtime/c_runtime_api.h \
  include/tvm/ffi/c_api.h include/dlpack/dlpack.h lib/pkgconfig/tvmrt.pc \
  lib/cmake/tvmrt/tvmrtConfig.cmake lib/cmake/tvmrt/tvmrtConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || { echo "install_consumer: $f was not installed"; exit 1; }
done

cmake -S "$src/c_tests/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_RPATH="$prefix/lib" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer_shared"
"$work/consumer/consumer_static"

# The alias: a shared library may leave symbols undefined, so this one needs libtvm_ffi.so only
# (kept although the alias defines none of the symbols: --no-as-needed).
cc -std=c11 -shared -fPIC -I"$prefix/include" "$src/c_tests/consumer/alias_ext.c" \
  -L"$prefix/lib" -Wl,--no-as-needed -ltvm_ffi -Wl,-rpath,"$prefix/lib" -o "$work/alias_ext.so"
needed=$(readelf -d "$work/alias_ext.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -c tvm)
[ "$needed" = 1 ] && readelf -d "$work/alias_ext.so" | grep -q 'NEEDED.*libtvm_ffi.so' ||
  { echo "install_consumer: alias_ext.so must need libtvm_ffi.so, nothing else of TVM"; exit 1; }
cc -std=c11 -I"$prefix/include" "$src/c_tests/consumer/alias_main.c" -o "$work/alias_main" -ldl
"$work/alias_main" "$work/alias_ext.so"

if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  # shellcheck disable=SC2046
  cc -std=c11 $(pkg-config --cflags tvmrt) "$src/c_tests/consumer/main.c" -o "$work/pc" \
    $(pkg-config --libs tvmrt) -Wl,-rpath,"$prefix/lib"
  "$work/pc"
  echo "install_consumer: find_package(tvmrt) and pkg-config both work"
else
  echo "install_consumer: find_package(tvmrt) works (pkg-config not installed: skipped that part)"
fi
