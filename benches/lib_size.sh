#!/usr/bin/env bash
# The size of the stripped libtvmrt.so, default features and the minimal deployment build
# (BENCHMARKS.md, "Library size"), and what each part of it costs.
#
#   benches/lib_size.sh [--profile release] [--top N]
#
# Builds each feature set (one after the other in cargo's target directory: only tvmrt itself is
# rebuilt between them), strips a copy of the library (`strip`, as a package would ship it,
# kept as target/size-<name>.so) and prints its size and its sections; then
# sums the sizes of the code symbols by owner (tvmrt's modules two levels deep, std, each
# dependency), as `cargo bloat --crates` would (cargo bloat itself refuses a package whose
# library has several crate types: cdylib + staticlib + rlib).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
profile=release
top=25
while [ $# -gt 0 ]; do
  case $1 in
    --profile) profile=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    *) echo "usage: $0 [--profile release] [--top N]" >&2; exit 2 ;;
  esac
done

measure() {
  local name=$1; shift
  local dir=${CARGO_TARGET_DIR:-target}
  cargo build --profile "$profile" --lib --quiet "$@"
  local lib=$dir/$profile/libtvmrt.so out=$dir/size-$name.so
  strip -o "$out" "$lib"
  echo "== $name (cargo build --profile $profile --lib $*): stripped libtvmrt.so $(stat -c %s "$out") bytes"
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

measure default
measure minimal --no-default-features --features vm
