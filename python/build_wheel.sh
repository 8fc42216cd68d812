#!/usr/bin/env bash
# Builds the tvmrt wheel: the Python package with libtvmrt.so and the `tvmrt` command-line
# tool bundled (tvmrt/lib/, tvmrt/bin/; the `tvmrt` console script runs the tool), tagged
# py3-none-manylinux_2_N for the newest glibc symbol version the two binaries use.
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
cargo build --profile "$profile" --lib --bin tvmrt --quiet
python=$(.ci/venv.sh wheel)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tvmrt/lib" "$stage/tvmrt/bin"
cp python/tvmrt/*.py "$stage/tvmrt/"
cp python/README.md "$stage/"
cp "$target/$dir/libtvmrt.so" "$stage/tvmrt/lib/"
cp "$target/$dir/tvmrt" "$stage/tvmrt/bin/"
# Debug info is most of a dev build's size and not needed to run.
strip --strip-debug "$stage/tvmrt/lib/libtvmrt.so" "$stage/tvmrt/bin/tvmrt"
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
requires-python = ">=3.8"
license = "Apache-2.0"
dependencies = []

[project.optional-dependencies]
numpy = ["numpy"]

[project.scripts]
tvmrt = "tvmrt._cli:main"

[tool.setuptools]
packages = ["tvmrt"]

[tool.setuptools.package-data]
tvmrt = ["lib/libtvmrt.so", "bin/tvmrt"]
TOML
built=$(mktemp -d)
"$python" -m pip wheel --quiet --no-deps --no-build-isolation "$stage" -w "$built" >&2
# The newest GLIBC_x.y either binary needs sets the manylinux tag.
glibc=$(objdump -T "$stage/tvmrt/lib/libtvmrt.so" "$stage/tvmrt/bin/tvmrt" |
  grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -n | tail -1)
plat="manylinux_2_${glibc}_$(uname -m)"
"$python" -m wheel tags --remove --python-tag py3 --abi-tag none --platform-tag "$plat" \
  "$built"/tvmrt-*.whl >&2
mkdir -p "$out"
mv "$built"/tvmrt-*-"$plat".whl "$out/"
rm -rf "$built"
wheel=$(ls "$out"/tvmrt-"$version"-py3-none-"$plat".whl)
echo "built $(du -h "$wheel" | cut -f1) $wheel" >&2
echo "$wheel"
