#!/usr/bin/env bash
# tvm4j, TVM v0.20.0's Java binding (jvm/, kept unchanged here: SOURCE), runs its own JUnit
# suite on tvmrt, compared test by test with what the same suite gave on TVM v0.20.0's runtime
# (expected_v0.20.txt) (issue 33).
#
#   conformance/tvm4j/run.sh                       the suite on tvmrt, checked
#   conformance/tvm4j/run.sh --record TVM_SOURCE   the suite on TVM's runtime, from a TVM
#                                                  v0.20.0 source tree with its dmlc-core and
#                                                  dlpack submodules: rewrites the expectations
#
# Maven Central is not reachable here, so the build does by hand what jvm/'s poms do: javac
# compiles core/ and writes the JNI header (-h), g++ builds libtvm4j.so from native/, and
# Debian's JUnit 4 runs the test classes through org.junit.runner.JUnitCore. Against tvmrt the
# JNI source compiles with tvmrt's TVM C headers plus two small headers of ours (shim/: CHECK
# and LOG(FATAL), dmlc::ThreadLocalStore). tvm4j dlopens the runtime named by -Dlibtvm.so.path
# (RTLD_LAZY | RTLD_GLOBAL): libtvmrt.so here; on record, TVM's runtime as its deployment guide
# builds it from one file (golang/src/tvm_runtime_pack.cc of the same release, compiled into
# a shared library). ModuleTest loads add_cpu.so, TVM's `myadd`: made here from
# conformance/common/myadd.c. Its CUDA test fails without a GPU; the expectations hold
# whatever TVM's runtime gave.
#
# RPCTest's two tests (test_addone, test_strcat) start tvm4j's own Java server (its server
# processor calls `rpc.ServerLoop` with Java send/receive functions), connect to it with
# `rpc.Connect` in the same process, and call a Java global through the session. On TVM
# v0.20.0's runtime pack they skip themselves (`Module.enabled("rpc")` is false: the pack
# leaves RPC out), so they are recorded as passing; with RPC built in, TVM v0.20.0 fails them,
# because tvm4j's client passes 3 arguments to `rpc.Connect`, which reads 4. On tvmrt they run
# (tvmrt's client takes the missing `enable_logging` as false): tvmrt is both the client and
# the server there. The Java server prints "Connection from" per session; the closing line
# counts them, and with the default build (RPC on) fewer than 2 fails the run. The proxy test
# is @Ignore'd upstream. Then tvmrt's own tvm4j test (tvmrt_tests/RemoteTensorTest.java, run
# apart, must pass): NDArrays on an RPCSession's device, filled, passed to myadd of a library
# uploaded to tvm4j's Java server, and read back (issue 48).
#
# Toolchain from Debian (installed when missing): a JDK (default-jdk-headless), junit4,
# libhamcrest-java and libslf4j-java. libtvmrt.so is $TVMRT_LIBRARY if set, else
# target/debug/libtvmrt.so. Fails if a test that passed on TVM's runtime does not pass on
# tvmrt; prints one closing line.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/conformance/tvm4j"
jvm="$here/jvm"
expected="$here/expected_v0.20.txt"
cd "$root"
# shellcheck source=../../.ci/lib.sh
. .ci/lib.sh

record=""
if [ "${1:-}" = "--record" ]; then
  record=$(cd "$2" && pwd)
fi

missing=()
command -v javac >/dev/null || missing+=(default-jdk-headless)
[ -f /usr/share/java/junit4.jar ] || missing+=(junit4)
[ -f /usr/share/java/hamcrest-core.jar ] || missing+=(libhamcrest-java)
[ -f /usr/share/java/slf4j-api.jar ] || missing+=(libslf4j-java)
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
fi
java_home=$(dirname "$(dirname "$(realpath "$(command -v javac)")")")
java_bin="$java_home/bin/java"

work="$root/target/tvm4j"
rm -rf "$work"
mkdir -p "$work/classes" "$work/test-classes" "$work/generated" "$work/native" "$work/testdir"
jars=/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar:/usr/share/java/slf4j-api.jar

