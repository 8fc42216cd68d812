#!/usr/bin/env bash
# Every check CI runs, in one command: installs cmake (and valgrind) when missing, then
# cargo fmt --check, cargo clippy -D warnings, cargo test, the tvmrt.h checks (drift from the
# sources, every export declared), the CMake build, ctest, the other CPUs under qemu-user
# (.ci/cross.sh), and a bounded fuzz run (every fuzz
# target for FUZZ_SECONDS, 60 by default, under AddressSanitizer). Keeps going after a failed
# step and exits non-zero if any step failed.
#
#   .ci/test.sh            (BUILD_DIR=build, JOBS=2, FUZZ_SECONDS=60 by default)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
HEADER=include/tvmrt.h
# CI builds each crate once: incremental compilation would only add work and disk (several GB in
# target/debug/incremental); .ci/cross.sh sets the same.
export CARGO_INCREMENTAL=0
# Any failure to generate the header is an error here (build.rs only warns by default).
export TVMRT_HEADER_STRICT=1

# step, run (a named step that records its failure in `failed`), apt_install.
# shellcheck source=.ci/lib.sh
. .ci/lib.sh

if ! command -v cmake >/dev/null; then
  step "installing cmake"
  apt_install cmake || failed+=("install cmake")
fi
if ! command -v valgrind >/dev/null; then
  step "installing valgrind"
  apt_install valgrind || echo "valgrind unavailable: the memcheck tests will not be registered"
fi
if ! command -v cc >/dev/null || ! command -v c++ >/dev/null; then
  step "installing a C/C++ compiler"
  apt_install gcc g++ || failed+=("install compilers")
fi
# OpenCL for the device tests (issue 22): the ICD loader and POCL, which runs OpenCL on the CPU.
# No OpenCL headers or link-time library are needed: tvmrt opens libOpenCL.so.1 at run time.
if ! ldconfig -p 2>/dev/null | grep -q 'libOpenCL\.so\.1' ||
  ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; then
  step "installing OpenCL (ocl-icd-libopencl1, pocl-opencl-icd)"
  apt_install ocl-icd-libopencl1 pocl-opencl-icd || failed+=("install OpenCL (POCL)")
fi
# Vulkan for the device tests (issue 34): the loader, Mesa's lavapipe (Vulkan on the CPU), the
# Khronos validation layer (the tests run with it on and require zero errors) and glslang, which
# compiles the test shaders. tvmrt links none of them: it opens libvulkan.so.1 at run time.
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1' ||
  ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 ||
  ! ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1 ||
  ! command -v glslangValidator >/dev/null; then
  step "installing Vulkan (libvulkan1, mesa-vulkan-drivers, vulkan-validationlayers, glslang-tools)"
  apt_install libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslang-tools ||
    failed+=("install Vulkan (lavapipe)")
fi
# POCL caches the kernels it compiles; keep them in target/ (hermetic, reused across steps).
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$PWD/target/pocl-cache}"
if [ ! -f /usr/include/gtest/gtest.h ]; then
  step "installing googletest (tvm-ffi's C++ suite)"
  apt_install libgtest-dev || failed+=("install libgtest-dev")
fi
# The Python package's C extension (python/build_ext.sh) needs the headers of the python3 the
# venvs are made from.
py_include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$py_include/Python.h" ]; then
  step "installing python3-dev"
  apt_install python3-dev || failed+=("install python3-dev")
fi

# The header as the tree has it, before any build regenerates it.
header_before=$(mktemp)
trap 'rm -f "$header_before"' EXIT  # replaced below, once the background builds start
had_header=0
if [ -f "$HEADER" ]; then
  cp "$HEADER" "$header_before"
  had_header=1
fi

# Layers point one way: only src/capi/ may name the C doors (the crates in crates/ see only the public API).
layers_one_way() {
  local up
  up=$(grep -rn 'crate::capi' src --include=*.rs | grep -v '^src/capi/')
  [ -z "$up" ] || { echo "core modules refer up to src/capi/:"; echo "$up"; return 1; }
}
run "layers point one way" layers_one_way
# The registry names no subsystem (src/globals.rs hands their globals in from above); also
# prints the size of the largest import circle (docs/registry.md). Under a second.
run "the registry names no subsystem" \
  python3 .ci/import_graph.py --only function::registry=function,value,error
