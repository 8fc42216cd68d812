#!/usr/bin/env bash
# The size of the stripped libtvmrt.so, default features and the minimal deployment build
# (BENCHMARKS.md, "Library size"), and what each part of it costs.
#
#   benches/lib_size.sh [--profile release] [--top N] [--build-std [--relr]]
#
# Builds each feature set (one after the other in cargo's target directory: only tvmrt itself is
# rebuilt between them), strips a copy of the library (`strip`, as a package would ship it,
# kept as target/size-<name>.so) and prints its size and its sections; then
# sums the sizes of the code symbols by owner (tvmrt's modules two levels deep, std, each
# dependency), as `cargo bloat --crates` would (cargo bloat itself refuses a package whose
# library has several crate types: cdylib + staticlib + rlib).
#
# --build-std adds the smallest deployment build (README, "Smaller builds"): the minimal
# features, profile release-small, and the standard library rebuilt by a pinned nightly
# (`-Z build-std`) without its backtrace symbolizer (std's `backtrace` feature: a panic message
# still reaches the C boundary, a backtrace prints addresses only) and with `optimize_for_size`.
# It installs that toolchain with rust-src through rustup if missing, builds into
# target/build-std, and checks the build: the library's unit tests (the panic boundary's among
# them) and every Relax model fixture (tests/vm_models.rs) run on the same std and profile.
#
# --relr links that build with packed relative relocations (`-z pack-relative-relocs`, DT_RELR):
# its dynamic relocations, a pointer's address each, shrink to a bitmap. Only a loader that
# reads DT_RELR loads it (glibc 2.36 and later): an option for a deployment that knows its
# loader, not the default. The tests then run linked the same way, and c_tests/vm_models.c runs
# against that library itself.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
profile=release
top=25
build_std=0
relr=0
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    --build-std) build_std=1; shift ;;
    --relr) relr=1; shift ;;
    *) echo "usage: $0 [--profile release] [--top N] [--build-std [--relr]]" >&2; exit 2 ;;
  esac
done

measure() {
  local name=$1; shift
  local dir=${CARGO_TARGET_DIR:-target}
  # -p tvmrt: the workspace's other crates would otherwise be selected too, and their
  # dependency on tvmrt would turn its features back on.
  cargo build --profile "$profile" -p tvmrt --lib --quiet "$@"
  report "$name" "$dir/$profile/libtvmrt.so" "cargo build --profile $profile -p tvmrt --lib $*"
}

# report NAME LIB COMMAND: the stripped size of LIB, its sections, its code by owner.
report() {
  local name=$1 lib=$2 command=$3
  local out=${CARGO_TARGET_DIR:-target}/size-$name.so
  strip -o "$out" "$lib"
  echo "== $name ($command): stripped libtvmrt.so $(stat -c %s "$out") bytes"
  size -A "$out" | awk '$2 > 4096 && $1 ~ /^\./ { printf "   %-20s %9d\n", $1, $2 }'
  nm -S --size-sort -C "$lib" | python3 -c '
import collections, re, sys
top = int(sys.argv[1])
by = collections.Counter()
total = 0
for line in sys.stdin:
    p = line.split(None, 3)
    if len(p) < 4 or p[2] not in "tTwW":
        continue
    size, name = int(p[1], 16), p[3].strip()
    total += size
    m = re.match(r"[<&*]*(?:impl )?([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)", name)
    segs = (m.group(1) if m else name).split("::")
    if segs[0] == "tvmrt":
        key = "::".join(segs[:3] if len(segs) > 3 else segs[:2])
    elif len(segs) > 1:
        key = segs[0]
    else:
        key = "(C exports and other unqualified symbols)"
    by[key] += size
print(f"   code symbols: {total} bytes; by owner:")
for k, v in by.most_common(top):
    print(f"   {v:9d} {100 * v / total:5.1f}%  {k}")
' "$top"
}

if [[ $relr == 1 && $build_std == 0 ]]; then
  echo "$0: --relr applies to the --build-std build" >&2
  exit 2
fi
measure default
measure minimal --no-default-features --features vm

if [[ $build_std == 1 ]]; then
  nightly=${TVMRT_NIGHTLY:-nightly-2026-05-19}
  if ! rustup component list --toolchain "$nightly" --installed 2>/dev/null | grep -q '^rust-src'; then
    rustup toolchain install "$nightly" --profile minimal --component rust-src
  fi
  host=$(rustc -vV | sed -n 's/^host: //p')
  dir=${CARGO_TARGET_DIR:-target}/build-std
  name=deploy
  if [[ $relr == 1 ]]; then
    # Its own target directory: the flag rebuilds std too.
    export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C link-arg=-Wl,-z,pack-relative-relocs"
    dir=$dir-relr
    name=deploy-relr
  fi
  zflags=(-Z build-std=std,panic_unwind,test -Z build-std-features=panic-unwind,optimize_for_size)
  args=(--target "$host" --profile release-small -p tvmrt --no-default-features --features vm)
  CARGO_TARGET_DIR=$dir cargo +"$nightly" build "${zflags[@]}" "${args[@]}" --lib --quiet
  lib=$dir/$host/release-small/libtvmrt.so
  report "$name" "$lib" "${RUSTFLAGS:+RUSTFLAGS='$RUSTFLAGS' }cargo +$nightly build ${zflags[*]} ${args[*]} --lib"
  echo "== $name: its unit tests and tests/vm_models.rs on the same std and profile"
  CARGO_TARGET_DIR=$dir cargo +"$nightly" test "${zflags[@]}" "${args[@]}" --lib --test vm_models \
    --quiet 2>&1 | grep -E '^test result|FAILED|panicked|^error'
  if [[ $relr == 1 ]]; then
    echo "== $name: c_tests/vm_models.c against the stripped library"
    bin=$(mktemp -d)
    cp "${CARGO_TARGET_DIR:-target}/size-$name.so" "$bin/libtvmrt.so"
    cc -O2 -I include -I c_tests -o "$bin/vm_models" c_tests/vm_models.c -L "$bin" -ltvmrt -ldl \
      -Wl,-rpath,"$bin"
    readelf -d "$bin/libtvmrt.so" | grep -q '(RELR)'
    "$bin/vm_models" tests/fixtures
    rm -rf "$bin"
  fi
fi
