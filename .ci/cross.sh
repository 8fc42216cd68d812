#!/usr/bin/env bash
# Cross builds and tests for the CPUs TVM deploys to: aarch64, armv7 (hard-float) and riscv64.
#
#   .ci/cross.sh [--build-only] [TARGET...]   (default: aarch64-unknown-linux-gnu
#                               armv7-unknown-linux-gnueabihf riscv64gc-unknown-linux-gnu)
#
# --build-only sets up the toolchains and builds what steps 1 to 3 build (the library, the tool,
# the test programs, the C tests), running nothing: .ci/test.sh runs it in the background, at the
# lowest priority, while the host's test suites leave a core idle; the full run then finds those
# builds done.
#
# Toolchains come from Debian's packages only, fetched with apt (verified by its indexes) and
# unpacked into target/cross-toolchain, never installed: rustc-web 1.96 (bookworm-security)
# with its LLVM and the host's standard library, plus libstd-rust-web-dev for each target's
# Debian architecture where that suite has it (arm64, armhf); otherwise the standard library is
# built from rust-web-src with -Zbuild-std (riscv64, which bookworm does not release; armhf
# too when its index cannot be fetched). The cross compilers (gcc/g++-<gnu triple>, also
# handed to build scripts as CC_<triple>/CXX_<triple>) and qemu-user-static are installed with
# apt-get. Then, per target, in target/cross:
#   1. cargo build of the library and the tool (dev profile, no debug info);
#   2. the library's unit tests and the integration tests that do not load the x86-64
#      fixtures of tests/fixtures, under qemu-user (cargo's runner; test programs that compile
#      C at run time get the cross compiler as CC);
#   3. the C tests: CMake with cmake/cross-linux-gnu.cmake, ctest under qemu-user;
#   4. the libraries apache-tvm 0.27 cross-compiled (tests/fixtures/cross: a Relax model with
#      weights and parallel kernels, tvm-ffi kernels) and the classic-ABI kernels
#      (tests/classic_libs, compiled here) run by the cross-built tool, compared with TVM's
#      x86-64 outputs and the x86-64 tool's (tests/fixtures/cross/compare.py);
#   5. the C layouts (tests/layouts): what the target's C compiler gives, against the record
#      the Rust unit tests check;
#   6. (aarch64) `tvmrt rpc-server` under qemu-user, driven by TVM's client, tracker and
#      MetaSchedule from the host (tests/rpc_board/board.py);
#   7. `tvmrt serve --model-repository` under qemu-user, answering tritonclient from the host
#      (tests/serve_board/board.py).
# Keeps going after a failed step; exits non-zero if any failed. Idempotent: downloads,
# unpacked toolchains and builds are reused.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
# shellcheck source=.ci/lib.sh
. .ci/lib.sh

BUILD_ONLY=0
if [ "${1:-}" = --build-only ]; then
  BUILD_ONLY=1
  shift
fi
if [ $# -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf riscv64gc-unknown-linux-gnu)
fi
CACHE=${TVMRT_CROSS_CACHE:-$ROOT/target/cross-toolchain}
export CARGO_TARGET_DIR=${TVMRT_CROSS_TARGET_DIR:-$ROOT/target/cross}
JOBS=${JOBS:-2}
RUST_WEB=1.96
# Debug info makes the test programs three times larger and slower to link; tests need none.
export CARGO_PROFILE_DEV_DEBUG=0
# Every build here starts clean in CI: incremental compilation only adds work.
export CARGO_INCREMENTAL=0

# Per Rust target: GNU triple (compilers, sysroot), Debian architecture, qemu name, tool
# fixture directory.
target_info() {
  case $1 in
  aarch64-unknown-linux-gnu) echo "aarch64-linux-gnu arm64 aarch64 aarch64" ;;
  armv7-unknown-linux-gnueabihf) echo "arm-linux-gnueabihf armhf arm armv7" ;;
  riscv64gc-unknown-linux-gnu) echo "riscv64-linux-gnu riscv64 riscv64 riscv64" ;;
  *) return 1 ;;
  esac
}

for t in "${TARGETS[@]}"; do
  target_info "$t" >/dev/null || { echo "cross.sh: unknown target $t"; exit 2; }
done

