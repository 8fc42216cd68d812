/* A first tvmrt program: register a C function as a global packed function,
 * then find it by name and call it through both of TVM's C ABIs: the classic
 * one (TVMFuncGetGlobal / TVMFuncCall, TVM <= 0.20) and tvm-ffi
 * (TVMFFIFunctionGetGlobal / TVMFFIFunctionCall, TVM >= 0.21).
 *
 *   cc hello.c -Iinclude -Ltarget/release -ltvmrt -Wl,-rpath,$PWD/target/release */
#include <tvmrt.h>

#include <stdio.h>
#include <string.h>

/* greet(name, times) -> "hello, <name>" repeated `times` times, as a classic callback. */
static int greet(TVMValue* args, int* type_codes, int num_args, TVMRetValueHandle ret,
                 void* resource_handle) {
  char text[256] = "";
  TVMValue result;
  int result_code = kTVMStr;
  int64_t i;
  (void)resource_handle;
  if (num_args != 2 || type_codes[0] != kTVMStr || type_codes[1] != kTVMArgInt) {
    TVMAPISetLastError("TypeError: greet(name: str, times: int)");
    return -1;
  }
  for (i = 0; i < args[1].v_int64 && strlen(text) + strlen(args[0].v_str) + 9 < sizeof(text);
       i++) {
    strcat(text, i ? " hello, " : "hello, ");
    strcat(text, args[0].v_str);
  }
  result.v_str = text;
  /* The string is copied, so `text` may go out of scope. */
  return TVMCFuncSetReturn(ret, &result, &result_code, 1);
}

static int fail(const char* what) {
  fprintf(stderr, "%s failed: %s\n", what, TVMGetLastError());
  return 1;
}

int main(void) {
  TVMFunctionHandle f = NULL, found = NULL;
  TVMFFIObjectHandle ffi_found = NULL;
  TVMFFIByteArray name = {"example.greet", strlen("example.greet")};

  /* Register. */
  if (TVMFuncCreateFromCFunc(greet, NULL, NULL, &f) != 0) return fail("TVMFuncCreateFromCFunc");
  if (TVMFuncRegisterGlobal("example.greet", f, 0) != 0) return fail("TVMFuncRegisterGlobal");
  TVMFuncFree(f); /* the registry keeps its own reference */

  /* Classic ABI: TVMValue + type codes. */
  {
    TVMValue args[2], ret;
    int codes[2] = {kTVMStr, kTVMArgInt}, ret_code = -1;
    args[0].v_str = "classic ABI";
    args[1].v_int64 = 2;
    if (TVMFuncGetGlobal("example.greet", &found) != 0 || found == NULL) {
      return fail("TVMFuncGetGlobal");
    }
    if (TVMFuncCall(found, args, codes, 2, &ret, &ret_code) != 0) return fail("TVMFuncCall");
    printf("TVMFuncCall        -> %s\n", ret.v_str);
    TVMFuncFree(found);
  }

  /* tvm-ffi ABI: TVMFFIAny values; the same function, found in the same registry. */
  {
    TVMFFIAny args[2], result;
    TVMFFIByteArray text;
    memset(args, 0, sizeof(args));
    memset(&result, 0, sizeof(result));
    args[0].type_index = kTVMFFIRawStr;
    args[0].v_c_str = "tvm-ffi ABI";
    args[1].type_index = kTVMFFIInt;
    args[1].v_int64 = 1;
    if (TVMFFIFunctionGetGlobal(&name, &ffi_found) != 0 || ffi_found == NULL) {
      return fail("TVMFFIFunctionGetGlobal");
    }
    if (TVMFFIFunctionCall(ffi_found, args, 2, &result) != 0) return fail("TVMFFIFunctionCall");
    /* Short strings are stored inline; longer ones are string objects. */
    text = result.type_index == kTVMFFISmallStr ? TVMFFISmallBytesGetContentByteArray(&result)
                                                : *TVMFFIBytesGetByteArrayPtr(result.v_obj);
    printf("TVMFFIFunctionCall -> %.*s\n", (int)text.size, text.data);
    if (result.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(result.v_obj);

    /* Errors cross too: a wrong argument is reported with the callback's message. */
    args[1].type_index = kTVMFFIFloat;
    args[1].v_float64 = 1.0;
    if (TVMFFIFunctionCall(ffi_found, args, 2, &result) == 0) {
      fprintf(stderr, "expected a TypeError\n");
      return 1;
    }
    printf("error as expected  -> %s\n", TVMGetLastError());
    TVMFFIObjectDecRef(ffi_found);
  }

  TVMFuncRemoveGlobal("example.greet");
  return 0;
}
