/* The guide's generated code (examples/byoc/gcc_0_guide.cc, compiled into this program against
 * tvmrt's drop-in headers) called directly through the entry TVM_DLL_EXPORT_TYPED_FUNC
 * defines, with the classic backend signature, in a program linking libtvmrt: results, the
 * returned int, and errors reported through TVMAPISetLastError (the weak reference the header
 * makes resolves to libtvmrt's export). */
#include "byoc_common.h"

extern int gcc_0(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                 int* out_ret_tcode, void* resource_handle);

int main(void) {
  GuideCase g;
  TVMValue values[5], ret;
  int codes[5], ret_code = -1;
  guide_init(&g, 21);
  guide_args(&g, values, codes);
  CHECK(gcc_0(values, codes, 5, &ret, &ret_code, NULL) == 0);
  CHECK(ret_code == kDLInt && ret.v_int64 == 0);
  guide_check(&g);

  /* kTVMNDArrayHandle carries the same DLTensor* in classic TVM. */
  guide_init(&g, 22);
  guide_args(&g, values, codes);
  codes[0] = kTVMNDArrayHandle;
  CHECK(gcc_0(values, codes, 5, &ret, &ret_code, NULL) == 0);
  guide_check(&g);

  expect_error(gcc_0(values, codes, 6, &ret, &ret_code, NULL),
               "TypeError: gcc_0: expected 5 argument(s), got 6");
  codes[4] = kTVMStr;
  expect_error(gcc_0(values, codes, 5, &ret, &ret_code, NULL),
               "gcc_0: argument 4 must be DLTensor* (type code 7 or 13), got str (type code 11)");
  printf("byoc_guide_direct: ok\n");
  return 0;
}
