#!/usr/bin/env bash
# The guide (docs/): builds it as a book with mdBook and checks it as a reader follows it
# (.ci/docs_check.py: every link and anchor of the Markdown and of the book, code quoted from
# tested files still equal to them, the guide's Python examples run, and its examples that need
# a server run against `tvmrt serve` on the fixtures, or against `tvmrt rpc-server` registered to
# TVM's tracker). The `tvmrt` examples run in `cargo test` (crates/cli/tests/docs_examples.rs).
#
# mdBook is installed once per machine by .ci/mdbook.sh (about 2.7 min of building on 2 cores, the
# first time only; CI's test.sh starts it in the background early); then this takes about 20 s. The examples need what `cargo test` builds
# (target/debug/libtvmrt.so and tvmrt), the venvs .venv/python, .venv/serve (OpenAI's client),
# .venv/triton (tritonclient), .venv/rpc (apache-tvm's RPC client and tracker) and, for
# tvm-ffi's package on tvmrt, .venv/tvm_ffi_tvmrt, which
# conformance/tvm_ffi/run.sh makes, and `cc` (the CUDA driver's test double, which a CUDA example
# runs on): CI runs this after those steps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mdbook=$(.ci/mdbook.sh)
.ci/venv.sh python >/dev/null
.ci/venv.sh serve >/dev/null
.ci/venv.sh triton >/dev/null
.ci/venv.sh rpc >/dev/null
# tvm-ffi's source release (unpacked once under .venv/; conformance/tvm_ffi/cpp.sh builds and
# runs its quickstart on tvmrt): the C++ page quotes that example from it.
# shellcheck source=venv.sh
source .ci/venv.sh
# shellcheck source=../conformance/tvm_ffi/sdist.sh
source conformance/tvm_ffi/sdist.sh
tvm_ffi_sdist >/dev/null
# mdBook reports what it could not render (unclosed HTML, a missing page) as warnings.
log=$("$mdbook" build docs 2>&1) || { echo "$log"; exit 1; }
if grep -E 'WARN|ERROR' <<<"$log"; then
  echo "mdbook build docs: warnings (above)"
  exit 1
fi
python3 .ci/docs_check.py --book target/book --run-python --run-servers
