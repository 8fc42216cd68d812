#!/usr/bin/env bash
# The library's unit tests for its raw-memory code under valgrind memcheck: lent and released
# library pages (mapped), tensors read in place (tensor::serialize), tvm-ffi's dense map layout
# and values and items changed in place (containers::map, containers::array), arrays changed in
# place and hook callbacks (reflection::structural), a loaded library's own symbol tables
# (module::dynsym), objects with a vtable pointer and weak references (object::tests), modules'
# C++-visible slots (module::tests), the native key hooks (containers::key), the classic door's
# values (rewritten bool descriptors and tensor views, value::classic, graph::params), the random
# fillers writing tensors (contrib::random), the device layer (device::: host allocation, zeroed
# blocks, payload and launch parsing, the CUDA code readers and block table; the OpenCL and CUDA
# calls themselves run under valgrind in ctest's memcheck_opencl and memcheck_cuda), and the LLM
# state's mapped weight shards, int32 uploads and staged auxiliary arrays (llm::), and value
# payloads zeroed in full (value::tests::payloads). Fails on any memory error.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# -p tvmrt-cli: the library as every other build has it (.ci/build.sh says why).
bin=$(cargo test -p tvmrt -p tvmrt-cli --lib --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])')
[ -n "$bin" ] || { echo "valgrind_unit.sh: no unit test binary found"; exit 1; }
# ld.so's over-read of POCL's $ORIGIN rpaths when a test opens OpenCL is not tvmrt's: the
# suppressions of ctest's memcheck_opencl (c_tests/pocl.supp) apply here too.
valgrind --quiet --error-exitcode=1 --leak-check=no --suppressions=c_tests/pocl.supp "$bin" --test-threads 1 \
  mapped:: tensor::serialize containers::map reflection::structural contrib::random \
  module::dynsym object::tests containers::array containers::key module::tests device:: llm:: \
  value::classic graph::params value::tests::payloads rpc::
