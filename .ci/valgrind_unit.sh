#!/usr/bin/env bash
# The library's unit tests for its raw-memory code under valgrind memcheck: lent and released
# library pages (mapped), tensors read in place (tensor::serialize), tvm-ffi's dense map layout
# (containers::map), arrays changed in place and hook callbacks (reflection::structural), a
# loaded library's own symbol tables (module::dynsym), and
# the random fillers writing tensors (contrib::random), and value payloads zeroed in full
# (value::tests::payloads). Fails on any memory error.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=$(cargo test --lib --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])')
[ -n "$bin" ] || { echo "valgrind_unit.sh: no unit test binary found"; exit 1; }
valgrind --quiet --error-exitcode=1 --leak-check=no "$bin" --test-threads 1 \
  mapped:: tensor::serialize containers::map reflection::structural contrib::random \
  module::dynsym value::tests::payloads
