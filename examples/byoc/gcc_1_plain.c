/* The plain-C form of a BYOC subgraph, shaped like the code TVM's C source codegen emits
 * (apache/tvm src/relay/backend/contrib/codegen_c/codegen_c.h, CodegenCBase: per-op kernels,
 * a subgraph function `<name>_` over raw buffers, a `<name>_wrapper_` over DLTensor*, and an
 * exported entry `<name>` with the classic backend signature that unpacks the TVMValue
 * arguments). Written for tvmrt's tests: the guide's subgraph (add -> subtract -> multiply on
 * 10x10 float32) exported as `gcc_1`, with argument checks TVM's emitted code leaves out. */
#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>

#define C_BINARY_OP_2D(p_ID_, p_OP_, p_DIM1_, p_DIM2_)       \
  static void p_ID_(const float* a, const float* b, float* out) { \
    for (int64_t i = 0; i < p_DIM1_; ++i) {                    \
      for (int64_t j = 0; j < p_DIM2_; ++j) {                  \
        int64_t k = i * p_DIM2_ + j;                           \
        out[k] = a[k] p_OP_ b[k];                              \
      }                                                        \
    }                                                          \
  }

C_BINARY_OP_2D(gcc_1_0, *, 10, 10)
C_BINARY_OP_2D(gcc_1_1, -, 10, 10)
C_BINARY_OP_2D(gcc_1_2, +, 10, 10)

static int gcc_1_(const float* in0, const float* in1, const float* in2, const float* in3,
                  float* out) {
  float* buf_0 = (float*)malloc(4 * 100);
  float* buf_1 = (float*)malloc(4 * 100);
  if (buf_0 == NULL || buf_1 == NULL) {
    free(buf_0);
    free(buf_1);
    return -1;
  }
  gcc_1_2(in0, in1, buf_0);
  gcc_1_1(buf_0, in2, buf_1);
  gcc_1_0(buf_1, in3, out);
  free(buf_0);
  free(buf_1);
  return 0;
}

static int gcc_1_wrapper_(DLTensor* arg0, DLTensor* arg1, DLTensor* arg2, DLTensor* arg3,
                          DLTensor* out0) {
  return gcc_1_((const float*)arg0->data, (const float*)arg1->data, (const float*)arg2->data,
                (const float*)arg3->data, (float*)out0->data);
}

/* Filled by the runtime when it loads the library (classic InitContextFunctions). */
#ifdef __cplusplus
extern "C" {
#endif
TVM_DLL void (*__TVMAPISetLastError)(const char*) __attribute__((weak));

static int fail(const char* msg) {
  if (__TVMAPISetLastError != NULL) __TVMAPISetLastError(msg);
  return -1;
}

TVM_DLL int32_t gcc_1(TVMValue* args, int* type_code, int num_args, TVMValue* out_value,
                      int* out_type_code, void* resource_handle) {
  (void)out_value;
  (void)out_type_code;
  (void)resource_handle;
  if (num_args != 5) return fail("ValueError: gcc_1 expects 5 tensors (4 inputs, 1 output)");
  DLTensor* t[5];
  for (int i = 0; i < 5; ++i) {
    if (type_code[i] != kTVMDLTensorHandle && type_code[i] != kTVMNDArrayHandle) {
      return fail("TypeError: gcc_1 expects DLTensor* arguments");
    }
    t[i] = (DLTensor*)args[i].v_handle;
    if (t[i] == NULL || t[i]->ndim != 2 || t[i]->shape[0] != 10 || t[i]->shape[1] != 10 ||
        t[i]->dtype.code != kDLFloat || t[i]->dtype.bits != 32) {
      return fail("ValueError: gcc_1 expects float32 tensors of shape (10, 10)");
    }
  }
  if (gcc_1_wrapper_(t[0], t[1], t[2], t[3], t[4]) != 0) {
    return fail("RuntimeError: gcc_1: out of memory");
  }
  return 0;
}
#ifdef __cplusplus
}
#endif
