/* Call overhead from C: nanoseconds per call of a trivial packed function
 * (returns its int argument + 1) through each C entry point.
 *
 * Built twice by run_call_overhead.sh: against libtvmrt, and against Apache
 * TVM's libtvm_ffi.so (with -DBENCH_NO_CLASSIC, since tvm-ffi has no classic
 * TVMFuncCall). Prints one "RESULT <case> <ns per call>" line per case; the
 * figure is the median of REPEATS timed runs of ITERS calls each.
 *
 *   call_overhead [ITERS [CASE-SUBSTRING]] */
/* clock_gettime and CLOCK_MONOTONIC under -std=c11. */
#define _POSIX_C_SOURCE 199309L

#include <tvm/ffi/c_api.h>
#ifndef BENCH_NO_CLASSIC
#include <tvm/runtime/c_runtime_api.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_timing.h"

#define REPEATS 9

static long g_iters = 2000000;
/* Only the cases whose name contains this (argv[2]), for profiling one at a time. */
static const char* g_only = "";

/* The tvm-ffi callee. */
static int ffi_add_one(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)num_args;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = args[0].v_int64 + 1;
  return 0;
}

typedef int64_t (*Loop)(void* f, long iters);

/* Baseline: the callee through a function pointer, no runtime involved (volatile, so the
 * compiler cannot inline it). */
static TVMFFISafeCallType volatile g_direct = ffi_add_one;
static int64_t loop_direct(void* f, long iters) {
  TVMFFISafeCallType call = g_direct;
  TVMFFIAny arg, result;
  int64_t acc = 0;
  long i;
  (void)f;
  memset(&arg, 0, sizeof(arg));
  arg.type_index = kTVMFFIInt;
  for (i = 0; i < iters; i++) {
    arg.v_int64 = i;
    if (call(NULL, &arg, 1, &result) != 0) abort();
    acc += result.v_int64;
  }
  return acc;
}

static int64_t loop_ffi(void* f, long iters) {
  TVMFFIAny arg, result;
  int64_t acc = 0;
  long i;
  memset(&arg, 0, sizeof(arg));
  arg.type_index = kTVMFFIInt;
  for (i = 0; i < iters; i++) {
    arg.v_int64 = i;
    if (TVMFFIFunctionCall(f, &arg, 1, &result) != 0) abort();
    acc += result.v_int64;
  }
  return acc;
}

#ifndef BENCH_NO_CLASSIC
/* The classic callee. */
static int classic_add_one(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                           void* resource) {
  TVMValue v;
  int code = kTVMArgInt;
  (void)codes;
  (void)num_args;
  (void)resource;
  v.v_int64 = args[0].v_int64 + 1;
  return TVMCFuncSetReturn(ret, &v, &code, 1);
}

static int64_t loop_classic(void* f, long iters) {
  TVMValue arg, ret;
  int code = kTVMArgInt, ret_code;
  int64_t acc = 0;
  long i;
  for (i = 0; i < iters; i++) {
    arg.v_int64 = i;
    if (TVMFuncCall(f, &arg, &code, 1, &ret, &ret_code) != 0) abort();
    acc += ret.v_int64;
  }
  return acc;
}
#endif

/* Times `loop` and prints the median ns per call. */
static void bench(const char* name, Loop loop, void* f) {
  double ns[REPEATS];
  int r;
  int64_t expected = (int64_t)g_iters * (g_iters - 1) / 2 + g_iters;
  if (strstr(name, g_only) == NULL) return;
  loop(f, g_iters / 10); /* warm up */
  for (r = 0; r < REPEATS; r++) {
    uint64_t t0 = now_ns();
    int64_t acc = loop(f, g_iters);
    uint64_t t1 = now_ns();
    if (acc != expected) {
      fprintf(stderr, "%s: wrong result %lld, expected %lld\n", name, (long long)acc,
              (long long)expected);
      exit(1);
    }
    ns[r] = (double)(t1 - t0) / (double)g_iters;
  }
  printf("RESULT %s %.2f\n", name, median_of(ns, REPEATS));
  fflush(stdout);
}

static void check(int rc, const char* what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed\n", what);
    exit(1);
  }
}

int main(int argc, char** argv) {
  TVMFFIObjectHandle ffi_fn = NULL;
  if (argc > 1) g_iters = atol(argv[1]);
  if (g_iters <= 0) g_iters = 1;
  if (argc > 2) g_only = argv[2];

  check(TVMFFIFunctionCreate(NULL, ffi_add_one, NULL, &ffi_fn), "TVMFFIFunctionCreate");
  bench("direct_c_call", loop_direct, NULL);
  bench("TVMFFIFunctionCall->ffi_callback", loop_ffi, ffi_fn);
#ifndef BENCH_NO_CLASSIC
  {
    TVMFunctionHandle classic_fn = NULL;
    check(TVMFuncCreateFromCFunc(classic_add_one, NULL, NULL, &classic_fn),
          "TVMFuncCreateFromCFunc");
    bench("TVMFuncCall->ffi_callback", loop_classic, ffi_fn);
    bench("TVMFuncCall->classic_callback", loop_classic, classic_fn);
    bench("TVMFFIFunctionCall->classic_callback", loop_ffi, classic_fn);
    TVMFuncFree(classic_fn);
  }
#endif
  TVMFFIObjectDecRef(ffi_fn);
  return 0;
}
