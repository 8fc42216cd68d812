#!/usr/bin/env bash
# Bounded fuzzing of tvmrt's input boundaries: libFuzzer + AddressSanitizer/LeakSanitizer, built
# with the machine's one (stable) Rust toolchain; no nightly and no cargo-fuzz needed.
#
# Usage: .ci/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#        .ci/fuzz.sh --build-only [TARGET...]   (builds the targets, fuzzes nothing)
#   SECONDS_PER_TARGET  defaults to $FUZZ_SECONDS, else 60.
#   TARGET              defaults to every target in fuzz/fuzz_targets/.
# Environment:
#   FUZZ_JOBS       targets fuzzed at once (default 2, one per core of a CI machine)
#   FUZZ_SANITIZER  address (default) or none (coverage only, faster to build and run)
#   FUZZ_TARGET_DIR build directory (default fuzz/target)
#
# The build is what `cargo fuzz build` does, spelled out: libfuzzer-sys links libFuzzer in,
# rustc's SanitizerCoverage pass feeds it, `--cfg fuzzing` is set, debug assertions and overflow
# checks are on. `-Zsanitizer=address` is the one flag stable rustc gates: the stable toolchain
# ships the sanitizer runtimes (lib/rustlib/<host>/lib/librustc-stable_rt.asan.a), so
# RUSTC_BOOTSTRAP=1 is set for this one build only, to unlock that flag. CI machines can fetch
# no toolchain but the one they have. RUSTFLAGS apply to the target only (`--target <host>`),
# so build scripts and proc macros build plainly.
#
# Each target starts from its committed seed corpus (fuzz/corpus/<target>, read-only here: new
# inputs go to a temporary directory) and runs with libFuzzer limits of 2 GiB RSS and 10 s per
# input. A crash, leak, timeout or OOM leaves its input in fuzz/artifacts/<target>/ and makes
# the script exit 1 after all targets ran. Per target it prints executions and executions per
# second; the last line is "fuzz: N passed, M failed".
set -u
cd "$(dirname "$0")/.."

build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
  secs=0
else
  secs="${1:-${FUZZ_SECONDS:-60}}"
  shift $(( $# > 0 ? 1 : 0 ))
fi
jobs="${FUZZ_JOBS:-2}"
sanitizer="${FUZZ_SANITIZER:-address}"
target_dir="${FUZZ_TARGET_DIR:-$PWD/fuzz/target}"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/fuzz_targets/*.rs; do
    targets+=("$(basename "$f" .rs)")
  done
fi

host="$(rustc -vV | sed -n 's/^host: //p')"
flags="--cfg fuzzing -Cdebug-assertions -Coverflow-checks -Cforce-frame-pointers"
flags+=" -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
flags+=" -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares"
case "$sanitizer" in
  address) flags+=" -Zsanitizer=address" ;;
  none) ;;
  *)
    echo "fuzz: FUZZ_SANITIZER must be address or none, not '$sanitizer'"
    exit 2
    ;;
esac

echo "fuzz: building ${#targets[@]} targets (libFuzzer, sanitizer: $sanitizer, $(rustc -V))"
build_log="$(mktemp /tmp/tvmrt-fuzz-build.XXXXXX.log)"
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
if ! (cd fuzz && RUSTC_BOOTSTRAP=1 RUSTFLAGS="$flags" cargo build --release --locked \
  --target "$host" --target-dir "$target_dir" "${bins[@]}") >"$build_log" 2>&1; then
  tail -n 40 "$build_log"
  echo "fuzz: the fuzz targets do not build (log: $build_log)"
  echo "fuzz: 0 passed, ${#targets[@]} failed"
  exit 1
fi
rm -f "$build_log"
if [ "$build_only" = 1 ]; then
  echo "fuzz: ${#targets[@]} targets built"
  exit 0
fi
bin_dir="$target_dir/$host/release"

work="$(mktemp -d /tmp/tvmrt-fuzz.XXXXXX)"
trap 'rm -rf "$work" /dev/shm/tvmrt-fuzz-npy-* 2>/dev/null' EXIT

# fuzz_one TARGET: runs one target for $secs seconds; its exit code goes to $work/TARGET.rc.
fuzz_one() {
  local t=$1
  mkdir -p "$work/$t" "fuzz/artifacts/$t"
  # LeakSanitizer reports at exit; libFuzzer's -detect_leaks also checks every new input.
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:abort_on_error=0" \
    "$bin_dir/$t" -artifact_prefix="fuzz/artifacts/$t/" "$work/$t" "fuzz/corpus/$t" \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -print_funcs=0 >"$work/$t.log" 2>&1
  echo $? >"$work/$t.rc"
}

# report TARGET: prints the target's line; returns its exit code.
report() {
  local t=$1 log="$work/$1.log" rc
  rc=$(cat "$work/$t.rc")
  local execs time_s corpus
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n1)
  time_s=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -n1)
  corpus=$(find "$work/$t" -type f | wc -l)
  execs=${execs:-0}
  time_s=${time_s:-$secs}
  [ "$time_s" -gt 0 ] || time_s=1
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $t: ok: $execs execs in ${time_s} s ($((execs / time_s))/s), $corpus new corpus inputs"
    return 0
  fi
  echo "fuzz $t: FAILED (exit $rc) after $execs execs; artifacts:"
  ls -1 "fuzz/artifacts/$t" | sed 's/^/  /'
  if grep -qE 'ERROR: |panicked at|SUMMARY' "$log"; then
    grep -E 'ERROR: |panicked at|SUMMARY' "$log" | head -n 10 | sed 's/^/  /'
  else
    tail -n 15 "$log" | sed 's/^/  /'
  fi
  return 1
}

echo "fuzz: ${#targets[@]} targets, $secs s each, $jobs at a time"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

passed=0
failed=0
for t in "${targets[@]}"; do
  if report "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
