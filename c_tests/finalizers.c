/* Finalizers and deleters run exactly once, when the last reference goes:
 * references held by handles, by the registry, by callees and by values. */
#include "check.h"

static int g_fin[12];

static void count_fin(void* resource) { g_fin[(intptr_t)resource]++; }

static void count_deleter(void* self) { g_fin[(intptr_t)self]++; }

static int ffi_noop(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  *result = ffi_none();
  return 0;
}

/* Keeps a reference to its function argument in a static slot (released later). */
static TVMFunctionHandle g_kept = NULL;
static int keep(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                void* resource) {
  TVMValue v = args[0];
  int code = codes[0];
  (void)num_args;
  (void)ret;
  (void)resource;
  if (TVMCbArgToReturn(&v, &code) != 0) return -1;
  g_kept = v.v_handle;
  return 0;
}

/* Sets its function argument as the result, then fails: the result must still be released. */
static int set_then_fail(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                         void* resource) {
  (void)num_args;
  (void)resource;
  if (TVMCFuncSetReturn(ret, &args[0], &codes[0], 1) != 0) return -1;
  TVMAPISetLastError("set_then_fail: failed after setting a result");
  return -1;
}

/* Sets its function argument as the result, then replaces it with an int. */
static int set_twice(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                     void* resource) {
  TVMValue seven;
  int int_code = kTVMArgInt;
  (void)num_args;
  (void)resource;
  seven.v_int64 = 7;
  if (TVMCFuncSetReturn(ret, &args[0], &codes[0], 1) != 0) return -1;
  return TVMCFuncSetReturn(ret, &seven, &int_code, 1);
}

static TVMFunctionHandle make(intptr_t slot) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMFuncCreateFromCFunc(cb_noop, (void*)slot, count_fin, &f));
  return f;
}

