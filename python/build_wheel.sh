#!/usr/bin/env bash
# Builds the tvmrt wheel: the Python package with libtvmrt.so, its libtvm_ffi.so alias and the
# `tvmrt` command-line tool bundled (tvmrt/lib/, tvmrt/bin/; the `tvmrt` console script runs the
# tool) and its C extension (tvmrt/_core.abi3.so, CPython's stable ABI), tagged
# cp310-abi3-manylinux_2_N for the newest glibc symbol version the binaries use.
#
#   python/build_wheel.sh [--profile release|dev] [--out DIR]    (default: release, dist/)
#
# Prints the wheel's path last. Install it with `pip install dist/tvmrt-*.whl`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
profile=release
out=dist
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--profile release|dev] [--out DIR]" >&2; exit 2 ;;
  esac
done
case $profile in release) dir=release ;; dev) dir=debug ;; *) echo "profile: release or dev" >&2; exit 2 ;; esac
target=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --profile "$profile" -p tvmrt --lib -p tvmrt-cli --bin tvmrt --quiet
python=$(.ci/venv.sh wheel)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# The whole package tree (every module and subpackage under python/tvmrt/, caches left out),
# so a module added there ships without touching this script.
mkdir -p "$stage/tvmrt"
tar -C python/tvmrt --exclude=__pycache__ --exclude='*.pyc' --exclude=lib --exclude=bin \
  --exclude='_core*.so' -cf - . | tar -C "$stage/tvmrt" -xf -
# The C extension, built for CPython's stable ABI: one binary for CPython 3.10 and later.
python/build_ext.sh --python "$python" --out "$stage/tvmrt" >/dev/null
mkdir -p "$stage/tvmrt/lib" "$stage/tvmrt/bin"
cp python/README.md "$stage/"
cp "$target/$dir/libtvmrt.so" "$stage/tvmrt/lib/"
cp "$target/$dir/tvmrt" "$stage/tvmrt/bin/"
# libtvm_ffi.so: tvmrt's second name, for libraries built against tvm-ffi (a wheel holds no
# symlinks: the alias is a library with no code that needs libtvmrt.so beside it).
cmake/tvm_ffi_alias.sh "$stage/tvmrt/lib"
# Debug info and the static symbol table are most of the binaries' size and not needed to run
# (the library's exported, dynamic symbols stay): 8.7 -> 7.0 MB unpacked for release.
strip --strip-unneeded "$stage/tvmrt/lib/libtvmrt.so" "$stage/tvmrt/bin/tvmrt"
# manylinux allows only a few system libraries (PEP 599/600); the binaries link no others
# (libstdc++ for tvmrt's C++ part, as tvm-ffi's own wheel; libtvmrt.so is the alias's, bundled).
needed=$(readelf -d "$stage/tvmrt/lib/libtvmrt.so" "$stage/tvmrt/lib/libtvm_ffi.so" \
  "$stage/tvmrt/bin/tvmrt" "$stage/tvmrt/_core.abi3.so" |
  sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
for so in $needed; do
  case $so in
    libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | libgcc_s.so.1) ;;
    libstdc++.so.6 | libtvmrt.so) ;;
    ld-linux-*.so.*) ;;
    *) echo "build_wheel: $so is not a library manylinux allows" >&2; exit 1 ;;
  esac
done
# libstdc++'s symbol versions must exist in the libstdc++ of the oldest distributions the tag
# admits; manylinux_2_34's (RHEL 9, GCC 11) has up to GLIBCXX_3.4.29 and CXXABI_1.3.13.
# None at all is fine: libtvmrt binds libstdc++ at first use (src/cxx/runtime.c), not by version.
newest() { objdump -T "$stage/tvmrt/lib/libtvmrt.so" "$stage/tvmrt/bin/tvmrt" |
  { grep -o "$1_[0-9.]*" || true; } | sed "s/$1_//" | sort -V | tail -1; }
for pair in GLIBCXX:3.4.29 CXXABI:1.3.13; do
  name=${pair%%:*} limit=${pair#*:} got=$(newest "${pair%%:*}")
  if [ -n "$got" ] && [ "$(printf '%s\n%s\n' "$got" "$limit" | sort -V | tail -1)" != "$limit" ]; then
    echo "build_wheel: libtvmrt needs ${name}_$got, newer than manylinux_2_34's ${name}_$limit" >&2
    exit 1
  fi
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
cat >"$stage/pyproject.toml" <<TOML
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tvmrt"
version = "$version"
description = "Run libraries compiled by Apache TVM: tvmrt's runtime with its Python binding"
readme = "README.md"
requires-python = ">=3.10"
license = "Apache-2.0"
dependencies = []

[project.optional-dependencies]
numpy = ["numpy"]

[project.scripts]
tvmrt = "tvmrt._cli:main"

[tool.setuptools.packages.find]
include = ["tvmrt", "tvmrt.*"]

[tool.setuptools.package-data]
tvmrt = ["lib/libtvmrt.so", "lib/libtvm_ffi.so", "bin/tvmrt", "_core.abi3.so"]
TOML
built=$(mktemp -d)
"$python" -m pip wheel --quiet --no-deps --no-build-isolation "$stage" -w "$built" >&2
# The newest GLIBC_x.y either binary needs sets the manylinux tag.
glibc=$(objdump -T "$stage/tvmrt/lib/libtvmrt.so" "$stage/tvmrt/bin/tvmrt" "$stage/tvmrt/_core.abi3.so" |
  grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -1)
plat="manylinux_2_${glibc}_$(uname -m)"
# Retag cp310-abi3-PLAT (the extension's stable ABI; the package also runs without it, through
# ctypes), and mark the wheel as holding binaries (Root-Is-Purelib: false: it installs into
# platlib, as platform wheels do); `wheel pack` rewrites RECORD's hashes.
"$python" -m wheel unpack --dest "$built/unpacked" "$built"/tvmrt-*.whl >&2
info=$(ls -d "$built"/unpacked/tvmrt-*/tvmrt-*.dist-info)
sed -i -e 's/^Root-Is-Purelib: .*/Root-Is-Purelib: false/' -e '/^Tag: /d' -e '/^$/d' "$info/WHEEL"
echo "Tag: cp310-abi3-$plat" >>"$info/WHEEL"
mkdir -p "$out"
"$python" -m wheel pack --dest-dir "$out" "$built"/unpacked/tvmrt-* >&2
rm -rf "$built"
wheel=$(ls "$out"/tvmrt-"$version"-cp310-abi3-"$plat".whl)
unpacked=$("$python" -c 'import sys, zipfile; print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist()))' "$wheel")
echo "built $wheel: $(stat -c %s "$wheel") bytes, $unpacked bytes unpacked" >&2
echo "$wheel"
