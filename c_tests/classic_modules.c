/* A classic-ABI library (TVM <= 0.20 layout: TVMBackendPackedCFunc kernels that reach the
 * runtime through `__TVMAPISetLastError`-style context pointers) loaded from C with
 * TVMModLoadFromFile and called through both doors. Through TVMFuncCall the caller's
 * TVMValue / type-code arrays reach the kernel unchanged, as in TVM's classic runtime: ints,
 * DLTensor* and NDArray handles, string and opaque results, the kernel's own errors, refused
 * type codes, more arguments than the fast path carries, workspace through the context
 * pointers, and the module freed before its functions. The library's path is argv[1]. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static TVMFunctionHandle get(TVMModuleHandle m, const char* name) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMModGetFunction(m, name, 0, &f));
  CHECK(f != NULL, "`%s` not found", name);
  return f;
}

static int call1(TVMFunctionHandle f, TVMValue v, int code, TVMValue* ret, int* ret_code) {
  return TVMFuncCall(f, &v, &code, 1, ret, ret_code);
}

int main(int argc, char** argv) {
  TVMModuleHandle m = NULL;
  TVMFunctionHandle add_one, scale2, greet, fail, workspace_sum, read_custom;
  TVMValue ret, nine[9];
  int ret_code, nine_codes[9], i;
  if (argc < 2) {
    fprintf(stderr, "usage: %s CLASSIC_LIBRARY.so\n", argv[0]);
    return 2;
  }
  CHECK_OK(TVMModLoadFromFile(argv[1], "so", &m));
  if (!CHECK(m != NULL, "no module")) return test_result("classic_modules");
  add_one = get(m, "add_one");
  scale2 = get(m, "scale2");
  greet = get(m, "greet");
  fail = get(m, "fail");
  workspace_sum = get(m, "workspace_sum");
  read_custom = get(m, "read_custom");
  /* The functions keep the library loaded. */
  CHECK_OK(TVMModFree(m));

  CHECK_OK(call1(add_one, tv_int(41), kTVMArgInt, &ret, &ret_code));
  CHECK(ret_code == kTVMArgInt && ret.v_int64 == 42, "add_one(41): code %d", ret_code);
  CHECK_OK(call1(workspace_sum, tv_int(100), kTVMArgInt, &ret, &ret_code));
  CHECK(ret_code == kTVMArgInt && ret.v_int64 == 4950, "workspace_sum(100): code %d",
        ret_code);

  /* A tensor from TVMArrayAlloc as an NDArray handle, then as a bare DLTensor*. */
  {
    int64_t shape[1] = {4};
    TVMArrayHandle t = NULL;
    float* data;
    CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &t));
    data = (float*)t->data;
    for (i = 0; i < 4; i++) data[i] = (float)i + 0.5f;
    CHECK_OK(call1(scale2, tv_handle(t), kTVMNDArrayHandle, &ret, &ret_code));
    CHECK(ret_code == kTVMNullptr, "scale2 returns nothing (code %d)", ret_code);
    CHECK(data[0] == 1.0f && data[3] == 7.0f, "NDArray handle: %f %f", data[0], data[3]);
    {
      DLTensor bare = *t;
      bare.strides = NULL;
      CHECK_OK(call1(scale2, tv_handle(&bare), kTVMDLTensorHandle, &ret, &ret_code));
    }
    CHECK(data[0] == 2.0f && data[3] == 14.0f, "DLTensor*: %f %f", data[0], data[3]);
    CHECK_FAILS_WITH(call1(scale2, tv_int(1), kTVMArgInt, &ret, &ret_code),
                     "scale2 expects one tensor");
    CHECK_OK(TVMArrayFree(t));
  }

  /* Results that are not plain: a string (copied, valid until the next call), a handle. */
  CHECK_OK(TVMFuncCall(greet, NULL, NULL, 0, &ret, &ret_code));
  CHECK(ret_code == kTVMStr && strcmp(ret.v_str, "hello from a classic library") == 0,
        "greet: code %d", ret_code);
  CHECK_OK(TVMFuncCall(read_custom, NULL, NULL, 0, &ret, &ret_code));
  CHECK(ret_code == kTVMOpaqueHandle && ret.v_handle == NULL, "read_custom: code %d", ret_code);

  /* Errors: the kernel's own, a code the kernel refuses, a code nobody knows (refused before
   * the kernel runs), and nine arguments (the general path, which still reaches the kernel). */
  CHECK_FAILS_WITH(TVMFuncCall(fail, NULL, NULL, 0, &ret, &ret_code),
                   "classic kernel failed on purpose");
  CHECK_FAILS_WITH(call1(add_one, tv_str("x"), kTVMStr, &ret, &ret_code),
                   "add_one expects one int argument");
  CHECK_FAILS_WITH(call1(add_one, tv_int(1), 99, &ret, &ret_code), "99");
  for (i = 0; i < 9; i++) {
    nine[i] = tv_int(i);
    nine_codes[i] = kTVMArgInt;
  }
  CHECK_FAILS_WITH(TVMFuncCall(add_one, nine, nine_codes, 9, &ret, &ret_code),
                   "add_one expects one int argument");
  CHECK_FAILS_WITH(TVMFuncCall(add_one, NULL, nine_codes, 1, &ret, &ret_code), "args");

  /* The tvm-ffi door reaches the same kernel. */
  {
    TVMFFIAny arg = ffi_int(-8), out = ffi_none();
    CHECK_OK(TVMFFIFunctionCall(add_one, &arg, 1, &out));
    CHECK(out.type_index == kTVMFFIInt && out.v_int64 == -7, "ffi add_one(-8): index %d",
          out.type_index);
  }

  CHECK_OK(TVMFuncFree(add_one));
  CHECK_OK(TVMFuncFree(scale2));
  CHECK_OK(TVMFuncFree(greet));
  CHECK_OK(TVMFuncFree(fail));
  CHECK_OK(TVMFuncFree(workspace_sum));
  CHECK_OK(TVMFuncFree(read_custom));
  return test_result("classic_modules");
}