# The integration tests that run on other CPUs: the ones that build what they load (classic
# libraries compiled from tests/classic_libs with $CC, libraries packed at run time) or load
# nothing. Not run: those loading the x86-64 libraries of tests/fixtures (module_fixtures,
# vm_models, graph_executor, runtime_random, tensor_kernels, reliability_mutants,
# reliability_bad_input, reliability_stress: step 4 runs cross-compiled equivalents of the
# fixtures through the tool) and those spawning the tool (cli_inspect, cli_run and
# pack_library's command_line_pack: a foreign program cannot be started from one under
# qemu-user without binfmt_misc, which containers lack).
CROSS_TESTS=(module_classic module_capi module_ffi_abi ffi_types ffi_runtime_content
  examplejson_module tensor_capi tensor_dlpack pack_library reliability_regressions)
# Tests that start a child process of this test binary: qemu-user cannot start a foreign
# program without binfmt_misc.
CROSS_SKIP=(a_bare_file_name_is_found_on_the_library_path)

# --- toolchains -------------------------------------------------------------------------

install_host_packages() {
  local want=(qemu-user-static cmake) t gnu
  for t in "${TARGETS[@]}"; do
    read -r gnu _ <<<"$(target_info "$t")"
    want+=("gcc-$gnu" "g++-$gnu")
  done
  local missing=() p
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
}

# apt with its own state under $CACHE/apt/<STATE>: the system's Debian sources, the
# architectures given, nothing installed or changed on the system. One state for the host's
# architecture and one per target architecture, so that an index apt cannot fetch (a mirror
# mid-sync) drops only that architecture, not the whole suite for every one.
APT_DIR=$CACHE/apt
# apt_state TOOL STATE ARCH... -- ARGS: runs apt-get or apt-cache in a private state.
apt_state() {
  local tool=$1 state=$2 arches=()
  shift 2
  while [ "$1" != -- ]; do
    arches+=(-o "APT::Architectures::=$1")
    shift
  done
  shift
  mkdir -p "$APT_DIR/$state/lists/partial" "$APT_DIR/$state/cache/archives/partial"
  "$tool" -o Dir::State::Lists="$APT_DIR/$state/lists" -o Dir::Cache="$APT_DIR/$state/cache" \
    -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$APT_DIR/sources" \
    -o APT::Architecture="$HOST_ARCH" "${arches[@]}" "$@"
}

