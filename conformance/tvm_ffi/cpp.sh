#!/usr/bin/env bash
# tvm-ffi's C++ side on tvmrt (issue 25): the C++ test suite of the pinned apache-tvm-ffi sdist
# (tests/cpp) and two of its examples, each compiled once against the sdist's headers and linked
# twice: with libtvm_ffi.so of the pinned wheel (.venv/tvm_ffi) and with tvmrt.
#
#   conformance/tvm_ffi/cpp.sh [-j JOBS]          (JOBS: parallel compiles, default 2)
#
# - tests/cpp (every tests/cpp/*.cc and tests/cpp/extra/*.cc, gtest from the system: Debian's
#   libgtest-dev): the reference links libtvm_ffi.so and the wheel's libtvm_ffi_testing.so;
#   tvmrt's links libtvmrt.so and the same prebuilt libtvm_ffi_testing.so, which binds to tvmrt
#   through tvmrt's libtvm_ffi.so alias. Prints the passing tests of each file on both and the
#   totals side by side; fails if a file does not build or link on tvmrt, if a test that passes
#   on libtvm_ffi.so does not pass on tvmrt, or if tvmrt passes fewer tests than
#   conformance/tvm_ffi/expected_cpp_passes records.
# - examples/quickstart: the add_one library and its C++ loader (Module::LoadFromFile,
#   GetFunction); the library built against tvmrt, and as a prebuilt extension against
#   libtvm_ffi.so, loaded by the loader linked with tvmrt (and, as the reference, with
#   libtvm_ffi.so).
# - examples/python_packaging: its extension built against libtvm_ffi.so (a prebuilt
#   extension), driven from C++ by cpp/packaging_driver.cc (run_example.py's four flows), with
#   tvmrt and with libtvm_ffi.so.
#
# libtvmrt.so is $TVMRT_LIBRARY if set, else target/debug/libtvmrt.so (.ci/build.sh).
# Objects are kept in target/tvm_ffi_cpp/ and recompiled when their source is newer.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/conformance/tvm_ffi"
cd "$root"
# shellcheck source=../../.ci/venv.sh
source .ci/venv.sh
# shellcheck source=sdist.sh
source "$here/sdist.sh"

jobs=2
if [ "${1:-}" = "-j" ]; then
  jobs=$2
  shift 2
fi
CXX=${CXX:-c++}

if [ ! -f /usr/include/gtest/gtest.h ]; then
  echo "cpp.sh: gtest is not installed (Debian: apt-get install libgtest-dev)" >&2
  exit 1
fi
sdist=$(tvm_ffi_sdist)
py=$(venv_python tvm_ffi)
ref_lib=$("$py" -c 'import os, tvm_ffi; print(os.path.dirname(tvm_ffi.__file__))')/lib
lib=${TVMRT_LIBRARY:-}
if [ -z "$lib" ]; then
  "$root/.ci/build.sh" --quiet
  lib="$root/target/debug/libtvmrt.so"
fi

build="$root/target/tvm_ffi_cpp"
mkdir -p "$build/obj" "$build/ref" "$build/tvmrt" "$build/rtlib"
# tvmrt's library directory as an installation has it: libtvmrt.so and the libtvm_ffi.so alias;
# the prebuilt testing library is copied beside them, so that its own search ($ORIGIN) finds the
# alias, not the wheel's libtvm_ffi.so.
rtlib="$build/rtlib"
ln -sf "$(realpath "$lib")" "$rtlib/libtvmrt.so"
CC=${CC:-cc} "$root/cmake/tvm_ffi_alias.sh" "$rtlib"
cp "$ref_lib/libtvm_ffi_testing.so" "$rtlib/"

# Every C++ function libtvm_ffi.so defines (nm type T; not the symbols of vague linkage, inline
# functions' statics and template instances, that each client emits itself) and ModuleObj's
# vtable and typeinfo: tvmrt exports them too.
nm -D --defined-only "$ref_lib/libtvm_ffi.so" |
  awk '$3 ~ /^_Z/ && ($2 == "T" || $3 ~ /^_ZT[VIS]N3tvm3ffi9ModuleObjE$/) { print $3 }' |
  sort -u >"$build/ref_cxx_symbols"
nm -D --defined-only "$lib" | awk '{ print $3 }' | sort -u >"$build/rt_symbols"
missing=$(comm -23 "$build/ref_cxx_symbols" "$build/rt_symbols")
if [ -n "$missing" ]; then
  echo "C++ symbols of libtvm_ffi.so that tvmrt does not export:" >&2
  echo "$missing" | c++filt | sed 's/^/  /' >&2
  exit 1
