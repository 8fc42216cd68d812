# Shared by run_kernel_bench.sh, vm_bench.sh and model_memory/run.sh (sourced): build one C
# benchmark against tvmrt and against Apache TVM, run the two alternately, then print one
# side-by-side table.
#
# Each program supports `--bench FIXTURES` (prints "RESULT <metric> <median> <min> <unit>"
# lines) and `--spawn SAMPLES KEY FIXTURES TVM_BIN RT_BIN` (load-to-first-result in fresh
# processes, alternating the two binaries; prints "RESULT <bin>: <metric> ...").

# ab_build SRC MACRO RT_OUT TVM_OUT TVMRT_LIB_DIR PYTHON: SRC built twice with -DMACRO naming
# the runtime: RT_OUT against libtvmrt.so in TVMRT_LIB_DIR (tvmrt's drop-in headers), TVM_OUT
# against the libtvm_ffi.so and libtvm_runtime.so of PYTHON's apache-tvm (its own headers).
# libtvm_runtime.so is linked --no-as-needed: the programs name none of its symbols, but its
# static initializers register the Relax VM and the context symbols kernels call
# (TVMBackendAllocWorkspace, TVMBackendParallelLaunch; TVM src/runtime/module.cc).
ab_build() {
  local src=$1 macro=$2 rt_out=$3 tvm_out=$4 libdir=$5 python=$6
  local root sp
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  sp="$("$python" -c 'import os, tvm_ffi; print(os.path.dirname(os.path.dirname(tvm_ffi.__file__)))')"
  local cflags=(-O2 -std=c11 -Wall -Wextra -Werror)
  "${CC:-cc}" "${cflags[@]}" -D"$macro"='"tvmrt"' -I"$root/include" "$src" -o "$rt_out" \
    -L"$libdir" -Wl,--no-as-needed -ltvmrt -Wl,--as-needed -Wl,-rpath,"$libdir"
  "${CC:-cc}" "${cflags[@]}" -D"$macro"='"apache-tvm"' \
    -I"$sp/tvm/include" -I"$sp/tvm_ffi/include" -I"$sp/tvm_ffi/3rdparty/dlpack/include" \
    "$src" -o "$tvm_out" \
    -Wl,--no-as-needed "$sp/tvm_ffi/lib/libtvm_ffi.so" "$sp/tvm/lib/libtvm_runtime.so" \
    -Wl,--as-needed -Wl,-rpath,"$sp/tvm_ffi/lib:$sp/tvm/lib"
}

# ab_header ROOT PYTHON: the run's conditions, as comment lines.
ab_header() {
  local root=$1 python=$2
  echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# TVM_NUM_THREADS=$TVM_NUM_THREADS ROUNDS=$ROUNDS LOAD_SAMPLES=$LOAD_SAMPLES"
  echo "# tvmrt: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' + uncommitted changes')"
  echo "# apache-tvm $("$python" -c 'import tvm; print(tvm.__version__)'), tvm-ffi $("$python" -c 'import tvm_ffi; print(tvm_ffi.__version__)')"
}

# ab_run TVM_BIN RT_BIN FIXTURES RESULTS KEY...: ROUNDS alternating --bench runs, then
# LOAD_SAMPLES spawned loads per KEY, into RESULTS as "<runtime> <metric> <median> <min> <unit>".
ab_run() {
  local tvm_bin=$1 rt_bin=$2 fix=$3 res=$4 k
  shift 4
  : >"$res"
  for _ in $(seq 1 "$ROUNDS"); do
    "$tvm_bin" --bench "$fix" | sed -n 's/^RESULT /tvm /p' >>"$res"
    "$rt_bin" --bench "$fix" | sed -n 's/^RESULT /tvmrt /p' >>"$res"
  done
  for k in "$@"; do
    "$tvm_bin" --spawn "$LOAD_SAMPLES" "$k" "$fix" "$tvm_bin" "$rt_bin" |
      sed -n 's/^RESULT //p' |
      sed -e "s|^$tvm_bin:|tvm |" -e "s|^$rt_bin:|tvmrt |" >>"$res"
  done
  echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# ab_table RESULTS: the markdown table. For --bench metrics (one line per round) "median" is
# the median of the round medians, "best" the lowest round median (the round least disturbed
# by other load on the machine), "min" the lowest single sample. Load-to-first-result metrics
# have one line (all samples), so there median = best.
ab_table() {
  awk '
    { key = $2; unit[key] = $5; if (!(key in seen)) { order[n++] = key; seen[key] = 1 }
      m = $1 SUBSEP key; cnt[m]++; med[m, cnt[m]] = $3
      if (!(m in mn) || $4 < mn[m]) mn[m] = $4
      if (!(m in best) || $3 < best[m]) best[m] = $3 }
    function median(m,    i, j, t, k, a) {
      k = cnt[m]; for (i = 1; i <= k; i++) a[i] = med[m, i]
      for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    END {
      printf "| measurement | unit | TVM median | TVM best | TVM min | tvmrt median | tvmrt best | tvmrt min | tvmrt/TVM median | tvmrt/TVM best |\n"
      printf "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
      for (i = 0; i < n; i++) {
        k = order[i]; t = "tvm" SUBSEP k; r = "tvmrt" SUBSEP k
        if (!(t in cnt) || !(r in cnt)) continue
        tm = median(t); rm = median(r)
        printf "| %s | %s | %.4g | %.4g | %.4g | %.4g | %.4g | %.4g | %.2f | %.2f |\n", k, unit[k], tm, best[t], mn[t], rm, best[r], mn[r], rm / tm, best[r] / best[t]
      }
    }' "$1"
}
