#!/usr/bin/env bash
# Checks that include/tvmrt.h declares every function libtvmrt.so exports, and nothing it
# does not (cbindgen skips, with only a log message, an export whose types it cannot express).
#
#   .ci/header_exports.sh [path/to/libtvmrt.so]     (default: target/debug/libtvmrt.so)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LIB=${1:-${CARGO_TARGET_DIR:-target}/debug/libtvmrt.so}
HEADER=include/tvmrt.h
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Exported functions, without Rust's and the toolchain's own symbols.
nm -D --defined-only "$LIB" | awk '$2 == "T" { print $3 }' | grep -v '^_' |
  grep -Ev '^rust_(begin_unwind|eh_personality|panic)' | sort -u >"$tmp/exported"
# Declared functions: a line starting a declaration `type name(`.
grep -E '^[A-Za-z_][A-Za-z0-9_ *]*[ *][A-Za-z_][A-Za-z0-9_]*\(' "$HEADER" |
  sed -E 's/^.*[ *]([A-Za-z_][A-Za-z0-9_]*)\(.*$/\1/' | sort -u >"$tmp/declared"

missing=$(comm -23 "$tmp/exported" "$tmp/declared")
extra=$(comm -13 "$tmp/exported" "$tmp/declared")
status=0
if [ -n "$missing" ]; then
  echo "exported by $LIB but not declared in $HEADER:"
  echo "$missing" | sed 's/^/  /'
  status=1
fi
if [ -n "$extra" ]; then
  echo "declared in $HEADER but not exported by $LIB:"
  echo "$extra" | sed 's/^/  /'
  status=1
fi
[ "$status" = 0 ] && echo "$HEADER declares all $(wc -l <"$tmp/exported") exports of $LIB"
exit "$status"