fi
echo "tvmrt exports the $(wc -l <"$build/ref_cxx_symbols") C++ symbols libtvm_ffi.so defines"

includes=(-I"$sdist/include" -I"$sdist/3rdparty/dlpack/include" -I"$sdist/tests/cpp")
cxxflags=(-std=c++17 -O0 -g0 -w -fPIC)
link_ref=(-L"$ref_lib" -Wl,--no-as-needed -ltvm_ffi_testing -ltvm_ffi -Wl,--as-needed
  -Wl,-rpath,"$ref_lib")
link_rt=(-L"$rtlib" -Wl,--no-as-needed -l:libtvm_ffi_testing.so -ltvmrt -Wl,--as-needed
  -Wl,-rpath,"$rtlib")

# compile SRC OBJ: once, unless the object is newer than the source.
compile() {
  if [ ! -f "$2" ] || [ "$1" -nt "$2" ]; then
    "$CXX" "${cxxflags[@]}" "${includes[@]}" -c "$1" -o "$2.tmp" 2>"$2.err" && mv "$2.tmp" "$2"
  fi
}

start=$(date +%s)
mapfile -t sources < <(ls "$sdist"/tests/cpp/test_*.cc "$sdist"/tests/cpp/extra/test_*.cc)
names=()
for src in "${sources[@]}"; do
  rel=${src#"$sdist/tests/cpp/"}
  names+=("${rel//\//_}")
done
# Compile in parallel, JOBS at a time; the examples' sources go along.
pending=()
for i in "${!sources[@]}"; do
  pending+=("${sources[$i]}" "$build/obj/${names[$i]%.cc}.o")
done
pending+=("$sdist/examples/quickstart/load/load_cpp.cc" "$build/obj/quickstart_load_cpp.o")
pending+=("$here/cpp/packaging_driver.cc" "$build/obj/packaging_driver.o")
running=0
for ((i = 0; i < ${#pending[@]}; i += 2)); do
  compile "${pending[$i]}" "${pending[$((i + 1))]}" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
compiled=$(date +%s)

failed=0
declare -A ref_ok rt_ok
ref_total=0
rt_total=0
regressions=()
# run EXE LOG: the names of the tests it reports passing, one per line, in LOG.
run_tests() {
  timeout 300 "$1" --gtest_color=no >"$2.out" 2>&1 || true
  sed -n 's/^\[       OK \] \([^ ]*\).*/\1/p' "$2.out" | sort >"$2"
}
printf '%-44s %12s %8s\n' "tests/cpp file" "libtvm_ffi.so" "tvmrt"
for name in "${names[@]}"; do
  stem=${name%.cc}
  obj="$build/obj/$stem.o"
  if [ ! -f "$obj" ]; then
    echo "$name: does not compile against the sdist's headers:" >&2
    head -20 "$obj.err" >&2
    failed=1
    continue
  fi
  "$CXX" "$obj" -o "$build/ref/$stem" "${link_ref[@]}" -lgtest_main -lgtest -pthread \
    2>"$build/ref/$stem.linkerr" || echo "$name: does not link against libtvm_ffi.so" >&2
  if ! "$CXX" "$obj" -o "$build/tvmrt/$stem" "${link_rt[@]}" -lgtest_main -lgtest -pthread \
    2>"$build/tvmrt/$stem.linkerr"; then
    echo "$name: does not link against tvmrt:" >&2
    grep -o "undefined reference to \`[^']*'" "$build/tvmrt/$stem.linkerr" | sort -u | head -5 >&2
    failed=1
  fi
  a=0
  b=0
  if [ -x "$build/ref/$stem" ]; then
    run_tests "$build/ref/$stem" "$build/ref/$stem.passed"
    a=$(wc -l <"$build/ref/$stem.passed")
  fi
  if [ -x "$build/tvmrt/$stem" ]; then
    run_tests "$build/tvmrt/$stem" "$build/tvmrt/$stem.passed"
    b=$(wc -l <"$build/tvmrt/$stem.passed")
    if [ -f "$build/ref/$stem.passed" ]; then
      while read -r t; do
        [ -n "$t" ] && regressions+=("$t")
      done < <(comm -23 "$build/ref/$stem.passed" "$build/tvmrt/$stem.passed")
    fi
  fi
  ref_total=$((ref_total + a))
  rt_total=$((rt_total + b))
  printf '%-44s %12d %8d\n' "$name" "$a" "$b"
done
printf '%-44s %12d %8d\n' "total (${#names[@]} files)" "$ref_total" "$rt_total"
echo "tvm-ffi C++ suite: libtvm_ffi.so $ref_total passed, tvmrt $rt_total passed"
if [ ${#regressions[@]} -ne 0 ]; then
  echo "passing on libtvm_ffi.so but not on tvmrt:" >&2
  printf '  %s\n' "${regressions[@]}" >&2
  failed=1
fi
expected=$(grep -v '^#' "$here/expected_cpp_passes" | tr -d '[:space:]')
if [ "$rt_total" -lt "$expected" ]; then
  echo "tvmrt passes $rt_total, below the $expected recorded in $here/expected_cpp_passes" >&2
  failed=1
elif [ "$rt_total" -gt "$expected" ]; then
  echo "tvmrt passes $rt_total, above the recorded $expected: raise $here/expected_cpp_passes"
fi

# tvmrt's structural hooks change containers that C++ code made, in place: the structural mutate
# and visit tests on tvmrt once more under memcheck (invalid accesses and leaks fail; the tests'
# own verdicts are above).
if command -v valgrind >/dev/null; then
  for stem in extra_test_structural_mutate extra_test_structural_visit; do
    status=0
    valgrind --quiet --error-exitcode=99 --leak-check=full \
      --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
      "$build/tvmrt/$stem" --gtest_color=no >"$build/tvmrt/$stem.memcheck" 2>&1 || status=$?
    if [ "$status" = 99 ]; then
      echo "$stem on tvmrt under memcheck: errors" >&2
      grep '^==' "$build/tvmrt/$stem.memcheck" | head -40 >&2
      failed=1
    else
      echo "$stem on tvmrt under memcheck: no errors"
    fi
  done
else
  echo "valgrind not installed: the memcheck runs are left out" >&2
  failed=1
fi

# ---- examples ---------------------------------------------------------------------------------
# check LABEL EXPECTED COMMAND...: runs COMMAND, whose output must be EXPECTED.
check() {
  local label=$1 want=$2
  shift 2
  local got
  got=$("$@" 2>&1) || true
  if [ "$got" = "$want" ]; then
    echo "$label: ok"
  else
    printf '%s: FAILED\n--- expected\n%s\n--- got\n%s\n' "$label" "$want" "$got" >&2
    failed=1
  fi
}
ex="$build/examples"
qs="$sdist/examples/quickstart"
mkdir -p "$ex/rt/build" "$ex/prebuilt/build"
"$CXX" "${cxxflags[@]}" "${includes[@]}" -shared "$qs/compile/add_one_cpu.cc" \
  -L"$rtlib" -ltvmrt -o "$ex/rt/build/add_one_cpu.so"
# A prebuilt extension: built against libtvm_ffi.so, no rpath (DT_NEEDED libtvm_ffi.so).
"$CXX" "${cxxflags[@]}" "${includes[@]}" -shared "$qs/compile/add_one_cpu.cc" \
  -L"$ref_lib" -ltvm_ffi -o "$ex/prebuilt/build/add_one_cpu.so"
"$CXX" "$build/obj/quickstart_load_cpp.o" -o "$ex/load_cpp_ref" "${link_ref[@]}"
"$CXX" "$build/obj/quickstart_load_cpp.o" -o "$ex/load_cpp_tvmrt" "${link_rt[@]}"
want='[ 2 3 4 5 6 ]'
check "quickstart on libtvm_ffi.so" "$want" bash -c "cd '$ex/prebuilt' && '$ex/load_cpp_ref'"
check "quickstart on tvmrt" "$want" bash -c "cd '$ex/rt' && '$ex/load_cpp_tvmrt'"
check "quickstart on tvmrt, add_one built against libtvm_ffi.so" "$want" \
  bash -c "cd '$ex/prebuilt' && '$ex/load_cpp_tvmrt'"

"$CXX" "${cxxflags[@]}" "${includes[@]}" -shared \
  "$sdist/examples/python_packaging/src/extension.cc" -L"$ref_lib" -ltvm_ffi \
  -o "$ex/libmy_ffi_extension.so"
"$CXX" "$build/obj/packaging_driver.o" -o "$ex/packaging_driver_ref" "${link_ref[@]}"
"$CXX" "$build/obj/packaging_driver.o" -o "$ex/packaging_driver_tvmrt" "${link_rt[@]}"
want=$("$ex/packaging_driver_ref" "$ex/libmy_ffi_extension.so" 2>&1) || {
  echo "python_packaging on libtvm_ffi.so failed: $want" >&2
  failed=1
}
check "python_packaging extension driven from C++ on tvmrt (as on libtvm_ffi.so)" "$want" \
  "$ex/packaging_driver_tvmrt" "$ex/libmy_ffi_extension.so"
echo "$want" | sed 's/^/  /'

end=$(date +%s)
echo "cpp.sh: $((compiled - start)) s compiling, $((end - compiled)) s linking and running"
exit "$failed"
