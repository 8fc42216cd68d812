/*
 * A library in the shape TVM <= 0.20 emitted (classic ABI), for tvmrt's module tests.
 *
 * - Every function has the backend signature
 *     int f(TVMValue* args, int* type_codes, int num_args,
 *           TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle);
 * - The runtime sets `__tvm_module_ctx` to its context and fills the context function pointers
 *   (`__TVMFuncCall`, `__TVMAPISetLastError`, `__TVMBackendGetFuncFromEnv`,
 *   `__TVMBackendAllocWorkspace`, `__TVMBackendFreeWorkspace`) at load; the code calls the
 *   runtime only through them, as TVM's classic codegen did, so this library has no undefined
 *   runtime symbols.
 * - `__tvm_main__` names the entry function.
 * - The blob `__tvm_dev_mblob` is compiled in from a separate generated file when a test wants
 *   one.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
} TVMValue;

typedef struct {
  void* data;
  int32_t device_type;
  int32_t device_id;
  int32_t ndim;
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

enum {
  kInt = 0,
  kFloat = 2,
  kNull = 4,
  kDLTensorHandle = 7,
  kStr = 11,
  kNDArrayHandle = 13,
};

EXPORT void* __tvm_module_ctx = NULL;
EXPORT int (*__TVMFuncCall)(void*, TVMValue*, int*, int, TVMValue*, int*) = NULL;
EXPORT void (*__TVMAPISetLastError)(const char*) = NULL;
EXPORT int (*__TVMBackendGetFuncFromEnv)(void*, const char*, void**) = NULL;
EXPORT void* (*__TVMBackendAllocWorkspace)(int, int, uint64_t, int, int) = NULL;
EXPORT int (*__TVMBackendFreeWorkspace)(int, int, void*) = NULL;
EXPORT const char __tvm_main__[] = "add_one";

/* add_one(x: int) -> x + 1 */
EXPORT int add_one(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  (void)res;
  if (n != 1 || codes[0] != kInt) {
    __TVMAPISetLastError("TypeError: add_one expects one int argument");
    return -1;
  }
  ret->v_int64 = args[0].v_int64 + 1;
  *ret_code = kInt;
  return 0;
}

/* scale2(t: float32 tensor) -> None; t *= 2 in place. Accepts DLTensor* and NDArray. */
EXPORT int scale2(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  (void)ret;
  (void)res;
  if (n != 1 || (codes[0] != kDLTensorHandle && codes[0] != kNDArrayHandle)) {
    __TVMAPISetLastError("TypeError: scale2 expects one tensor");
    return -1;
  }
  DLTensor* t = (DLTensor*)args[0].v_handle;
  if (t->code != kFloat || t->bits != 32) {
    __TVMAPISetLastError("TypeError: scale2 expects float32");
    return -1;
  }
  int64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  float* data = (float*)((char*)t->data + t->byte_offset);
  for (int64_t i = 0; i < count; ++i) data[i] *= 2.0f;
  *ret_code = kNull;
  return 0;
}

/* call_helper(x: int) -> helper(x), where `helper` is found through the environment (the root
   module's imports, then the global registry) and cached, as classic codegen did. */
static void* helper_handle = NULL;
EXPORT int call_helper(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                       void* res) {
  (void)res;
  if (helper_handle == NULL) {
    if (__TVMBackendGetFuncFromEnv(__tvm_module_ctx, "helper", &helper_handle) != 0) {
      return -1;
    }
  }
  return __TVMFuncCall(helper_handle, args, codes, n, ret, ret_code);
}

/* call_named(name: str, x: int) -> name(x), looked up each time (no cache). */
EXPORT int call_named(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                      void* res) {
  (void)res;
  if (n != 2 || codes[0] != kStr) {
    __TVMAPISetLastError("TypeError: call_named expects (str, value)");
    return -1;
  }
  void* f = NULL;
  if (__TVMBackendGetFuncFromEnv(__tvm_module_ctx, args[0].v_str, &f) != 0) return -1;
  return __TVMFuncCall(f, args + 1, codes + 1, 1, ret, ret_code);
}

/* fail() always raises. */
EXPORT int fail(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)ret_code;
  (void)res;
  __TVMAPISetLastError("ValueError: classic kernel failed on purpose");
  return -1;
}

/* greet() -> a string (the runtime copies it). */
EXPORT int greet(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)res;
  ret->v_str = "hello from a classic library";
  *ret_code = kStr;
  return 0;
}

/* workspace_sum(n: int) -> sum of 0..n-1 computed in runtime workspace memory. */
EXPORT int workspace_sum(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                         void* res) {
  (void)res;
  if (n != 1 || codes[0] != kInt || args[0].v_int64 < 0) {
    __TVMAPISetLastError("TypeError: workspace_sum expects one non-negative int");
    return -1;
  }
  int64_t count = args[0].v_int64;
  int64_t* buf = (int64_t*)__TVMBackendAllocWorkspace(1, 0, (uint64_t)(count + 1) * 8, 0, 64);
  if (buf == NULL) return -1;
  if (((uintptr_t)buf) % 64 != 0) {
    __TVMAPISetLastError("RuntimeError: workspace is not 64-byte aligned");
    return -1;
  }
  int64_t sum = 0;
  for (int64_t i = 0; i < count; ++i) buf[i] = i;
  for (int64_t i = 0; i < count; ++i) sum += buf[i];
  if (__TVMBackendFreeWorkspace(1, 0, buf) != 0) return -1;
  ret->v_int64 = sum;
  *ret_code = kInt;
  return 0;
}

/* A variable filled by the runtime only when a test registers it as a context symbol
   (TVMFFIEnvModRegisterContextSymbol); read_custom() returns it as an opaque handle. */
EXPORT void* __tvmrt_test_custom_ctx = NULL;
EXPORT int read_custom(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code,
                       void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)res;
  ret->v_handle = __tvmrt_test_custom_ctx;
  *ret_code = 3; /* kTVMOpaqueHandle */
  return 0;
}

/* A data symbol: must not be found by name as a function. */
EXPORT int ordinary_data_value = 42;
