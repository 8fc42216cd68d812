#!/usr/bin/env bash
# tvm-ffi's Rust crates (`tvm-ffi` and `tvm-ffi-sys` 0.1.15 from crates.io) run their own test
# suite on tvm-ffi's library and on tvmrt, and the results are compared test by test (issue 33).
#
#   conformance/tvm_ffi_rust/run.sh
#
# As a new user of the crates would: tvm-ffi-sys's build script links `tvm_ffi` (and, for the
# tests, `tvm_ffi_testing`) from the directory `tvm-ffi-config --libdir` prints.
#   reference  the venv .venv/tvm_ffi (apache-tvm-ffi 0.1.15.post2 from PyPI, as released);
#   tvmrt      a directory holding libtvmrt.so, a libtvm_ffi.so link to it and the wheel's
#              libtvm_ffi_testing.so, printed by a tvm-ffi-config of its own.
# The crate's sources come from crates.io by exact version (fetch/Cargo.lock) and are tested
# unchanged (a copy gets an empty [workspace] table so cargo builds it on its own).
#
# libtvmrt.so is $TVMRT_LIBRARY if set, else target/debug/libtvmrt.so (built here with
# .ci/build.sh). Fails if a test passing on libtvm_ffi.so does not pass on tvmrt; prints
# one closing line.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/conformance/tvm_ffi_rust"
cd "$root"
# shellcheck source=../../.ci/venv.sh
source .ci/venv.sh
work="$root/target/tvm_ffi_rust"
mkdir -p "$work"

# The crate as published.
cargo fetch --locked --quiet --manifest-path "$here/fetch/Cargo.toml"
crate_src=$(cargo metadata --locked --format-version 1 --manifest-path "$here/fetch/Cargo.toml" |
  python3 -c 'import json, os, sys
pkgs = json.load(sys.stdin)["packages"]
print(next(os.path.dirname(p["manifest_path"]) for p in pkgs
           if p["name"] == "tvm-ffi" and p["version"] == "0.1.15"))')
rm -rf "$work/crate"
cp -r "$crate_src" "$work/crate"
chmod -R u+w "$work/crate"
printf '\n[workspace]\n' >>"$work/crate/Cargo.toml"

# The reference: the wheel's library directory and tvm-ffi-config.
ref_py=$(venv_python tvm_ffi)
ref_bin=$(dirname "$ref_py")
ref_lib=$("$ref_bin/tvm-ffi-config" --libdir)

# tvmrt's directory.
lib=${TVMRT_LIBRARY:-}
if [ -z "$lib" ]; then
  "$root/.ci/build.sh" --quiet
  lib="$root/target/debug/libtvmrt.so"
fi
tvmrt_lib="$work/tvmrt_lib"
tvmrt_bin="$work/tvmrt_bin"
rm -rf "$tvmrt_lib" "$tvmrt_bin"
mkdir -p "$tvmrt_lib" "$tvmrt_bin"
cp "$(realpath "$lib")" "$tvmrt_lib/libtvmrt.so"
ln -s libtvmrt.so "$tvmrt_lib/libtvm_ffi.so"
cp "$ref_lib/libtvm_ffi_testing.so" "$tvmrt_lib/"
printf '#!/bin/sh\n# tvm-ffi-config for tvmrt: the library directory only.\necho %s\n' \
  "$tvmrt_lib" >"$tvmrt_bin/tvm-ffi-config"
chmod +x "$tvmrt_bin/tvm-ffi-config"

# suite LABEL BIN_DIR LIB_DIR: the crate's `cargo test` with BIN_DIR's tvm-ffi-config first on
# PATH and LIB_DIR on the loader path; writes "ok|FAILED|ignored<TAB><test binary>::<test>"
# lines to $work/LABEL.results (one target directory per label: each links its own library).
suite() {
  local label=$1 bin=$2 libdir=$3
  local log="$work/$label.log"
  (cd "$work/crate" &&
    PATH="$bin:$PATH" LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      CARGO_TARGET_DIR="$work/target-$label" \
      cargo test --locked --no-fail-fast 2>&1) >"$log" || true
  # "Running tests/test_any.rs (...)" / "Doc-tests tvm_ffi" name the binary of the results
  # that follow.
  awk '
    /^ *Running / { bin = $2; next }
    /^ *Doc-tests / { bin = "doc:" $2; next }
    /^test .* \.\.\. (ok|FAILED|ignored)/ {
      name = $0; sub(/^test /, "", name); sub(/ \.\.\. .*/, "", name)
      status = $NF; if ($0 ~ /\.\.\. ignored/) status = "ignored"
      print status "\t" bin "::" name
    }' "$log" | sort >"$work/$label.results"
  if ! [ -s "$work/$label.results" ]; then
    tail -40 "$log" >&2
    echo "run.sh: the suite on $label ran no test (log: $log)" >&2
    return 1
  fi
}

suite reference "$ref_bin" "$ref_lib"
suite tvmrt "$tvmrt_bin" "$tvmrt_lib"

count() { grep -c "^$2	" "$work/$1.results" || true; }
passing() { sed -n 's/^ok\t//p' "$work/$1.results" | sort; }
total=$(wc -l <"$work/reference.results")
ref_pass=$(count reference ok)
tvmrt_pass=$(count tvmrt ok)
# Tests passing on the reference that do not pass on tvmrt (failed, or missing: a crash).
regressions=$(comm -23 <(passing reference) <(passing tvmrt))
if [ -n "$regressions" ]; then
  echo "passing on libtvm_ffi.so, not on tvmrt:"
  echo "$regressions" | sed 's/^/  /'
  grep -E '^(---- |thread .* panicked)' "$work/tvmrt.log" | head -40 || true
  echo "tvm-ffi Rust crates 0.1.15: $tvmrt_pass/$total tests pass on tvmrt, $ref_pass/$total on libtvm_ffi.so: $(echo "$regressions" | wc -l) regression(s)"
  exit 1
fi
echo "tvm-ffi Rust crates 0.1.15: $tvmrt_pass/$total tests pass on tvmrt, $ref_pass/$total on libtvm_ffi.so; every test passing on libtvm_ffi.so passes on tvmrt"
