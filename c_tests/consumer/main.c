/* A program of a tvmrt user, built against the installed package: calls a C callback through
 * the classic API, as a TVM user's program does, including tvmrt.h with TVM's headers. */
#include <stdio.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvmrt.h>

static int add_one(TVMValue* args, int* codes, int n, TVMRetValueHandle ret, void* resource) {
  TVMValue v;
  int code = kTVMArgInt;
  (void)resource;
  if (n != 1 || codes[0] != kTVMArgInt) return -1;
  v.v_int64 = args[0].v_int64 + 1;
  return TVMCFuncSetReturn(ret, &v, &code, 1);
}

int main(void) {
  TVMFunctionHandle f = NULL;
  TVMValue arg, ret;
  int code = kTVMArgInt, ret_code = 0;
  if (TVMFuncCreateFromCFunc(add_one, NULL, NULL, &f) != 0) return 1;
  arg.v_int64 = 41;
  if (TVMFuncCall(f, &arg, &code, 1, &ret, &ret_code) != 0 || ret.v_int64 != 42) {
    fprintf(stderr, "consumer: call failed: %s\n", TVMGetLastError());
    return 1;
  }
  TVMFuncFree(f);
  printf("consumer: 41 + 1 = %lld\n", (long long)ret.v_int64);
  return 0;
}
