/* The two doors onto one registry: a function registered through the tvm-ffi
 * API is found and called through the classic one, and the reverse, with
 * arguments, results and errors (kind and message) converted. */
#include "check.h"

/* tvm-ffi callee: sum of int arguments; a string argument raises ValueError;
 * no arguments returns a string. */
static int ffi_sum(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  int64_t sum = 0;
  int32_t i;
  (void)self;
  if (num_args == 0) {
    TVMFFIByteArray text = ffi_str("sum of nothing, said tvm-ffi");
    return TVMFFIStringFromByteArray(&text, result);
  }
  for (i = 0; i < num_args; i++) {
    if (args[i].type_index != kTVMFFIInt) {
      char msg[96];
      snprintf(msg, sizeof(msg), "argument %d has type index %d, not int", i,
               args[i].type_index);
      TVMFFIErrorSetRaisedFromCStr("ValueError", msg);
      return -1;
    }
    sum += args[i].v_int64;
  }
  *result = ffi_int(sum);
  return 0;
}

/* tvm-ffi callee created with NULL self and no deleter: self is the function object. */
static void* g_seen_self = NULL;
static int ffi_self(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)args;
  (void)num_args;
  g_seen_self = self;
  *result = ffi_int(1);
  return 0;
}

/* Classic callee: x * 10 for an int; TypeError otherwise; returns a string for a string. */
static int classic_mul(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                       void* resource) {
  TVMValue out;
  int code;
  (void)resource;
  if (num_args != 1) {
    TVMAPISetLastError("TypeError: classic_mul takes 1 argument");
    return -1;
  }
  if (codes[0] == kTVMStr) {
    out.v_str = "classic says hello";
    code = kTVMStr;
    return TVMCFuncSetReturn(ret, &out, &code, 1);
  }
  if (codes[0] != kTVMArgInt) {
    TVMAPISetLastError("TypeError: classic_mul wants an int");
    return -1;
  }
  out.v_int64 = args[0].v_int64 * 10;
  code = kTVMArgInt;
  return TVMCFuncSetReturn(ret, &out, &code, 1);
}

/* Checks the raised error object's kind and message, then releases it. */
static void expect_raised(const char* kind, const char* message_part) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (!CHECK(err != NULL, "an error is raised")) return;
  {
    TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
    CHECK(cell->kind.size == strlen(kind) && memcmp(cell->kind.data, kind, cell->kind.size) == 0,
          "kind %.*s, expected %s", (int)cell->kind.size, cell->kind.data, kind);
    CHECK(bytes_contain(cell->message, message_part),
          "message %.*s, expected %s in it", (int)cell->message.size, cell->message.data,
          message_part);
  }
  TVMFFIObjectDecRef(err);
}

