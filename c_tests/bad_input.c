/* Bad input is an error with a message, never a crash: null handles and
 * out-pointers, unknown type codes, negative or wrong argument counts, wrong
 * handle kinds, malformed strings. Every call returns non-zero and leaves a
 * message in TVMGetLastError naming what was wrong. Also run under valgrind. */
#include "check.h"

/* Tries to return two values at once. */
static int two_returns(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                       void* res) {
  (void)num_args;
  (void)res;
  return TVMCFuncSetReturn(ret, args, codes, 2);
}

static int ffi_noop(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = ffi_none();
  return 0;
}

int main(void) {
  TVMFunctionHandle f = NULL, out = NULL;
  TVMValue v[2], ret;
  int codes[2], ret_code = -1, n = 0;
  const char** names = NULL;

  CHECK_OK(TVMFuncCreateFromCFunc(cb_noop, NULL, NULL, &f));

  /* Null names, handles and out-pointers. */
  CHECK_FAILS_WITH(TVMFuncGetGlobal(NULL, &out), "name");
  CHECK_FAILS_WITH(TVMFuncGetGlobal("c_tests.bad", NULL), "out");
  CHECK_FAILS_WITH(TVMFuncRegisterGlobal(NULL, f, 0), "name");
  CHECK_FAILS_WITH(TVMFuncRegisterGlobal("c_tests.bad", NULL, 0), "f");
  CHECK_FAILS_WITH(TVMFuncRemoveGlobal(NULL), "name");
  CHECK_FAILS_WITH(TVMFuncListGlobalNames(NULL, &names), "out_size");
  CHECK_FAILS_WITH(TVMFuncListGlobalNames(&n, NULL), "out_array");
  CHECK_FAILS_WITH(TVMFuncCreateFromCFunc(NULL, NULL, NULL, &out), "func");
  CHECK_FAILS_WITH(TVMFuncCreateFromCFunc(cb_noop, NULL, NULL, NULL), "out");
  CHECK_FAILS_WITH(TVMFuncCall(NULL, v, codes, 0, &ret, &ret_code), "func");
  CHECK_FAILS_WITH(TVMFuncCall(f, v, codes, 0, NULL, &ret_code), "ret_val");
  CHECK_FAILS_WITH(TVMFuncCall(f, v, codes, 0, &ret, NULL), "ret_type_code");
  CHECK_FAILS_WITH(TVMFuncCall(f, NULL, codes, 1, &ret, &ret_code), "args");
  CHECK_FAILS_WITH(TVMFuncCall(f, v, NULL, 1, &ret, &ret_code), "arg_type_codes");
  CHECK_FAILS_WITH(TVMCbArgToReturn(NULL, codes), "value");
  CHECK_FAILS_WITH(TVMObjectRetain(NULL), "obj");
  CHECK_FAILS_WITH(TVMFFIObjectIncRef(NULL), "obj");
  CHECK_FAILS_WITH(TVMObjectGetTypeIndex(f, NULL), "out_tindex");
  CHECK_FAILS_WITH(TVMFFIFunctionCall(NULL, NULL, 0, NULL), "func");
  CHECK_FAILS_WITH(TVMFFIFunctionCreate(NULL, NULL, NULL, &out), "safe_call");
  CHECK_FAILS_WITH(TVMFFIFunctionCreate(NULL, ffi_noop, NULL, NULL), "out");
  CHECK_FAILS_WITH(TVMFFIFunctionGetGlobal(NULL, &out), "name");
  CHECK_FAILS_WITH(TVMFFIAnyViewToOwnedAny(NULL, NULL), "any_view");
  CHECK_FAILS_WITH(TVMFFIDataTypeToString(NULL, NULL), "dtype");
  CHECK_FAILS_WITH(TVMFFIStringFromByteArray(NULL, NULL), "input");

  /* Unknown type codes and negative counts. */
  v[0].v_int64 = 1;
  codes[0] = 99;
  CHECK_FAILS_WITH(TVMFuncCall(f, v, codes, 1, &ret, &ret_code), "99");
  CHECK_FAILS_WITH(TVMFuncCall(f, v, codes, 1, &ret, &ret_code), "argument 0");
  codes[0] = -3;
  CHECK_FAILS_WITH(TVMFuncCall(f, v, codes, 1, &ret, &ret_code), "-3");
  codes[0] = kTVMArgInt;
  CHECK_FAILS_WITH(TVMFuncCall(f, v, codes, -1, &ret, &ret_code), "num_args");
  {
    TVMFFIAny a = ffi_int(1), r = ffi_none();
    CHECK_FAILS_WITH(TVMFFIFunctionCall(f, &a, -1, &r), "num_args");
    CHECK_FAILS_WITH(TVMFFIFunctionCall(f, NULL, 2, &r), "args");
  }

  /* Wrong handle kinds: a string object where a function is expected. */
  {
    TVMFFIByteArray text = ffi_str("definitely not a function object");
    TVMFFIAny s = ffi_none(), r = ffi_none();
    CHECK_OK(TVMFFIStringFromByteArray(&text, &s));
    CHECK(s.type_index == kTVMFFIStr, "a string object (index %d)", s.type_index);
    CHECK_FAILS_WITH(TVMFuncRegisterGlobal("c_tests.bad.str", s.v_obj, 0), "f");
    CHECK_FAILS_WITH(TVMFuncCall(s.v_obj, v, codes, 0, &ret, &ret_code), "func");
    CHECK_FAILS_WITH(TVMFFIFunctionCall(s.v_obj, NULL, 0, &r), "not a function");
    ffi_release(&s);
  }

  /* Wrong argument counts and types inside tvmrt's own functions. */
  {
    TVMFunctionHandle remove = NULL;
    CHECK_OK(TVMFuncGetGlobal("ffi.FunctionRemoveGlobal", &remove));
    CHECK(remove != NULL, "built-in ffi.FunctionRemoveGlobal exists");
    if (remove != NULL) {
      CHECK_FAILS_WITH(TVMFuncCall(remove, v, codes, 0, &ret, &ret_code), "argument");
      v[0].v_int64 = 5;
      codes[0] = kTVMArgInt;
      CHECK_FAILS_WITH(TVMFuncCall(remove, v, codes, 1, &ret, &ret_code), "name");
      TVMFuncFree(remove);
    }
  }

  /* A callback misusing TVMCFuncSetReturn. */
  {
    TVMFunctionHandle g = NULL;
    CHECK_OK(TVMFuncCreateFromCFunc(two_returns, NULL, NULL, &g));
    v[0].v_int64 = 1;
    v[1].v_int64 = 2;
    codes[0] = codes[1] = kTVMArgInt;
    CHECK_FAILS_WITH(TVMFuncCall(g, v, codes, 2, &ret, &ret_code), "num_ret");
    CHECK_OK(TVMFuncFree(g));
  }

  /* Malformed strings and unknown names. */
  {
    TVMFFIByteArray bad = ffi_str("float33x");
    TVMFFIByteArray not_utf8 = {"\xff\xfe", 2};
    DLDataType t;
    CHECK_FAILS_WITH(TVMFFIDataTypeFromString(&bad, &t), "float33x");
    CHECK_FAILS_WITH(TVMFFIFunctionGetGlobal(&not_utf8, &out), "UTF-8");
    CHECK_FAILS_WITH(TVMFuncRegisterGlobal("", f, 0), "empty");
    CHECK_FAILS_WITH(TVMFuncRemoveGlobal("c_tests.bad.never_registered"),
                     "c_tests.bad.never_registered");
    CHECK_FAILS_WITH(TVMByteArrayFree((TVMByteArray*)&bad), "byte array");
  }

  /* The error is also visible from the tvm-ffi side, and the library still works. */
  {
    TVMFFIObjectHandle err = NULL;
    CHECK_FAILS_WITH(TVMFuncGetGlobal(NULL, &out), "name");
    TVMFFIErrorMoveFromRaised(&err);
    CHECK(err != NULL, "the failure raised an error object");
    if (err) TVMFFIObjectDecRef(err);
    CHECK_OK(TVMFuncCall(f, v, codes, 0, &ret, &ret_code));
    CHECK(ret_code == kTVMNullptr, "a working call afterwards returns None (code %d)", ret_code);
  }

  CHECK_OK(TVMFuncFree(f));
  return test_result("bad_input");
}
