/* Modules from C, as a TVM user's program loads a library: TVMModLoadFromFile on real TVM 0.27
 * output (tests/fixtures, passed as argv[1]), TVMModGetFunction (NULL when absent), calls on
 * DLTensors, TVM's own shape assertion reported through TVMGetLastError, lifetimes (the module
 * freed before its function, the same library loaded twice, loads from 4 threads at once),
 * imports restored from a blob, and the load errors. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static char g_dir[4096];

static const char* fixture(const char* name, char* buf, size_t n) {
  snprintf(buf, n, "%s/%s", g_dir, name);
  return buf;
}

/* A float32 vector tensor over `data` (strides NULL, as TVM's C users pass them). */
static DLTensor vec(float* data, int64_t* shape) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* Calls add(a, b, c) on n floats; returns TVMFuncCall's status. */
static int call_add(TVMFunctionHandle f, int64_t na, int64_t nb, float* c_out) {
  static float a[64] __attribute__((aligned(64)));
  static float b[64] __attribute__((aligned(64)));
  int64_t sa[1], sb[1];
  DLTensor ta, tb, tc;
  TVMValue args[3], ret;
  int codes[3] = {kTVMDLTensorHandle, kTVMDLTensorHandle, kTVMDLTensorHandle}, ret_code, i;
  for (i = 0; i < 64; i++) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
  }
  sa[0] = na;
  sb[0] = nb;
  ta = vec(a, sa);
  tb = vec(b, sb);
  tc = vec(c_out, sa);
  args[0].v_handle = &ta;
  args[1].v_handle = &tb;
  args[2].v_handle = &tc;
  return TVMFuncCall(f, args, codes, 3, &ret, &ret_code);
}

static void test_load_call_and_lifetimes(void) {
  char path[4200];
  static float c[64] __attribute__((aligned(64)));
  TVMModuleHandle m1 = NULL, m2 = NULL;
  TVMFunctionHandle add = NULL, missing = (TVMFunctionHandle)1;
  int i, ok = 1;
  CHECK_OK(TVMModLoadFromFile(fixture("add_dyn.so", path, sizeof(path)), "so", &m1));
  if (!CHECK(m1 != NULL, "no module")) return;
  CHECK_OK(TVMModGetFunction(m1, "add", 0, &add));
  CHECK_OK(TVMModGetFunction(m1, "no_such_function", 1, &missing));
  CHECK(missing == NULL, "an absent function is NULL, not an error");
  /* The function keeps the library alive: free the module first, then call. */
  CHECK_OK(TVMModFree(m1));
  if (!CHECK(add != NULL, "add not found")) return;
  CHECK_OK(call_add(add, 16, 16, c));
  for (i = 0; i < 16; i++) ok &= c[i] == 1.5f * (float)i;
  CHECK(ok, "add computed wrong values");
  /* TVM's generated assertion, with its message. */
  CHECK_FAILS_WITH(call_add(add, 16, 8, c), "Mismatched B.shape[0] on argument #1");
  /* The same file twice: two modules, both usable, freed in any order. */
  CHECK_OK(TVMModLoadFromFile(path, "", &m1));
  CHECK_OK(TVMModLoadFromFile(path, "so", &m2));
  CHECK(m1 != m2, "two loads gave one handle");
  CHECK_OK(TVMModFree(m1));
  {
    TVMFunctionHandle add2 = NULL;
    CHECK_OK(TVMModGetFunction(m2, "add", 0, &add2));
    CHECK_OK(call_add(add2, 8, 8, c));
    CHECK_OK(TVMFuncFree(add2));
  }
  CHECK_OK(TVMModFree(m2));
  CHECK_OK(TVMFuncFree(add));
}

static void* load_and_call(void* arg) {
  char path[4200];
  float c[16];
  long failures = 0;
  int i;
  (void)arg;
  for (i = 0; i < 20; i++) {
    TVMModuleHandle m = NULL;
    TVMFunctionHandle f = NULL;
    if (TVMModLoadFromFile(fixture("add_dyn.so", path, sizeof(path)), "so", &m) != 0 ||
        TVMModGetFunction(m, "add", 0, &f) != 0 || f == NULL || call_add(f, 16, 16, c) != 0) {
      failures++;
    }
    if (f) TVMFuncFree(f);
    if (m) TVMModFree(m);
  }
  return (void*)failures;
}

static void test_threads(void) {
  pthread_t t[4];
  int i;
  for (i = 0; i < 4; i++) pthread_create(&t[i], NULL, load_and_call, NULL);
  for (i = 0; i < 4; i++) {
    void* r = NULL;
    pthread_join(t[i], &r);
    CHECK(r == NULL, "thread %d: %ld failed loads or calls", i, (long)r);
  }
}

static void test_imports(void) {
  char path[4200];
  TVMModuleHandle m = NULL;
  TVMFunctionHandle f = NULL;
  /* A Relax model: the root is the VM executable, the kernels are in its import. */
  CHECK_OK(TVMModLoadFromFile(fixture("mlp.so", path, sizeof(path)), "so", &m));
  if (!CHECK(m != NULL, "mlp.so did not load")) return;
  CHECK_OK(TVMModGetFunction(m, "matmul", 0, &f));
  CHECK(f == NULL, "a kernel found without query_imports");
  CHECK_OK(TVMModGetFunction(m, "matmul", 1, &f));
  CHECK(f != NULL, "a kernel not found through the imports");
  if (f) CHECK_OK(TVMFuncFree(f));
  CHECK_OK(TVMModGetFunction(m, "vm_load_executable", 0, &f));
  CHECK(f != NULL, "vm_load_executable missing on the root");
  if (f) CHECK_OK(TVMFuncFree(f));
  CHECK_OK(TVMModFree(m));
}

static void test_errors(void) {
  char path[4200];
  TVMModuleHandle m = NULL;
  TVMFunctionHandle f = NULL;
  CHECK_FAILS_WITH(TVMModLoadFromFile(fixture("does_not_exist.so", path, sizeof(path)), "so", &m),
                   "does_not_exist.so");
  CHECK_FAILS_WITH(TVMModLoadFromFile(fixture("manifest.json", path, sizeof(path)), "so", &m),
                   "cannot load library");
  CHECK_FAILS_WITH(TVMModLoadFromFile(fixture("manifest.json", path, sizeof(path)), "", &m),
                   "loadfile_json");
  CHECK_FAILS_WITH(TVMModLoadFromFile(NULL, "so", &m), "file");
  CHECK_FAILS_WITH(TVMModLoadFromFile(fixture("add_dyn.so", path, sizeof(path)), "so", NULL),
                   "out");
  CHECK_FAILS_WITH(TVMModGetFunction(NULL, "add", 0, &f), "mod");
  CHECK_FAILS_WITH(TVMModFree(NULL), "mod");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: modules FIXTURES_DIR\n");
    return 2;
  }
  snprintf(g_dir, sizeof(g_dir), "%s", argv[1]);
  test_load_call_and_lifetimes();
  test_threads();
  test_imports();
  test_errors();
  return test_result("modules");
}
