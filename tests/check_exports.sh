#!/bin/sh
# Checks that a libtvmrt.so exports every function the drop-in headers declare.
#
# Usage: tests/check_exports.sh [path/to/libtvmrt.so] [include-dir]
# Defaults: target/debug/libtvmrt.so and include/ next to this script's parent.
# Collects the name of every `TVM_DLL` / `TVM_FFI_DLL` prototype in include/tvm/**/*.h
# (TVM_FFI_DLL_EXPORT marks symbols a user library provides and is skipped), then looks each
# up among the library's defined dynamic symbols. Exits 1 listing the missing ones.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-"$root/target/debug/libtvmrt.so"}
inc=${2:-"$root/include"}

if [ ! -f "$lib" ]; then
  echo "check_exports: library not found: $lib" >&2
  exit 2
fi
headers=$(find "$inc/tvm" -name '*.h' | sort)
if [ -z "$headers" ]; then
  echo "check_exports: no headers under $inc/tvm" >&2
  exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A prototype starts a line with the export macro and names the function right before its
# first '('; the return type may carry attributes (TVM_FFI_ATTRIBUTE_PURE) and span lines.
# shellcheck disable=SC2086
perl -0777 -ne '
  s{/\*.*?\*/}{}gs;            # drop block comments
  s{//[^\n]*}{}g;              # and line comments
  while (/^[ \t]*(?:TVM_DLL|TVM_FFI_DLL)\b[^(;#{}]*?(\w+)\s*\(/mg) { print "$1\n"; }
' $headers | sort -u > "$tmp/declared"

nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwiV]$/ { print $3 }' | sed 's/@.*//' \
  | sort -u > "$tmp/exported"

missing=$(comm -23 "$tmp/declared" "$tmp/exported")
declared=$(wc -l < "$tmp/declared" | tr -d ' ')
if [ -n "$missing" ]; then
  count=$(printf '%s\n' "$missing" | wc -l | tr -d ' ')
  echo "check_exports: $count of $declared declared functions are not exported by $lib:"
  printf '  %s\n' $missing
  exit 1
fi
echo "check_exports: all $declared declared functions are exported by $lib"