# core/: the classes, and the JNI header the native source includes under another name (the
# pom's antrun step copies org_apache_tvm_LibInfo.h to org_apache_tvm_native_c_api.h).
find "$jvm/core/src/main/java" -name '*.java' >"$work/main-sources.txt"
javac -nowarn -encoding UTF-8 -d "$work/classes" -h "$work/generated" @"$work/main-sources.txt" \
  2>"$work/javac.log" || { cat "$work/javac.log" >&2; exit 1; }
cp "$work/generated/org_apache_tvm_LibInfo.h" "$work/generated/org_apache_tvm_native_c_api.h"
find "$jvm/core/src/test/java" -name '*.java' >"$work/test-sources.txt"
javac -nowarn -encoding UTF-8 -d "$work/test-classes" -cp "$work/classes:$jars" \
  @"$work/test-sources.txt" 2>>"$work/javac.log" || { cat "$work/javac.log" >&2; exit 1; }

# native/: libtvm4j.so (no runtime linked: it dlopens one).
if [ -n "$record" ]; then
  includes=(-I"$record/include" -I"$record/3rdparty/dmlc-core/include"
    -I"$record/3rdparty/dlpack/include" -DDMLC_USE_LOGGING_LIBRARY="<tvm/runtime/logging.h>"
    -DTVM_USE_LIBBACKTRACE=0)
else
  includes=(-I"$root/include" -I"$here/shim")
fi
g++ -std=c++17 -O2 -shared -fPIC -o "$work/native/libtvm4j.so" \
  -I"$work/generated" -I"$java_home/include" -I"$java_home/include/linux" "${includes[@]}" \
  "$jvm/native/src/main/native/org_apache_tvm_native_c_api.cc"

if [ -n "$record" ]; then
  # TVM v0.20.0's runtime: the release's runtime pack, as a shared library.
  runtime="$work/libtvm_runtime.so"
  g++ -std=c++17 -O2 -shared -fPIC -o "$runtime" -I"$record" "${includes[@]}" \
    "$record/golang/src/tvm_runtime_pack.cc" -ldl -lm -lpthread
  label="TVM v0.20.0's runtime"
else
  runtime=${TVMRT_LIBRARY:-}
  if [ -z "$runtime" ]; then
    "$root/.ci/build.sh" --quiet
    runtime="$root/target/debug/libtvmrt.so"
  fi
  runtime=$(realpath "$runtime")
  label="tvmrt"
fi
cc -shared -fPIC -O2 -o "$work/testdir/add_cpu.so" "$root/conformance/common/myadd.c"

# The suite: every test class, through JUnit 4's text runner. A listener-free way to get each
# test's result: JUnitCore prints failures by name; the tests are listed from the classes.
classes=$(cd "$work/test-classes" && find . -name '*Test.class' | sed 's|^\./||; s|\.class$||; s|/|.|g' | sort)
log="$work/junit.log"
# Bounded: a hang fails the step instead of stalling CI.
timeout 300 "$java_bin" -cp "$work/test-classes:$work/classes:$jars" \
  -Djava.library.path="$work/native" -Dlibtvm.so.path="$runtime" \
  -Dtest.tempdir="$work/testdir" -Dslf4j.internal.verbosity=WARN \
  org.junit.runner.JUnitCore $classes >"$log" 2>&1 || true

# Each test method: FAIL when JUnitCore reports "N) method(class)", IGNORED when @Ignore'd,
# PASS otherwise; the run must have ended with JUnit's summary line.
if ! grep -qE '^(OK \(|Tests run: )' "$log"; then
  tail -40 "$log" >&2
  echo "tvm4j (TVM v0.20.0): the suite did not finish on $label (log: $log)"
  exit 1
