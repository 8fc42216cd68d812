#!/usr/bin/env bash
# The library (libtvmrt.so, libtvmrt.a) and the `tvmrt` tool, in one cargo build:
#
#   .ci/build.sh [cargo build options: --quiet, --profile P, --target T, -p tvmrt-triton...]
#
# Every script and CI step that needs the library builds it this way (CMakeLists.txt likewise).
# cargo resolves the features of the library's dependencies from the packages a command names:
# `cargo build -p tvmrt --lib` alone gets fewer than the workspace's `cargo test` (the tool's
# dependencies turn on more of serde's, flate2's, syn's...), and the library's artifacts have
# one name whatever the features, so each switch between the two compiled the library and
# everything above it again, minutes each time, several times per CI run. Naming the tool's
# package too gives every build the workspace's set: after `cargo test` this is a no-op.
# (Test runs name it likewise: `cargo test -p tvmrt -p tvmrt-cli --lib ...`.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec cargo build -p tvmrt --lib -p tvmrt-cli --bin tvmrt "$@"
