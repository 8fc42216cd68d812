/* The library gotvm's and tvm4j's tests load (TVM v0.20 made theirs with
 * `tvm.build(..., name="myadd")` and `export_library`): a classic-ABI (TVM <= 0.20) library
 * exporting `myadd(A, B, C)`, float32 C[i] = A[i] + B[i] for any length n, and `__tvm_main__`
 * naming it as the module's entry. Written in C like the project's other classic fixtures
 * (tests/classic_libs, tests/fixtures/graph/gen.py): it checks its arguments as TVM's generated
 * code does and reports through the `__TVMAPISetLastError` context pointer the runtime fills at
 * load, so it links nothing and any TVM-compatible runtime loads it.
 *
 *   cc -shared -fPIC -O2 -o deploy.so conformance/common/myadd.c */
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
} TVMValue;

typedef struct {
  void* data;
  int32_t device_type, device_id, ndim;
  uint8_t code, bits;
  uint16_t lanes;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

EXPORT void* __tvm_module_ctx = 0;
EXPORT void (*__TVMAPISetLastError)(const char*) = 0;
EXPORT const char __tvm_main__[] = "myadd";

/* kTVMDLTensorHandle and kTVMNDArrayHandle: what a tensor argument may be passed as. */
static int is_tensor(int code) { return code == 7 || code == 13; }

static int fail(const char* msg) {
  if (__TVMAPISetLastError) __TVMAPISetLastError(msg);
  return -1;
}

/* A compact 1-D float32 CPU tensor. */
static int check(const DLTensor* t, const char* wrong) {
  if (t->ndim != 1) return fail(wrong);
  if (t->code != 2 || t->bits != 32 || t->lanes != 1) {
    return fail("TypeError: myadd: the arguments must be float32 tensors");
  }
  if (t->device_type != 1) return fail("ValueError: myadd: the arguments must be on the CPU");
  if (t->strides && t->strides[0] != 1) return fail("ValueError: myadd: tensors must be compact");
  return 0;
}

EXPORT int myadd(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                 void* resource) {
  const DLTensor *a, *b, *c;
  const float *x, *y;
  float* z;
  int64_t i, n;
  (void)ret;
  (void)ret_code;
  (void)resource;
  if (num_args != 3) return fail("TypeError: myadd: expected 3 arguments");
  if (!is_tensor(codes[0]) || !is_tensor(codes[1]) || !is_tensor(codes[2])) {
    return fail("TypeError: myadd: expected 3 tensors");
  }
  a = (const DLTensor*)args[0].v_handle;
  b = (const DLTensor*)args[1].v_handle;
  c = (const DLTensor*)args[2].v_handle;
  if (check(a, "ValueError: myadd: A must be 1-D") || check(b, "ValueError: myadd: B must be 1-D") ||
      check(c, "ValueError: myadd: C must be 1-D")) {
    return -1;
  }
  n = a->shape[0];
  if (b->shape[0] != n || c->shape[0] != n) {
    return fail("ValueError: myadd: A, B and C must have the same length");
  }
  x = (const float*)((const char*)a->data + a->byte_offset);
  y = (const float*)((const char*)b->data + b->byte_offset);
  z = (float*)((char*)c->data + c->byte_offset);
  for (i = 0; i < n; ++i) z[i] = x[i] + y[i];
  return 0;
}