run "cargo fmt --check" cargo fmt --all -- --check
run "cargo clippy --all-targets -D warnings" cargo clippy --all-targets -- -D warnings
# The minimal deployment build (CPU, Relax VM; no LLM state, graph executor, contrib,
# profiling or device back ends: BENCHMARKS.md sizes it) compiles warning-free, and its unit
# tests (the panic boundary's among them) and every Relax model fixture (tests/vm_models.rs)
# pass: about 2 min. `-p tvmrt` matters: without it
# the workspace's other crates are selected too and turn tvmrt's features back on.
run "minimal features: clippy, unit tests, vm_models, -p tvmrt --no-default-features --features vm" \
  bash -c 'cargo clippy -p tvmrt --lib --no-default-features --features vm -- -D warnings &&
    cargo test -p tvmrt --lib --test vm_models --no-default-features --features vm'
# NVRTC, CUDA's headers and nvfatbin from PyPI (.ci/requirements/cuda.txt, ~95 MB download
# once): the CUDA tests compile TVM's CUDA source with it. No GPU or NVIDIA driver is needed:
# those tests open a test double of the driver (tests/cuda_double/fake_cuda.c).
run "cuda venv (NVRTC from PyPI)" .ci/venv.sh cuda
run "cargo test" cargo test --no-fail-fast
# The steps below build the library and the tool with .ci/build.sh, which must find `cargo test`'s
# build up to date: a feature a dev-dependency alone turns on (or a step building the library
# its own way) would compile the library and everything above it again, step after step.
one_build() {
  local log
  log=$(.ci/build.sh 2>&1) || { echo "$log"; return 1; }
  if grep -E '^ *Compiling ' <<<"$log"; then
    echo "the library and tool as .ci/build.sh builds them differ from cargo test's build"
    return 1
  fi
}
run "one build of the library serves every step" one_build

# Builds that later steps need, started now in the background at the lowest priority (nice 19):
# mdBook for the guide, the other CPUs' library, tool, test programs and C tests (.ci/cross.sh
# --build-only), and the fuzz targets. The host's suites below leave about a core idle (pip,
# servers, one-threaded Python), which these fill: the steps that need them then find them built.
# Two chains, waited for before the cross step and the fuzz step. Their output goes to logs
# printed there; a background build that failed is built again, and reported, by its own step.
# The targets run under qemu-user below (riscv64 passes too: `.ci/cross.sh` with no arguments
# runs all three, but it does not fit CI's budget beside these two).
CROSS_TARGETS=${CROSS_TARGETS:-aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf}
prebuild_dir=$(mktemp -d)
# shellcheck disable=SC2086
setsid nice -n 19 bash -c ".ci/mdbook.sh; .ci/cross.sh --build-only $CROSS_TARGETS" \
  >"$prebuild_dir/cross.log" 2>&1 </dev/null &
prebuild_cross=$!
setsid nice -n 19 env FUZZ_JOBS="$JOBS" .ci/fuzz.sh --build-only \
  >"$prebuild_dir/fuzz.log" 2>&1 </dev/null &
prebuild_fuzz=$!
trap 'rm -rf "$header_before" "$prebuild_dir"; kill -- -"$prebuild_cross" -"$prebuild_fuzz" 2>/dev/null' EXIT
# wait_prebuild PID LOG: waits for a background build and prints the steps it ran.
wait_prebuild() {
  local status=0 start=$SECONDS
  wait "$1" || status=$?
  echo "(waited $((SECONDS - start)) s for it)"
  grep -E '^(ok|FAILED): |^fuzz: ' "$2"
  if [ "$status" != 0 ]; then
    tail -n 30 "$2"
    echo "(the background build ended with exit $status: the step below builds it again)"
  fi
}
# The Vulkan suite (its `cargo test` run above was on lavapipe with push descriptors) twice
# more, with the validation layer on and zero errors required: on lavapipe with push
# descriptors off, and on a second driver, SwiftShader (no push descriptors, no float64/int64:
# .ci/swiftshader.sh takes its library out of Debian's chromium-common). The binaries are built
# by the step above; about 10 s each.
VULKAN_TESTS=(--test vulkan_kernels --test vulkan_device --test vulkan_host --test vulkan_graph
  --test vulkan_tvm_codegen)