fi
results="$work/results.txt"
for cls in $classes; do
  src="$jvm/core/src/test/java/${cls//.//}.java"
  # @Test methods, and which are @Ignore'd (the annotation lines just above the method).
  awk -v cls="$cls" '
    /@Ignore/ { ignored = 1 }
    /@Test/ { test = 1 }
    /public void [A-Za-z0-9_]+\(/ {
      if (test) {
        name = $0; sub(/.*public void /, "", name); sub(/\(.*/, "", name)
        print cls "." name (ignored ? " IGNORED" : "")
      }
      test = 0; ignored = 0
    }' "$src"
done | while read -r test flag; do
  method=${test##*.}
  cls=${test%.*}
  if [ "${flag:-}" = IGNORED ]; then
    echo "$test IGNORED"
  elif grep -qE "^[0-9]+\) $method\($cls\)" "$log"; then
    echo "$test FAIL"
  else
    echo "$test PASS"
  fi
done | sort >"$results"
total=$(wc -l <"$results")
passes=$(grep -c ' PASS$' "$results" || true)
junit_line=$(grep -E '^(OK \(|Tests run: )' "$log" | tail -1)

if [ -n "$record" ]; then
  {
    echo "# tvm4j's tests (TVM v0.20.0 jvm/) on TVM v0.20.0's runtime (tvm_runtime_pack.cc built"
    echo "# from source as a shared library), recorded by: conformance/tvm4j/run.sh --record TVM_SOURCE"
    echo "# JUnit: $junit_line"
    cat "$results"
  } >"$expected"
  echo "tvm4j (TVM v0.20.0): $passes/$total tests pass on $label; recorded in $expected"
  exit 0
fi

want_pass=$(sed -n '/^#/d; s/ PASS$//p' "$expected" | sort)
regressions=$(comm -23 <(echo "$want_pass") <(sed -n 's/ PASS$//p' "$results"))
ref_passes=$(echo "$want_pass" | grep -c . || true)
ref_total=$(sed '/^#/d' "$expected" | wc -l)
if [ -n "$regressions" ]; then
  echo "passing on TVM v0.20.0's runtime, not on tvmrt:"
  echo "$regressions" | sed 's/^/  /'
  grep -A6 -E '^[0-9]+\) ' "$log" | head -60 || true
  echo "tvm4j (TVM v0.20.0): $passes/$total tests pass on tvmrt, $ref_passes/$ref_total on TVM v0.20.0's runtime: $(echo "$regressions" | wc -l) regression(s)"
  exit 1
fi
# RPCTest: did its tests run (a session each on tvm4j's Java server), or skip themselves?
rpc_sessions=$(grep -c 'Connection from /127\.0\.0\.1' "$log" || true)
if [ "$rpc_sessions" -ge 2 ]; then
  rpc_note="RPCTest ran: $rpc_sessions sessions from tvmrt's rpc.Connect to tvm4j's Java server on tvmrt's rpc.ServerLoop"
else
  rpc_note="RPCTest skipped itself (Module.enabled(\"rpc\") false: a build without the rpc feature)"
  if [ -z "${TVMRT_LIBRARY:-}" ]; then
    echo "tvm4j (TVM v0.20.0): RPCTest did not run on tvmrt's default build, which has RPC (log: $log)"
    exit 1
  fi
fi
# tvmrt's own tvm4j test (tvmrt_tests/, not tvm4j's): NDArrays on an RPCSession's device,
# through tvm4j's Java server, as a tvm4j user tunes on a board (issue 48). With RPC only.
if [ "$rpc_sessions" -ge 2 ]; then
  mkdir -p "$work/tvmrt-test-classes"
  javac -nowarn -encoding UTF-8 -d "$work/tvmrt-test-classes" \
    -cp "$work/test-classes:$work/classes:$jars" \
    "$here/tvmrt_tests/org/apache/tvm/rpc/RemoteTensorTest.java" 2>>"$work/javac.log" ||
    { cat "$work/javac.log" >&2; exit 1; }
  own_log="$work/junit-tvmrt.log"
  timeout 120 "$java_bin" -cp "$work/tvmrt-test-classes:$work/test-classes:$work/classes:$jars" \
    -Djava.library.path="$work/native" -Dlibtvm.so.path="$runtime" \
    -Dtest.tempdir="$work/testdir" -Dslf4j.internal.verbosity=WARN \
    org.junit.runner.JUnitCore org.apache.tvm.rpc.RemoteTensorTest >"$own_log" 2>&1 || {
    tail -40 "$own_log" >&2
    echo "tvm4j: tvmrt's RemoteTensorTest failed (log: $own_log)"
    exit 1
  }
  rpc_note="$rpc_note; tvmrt's RemoteTensorTest passed (NDArrays on the session's device)"
fi
echo "tvm4j (TVM v0.20.0): $passes/$total tests pass on tvmrt, $ref_passes/$ref_total on TVM v0.20.0's runtime; every test passing there passes on tvmrt; $rpc_note ($junit_line)"
