/* A library packed by `tvmrt pack` from the guide's generated C++, the plain-C form and the
 * guide's ExampleJSON graph, loaded with TVMModLoadFromFile: every function of the sources is
 * in the library module, the subgraph is reached through its import, and errors raised by the
 * generated wrapper reach TVMGetLastError.
 * Usage: byoc_packed <packed.so> */
#include "byoc_common.h"

int main(int argc, char** argv) {
  CHECK(argc == 2);
  TVMModuleHandle lib = NULL;
  CHECK_OK(TVMModLoadFromFile(argv[1], "", &lib));
  const char* own[] = {"gcc_0", "gcc_1"};
  for (int i = 0; i < 2; ++i) {
    TVMFunctionHandle f = NULL;
    CHECK_OK(TVMModGetFunction(lib, own[i], 0, &f));
    CHECK(f != NULL);
    guide_call_and_check(f, 10 + i);
    CHECK_OK(TVMFuncFree(f));
  }
  TVMFunctionHandle sub = NULL;
  CHECK_OK(TVMModGetFunction(lib, "subgraph_0", 0, &sub));
  CHECK(sub == NULL); /* not in the library itself ... */
  CHECK_OK(TVMModGetFunction(lib, "subgraph_0", 1, &sub));
  CHECK(sub != NULL); /* ... but in the ExampleJSON module it imports */
  CHECK(guide_call_and_check(sub, 12) == kTVMNDArrayHandle); /* it returns its result */

  /* Errors from the generated code (tvmrt's packed_func.h) and from the plain-C entry. */
  TVMFunctionHandle g0 = NULL, g1 = NULL;
  CHECK_OK(TVMModGetFunction(lib, "gcc_0", 0, &g0));
  CHECK_OK(TVMModGetFunction(lib, "gcc_1", 0, &g1));
  GuideCase g;
  TVMValue values[5], ret;
  int codes[5], ret_code;
  guide_init(&g, 13);
  guide_args(&g, values, codes);
  expect_error(TVMFuncCall(g0, values, codes, 4, &ret, &ret_code),
               "gcc_0: expected 5 argument(s), got 4");
  codes[2] = kDLFloat;
  expect_error(TVMFuncCall(g0, values, codes, 5, &ret, &ret_code),
               "gcc_0: argument 2 must be DLTensor*");
  expect_error(TVMFuncCall(g1, values, codes, 5, &ret, &ret_code),
               "gcc_1 expects DLTensor* arguments");

  CHECK_OK(TVMModFree(lib));
  /* Functions keep the library loaded. */
  CHECK(guide_call_and_check(sub, 14) == kTVMNDArrayHandle);
  guide_call_and_check(g0, 15);
  CHECK_OK(TVMFuncFree(sub));
  CHECK_OK(TVMFuncFree(g0));
  CHECK_OK(TVMFuncFree(g1));
  printf("byoc_packed: ok\n");
  return 0;
}