run "Vulkan suite on lavapipe, descriptor sets" env TVM_VULKAN_DISABLE_PUSH_DESCRIPTOR=1 \
  TVMRT_TEST_VULKAN_DEVICE=llvmpipe,sets cargo test --no-fail-fast "${VULKAN_TESTS[@]}"
vulkan_swiftshader() {
  local icd
  icd=$(.ci/swiftshader.sh) &&
    VK_ICD_FILENAMES="$icd" TVMRT_TEST_VULKAN_DEVICE=SwiftShader,sets \
      cargo test --no-fail-fast "${VULKAN_TESTS[@]}"
}
run "Vulkan suite on SwiftShader (second driver)" vulkan_swiftshader
# The unit tests of the raw-memory code once more, under valgrind memcheck (about 10 s).
run "unit tests under valgrind" .ci/valgrind_unit.sh
# The Python package loads target/debug/libtvmrt.so, which `cargo test` built (.ci/build.sh is
# a no-op here, and builds it when the step runs alone). In the pinned venv (numpy), every test must run: a skip fails the step. The suite runs twice,
# through the C extension (built first) and through ctypes.
python_tests() { .ci/build.sh --quiet && python/run_tests.sh --no-skips; }
run "python package tests" python_tests
# The wheel, installed in a fresh venv (pinned numpy) and tested from a temporary directory
# with --installed --no-skips, with its C extension and without it (the package must be the
# venv's, the library and the extension the bundled ones).
# Dev profile: `cargo test` and the step above already built it, so this takes 10-25 s on 2
# cores; a release build would add 2 min of CPU (2.5 min wall measured on the shared VM)
# for the same behaviour. README's `python/build_wheel.sh` builds release.
run "python wheel: build, install, test" python/test_wheel.sh
# The classic graph-executor fixtures through the classic C API (ctypes), the same program whose
# outputs on TVM v0.19.0's runtime are recorded in tests/fixtures/graph (about 1 s).
run "graph models: TVM 0.19's outputs" \
  python3 tests/fixtures/graph/record.py --runtime target/debug/libtvmrt.so --check
# The classic graph model on OpenCL (POCL), against what TVM v0.19.0's runtime built with
# USE_OPENCL=ON gave on POCL (tests/fixtures/opencl/graph_cl.expected.json; about 2 s).
run "graph model on OpenCL: TVM 0.19's outputs" \
  python3 tests/fixtures/graph/record.py --runtime target/debug/libtvmrt.so --opencl --check
# tvm-ffi's own Python suite with libtvmrt.so swapped in; fails below the recorded pass count
# (about 45 s on 2 cores, plus about 20 s the first time to build its venv and fetch the sdist).
run "tvm-ffi suite on tvmrt" conformance/tvm_ffi/run.sh --ci
# tvm-ffi's C++ side: its tests/cpp (41 files, each compiled once and linked against
# libtvm_ffi.so and against tvmrt, counts side by side, the structural ones once more under
# memcheck) and its quickstart and python_packaging examples built against tvmrt and as
# prebuilt extensions; fails if anything passing on libtvm_ffi.so fails on tvmrt. About 200 s of
# CPU (150 s of it compiling the suite, in parallel), so about 2.5 min on 2 cores.
run "tvm-ffi C++ suite and examples on tvmrt" conformance/tvm_ffi/cpp.sh -j "$JOBS"
# The language bindings TVM shipped, each running its own suite on tvmrt and compared test by
# test with TVM's runtime (issue 33). tvm-ffi's Rust crates 0.1.15 from crates.io on
# libtvm_ffi.so (PyPI) and on tvmrt: two builds of the crate's tests, about 2.7 min of CPU
# from a clean target/tvm_ffi_rust (8 min wall measured on the shared VM at load 12; 1 min
# when already built).
run "tvm-ffi Rust crates' suite on tvmrt" conformance/tvm_ffi_rust/run.sh
# gotvm (TVM v0.20.0, Go 1.19 from Debian) and tvm4j (TVM v0.20.0, JDK + JUnit 4 from Debian),
# against the results TVM v0.20.0's runtime gave (expected_v0.20.txt): about 20 s each, plus the
# Debian packages the first time.
run "gotvm suite on tvmrt" conformance/gotvm/run.sh
run "tvm4j suite on tvmrt" conformance/tvm4j/run.sh
# ONNX backend cases compiled by TVM 0.27 and run on TVM's and tvmrt's runtimes: a
# deterministic subset of 160 cases (101 s measured on 2 cores, plus 30 s the first time to build
# the venv); fails if a case that passes on TVM fails, crashes or hangs on tvmrt.
run "onnx conformance subset" conformance/onnx/run.sh --subset 150
# `tvmrt serve` on the MLC-LLM fixture with OpenAI's pinned Python client and plain HTTP
# (tests/serve/run.sh): TVM's greedy tokens, streaming, 16 concurrent streams, 64 requests,
# disconnects, bad input, a full queue, echo's prompt logprobs; then lm-evaluation-harness's
# local-completions client on three local tasks, its loglikelihoods and texts TVM's. About
# 30 s with the debug tool already built, plus about 55 s the first time to build the two
# venvs (lm-eval's: 760 MB, no torch).
run "tvmrt serve: OpenAI client and lm-evaluation-harness on the MLC-LLM fixture" tests/serve/run.sh
# `tvmrt rpc-server` with apache-tvm 0.27's unchanged RPC client, tracker and compiler (the
# pinned venv .ci/requirements/rpc.txt; issue 48): uploads, kernels from .so and .tar, a Relax
# model, copies, time_evaluator, errors, timeouts, parallel sessions, the tracker, and a
# correct session after each crash or bad client (tests/rpc/run.sh).
run "tvmrt rpc-server: TVM 0.27's RPC client and tracker" tests/rpc/run.sh

