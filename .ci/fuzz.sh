#!/usr/bin/env bash
# Bounded fuzzing of tvmrt's input boundaries with cargo-fuzz (libFuzzer + AddressSanitizer).
#
# Usage: .ci/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  defaults to $FUZZ_SECONDS, else 60.
#   TARGET              defaults to every target of fuzz/Cargo.toml.
#
# Needs the nightly toolchain (`rustup toolchain install nightly`) and cargo-fuzz. When nightly
# is missing the script prints a "fuzz: skipped" line and exits 0. When cargo-fuzz is missing it
# runs `cargo install cargo-fuzz --locked` (set FUZZ_NO_INSTALL=1 to skip instead); if that
# fails it also prints "fuzz: skipped" and exits 0.
#
# Each target starts from its committed seed corpus (fuzz/corpus/<target>, read-only here: new
# inputs go to a temporary directory) and runs with libFuzzer limits of 2 GiB RSS and 10 s per
# input. A crash, leak, timeout or OOM leaves its input in fuzz/artifacts/<target>/ and makes
# the script exit 1 after all targets ran. Per target it prints executions and executions per
# second; the last line is "fuzz: N passed, M failed".
set -u
cd "$(dirname "$0")/.."

secs="${1:-${FUZZ_SECONDS:-60}}"
shift $(( $# > 0 ? 1 : 0 ))

if ! command -v rustup >/dev/null 2>&1 || ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz: skipped: no nightly Rust toolchain (install it with: rustup toolchain install nightly)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  if [ "${FUZZ_NO_INSTALL:-0}" = "1" ]; then
    echo "fuzz: skipped: cargo-fuzz is not installed (cargo install cargo-fuzz) and FUZZ_NO_INSTALL=1"
    exit 0
  fi
  echo "fuzz: installing cargo-fuzz"
  if ! cargo install cargo-fuzz --locked >/tmp/tvmrt-cargo-fuzz-install.log 2>&1; then
    echo "fuzz: skipped: cargo install cargo-fuzz failed (log: /tmp/tvmrt-cargo-fuzz-install.log)"
    exit 0
  fi
fi

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/fuzz_targets/*.rs; do
    targets+=("$(basename "$f" .rs)")
  done
fi

echo "fuzz: building ${#targets[@]} targets (nightly, AddressSanitizer)"
if ! cargo +nightly fuzz build >/tmp/tvmrt-fuzz-build.log 2>&1; then
  tail -n 40 /tmp/tvmrt-fuzz-build.log
  echo "fuzz: the fuzz targets do not build"
  echo "fuzz: 0 passed, ${#targets[@]} failed"
  exit 1
fi

bin_dir="fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
work="$(mktemp -d /tmp/tvmrt-fuzz.XXXXXX)"
trap 'rm -rf "$work" /dev/shm/tvmrt-fuzz-npy-* 2>/dev/null' EXIT
passed=0
failed=0
for t in "${targets[@]}"; do
  mkdir -p "$work/$t" "fuzz/artifacts/$t"
  log="$work/$t.log"
  # The binaries built above, run directly: `cargo fuzz run` would rebuild first.
  "$bin_dir/$t" -artifact_prefix="fuzz/artifacts/$t/" "$work/$t" "fuzz/corpus/$t" \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -print_funcs=0 \
    >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n1)
  time_s=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -n1)
  corpus=$(ls "$work/$t" | wc -l)
  execs=${execs:-0}
  time_s=${time_s:-$secs}
  [ "$time_s" -gt 0 ] || time_s=1
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    echo "fuzz $t: ok: $execs execs in ${time_s} s ($((execs / time_s))/s), $corpus new corpus inputs"
  else
    failed=$((failed + 1))
    echo "fuzz $t: FAILED (exit $rc) after $execs execs; artifacts:"
    ls -1 "fuzz/artifacts/$t" | sed 's/^/  /'
    if grep -qE 'ERROR: |panicked at|SUMMARY' "$log"; then
      grep -E 'ERROR: |panicked at|SUMMARY' "$log" | head -n 10 | sed 's/^/  /'
    else
      tail -n 15 "$log" | sed 's/^/  /'
    fi
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
