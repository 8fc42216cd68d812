/* Classic-ABI kernel call overhead from C: ns per TVMFuncCall of `add_one` from a TVM <= 0.20
 * style library (tests/classic_libs/classic_kernels.c), loaded with TVMModLoadFromFile.
 *
 *   classic_kernel_call LIBRARY.so [CALLS]
 *
 * Prints "RESULT classic_kernel_call <ns per call>", the median of 9 timed loops. */
#define _POSIX_C_SOURCE 199309L

#include <tvm/runtime/c_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_timing.h"

#define REPEATS 9

static long long loop_kernel(TVMFunctionHandle f, long n) {
  TVMValue arg, ret;
  int code = kTVMArgInt, ret_code;
  long long acc = 0;
  long i;
  for (i = 0; i < n; i++) {
    arg.v_int64 = i;
    if (TVMFuncCall(f, &arg, &code, 1, &ret, &ret_code) != 0) {
      fprintf(stderr, "TVMFuncCall: %s\n", TVMGetLastError());
      exit(1);
    }
    acc += ret.v_int64;
  }
  return acc;
}

int main(int argc, char** argv) {
  TVMModuleHandle mod = NULL;
  TVMFunctionHandle add_one = NULL;
  double ns[REPEATS];
  long calls = argc > 2 ? atol(argv[2]) : 2000000;
  int r;
  if (argc < 2 || calls <= 0) {
    fprintf(stderr, "usage: %s LIBRARY.so [CALLS]\n", argv[0]);
    return 2;
  }
  if (TVMModLoadFromFile(argv[1], "so", &mod) != 0 ||
      TVMModGetFunction(mod, "add_one", 0, &add_one) != 0 || add_one == NULL) {
    fprintf(stderr, "loading add_one from %s: %s\n", argv[1], TVMGetLastError());
    return 1;
  }
  loop_kernel(add_one, calls / 10); /* warm up */
  for (r = 0; r < REPEATS; r++) {
    uint64_t t0 = now_ns();
    long long acc = loop_kernel(add_one, calls);
    uint64_t t1 = now_ns();
    if (acc != (long long)calls * (calls - 1) / 2 + calls) {
      fprintf(stderr, "wrong sum %lld\n", acc);
      return 1;
    }
    ns[r] = (double)(t1 - t0) / (double)calls;
  }
  printf("RESULT classic_kernel_call %.2f\n", median_of(ns, REPEATS));
  TVMFuncFree(add_one);
  TVMModFree(mod);
  return 0;
}
