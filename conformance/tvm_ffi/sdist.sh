# The source distribution of the pinned apache-tvm-ffi (the version of
# .ci/requirements/tvm_ffi.txt), from PyPI: its tests/python, tests/cpp, include/ and examples/
# are what conformance/tvm_ffi/ runs on tvmrt. Sourced by run.sh and cpp.sh.
#
#   tvm_ffi_sdist      downloads and unpacks it once into .venv/tvm_ffi_suite/ (pip download,
#                      only the package itself as source, its build requirements as wheels) and
#                      prints its directory.

tvm_ffi_sdist() {
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  local version
  version=$(sed -n 's/^apache-tvm-ffi==//p' "$root/.ci/requirements/tvm_ffi.txt")
  local dir="$root/.venv/tvm_ffi_suite/apache_tvm_ffi-$version"
  if [ ! -d "$dir/tests/cpp" ]; then
    local py
    py=$(venv_python tvm_ffi) || return 1
    mkdir -p "$root/.venv/tvm_ffi_suite"
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps \
      --no-binary apache-tvm-ffi "apache-tvm-ffi==$version" -d "$root/.venv/tvm_ffi_suite" >&2 ||
      return 1
    tar -xzf "$root/.venv/tvm_ffi_suite/apache_tvm_ffi-$version.tar.gz" \
      -C "$root/.venv/tvm_ffi_suite" || return 1
  fi
  echo "$dir"
}