# `tvmrt serve`'s engine on OpenCL with a second implementation, Intel's CPU runtime from PyPI
# (pinned venv; Debian's ICD loader opens it through OCL_ICD_VENDORS, which the test sets):
# greedy tokens of lib_opencl.so equal TVM's, and TVM's merge-state kernel's race on CPU
# devices (crates/serve/tests/opencl_intel.rs). About 40 s on a clean clone, the download of
# the venv's packages included (830 MB in .venv/intel_opencl), the test built. Its own clippy:
# `test = false` keeps it out of `--all-targets` too. `-p tvmrt-cli` beside it: the library as
# every other step builds it (.ci/build.sh).
run "tvmrt serve on OpenCL: Intel's CPU runtime" bash -c \
  ".ci/venv.sh intel_opencl >/dev/null && \
   cargo clippy -p tvmrt-serve -p tvmrt-cli --test opencl_intel -- -D warnings && \
   cargo test -p tvmrt-serve -p tvmrt-cli --test opencl_intel"

header_drift() {
  # Regenerate (strictly: a source cbindgen cannot parse fails here), then compare with what
  # the tree had before any build, and, when the file is tracked, with what git has.
  if ! .ci/build.sh --quiet; then
    echo "could not regenerate $HEADER (see the errors above)"
    return 1
  fi
  if [ "$had_header" = 0 ]; then
    echo "$HEADER was missing; the build generated it: add it to the repository"
    return 1
  fi
  if ! cmp -s "$header_before" "$HEADER"; then
    diff -u "$header_before" "$HEADER" | head -100
    echo "$HEADER was out of date with src/ (now regenerated): commit the new version"
    return 1
  fi
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
    git ls-files --error-unmatch "$HEADER" >/dev/null 2>&1; then
    if ! git diff --exit-code -- "$HEADER"; then
      echo "$HEADER differs from the committed version: commit (or stage) it"
      return 1
    fi
  fi
}
run "tvmrt.h drift check" header_drift
run "tvmrt.h declares every export" .ci/header_exports.sh
# A C program must not load libstdc++ with tvmrt (src/cxx/runtime.c binds it at first use;
# BENCHMARKS.md, "Cold start"): the library records no DT_NEEDED libstdc++ (32-bit Arm aside).
no_libstdcxx() {
  if readelf -d target/debug/libtvmrt.so | grep -q 'NEEDED.*libstdc++'; then
    echo "target/debug/libtvmrt.so needs libstdc++ (DT_NEEDED): see src/cxx/runtime.c"
    return 1
  fi
}
run "libtvmrt.so does not load libstdc++" no_libstdcxx

