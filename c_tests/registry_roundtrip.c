/* The classic registry from C: register, look up, call, list, override and
 * remove a global function made from a C callback. Also built against
 * libtvmrt.a (registry_roundtrip_static) to check that the static library links. */
#include "check.h"

static int add_one(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                   void* resource) {
  (void)resource;
  if (num_args != 1 || codes[0] != kTVMArgInt) {
    TVMAPISetLastError("TypeError: add_one expects one int");
    return -1;
  }
  return cb_return_int(ret, args[0].v_int64 + 1);
}

static int times_two(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                     void* resource) {
  (void)codes;
  (void)num_args;
  (void)resource;
  return cb_return_int(ret, args[0].v_int64 * 2);
}

static int name_listed(const char* name) {
  int n = 0, i;
  const char** names = NULL;
  if (TVMFuncListGlobalNames(&n, &names) != 0) return -1;
  for (i = 0; i < n; i++) {
    if (strcmp(names[i], name) == 0) return 1;
  }
  return 0;
}

static int64_t call_int(TVMFunctionHandle f, int64_t x) {
  TVMValue arg = tv_int(x), ret;
  int code = kTVMArgInt, ret_code = -1;
  if (TVMFuncCall(f, &arg, &code, 1, &ret, &ret_code) != 0) {
    fprintf(stderr, "call failed: %s\n", TVMGetLastError());
    return -999;
  }
  CHECK(ret_code == kTVMArgInt, "result type code %d", ret_code);
  return ret.v_int64;
}

int main(void) {
  TVMFunctionHandle f = NULL, g = NULL, h = NULL, missing = (TVMFunctionHandle)1;

  CHECK_OK(TVMFuncCreateFromCFunc(add_one, NULL, NULL, &f));
  CHECK(f != NULL, "TVMFuncCreateFromCFunc gave a NULL handle");
  CHECK(call_int(f, 1) == 2, "direct call");

  CHECK_OK(TVMFuncRegisterGlobal("c_tests.add_one", f, 0));
  CHECK(name_listed("c_tests.add_one") == 1, "registered name is listed");
  /* A second registration without override is refused, naming the function. */
  CHECK_FAILS_WITH(TVMFuncRegisterGlobal("c_tests.add_one", f, 0), "c_tests.add_one");

  CHECK_OK(TVMFuncGetGlobal("c_tests.add_one", &g));
  CHECK(g != NULL, "lookup found the function");
  CHECK(call_int(g, 41) == 42, "call through the looked-up handle");
  CHECK(call_int(g, -5) == -4, "negative argument");

  /* Override replaces the function; a handle held from before keeps the old one. */
  CHECK_OK(TVMFuncCreateFromCFunc(times_two, NULL, NULL, &h));
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.add_one", h, 1));
  CHECK(call_int(g, 10) == 11, "old handle keeps the old function");
  CHECK_OK(TVMFuncFree(g));
  g = NULL;
  CHECK_OK(TVMFuncGetGlobal("c_tests.add_one", &g));
  CHECK(g != NULL && call_int(g, 10) == 20, "override took effect");
  CHECK_OK(TVMFuncFree(g));

  /* Remove: gone from lookup and from the list; removing twice is an error. */
  CHECK_OK(TVMFuncRemoveGlobal("c_tests.add_one"));
  CHECK_OK(TVMFuncGetGlobal("c_tests.add_one", &missing));
  CHECK(missing == NULL, "removed function is not found (got %p)", missing);
  CHECK(name_listed("c_tests.add_one") == 0, "removed name is not listed");
  CHECK_FAILS_WITH(TVMFuncRemoveGlobal("c_tests.add_one"), "c_tests.add_one");

  /* Many names. */
  {
    char name[64];
    int i, ok = 1;
    for (i = 0; i < 100; i++) {
      snprintf(name, sizeof(name), "c_tests.many.%d", i);
      if (TVMFuncRegisterGlobal(name, i % 2 ? f : h, 0) != 0) ok = 0;
    }
    CHECK(ok, "100 registrations");
    for (i = 0; i < 100; i++) {
      TVMFunctionHandle k = NULL;
      snprintf(name, sizeof(name), "c_tests.many.%d", i);
      CHECK_OK(TVMFuncGetGlobal(name, &k));
      if (k == NULL || call_int(k, 3) != (i % 2 ? 4 : 6)) ok = 0;
      if (k) TVMFuncFree(k);
      CHECK(name_listed(name) == 1, "%s listed", name);
      CHECK_OK(TVMFuncRemoveGlobal(name));
    }
    CHECK(ok, "100 lookups and calls");
  }

  CHECK_OK(TVMFuncFree(f));
  CHECK_OK(TVMFuncFree(h));
  return test_result("registry_roundtrip");
}
