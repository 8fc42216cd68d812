/* Re-entrancy: callbacks that, while being called, register, look up, call,
 * list and remove global functions, and call themselves recursively through
 * the registry. A call must never hold the registry's lock. */
#include "check.h"

static int add_n(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                 void* resource) {
  (void)codes;
  (void)num_args;
  return cb_return_int(ret, args[0].v_int64 + (int64_t)(intptr_t)resource);
}

/* depth(n): registers "c_tests.reent.child.<n>" (x -> x + n), calls it through a
 * fresh lookup, lists the names, recurses into depth(n - 1) through the
 * registry, then removes its child. Returns the sum of the children's results. */
static int depth(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                 void* resource) {
  int64_t n = args[0].v_int64, total = 0;
  char name[64];
  TVMFunctionHandle child = NULL, found = NULL, self = NULL;
  TVMValue a, out;
  int code = kTVMArgInt, out_code = -1, count = 0;
  const char** names = NULL;
  (void)codes;
  (void)num_args;
  (void)resource;

  snprintf(name, sizeof(name), "c_tests.reent.child.%lld", (long long)n);
  if (TVMFuncCreateFromCFunc(add_n, (void*)(intptr_t)n, NULL, &child) != 0) return -1;
  if (TVMFuncRegisterGlobal(name, child, 0) != 0) return -1;
  TVMFuncFree(child);
  if (TVMFuncGetGlobal(name, &found) != 0 || found == NULL) return -1;
  a.v_int64 = 100;
  if (TVMFuncCall(found, &a, &code, 1, &out, &out_code) != 0) return -1;
  TVMFuncFree(found);
  total += out.v_int64;
  if (TVMFuncListGlobalNames(&count, &names) != 0 || count <= 0) return -1;

  if (n > 0) {
    if (TVMFuncGetGlobal("c_tests.reent.depth", &self) != 0 || self == NULL) return -1;
    a.v_int64 = n - 1;
    code = kTVMArgInt;
    if (TVMFuncCall(self, &a, &code, 1, &out, &out_code) != 0) return -1;
    TVMFuncFree(self);
    total += out.v_int64;
  }
  if (TVMFuncRemoveGlobal(name) != 0) return -1;
  out.v_int64 = total;
  code = kTVMArgInt;
  return TVMCFuncSetReturn(ret, &out, &code, 1);
}

/* Replaces itself in the registry while running (override of the running function). */
static int replace_self(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                        void* resource) {
  TVMFunctionHandle next = NULL;
  (void)codes;
  (void)num_args;
  (void)resource;
  if (TVMFuncCreateFromCFunc(add_n, (void*)(intptr_t)1000, NULL, &next) != 0) return -1;
  if (TVMFuncRegisterGlobal("c_tests.reent.replace", next, 1) != 0) return -1;
  TVMFuncFree(next);
  return cb_return_int(ret, args[0].v_int64);
}

static int64_t call_global(const char* name, int64_t x) {
  TVMFunctionHandle f = NULL;
  TVMValue a = tv_int(x), out;
  int code = kTVMArgInt, out_code = -1, rc;
  if (TVMFuncGetGlobal(name, &f) != 0 || f == NULL) return -99999;
  rc = TVMFuncCall(f, &a, &code, 1, &out, &out_code);
  TVMFuncFree(f);
  if (rc != 0) {
    fprintf(stderr, "%s failed: %s\n", name, TVMGetLastError());
    return -99999;
  }
  return out.v_int64;
}

int main(void) {
  TVMFunctionHandle f = NULL;
  TVMFunctionHandle probe = NULL;
  int i;

  CHECK_OK(TVMFuncCreateFromCFunc(depth, NULL, NULL, &f));
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.reent.depth", f, 0));
  CHECK_OK(TVMFuncFree(f));

  /* depth(n) sums (100 + k) for k = 0..n. */
  CHECK(call_global("c_tests.reent.depth", 0) == 100, "depth 0");
  CHECK(call_global("c_tests.reent.depth", 3) == 4 * 100 + 6, "depth 3");
  CHECK(call_global("c_tests.reent.depth", 20) == 21 * 100 + 210, "depth 20");
  for (i = 0; i <= 20; i++) {
    char name[64];
    snprintf(name, sizeof(name), "c_tests.reent.child.%d", i);
    probe = (TVMFunctionHandle)1;
    CHECK_OK(TVMFuncGetGlobal(name, &probe));
    CHECK(probe == NULL, "%s removed by its creator", name);
  }

  CHECK_OK(TVMFuncCreateFromCFunc(replace_self, NULL, NULL, &f));
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.reent.replace", f, 0));
  CHECK_OK(TVMFuncFree(f));
  CHECK(call_global("c_tests.reent.replace", 5) == 5, "first call runs the original");
  CHECK(call_global("c_tests.reent.replace", 5) == 1005, "second call runs the replacement");

  CHECK_OK(TVMFuncRemoveGlobal("c_tests.reent.depth"));
  CHECK_OK(TVMFuncRemoveGlobal("c_tests.reent.replace"));
  return test_result("reentrancy");
}