cmake_build() {
  # The dev-profile library: `cargo build --lib` above already built it, so CI compiles the
  # crate once more at most (README's plain cmake command builds release).
  # The C++ tests (c_tests/cxx) need tvm-ffi's C++ headers: the pinned wheel's.
  local ffi_include
  ffi_include=$("$(.ci/venv.sh tvm_ffi)" -m tvm_ffi.config --includedir) || return 1
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DTVMRT_CARGO_PROFILE="${TVMRT_CARGO_PROFILE:-dev}" \
    -DTVMRT_TVM_FFI_INCLUDE_DIR="$ffi_include" -DTVMRT_REQUIRE_CXX_TESTS=ON || return 1
  # Keep going past a target that fails to compile, so ctest still reports the others.
  local keep_going=-k
  if [ -f "$BUILD_DIR/build.ninja" ]; then keep_going="-k 0"; fi
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR" -j "$JOBS" -- $keep_going
}
run "cmake configure + build" cmake_build
run "ctest" bash -c "cd '$BUILD_DIR' && ctest --output-on-failure -j '$JOBS'"
# The Triton backend (issue 30): crates/triton's libtriton_tvmrt.so (dev profile) in the real
# Triton 2.51 server of the pinned nvidia-pytriton wheel, with tritonclient over HTTP and gRPC
# on 127.0.0.1: outputs equal to direct tvmrt calls, auto-complete, dynamic batching, two
# instances, 16 clients x 200 requests, every bad input (about 10 s once built; the venv, a
# 300 MB download with the server, about 60 s the first time).
run "Triton backend in tritonserver" crates/triton/tests/run.sh
# `tvmrt serve --model-repository` (crates/oip, issue 50) under the same client tests, same
# repository and venv (tritonclient over HTTP binary and JSON and gRPC), and its own: bad
# requests at the protocol level (unknown model, malformed JSON and protobuf, an oversized body,
# a batch over the maximum) each refused alone, load/unload/reload, SIGTERM with requests in
# flight (about 10 s once the tool is built).
run "tvmrt serve (OIP) under the Triton backend's client tests" crates/oip/tests/run.sh
# KServe's own Python SDK (pinned venv .ci/requirements/kserve.txt, 450 MB, about 50 s to build
# the first time) against `tvmrt serve --model-repository`: its v2 REST (JSON and binary) and
# gRPC clients get TVM's recorded outputs; and the KServe runtime manifest
# (docs/kserve/tvmrt-runtime.yaml) validated against KServe's CRD schema (issue 50). About 15 s.
run "KServe's clients and runtime manifest against tvmrt serve" tests/kserve/run.sh
# The guide (docs/): mdBook builds it with no warning, every link and anchor resolves, code
# quoted from tested files equals them, its Python and server examples run (on the library, the
# tool and the venvs the steps above made). About 5 s; 2.7 min more the first time, to build
# mdBook into target/. Its `tvmrt` examples run in `cargo test` (crates/cli/tests/docs_examples.rs).
run "the guide: mdbook build, links, quoted code, Python and server examples" .ci/docs.sh
# The other CPUs (issue 26): aarch64 and 32-bit armv7 built with Debian's rustc-web 1.96 and
# cross gcc, their unit, integration and C tests, TVM-built fixtures and C/C++ layouts run
# under qemu-user (.ci/cross.sh), on the builds the background made. All three CPUs from a clean
# clone, downloads included, took 18.4 min user + 1.5 min sys of CPU (35.7 min wall on the
# shared, loaded 2-core VM); these two are about two thirds of that.
step "the background builds: mdBook, the other CPUs"
wait_prebuild "$prebuild_cross" "$prebuild_dir/cross.log"
# shellcheck disable=SC2086
run "other CPUs under qemu-user (.ci/cross.sh $CROSS_TARGETS)" .ci/cross.sh $CROSS_TARGETS
step "the background build: the fuzz targets"
wait_prebuild "$prebuild_fuzz" "$prebuild_dir/fuzz.log"
run "fuzz (${FUZZ_SECONDS:-60} s per target, AddressSanitizer)" \
  env FUZZ_JOBS="$JOBS" .ci/fuzz.sh "${FUZZ_SECONDS:-60}"

if [ ${#failed[@]} -ne 0 ]; then
  printf '\n%d step(s) failed:\n' "${#failed[@]}"
  printf '  - %s\n' "${failed[@]}"
  exit 1
fi
printf '\nall checks passed\n'
