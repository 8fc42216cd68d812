/* A classic TVM model (TVM <= 0.19 relay.build layout: a GraphExecutorFactory importing its
 * kernels) from C, through the classic C API only, as a TVM 0.19 C program runs one:
 * TVMModLoadFromFile, the factory's `default(dev)`, set_input by name, run, get_output (as an
 * NDArray handle and into a tensor of ours), get_input of a saved parameter, load_params, and
 * the errors of bad calls.
 * Usage: graph_executor <tests/fixtures/graph/int_model.so> */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

/* Calls f(args...) with one argument list built by the caller. */
static int call(TVMFunctionHandle f, TVMValue* v, int* codes, int n, TVMValue* ret, int* rc) {
  return TVMFuncCall(f, v, codes, n, ret, rc);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <int_model.so>\n", argv[0]);
    return 2;
  }
  TVMModuleHandle factory = NULL;
  CHECK_OK(TVMModLoadFromFile(argv[1], "so", &factory));

  /* exec = factory["default"](tvm.cpu(0)) */
  TVMValue v[4], ret;
  int codes[4], ret_code;
  v[0].v_device.device_type = kDLCPU;
  v[0].v_device.device_id = 0;
  codes[0] = kDLDevice;
  TVMFunctionHandle create = get_func(factory, "default", 0);
  CHECK_OK(call(create, v, codes, 1, &ret, &ret_code));
  if (!CHECK(ret_code == kTVMModuleHandle, "default() returned type code %d", ret_code)) return 1;
  TVMModuleHandle exec = ret.v_handle;

  TVMFunctionHandle set_input = get_func(exec, "set_input", 0);
  TVMFunctionHandle run = get_func(exec, "run", 0);
  TVMFunctionHandle get_output = get_func(exec, "get_output", 0);
  TVMFunctionHandle get_input = get_func(exec, "get_input", 0);
  TVMFunctionHandle num_outputs = get_func(exec, "get_num_outputs", 0);
  TVMFunctionHandle load_params = get_func(exec, "load_params", 0);

  /* The saved parameter `w`, as an NDArray handle. */
  v[0].v_str = "w";
  codes[0] = kTVMStr;
  CHECK_OK(call(get_input, v, codes, 1, &ret, &ret_code));
  if (!CHECK(ret_code == kTVMNDArrayHandle, "get_input returned type code %d", ret_code)) return 1;
  DLTensor* wt = (DLTensor*)ret.v_handle;
  CHECK(wt->ndim == 1 && wt->shape[0] == 5 && wt->dtype.code == kDLInt && wt->dtype.bits == 32,
        "w is not int32[5] (ndim %d)", wt->ndim);
  int32_t w[5];
  memcpy(w, wt->data, sizeof(w));
  CHECK_OK(TVMArrayFree((TVMArrayHandle)ret.v_handle));

  int32_t x[5] = {1, 2, 3, -4, 5};
  int64_t s5[1] = {5};
  DLTensor xt = cpu_tensor(x, s5, 1, kDLInt, 32);
  v[0].v_str = "x";
  codes[0] = kTVMStr;
  v[1].v_handle = &xt;
  codes[1] = kTVMDLTensorHandle;
  CHECK_OK(call(set_input, v, codes, 2, &ret, &ret_code));
  CHECK_OK(call(run, v, codes, 0, &ret, &ret_code));
  CHECK_OK(call(num_outputs, v, codes, 0, &ret, &ret_code));
  CHECK(ret_code == kDLInt && ret.v_int64 == 2, "get_num_outputs: code %d", ret_code);

  /* Output 0 into our tensor: y = x * w + 3. */
  int32_t y[5] = {0};
  DLTensor yt = cpu_tensor(y, s5, 1, kDLInt, 32);
  v[0].v_int64 = 0;
  codes[0] = kDLInt;
  v[1].v_handle = &yt;
  codes[1] = kTVMDLTensorHandle;
  CHECK_OK(call(get_output, v, codes, 2, &ret, &ret_code));
  for (int i = 0; i < 5; ++i) CHECK(y[i] == x[i] * w[i] + 3, "y[%d] = %d", i, (int)y[i]);

  /* Output 1 as an NDArray handle: y saturated to int8. */
  v[0].v_int64 = 1;
  CHECK_OK(call(get_output, v, codes, 1, &ret, &ret_code));
  if (!CHECK(ret_code == kTVMNDArrayHandle, "get_output returned type code %d", ret_code)) return 1;
  DLTensor* zt = (DLTensor*)ret.v_handle;
  CHECK(zt->dtype.code == kDLInt && zt->dtype.bits == 8 && zt->shape[0] == 5,
        "output 1 is not int8[5]");
  for (int i = 0; i < 5; ++i) {
    int32_t want = y[i] > 127 ? 127 : (y[i] < -128 ? -128 : y[i]);
    CHECK(((int8_t*)zt->data)[i] == want, "z[%d] = %d, want %d", i, ((int8_t*)zt->data)[i], (int)want);
  }
  CHECK_OK(TVMArrayFree((TVMArrayHandle)ret.v_handle));

  /* Bad calls: each returns -1 with a message naming what was wrong. */
  v[0].v_int64 = 7;
  codes[0] = kDLInt;
  CHECK_FAILS_WITH(call(get_output, v, codes, 1, &ret, &ret_code), "output index 7 is out of range");
  float xf[5] = {0};
  DLTensor xft = cpu_tensor(xf, s5, 1, kDLFloat, 32);
  v[0].v_str = "x";
  codes[0] = kTVMStr;
  v[1].v_handle = &xft;
  codes[1] = kTVMDLTensorHandle;
  CHECK_FAILS_WITH(call(set_input, v, codes, 2, &ret, &ret_code),
                   "dtype float32 differs from the graph's int32");
  TVMByteArray junk = {"\x01\x02\x03", 3};
  v[0].v_handle = &junk;
  codes[0] = kTVMBytes;
  CHECK_FAILS_WITH(call(load_params, v, codes, 1, &ret, &ret_code), "invalid parameters blob");

  CHECK_OK(TVMModFree(exec));
  CHECK_OK(TVMModFree(factory));
  TVMFunctionHandle fs[] = {create, set_input, run, get_output, get_input, num_outputs, load_params};
  for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); ++i) CHECK_OK(TVMFuncFree(fs[i]));
  return test_result("graph_executor");
}
