/* Shared helpers of the byoc_* C tests: host tensors, the guide's inputs and checks. */
#ifndef TVMRT_C_TESTS_BYOC_COMMON_H_
#define TVMRT_C_TESTS_BYOC_COMMON_H_

#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

#define CHECK_OK(call)                                                             \
  do {                                                                             \
    if ((call) != 0) {                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,         \
              TVMGetLastError());                                                  \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

/* Checks that the last error contains `want`. */
static inline void expect_error(int rc, const char* want) {
  const char* msg = TVMGetLastError();
  if (rc == 0 || msg == NULL || strstr(msg, want) == NULL) {
    fprintf(stderr, "expected an error containing \"%s\", got rc=%d message=%s\n", want, rc,
            msg ? msg : "(null)");
    exit(1);
  }
}

/* Four 10x10 inputs, one output, as DLTensors over plain arrays. */
typedef struct {
  float data[5][100];
  int64_t shape[2];
  DLTensor t[5];
} GuideCase;

static inline void guide_init(GuideCase* g, unsigned seed) {
  g->shape[0] = 10;
  g->shape[1] = 10;
  for (int k = 0; k < 5; ++k) {
    for (int i = 0; i < 100; ++i) {
      /* Multiples of 1/8 in [-4, 4): every result below is exact in float32. */
      unsigned x = (seed * 2654435761u) ^ (unsigned)(k * 7919 + i * 104729);
      x ^= x >> 13;
      x *= 0x5bd1e995u;
      x ^= x >> 15;
      g->data[k][i] = k == 4 ? 0.0f : (float)((int)(x % 64) - 32) / 8.0f;
    }
    DLTensor* t = &g->t[k];
    t->data = g->data[k];
    t->device.device_type = kDLCPU;
    t->device.device_id = 0;
    t->ndim = 2;
    t->dtype.code = kDLFloat;
    t->dtype.bits = 32;
    t->dtype.lanes = 1;
    t->shape = g->shape;
    t->strides = NULL;
    t->byte_offset = 0;
  }
}

/* Classic packed arguments: the five tensors as kTVMDLTensorHandle. */
static inline void guide_args(GuideCase* g, TVMValue* values, int* codes) {
  for (int k = 0; k < 5; ++k) {
    values[k].v_handle = &g->t[k];
    codes[k] = kTVMDLTensorHandle;
  }
}

/* Checks out == (a + b - c) * d exactly. */
static inline void guide_check(const GuideCase* g) {
  for (int i = 0; i < 100; ++i) {
    float want = (g->data[0][i] + g->data[1][i] - g->data[2][i]) * g->data[3][i];
    if (g->data[4][i] != want) {
      fprintf(stderr, "element %d: got %g, want %g\n", i, g->data[4][i], want);
      exit(1);
    }
  }
}

/* Checks a returned tensor (a DLTensor*: the classic NDArray handle, or the tensor of a
 * tvm-ffi tensor object) against the guide case's output, in memory of its own. */
static inline void guide_check_returned(const GuideCase* g, const DLTensor* t) {
  CHECK(t != NULL && t->data != NULL && t->data != g->data[4]);
  CHECK(t->ndim == 2 && t->shape[0] == 10 && t->shape[1] == 10);
  CHECK(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1);
  CHECK(t->device.device_type == kDLCPU && t->byte_offset == 0);
  CHECK(memcmp(t->data, g->data[4], sizeof(g->data[4])) == 0);
}

/* Calls a packed function on a fresh guide case and checks the output argument; returns the
 * classic return type code. A returned NDArray (the ExampleJSON module's result) is checked
 * against the output and freed. */
static inline int guide_call_and_check(TVMFunctionHandle f, unsigned seed) {
  GuideCase g;
  TVMValue values[5], ret;
  int codes[5], ret_code;
  guide_init(&g, seed);
  guide_args(&g, values, codes);
  CHECK_OK(TVMFuncCall(f, values, codes, 5, &ret, &ret_code));
  guide_check(&g);
  if (ret_code == kTVMNDArrayHandle) {
    guide_check_returned(&g, (const DLTensor*)ret.v_handle);
    CHECK_OK(TVMArrayFree((TVMArrayHandle)ret.v_handle));
  }
  return ret_code;
}

#endif /* TVMRT_C_TESTS_BYOC_COMMON_H_ */
