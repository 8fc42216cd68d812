/* tvm-ffi calling helpers shared by the C launch benchmarks (opencl_launch.c, vulkan_launch.c):
 * a global function by name, TVMFFIAny values of each kind they pass, and a call that exits
 * with tvmrt's message on failure (a benchmark has nothing to recover). Include after
 * <tvm/ffi/c_api.h> and <tvm/runtime/c_runtime_api.h>. */
#ifndef TVMRT_BENCH_FFI_H_
#define TVMRT_BENCH_FFI_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline TVMFFIObjectHandle global(const char* name) {
  TVMFFIByteArray n = {name, strlen(name)};
  TVMFFIObjectHandle f = NULL;
  if (TVMFFIFunctionGetGlobal(&n, &f) != 0 || !f) {
    fprintf(stderr, "no global %s\n", name);
    exit(1);
  }
  return f;
}

static inline TVMFFIAny any_of(int32_t type_index) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = type_index;
  return a;
}

static inline TVMFFIAny any_obj(void* h) {
  TVMFFIAny a = any_of(((TVMFFIObject*)h)->type_index);
  a.v_obj = (TVMFFIObject*)h;
  return a;
}

static inline TVMFFIAny any_int(int64_t v) {
  TVMFFIAny a = any_of(kTVMFFIInt);
  a.v_int64 = v;
  return a;
}

static inline TVMFFIAny any_float(double v) {
  TVMFFIAny a = any_of(kTVMFFIFloat);
  a.v_float64 = v;
  return a;
}

static inline TVMFFIAny any_ptr(void* p) {
  TVMFFIAny a = any_of(kTVMFFIOpaquePtr);
  a.v_ptr = p;
  return a;
}

static inline TVMFFIAny any_dltensor(DLTensor* t) {
  TVMFFIAny a = any_of(kTVMFFIDLTensorPtr);
  a.v_ptr = t;
  return a;
}

/* Calls `f`; exits with the last error on failure. */
static inline TVMFFIAny call(TVMFFIObjectHandle f, TVMFFIAny* args, int n) {
  TVMFFIAny out;
  memset(&out, 0, sizeof(out));
  if (TVMFFIFunctionCall(f, args, n, &out) != 0) {
    fprintf(stderr, "call failed: %s\n", TVMGetLastError());
    exit(1);
  }
  return out;
}

#endif /* TVMRT_BENCH_FFI_H_ */