int main(void) {
  TVMFFIByteArray sum_name = ffi_str("c_tests.cross.ffi_sum");
  TVMFFIByteArray mul_name = ffi_str("c_tests.cross.classic_mul");
  TVMFFIObjectHandle h = NULL;
  TVMFunctionHandle cf = NULL;

  /* tvm-ffi in, classic out. */
  CHECK_OK(TVMFFIFunctionCreate(NULL, ffi_sum, NULL, &h));
  CHECK_OK(TVMFFIFunctionSetGlobal(&sum_name, h, 0));
  CHECK_OK(TVMFFIObjectDecRef(h));
  CHECK_OK(TVMFuncGetGlobal("c_tests.cross.ffi_sum", &cf));
  CHECK(cf != NULL, "classic lookup finds the tvm-ffi function");
  if (cf != NULL) {
    TVMValue args[3], ret;
    int codes[3] = {kTVMArgInt, kTVMArgInt, kTVMArgInt}, ret_code = -1;
    const char* msg;
    args[0] = tv_int(1);
    args[1] = tv_int(20);
    args[2] = tv_int(300);
    CHECK_OK(TVMFuncCall(cf, args, codes, 3, &ret, &ret_code));
    CHECK(ret_code == kTVMArgInt && ret.v_int64 == 321, "sum = %lld (code %d)",
          (long long)ret.v_int64, ret_code);

    /* A string result arrives as a classic string. */
    CHECK_OK(TVMFuncCall(cf, args, codes, 0, &ret, &ret_code));
    CHECK(ret_code == kTVMStr && strcmp(ret.v_str, "sum of nothing, said tvm-ffi") == 0,
          "string result (code %d)", ret_code);

    /* A tvm-ffi error reaches the classic caller as "Kind: message". */
    args[1] = tv_str("twenty");
    codes[1] = kTVMStr;
    CHECK(TVMFuncCall(cf, args, codes, 3, &ret, &ret_code) == -1, "the callee fails");
    msg = TVMGetLastError();
    CHECK(strncmp(msg, "ValueError: argument 1 has type index", 37) == 0, "classic text: %s",
          msg);
    CHECK_OK(TVMFuncFree(cf));
  }

  /* Classic in, tvm-ffi out. */
  CHECK_OK(TVMFuncCreateFromCFunc(classic_mul, NULL, NULL, &cf));
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.cross.classic_mul", cf, 0));
  CHECK_OK(TVMFuncFree(cf));
  h = NULL;
  CHECK_OK(TVMFFIFunctionGetGlobal(&mul_name, &h));
  CHECK(h != NULL, "tvm-ffi lookup finds the classic function");
  if (h != NULL) {
    TVMFFIAny arg = ffi_int(7), result = ffi_none();
    CHECK(TVMFFIObjectGetTypeIndex(h) == kTVMFFIFunction, "a function object");
    CHECK_OK(TVMFFIFunctionCall(h, &arg, 1, &result));
    CHECK(result.type_index == kTVMFFIInt && result.v_int64 == 70, "7 * 10 = %lld (index %d)",
          (long long)result.v_int64, result.type_index);

    /* Calling through the cell directly, as tvm-ffi's C++ headers do. */
    result = ffi_none();
    CHECK(TVMFFIFunctionGetCellPtr(h)->safe_call(h, &arg, 1, &result) == 0 &&
              result.v_int64 == 70,
          "safe_call through the cell");

    /* A classic string result arrives as a tvm-ffi string. */
    arg.type_index = kTVMFFIRawStr;
    arg.v_c_str = "hi";
    result = ffi_none();
    CHECK_OK(TVMFFIFunctionCall(h, &arg, 1, &result));
    CHECK(ffi_string_is(&result, "classic says hello"), "string result, index %d",
          result.type_index);
    ffi_release(&result);

    /* A classic error reaches tvm-ffi with its kind and message split. */
    arg.type_index = kTVMFFIFloat;
    arg.v_float64 = 1.5;
    CHECK(TVMFFIFunctionCall(h, &arg, 1, &result) != 0, "the classic callee fails");
    expect_raised("TypeError", "classic_mul wants an int");
    CHECK(TVMFFIFunctionCall(h, NULL, 0, &result) != 0, "wrong count fails");
    expect_raised("TypeError", "takes 1 argument");
    CHECK_OK(TVMFFIObjectDecRef(h));
  }

  /* The tvm-ffi function calls the classic one through the ffi door, nested. */
  {
    TVMFunctionHandle sum = NULL;
    TVMFFIObjectHandle mul = NULL;
    TVMFFIAny arg = ffi_int(4), mid = ffi_none(), out = ffi_none();
    CHECK_OK(TVMFFIFunctionGetGlobal(&mul_name, &mul));
    CHECK_OK(TVMFFIFunctionGetGlobal(&sum_name, &sum));
    CHECK_OK(TVMFFIFunctionCall(mul, &arg, 1, &mid));
    {
      TVMFFIAny two[2];
      two[0] = mid;
      two[1] = ffi_int(2);
      CHECK_OK(TVMFFIFunctionCall(sum, two, 2, &out));
    }
    CHECK(out.type_index == kTVMFFIInt && out.v_int64 == 42, "4 * 10 + 2 = %lld",
          (long long)out.v_int64);
    TVMFFIObjectDecRef(mul);
    TVMFFIObjectDecRef(sum);
  }

  /* NULL self and no deleter: the callback receives the function object. */
  {
    TVMFFIAny result = ffi_none();
    CHECK_OK(TVMFFIFunctionCreate(NULL, ffi_self, NULL, &h));
    CHECK_OK(TVMFFIFunctionCall(h, NULL, 0, &result));
    CHECK(g_seen_self == h, "self is the function object (%p vs %p)", g_seen_self, (void*)h);
    CHECK_OK(TVMFFIObjectDecRef(h));
  }

  /* The version tvm-ffi callers check: exactly the shipped header's. */
  {
    TVMFFIVersion v;
    memset(&v, 0xff, sizeof(v));
    TVMFFIGetVersion(&v);
    CHECK(v.major == TVM_FFI_VERSION_MAJOR && v.minor == TVM_FFI_VERSION_MINOR &&
              v.patch == TVM_FFI_VERSION_PATCH,
          "version %u.%u.%u, header %d.%d.%d", v.major, v.minor, v.patch, TVM_FFI_VERSION_MAJOR,
          TVM_FFI_VERSION_MINOR, TVM_FFI_VERSION_PATCH);
  }

  CHECK_OK(TVMFuncRemoveGlobal("c_tests.cross.ffi_sum"));
  CHECK_OK(TVMFuncRemoveGlobal("c_tests.cross.classic_mul"));
  return test_result("cross_abi");
}