int main(void) {
  TVMFunctionHandle f, g, k;
  TVMValue a, out;
  int code, out_code;

  /* 0: one handle. */
  f = make(0);
  CHECK(g_fin[0] == 0, "not finalized while held");
  CHECK_OK(TVMFuncFree(f));
  CHECK(g_fin[0] == 1, "finalized once by the last free (%d)", g_fin[0]);

  /* 1: handle + registry + a looked-up handle + a retained reference. */
  f = make(1);
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.fin.one", f, 0));
  CHECK_OK(TVMFuncFree(f));
  CHECK(g_fin[1] == 0, "registry keeps it alive");
  CHECK_OK(TVMFuncGetGlobal("c_tests.fin.one", &g));
  CHECK_OK(TVMObjectRetain(g));
  CHECK_OK(TVMFuncRemoveGlobal("c_tests.fin.one"));
  CHECK(g_fin[1] == 0, "handles keep it alive after removal");
  CHECK_OK(TVMObjectFree(g));
  CHECK(g_fin[1] == 0, "one handle left");
  CHECK_OK(TVMFuncFree(g));
  CHECK(g_fin[1] == 1, "finalized once (%d)", g_fin[1]);

  /* 2: replaced by an override: the old function goes when the registry drops it. */
  f = make(2);
  g = make(3);
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.fin.two", f, 0));
  CHECK_OK(TVMFuncFree(f));
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.fin.two", g, 1));
  CHECK(g_fin[2] == 1, "overridden function finalized (%d)", g_fin[2]);
  CHECK(g_fin[3] == 0, "the new one is alive");
  CHECK_OK(TVMFuncFree(g));
  CHECK_OK(TVMFuncRemoveGlobal("c_tests.fin.two"));
  CHECK(g_fin[3] == 1, "the new one finalized on removal (%d)", g_fin[3]);

  /* 4: a callee keeps a reference to its argument past the call. */
  CHECK_OK(TVMFuncCreateFromCFunc(keep, NULL, NULL, &k));
  f = make(4);
  a.v_handle = f;
  code = kTVMPackedFuncHandle;
  CHECK_OK(TVMFuncCall(k, &a, &code, 1, &out, &out_code));
  CHECK_OK(TVMFuncFree(f));
  CHECK(g_fin[4] == 0, "kept by the callee");
  CHECK(g_kept == f, "the callee kept the same object");
  CHECK_OK(TVMFuncFree(g_kept));
  CHECK(g_fin[4] == 1, "finalized once the callee let go (%d)", g_fin[4]);
  CHECK_OK(TVMFuncFree(k));

  /* 5: a tvm-ffi function with self and deleter; references through the ffi API. */
  {
    TVMFFIObjectHandle h = NULL, found = NULL;
    TVMFFIByteArray name = ffi_str("c_tests.fin.ffi");
    CHECK_OK(TVMFFIFunctionCreate((void*)(intptr_t)5, ffi_noop, count_deleter, &h));
    CHECK_OK(TVMFFIObjectIncRef(h));
    CHECK_OK(TVMFFIFunctionSetGlobal(&name, h, 0));
    CHECK_OK(TVMFFIObjectDecRef(h));
    CHECK_OK(TVMFFIObjectDecRef(h));
    CHECK(g_fin[5] == 0, "registry holds the ffi function");
    CHECK_OK(TVMFFIFunctionGetGlobal(&name, &found));
    CHECK_OK(TVMFuncRemoveGlobal("c_tests.fin.ffi"));
    CHECK(g_fin[5] == 0, "looked-up reference holds it");
    CHECK_OK(TVMFFIObjectDecRef(found));
    CHECK(g_fin[5] == 1, "deleter ran once (%d)", g_fin[5]);
  }

  /* 6: a function held inside an owned value (TVMFFIAnyViewToOwnedAny). */
  {
    TVMFFIAny view = ffi_none(), owned = ffi_none();
    f = make(6);
    view.type_index = kTVMFFIFunction;
    view.v_obj = (TVMFFIObject*)f;
    CHECK_OK(TVMFFIAnyViewToOwnedAny(&view, &owned));
    CHECK_OK(TVMFuncFree(f));
    CHECK(g_fin[6] == 0, "the owned value holds a reference");
    CHECK(owned.type_index == kTVMFFIFunction && owned.v_obj == (TVMFFIObject*)f,
          "owned value is the same function");
    ffi_release(&owned);
    CHECK(g_fin[6] == 1, "finalized with the value (%d)", g_fin[6]);
  }

  /* 7-10: a result set by a callback is released when the callback fails afterwards, or
   * sets another result; through TVMFuncCall and through TVMFFIFunctionCall. */
  {
    TVMFunctionHandle fail_fn = NULL, twice_fn = NULL;
    TVMFFIAny arg = ffi_none(), result = ffi_none();
    CHECK_OK(TVMFuncCreateFromCFunc(set_then_fail, NULL, NULL, &fail_fn));
    CHECK_OK(TVMFuncCreateFromCFunc(set_twice, NULL, NULL, &twice_fn));

    f = make(7);
    a.v_handle = f;
    code = kTVMPackedFuncHandle;
    CHECK_FAILS_WITH(TVMFuncCall(fail_fn, &a, &code, 1, &out, &out_code),
                     "set_then_fail: failed after setting a result");
    CHECK_OK(TVMFuncFree(f));
    CHECK(g_fin[7] == 1, "classic call: the failed call's result released (%d)", g_fin[7]);

    f = make(8);
    arg.type_index = kTVMFFIFunction;
    arg.v_obj = (TVMFFIObject*)f;
    CHECK_FAILS_WITH(TVMFFIFunctionCall(fail_fn, &arg, 1, &result),
                     "set_then_fail: failed after setting a result");
    CHECK(result.type_index == kTVMFFINone, "no result after a failure (index %d)",
          result.type_index);
    CHECK_OK(TVMFuncFree(f));
    CHECK(g_fin[8] == 1, "ffi call: the failed call's result released (%d)", g_fin[8]);

    f = make(9);
    a.v_handle = f;
    CHECK_OK(TVMFuncCall(twice_fn, &a, &code, 1, &out, &out_code));
    CHECK(out_code == kTVMArgInt && out.v_int64 == 7, "classic call: the second result (%d)",
          out_code);
    CHECK_OK(TVMFuncFree(f));
    CHECK(g_fin[9] == 1, "classic call: the replaced result released (%d)", g_fin[9]);

    f = make(10);
    arg.v_obj = (TVMFFIObject*)f;
    CHECK_OK(TVMFFIFunctionCall(twice_fn, &arg, 1, &result));
    CHECK(result.type_index == kTVMFFIInt && result.v_int64 == 7,
          "ffi call: the second result (index %d)", result.type_index);
    CHECK_OK(TVMFuncFree(f));
    CHECK(g_fin[10] == 1, "ffi call: the replaced result released (%d)", g_fin[10]);

    CHECK_OK(TVMFuncFree(fail_fn));
    CHECK_OK(TVMFuncFree(twice_fn));
  }

  /* No finalizer ran twice. */
  {
    int i;
    for (i = 0; i < 11; i++) CHECK(g_fin[i] == 1, "slot %d finalized %d times", i, g_fin[i]);
  }
  return test_result("finalizers");
}