# Fills $CACHE/root with rustc-web and the standard libraries; writes $CACHE/bin/rustc and
# $CACHE/build-std (the targets whose standard library is built from source).
setup_rust() {
  HOST_ARCH=$(dpkg --print-architecture)
  local stamp t gnu arch f
  stamp="$CACHE/stamp-$RUST_WEB-$(echo "${TARGETS[*]}" | tr ' ' '+')"
  if [ -f "$stamp" ] && [ -x "$CACHE/bin/rustc" ]; then
    echo "toolchain cached in $CACHE"
    return 0
  fi
  mkdir -p "$APT_DIR/sources" "$CACHE/debs" "$CACHE/bin"
  rm -f "$APT_DIR/sources/"*
  local n=0
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -s "$f" ] || continue
    n=$((n + 1))
    cp "$f" "$APT_DIR/sources/$n-$(basename "$f")"
  done
  apt_state apt-get host "$HOST_ARCH" -- update -qq >"$CACHE/apt-update.log" 2>&1 ||
    grep -v '^W:' "$CACHE/apt-update.log"
  local version
  version=$(apt_state apt-cache host "$HOST_ARCH" -- policy rustc-web |
    awk '/Candidate:/ {print $2}')
  case $version in
  "$RUST_WEB".*) ;;
  *)
    echo "cross.sh: rustc-web $RUST_WEB not in the package indexes (candidate: '$version')"
    return 1
    ;;
  esac
  local llvm
  llvm=$(apt_state apt-cache host "$HOST_ARCH" -- show "libstd-rust-web-$RUST_WEB=$version" |
    sed -n 's/^Depends:.*\(libllvm[0-9]*\).*/\1/p' | head -1)
  local pkgs=("rustc-web=$version" "libstd-rust-web-$RUST_WEB=$version"
    "libstd-rust-web-dev=$version" "rust-web-src=$version" "$llvm")
  if ! (cd "$CACHE/debs" && apt_state apt-get host "$HOST_ARCH" -- download "${pkgs[@]}") \
    >"$CACHE/apt-download.log" 2>&1; then
    cat "$CACHE/apt-download.log"
    return 1
  fi
  : >"$CACHE/build-std"
  for t in "${TARGETS[@]}"; do
    read -r gnu arch _ <<<"$(target_info "$t")"
    apt_state apt-get "$arch" "$HOST_ARCH" "$arch" -- update -qq >"$CACHE/apt-update-$arch.log" 2>&1 ||
      grep -v '^W:' "$CACHE/apt-update-$arch.log"
    if apt_state apt-cache "$arch" "$HOST_ARCH" "$arch" -- show "libstd-rust-web-dev:$arch" 2>/dev/null |
      grep -x "Version: $version" >/dev/null &&
      (cd "$CACHE/debs" && apt_state apt-get "$arch" "$HOST_ARCH" "$arch" -- \
        download "libstd-rust-web-dev:$arch=$version") >>"$CACHE/apt-download.log" 2>&1; then
      echo "$t: libstd-rust-web-dev:$arch $version"
    else
      echo "no libstd-rust-web-dev:$arch $version in the indexes: $t builds its std from source"
      echo "$t" >>"$CACHE/build-std"
    fi
  done
  rm -rf "$CACHE/root"
  for f in "$CACHE"/debs/*.deb; do
    dpkg-deb -x "$f" "$CACHE/root" || return 1
  done
  # rustc needs its own libraries (librustc_driver, LLVM) but not on every program's path.
  local multiarch
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")
  cat >"$CACHE/bin/rustc" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$CACHE/root/usr/lib/$multiarch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$CACHE/root/usr/bin/rustc" "\$@"
EOF
  chmod +x "$CACHE/bin/rustc"
  local version_line
  version_line=$("$CACHE/bin/rustc" --version) || return 1
  echo "$version_line"
  rm -f "$CACHE"/stamp-*
  touch "$stamp"
}

# The libraries libllvm needs at run time (installed on most Debian systems already).
install_llvm_deps() {
  local missing=() p
  for p in libz3-4 libedit2 libxml2 libffi8 libzstd1 zlib1g; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
}

run "cross: compilers and qemu-user" install_host_packages
run "cross: libllvm's libraries" install_llvm_deps
run "cross: rustc-web $RUST_WEB and standard libraries" setup_rust
[ ${#failed[@]} -eq 0 ] || { printf 'cross.sh: setup failed: %s\n' "${failed[*]}"; exit 1; }
export RUSTC=$CACHE/bin/rustc

# --- per target ------------------------------------------------------------------------

# Sets the environment cargo needs for target $1 and prints the extra cargo arguments.
target_env() {
  local t=$1 gnu qemu upper lower cc cxx
  read -r gnu _ qemu _ <<<"$(target_info "$t")"
  upper=$(echo "$t" | tr 'a-z-' 'A-Z_')
  lower=${t//-/_}
  # Full paths, as CMake passes them for the C tests: cargo rebuilds what a changed linker or
  # CC_<triple> touches, the standard library included.
  cc=$(command -v "$gnu-gcc") && cxx=$(command -v "$gnu-g++") || return 1
  export "CARGO_TARGET_${upper}_LINKER=$cc"
  export "CC_${lower}=$cc" "CXX_${lower}=$cxx" "AR_${lower}=$gnu-ar"
  # Test programs run under qemu; those compiling C at run time get the target's compilers.
  local runner=$CACHE/bin/run-$t
  cat >"$runner" <<EOF
#!/bin/sh
CC=$gnu-gcc CXX=$gnu-g++ exec qemu-$qemu-static -L /usr/$gnu "\$@"
EOF
  chmod +x "$runner"
  export "CARGO_TARGET_${upper}_RUNNER=$runner"
  if grep -qx "$t" "$CACHE/build-std"; then
    export RUSTC_BOOTSTRAP=1
    CARGO_EXTRA=(-Zbuild-std=std,panic_unwind)
  else
    unset RUSTC_BOOTSTRAP
    CARGO_EXTRA=()
  fi
}

cargo_build() {
  nice .ci/build.sh --quiet --target "$1" "${CARGO_EXTRA[@]}"
}

# `-p tvmrt-cli` beside `-p tvmrt`: the library as the build above has it (.ci/build.sh).
# The thread pool's tests run on their own, one at a time: `idle_workers_sleep` measures the
# process's CPU time, which other tests running beside it inflate (under emulation enough to
# fail), and qemu-user cannot fork a process whose other threads are busy: the child of
# `forked_child_gets_fresh_workers` then hangs now and then (about 1 run in 4 among the other
# thread-pool tests, for an x86-64 build under qemu-x86_64 too, never natively). Alone it hangs
# far less often, but it does (armv7, once in a clean CI run here): a hung run is tried once more.
POOL_TESTS=backend::thread_pool::
FORK_TEST=backend::thread_pool::workers::tests::forked_child_gets_fresh_workers
# cargo_test TARGET ARGS...: `cargo test` of the library and the tool for TARGET.
cargo_test() {
  local t=$1
  shift
  nice cargo test --quiet --target "$t" "${CARGO_EXTRA[@]}" -p tvmrt -p tvmrt-cli --lib "$@"
}

# The test programs steps 2 (all of them: the runs below take subsets) build.
cargo_test_args() {
  local t
  for t in "${CROSS_TESTS[@]}"; do printf '%s\n' --test "$t"; done
}

cargo_tests() {
  local tests=() ok=0
  mapfile -t tests < <(cargo_test_args)
  cargo_test "$1" "${tests[@]}" --no-fail-fast -- --test-threads "$JOBS" --skip "$POOL_TESTS" \
    "${CROSS_SKIP[@]/#/--skip=}" || ok=1
  cargo_test "$1" -- --test-threads 1 "$POOL_TESTS" --skip "$FORK_TEST" || ok=1
  local fork_test=(cargo_test "$1" -- --exact "$FORK_TEST")
  "${fork_test[@]}" || { echo "$FORK_TEST: once more (qemu-user's fork)"; "${fork_test[@]}"; } ||
    ok=1
  return $ok
}

# Builds, runs nothing: what cargo_tests runs.
cargo_tests_build() {
  local tests=()
  mapfile -t tests < <(cargo_test_args)
  cargo_test "$1" "${tests[@]}" --no-run
}

# Configures and builds the C tests of target $1 in $CARGO_TARGET_DIR/cmake-$1.
c_tests_build() {
  local t=$1 dir=$CARGO_TARGET_DIR/cmake-$1
  cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/cross-linux-gnu.cmake" \
    -DTVMRT_TARGET="$t" -DCMAKE_BUILD_TYPE=Release -DTVMRT_CARGO_PROFILE=dev \
    -DTVMRT_CARGO_TARGET_DIR="$CARGO_TARGET_DIR" >/dev/null || return 1
  # The library's own cargo step needs -Zbuild-std where the target has no std package.
  if [ ${#CARGO_EXTRA[@]} -gt 0 ]; then
    export CARGO_UNSTABLE_BUILD_STD=std,panic_unwind
  fi
  local ok=0
  nice cmake --build "$dir" -j "$JOBS" >/dev/null || {
    cmake --build "$dir" -j 1 2>&1 | tail -40
    ok=1
  }
  unset CARGO_UNSTABLE_BUILD_STD
  return $ok
}

c_tests() {
  c_tests_build "$1" || return 1
  (cd "$CARGO_TARGET_DIR/cmake-$1" && ctest --output-on-failure -j "$JOBS" --timeout 300)
}

# Runs the tool built for $1 (or the host's, for x86_64) on the cross fixtures into $OUT/<dir>.
tool_runs() {
  local t=$1 dir=$2 tool=$3 classic=$4
  shift 4
  local fx=$ROOT/tests/fixtures/cross in=$ROOT/tests/fixtures/cross/inputs out=$OUT/$dir
  rm -rf "$out" && mkdir -p "$out"
  local ok=0
  "$@" "$tool" run "$fx/$dir/model.so" main -i "$in/x.npy" --save "$out/model.main" || ok=1
  "$@" "$tool" run "$fx/$dir/kernels.so" add -i "$in/a.npy" -i "$in/b.npy" -o float32:1000 \
    --save "$out/kernels.add" || ok=1
  "$@" "$tool" run "$fx/$dir/kernels.so" matmul_parallel -i "$in/ma.npy" -i "$in/mb.npy" \
    -o float32:64x48 --save "$out/kernels.matmul_parallel" || ok=1
  "$@" "$tool" run "$fx/$dir/kernels.so" scale_int8 -i "$in/i8.npy" -o int8:777 \
    --save "$out/kernels.scale_int8" || ok=1
  # TVM's entry alias: `main` is __tvm_ffi_main, a branch to double_it's PLT entry.
  "$@" "$tool" run "$fx/$dir/single.so" main -i "$in/a.npy" -o float32:1000 \
    --save "$out/single.double_it" || ok=1
  # The classic kernels' results, without the lines naming the library's path.
  {
    "$@" "$tool" run "$classic" add_one -i int:41
    "$@" "$tool" run "$classic" workspace_sum -i int:1000
    "$@" "$tool" run "$classic" greet
  } 2>&1 | grep -v "^$classic" >"$out/classic.txt" || ok=1
  cat "$out/classic.txt"
  return $ok
}

fixture_runs() {
  local t=$1 gnu qemu dir
  read -r gnu _ qemu dir <<<"$(target_info "$t")"
  local classic=$OUT/$dir-classic_kernels.so
  "$gnu-gcc" -shared -fPIC -O1 -o "$classic" tests/classic_libs/classic_kernels.c || return 1
  TVM_NUM_THREADS=4 tool_runs "$t" "$dir" "$CARGO_TARGET_DIR/$t/debug/tvmrt" "$classic" \
    "qemu-$qemu-static" -L "/usr/$gnu"
}

# `tvmrt rpc-server` built for the target, run under qemu-user as on a board: the host
# cross-compiles with apache-tvm 0.27 and reaches it through TVM's tracker with TVM's client
# and MetaSchedule (tests/rpc_board/board.py; issue 48). aarch64 only: about 2 min.
rpc_board() {
  local t=$1 gnu qemu py
  read -r gnu _ qemu _ <<<"$(target_info "$t")"
  py=$(.ci/venv.sh rpc) || return 1
  "$py" tests/rpc_board/board.py --tool "$CARGO_TARGET_DIR/$t/debug/tvmrt" \
    --qemu "qemu-$qemu-static" --sysroot "/usr/$gnu" --gnu "$gnu" --mtriple "$gnu"
}

# `tvmrt serve` built for the target, run under qemu-user as on a board, answering tritonclient
# from the host over HTTP and gRPC with the outputs TVM gave (tests/serve_board/board.py;
# issue 50). About 20 s.
serve_board() {
  local t=$1 gnu qemu dir py
  read -r gnu _ qemu dir <<<"$(target_info "$t")"
  py=$(.ci/venv.sh triton) || return 1
  "$py" tests/serve_board/board.py --tool "$CARGO_TARGET_DIR/$t/debug/tvmrt" --arch "$dir" \
    --qemu "qemu-$qemu-static" --sysroot "/usr/$gnu"
}

# What the CPU's C++ compiler makes of the structures tvmrt shares with C and C++
# (tests/layouts): the record the Rust unit tests compare against must match it.
c_layouts() {
  tests/layouts/record.sh --out "$OUT/layouts" "$1" || return 1
  diff -u "tests/layouts/$1.txt" "$OUT/layouts/$1.txt"
}

if [ "$BUILD_ONLY" = 1 ]; then
  for t in "${TARGETS[@]}"; do
    target_env "$t"
    run "$t: build library and tool" cargo_build "$t"
    run "$t: build the test programs" cargo_tests_build "$t"
    run "$t: build the C tests" c_tests_build "$t"
  done
  [ ${#failed[@]} -eq 0 ] || { printf 'cross.sh: failed: %s\n' "${failed[*]}"; exit 1; }
  exit 0
fi

OUT=$CARGO_TARGET_DIR/fixture-runs
mkdir -p "$OUT"
dirs=(x86_64)
for t in "${TARGETS[@]}"; do
  target_env "$t"
  run "$t: build library and tool" cargo_build "$t"
  run "$t: unit and integration tests under qemu" cargo_tests "$t"
  run "$t: C tests (CMake, ctest under qemu)" c_tests "$t"
  run "$t: TVM-built fixtures and classic kernels through the tool" fixture_runs "$t"
  run "$t: tvmrt serve under qemu answers tritonclient" serve_board "$t"
  run "$t: C/C++ layouts match the record" c_layouts "$(target_info "$t" | cut -d' ' -f4)"
  if [ "$t" = aarch64-unknown-linux-gnu ]; then
    run "$t: rpc-server under qemu: TVM's client, tracker and MetaSchedule" rpc_board "$t"
  fi
  dirs+=("$(target_info "$t" | cut -d' ' -f4)")
done

# The x86-64 reference runs: the host's own tool (as cargo test builds it).
host_runs() (
  unset RUSTC RUSTC_BOOTSTRAP CARGO_PROFILE_DEV_DEBUG
  CARGO_TARGET_DIR="$ROOT/target" .ci/build.sh --quiet || exit 1
  classic=$OUT/x86_64-classic_kernels.so
  cc -shared -fPIC -O1 -o "$classic" tests/classic_libs/classic_kernels.c || exit 1
  TVM_NUM_THREADS=4 tool_runs host x86_64 "$ROOT/target/debug/tvmrt" "$classic"
)
run "x86_64: the same runs with the host's tool" host_runs
run "x86_64: C/C++ layouts match the record" c_layouts x86_64
compare() {
  local py
  py=$(.ci/venv.sh python) || return 1
  "$py" tests/fixtures/cross/compare.py "$OUT" "${dirs[@]}"
}
run "cross: outputs against TVM's on x86-64" compare

if [ ${#failed[@]} -ne 0 ]; then
  printf '\n%d cross step(s) failed:\n' "${#failed[@]}"
  printf '  - %s\n' "${failed[@]}"
  exit 1
fi
printf '\nall cross checks passed\n'
