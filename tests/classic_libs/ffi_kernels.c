/*
 * Hand-written functions with the tvm-ffi ABI (TVM 0.21+), for tvmrt's module tests: what TVM's
 * codegen emits for `T.call_packed`, reduced to its calls.
 *
 * - Each function is exported as `__tvm_ffi_<name>` with the signature
 *     int f(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result);
 *   the runtime calls it with self == NULL (tvm-ffi's library module does).
 * - `__tvm_ffi__library_ctx` is set by the runtime; the context function pointers are filled
 *   at load. The looked-up function handle is cached with `TVMFFIHandleInitOnce`, as TVM does.
 */
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct {
  int32_t type_index;
  uint32_t small_str_len;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
  };
} TVMFFIAny;

enum { kNone = 0, kInt = 1 };

EXPORT void* __tvm_ffi__library_ctx = NULL;
EXPORT int (*__TVMFFIFunctionCall)(void*, TVMFFIAny*, int32_t, TVMFFIAny*) = NULL;
EXPORT void (*__TVMFFIErrorSetRaisedFromCStr)(const char*, const char*) = NULL;
EXPORT int (*__TVMFFIEnvModLookupFromImports)(void*, const char*, void**) = NULL;
EXPORT int (*__TVMFFIHandleInitOnce)(void**, int (*)(void**)) = NULL;

static void* helper_handle = NULL;

static int init_helper(void** out) {
  return __TVMFFIEnvModLookupFromImports(__tvm_ffi__library_ctx, "helper", out);
}

/* call_helper(x) -> helper(x), `helper` found in the library module's imports. */
EXPORT int __tvm_ffi_call_helper(void* self, const TVMFFIAny* args, int32_t n,
                                 TVMFFIAny* result) {
  if (self != NULL) {
    __TVMFFIErrorSetRaisedFromCStr("RuntimeError", "self must be NULL");
    return -1;
  }
  if (__TVMFFIHandleInitOnce(&helper_handle, init_helper) != 0) return -1;
  return __TVMFFIFunctionCall(helper_handle, (TVMFFIAny*)args, n, result);
}

/* negate(x: int) -> -x */
EXPORT int __tvm_ffi_negate(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  if (n != 1 || args[0].type_index != kInt) {
    __TVMFFIErrorSetRaisedFromCStr("TypeError", "negate expects one int");
    return -1;
  }
  result->type_index = kInt;
  result->small_str_len = 0;
  result->v_int64 = -args[0].v_int64;
  return 0;
}

/* A plain C function without the prefix: not a function of a tvm-ffi library. */
EXPORT int negate(int x) { return -x; }
