/* C callbacks receiving functions as arguments, returning new functions
 * (closures over a resource handle), and returning their own arguments. */
#include "check.h"

#include <stdlib.h>

static int g_adders_freed = 0;

static int add_one(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                   void* resource) {
  (void)codes;
  (void)num_args;
  (void)resource;
  return cb_return_int(ret, args[0].v_int64 + 1);
}

/* apply(f, x) = f(x), calling back through TVMFuncCall. */
static int apply(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                 void* resource) {
  TVMValue out;
  int out_code = -1;
  (void)resource;
  if (num_args != 2 || codes[0] != kTVMPackedFuncHandle) {
    TVMAPISetLastError("TypeError: apply expects (function, value)");
    return -1;
  }
  if (TVMFuncCall(args[0].v_handle, &args[1], &codes[1], 1, &out, &out_code) != 0) return -1;
  return TVMCFuncSetReturn(ret, &out, &out_code, 1);
}

/* The closure made by make_adder: adds *(int64_t*)resource. */
static int adder(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                 void* resource) {
  (void)codes;
  (void)num_args;
  return cb_return_int(ret, args[0].v_int64 + *(int64_t*)resource);
}

static void free_adder(void* resource) {
  g_adders_freed++;
  free(resource);
}

/* make_adder(n) returns a new function x -> x + n. */
static int make_adder(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                      void* resource) {
  TVMFunctionHandle f = NULL;
  TVMValue out;
  int code = kTVMPackedFuncHandle, rc;
  int64_t* n = (int64_t*)malloc(sizeof(int64_t));
  (void)codes;
  (void)num_args;
  (void)resource;
  *n = args[0].v_int64;
  if (TVMFuncCreateFromCFunc(adder, n, free_adder, &f) != 0) return -1;
  out.v_handle = f;
  /* TVMCFuncSetReturn copies the value: the caller gets its own reference. */
  rc = TVMCFuncSetReturn(ret, &out, &code, 1);
  TVMFuncFree(f);
  return rc;
}

/* identity(x) returns its argument through TVMCbArgToReturn, as TVM's
 * frontends do (the converted value is owned, and released after SetReturn). */
static int identity(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                    void* resource) {
  TVMValue v;
  int code, rc;
  (void)resource;
  if (num_args != 1) {
    TVMAPISetLastError("ValueError: identity expects 1 argument");
    return -1;
  }
  v = args[0];
  code = codes[0];
  if (TVMCbArgToReturn(&v, &code) != 0) return -1;
  rc = TVMCFuncSetReturn(ret, &v, &code, 1);
  if (code == kTVMPackedFuncHandle || code == kTVMObjectHandle || code == kTVMModuleHandle) {
    TVMObjectFree(v.v_handle);
  }
  return rc;
}

static TVMFunctionHandle make(TVMPackedCFunc fn) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMFuncCreateFromCFunc(fn, NULL, NULL, &f));
  return f;
}

int main(void) {
  TVMFunctionHandle inc = make(add_one), ap = make(apply), mk = make(make_adder),
                    id = make(identity);
  TVMValue args[2], ret;
  int codes[2], ret_code = -1;

  /* A function as an argument. */
  args[0] = tv_handle(inc);
  codes[0] = kTVMPackedFuncHandle;
  args[1] = tv_int(99);
  codes[1] = kTVMArgInt;
  CHECK_OK(TVMFuncCall(ap, args, codes, 2, &ret, &ret_code));
  CHECK(ret_code == kTVMArgInt && ret.v_int64 == 100, "apply(add_one, 99) = %lld (code %d)",
        (long long)ret.v_int64, ret_code);

  /* apply(apply, ...) is a type error reported from inside the callback. */
  args[0] = tv_handle(ap);
  CHECK_FAILS_WITH(TVMFuncCall(ap, args, codes, 2, &ret, &ret_code), "apply expects");

  /* A function as a result: a closure that outlives the call that made it. */
  {
    TVMFunctionHandle add5 = NULL;
    args[0] = tv_int(5);
    codes[0] = kTVMArgInt;
    CHECK_OK(TVMFuncCall(mk, args, codes, 1, &ret, &ret_code));
    CHECK(ret_code == kTVMPackedFuncHandle, "make_adder returns a function (code %d)", ret_code);
    add5 = ret.v_handle;
    CHECK(g_adders_freed == 0, "closure alive while the caller holds it");
    args[0] = tv_int(37);
    CHECK_OK(TVMFuncCall(add5, args, codes, 1, &ret, &ret_code));
    CHECK(ret.v_int64 == 42, "add5(37) = %lld", (long long)ret.v_int64);

    /* ... and passed back in as an argument. */
    args[0] = tv_handle(add5);
    codes[0] = kTVMPackedFuncHandle;
    args[1] = tv_int(1);
    codes[1] = kTVMArgInt;
    CHECK_OK(TVMFuncCall(ap, args, codes, 2, &ret, &ret_code));
    CHECK(ret.v_int64 == 6, "apply(add5, 1) = %lld", (long long)ret.v_int64);

    /* identity(add5) hands back the same function object. */
    CHECK_OK(TVMFuncCall(id, args, codes, 1, &ret, &ret_code));
    CHECK(ret_code == kTVMPackedFuncHandle && ret.v_handle == add5,
          "identity returns the same function (code %d)", ret_code);
    if (ret_code == kTVMPackedFuncHandle) CHECK_OK(TVMFuncFree(ret.v_handle));

    CHECK_OK(TVMFuncFree(add5));
    CHECK(g_adders_freed == 1, "closure freed once with its last handle (%d)", g_adders_freed);
  }

  /* identity of plain values. */
  args[0] = tv_int(-7);
  codes[0] = kTVMArgInt;
  CHECK_OK(TVMFuncCall(id, args, codes, 1, &ret, &ret_code));
  CHECK(ret_code == kTVMArgInt && ret.v_int64 == -7, "identity(-7)");
  args[0] = tv_str("hello, callbacks");
  codes[0] = kTVMStr;
  CHECK_OK(TVMFuncCall(id, args, codes, 1, &ret, &ret_code));
  CHECK(ret_code == kTVMStr && strcmp(ret.v_str, "hello, callbacks") == 0, "identity(str)");

  /* A global function found by name and passed as an argument. */
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.callbacks.inc", inc, 1));
  {
    TVMFunctionHandle found = NULL;
    CHECK_OK(TVMFuncGetGlobal("c_tests.callbacks.inc", &found));
    args[0] = tv_handle(found);
    codes[0] = kTVMPackedFuncHandle;
    args[1] = tv_int(0);
    codes[1] = kTVMArgInt;
    CHECK_OK(TVMFuncCall(ap, args, codes, 2, &ret, &ret_code));
    CHECK(ret.v_int64 == 1, "apply(global inc, 0)");
    CHECK_OK(TVMFuncFree(found));
  }
  CHECK_OK(TVMFuncRemoveGlobal("c_tests.callbacks.inc"));

  CHECK_OK(TVMFuncFree(inc));
  CHECK_OK(TVMFuncFree(ap));
  CHECK_OK(TVMFuncFree(mk));
  CHECK_OK(TVMFuncFree(id));
  return test_result("callbacks");
}
