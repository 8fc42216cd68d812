/* tvmrt loaded in a local scope, as the JVM loads a JNI library, as Python's ctypes loads one by
 * default and as Triton loads a backend: the program does not link tvmrt; it dlopens the object
 * holding tvmrt with RTLD_LOCAL, takes the C API from that handle with dlsym, and loads TVM 0.27
 * libraries through it. Their kernels import `TVMFFIErrorSetRaisedFromCStrParts` by name from
 * the global scope, where tvmrt is not, until tvmrt makes its object global at the first load
 * that needs it (src/module/runtime_scope.rs).
 *
 * Checked: a kernel library loads, computes the right values and reports TVM's own shape
 * assertion (the call that goes through the imported symbol); a Relax model runs through the
 * VM and matches TVM's recorded output.
 *
 * Usage: rtld_local OBJECT FIXTURES_DIR
 *   OBJECT is libtvmrt.so, or a plugin that links tvmrt statically (rtld_local_plugin.so). */
#include <dlfcn.h>

#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_runtime_api.h>

/* Every C API function the helpers below call, taken from the handle with dlsym. The macros
 * make check.h and vm_common.h call them through these pointers. */
#define RTLD_LOCAL_API(X)      \
  X(TVMGetLastError)           \
  X(TVMModLoadFromFile)        \
  X(TVMModGetFunction)         \
  X(TVMModFree)                \
  X(TVMFuncCall)               \
  X(TVMFuncFree)               \
  X(TVMCFuncSetReturn)         \
  X(TVMFFIFunctionGetGlobal)   \
  X(TVMFFIFunctionCall)        \
  X(TVMFFIObjectDecRef)        \
  X(TVMFFITensorFromDLPack)    \
  X(TVMFFIErrorMoveFromRaised)

#define RTLD_LOCAL_DECLARE(name) static __typeof__(&name) p_##name;
RTLD_LOCAL_API(RTLD_LOCAL_DECLARE)

#define TVMGetLastError p_TVMGetLastError
#define TVMModLoadFromFile p_TVMModLoadFromFile
#define TVMModGetFunction p_TVMModGetFunction
#define TVMModFree p_TVMModFree
#define TVMFuncCall p_TVMFuncCall
#define TVMFuncFree p_TVMFuncFree
#define TVMCFuncSetReturn p_TVMCFuncSetReturn
#define TVMFFIFunctionGetGlobal p_TVMFFIFunctionGetGlobal
#define TVMFFIFunctionCall p_TVMFFIFunctionCall
#define TVMFFIObjectDecRef p_TVMFFIObjectDecRef
#define TVMFFITensorFromDLPack p_TVMFFITensorFromDLPack
#define TVMFFIErrorMoveFromRaised p_TVMFFIErrorMoveFromRaised

#include "check.h"
#include "vm_common.h"

static const char* g_dir;

/* Resolves every API function from `handle`; 0, or -1 naming the first one missing. */
static int resolve_api(void* handle) {
  void* sym;
#define RTLD_LOCAL_RESOLVE(name)                                                  \
  sym = dlsym(handle, #name);                                                     \
  if (!CHECK(sym != NULL, "%s is not exported by the object", #name)) return -1; \
  memcpy(&p_##name, &sym, sizeof(sym));
  RTLD_LOCAL_API(RTLD_LOCAL_RESOLVE)
#undef RTLD_LOCAL_RESOLVE
  return 0;
}

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

/* add(a, b, c) on float vectors of lengths na, nb (c has na); TVMFuncCall's status. */
static int call_add(TVMFunctionHandle f, int64_t na, int64_t nb, float* a, float* b, float* c) {
  int64_t sa[1] = {na}, sb[1] = {nb};
  DLTensor ta = vec(a, sa), tb = vec(b, sb), tc = vec(c, sa);
  TVMValue args[3], ret;
  int codes[3] = {kTVMDLTensorHandle, kTVMDLTensorHandle, kTVMDLTensorHandle}, ret_code;
  args[0].v_handle = &ta;
  args[1].v_handle = &tb;
  args[2].v_handle = &tc;
  return TVMFuncCall(f, args, codes, 3, &ret, &ret_code);
}

static void test_kernel_library(void) {
  static float a[16] __attribute__((aligned(64)));
  static float b[16] __attribute__((aligned(64)));
  static float c[16] __attribute__((aligned(64)));
  char path[4200];
  TVMModuleHandle m = NULL;
  TVMFunctionHandle add = NULL;
  int i, ok = 1;
  snprintf(path, sizeof(path), "%s/add_dyn.so", g_dir);
  CHECK_OK(TVMModLoadFromFile(path, "so", &m));
  if (!CHECK(m != NULL, "add_dyn.so did not load")) return;
  CHECK_OK(TVMModGetFunction(m, "add", 0, &add));
  if (CHECK(add != NULL, "add not found")) {
    for (i = 0; i < 16; i++) {
      a[i] = (float)i;
      b[i] = 0.25f * (float)(i * i);
      c[i] = -1.0f;
    }
    CHECK_OK(call_add(add, 16, 16, a, b, c));
    for (i = 0; i < 16; i++) ok &= c[i] == (float)i + 0.25f * (float)(i * i);
    CHECK(ok, "add computed wrong values (c[3] = %g, want 5.25)", (double)c[3]);
    /* TVM's generated shape assertion reports through TVMFFIErrorSetRaisedFromCStrParts, the
     * symbol the kernel imports from the global scope. */
    CHECK_FAILS_WITH(call_add(add, 16, 8, a, b, c), "Mismatched B.shape[0] on argument #1");
    CHECK_OK(TVMFuncFree(add));
  }
  CHECK_OK(TVMModFree(m));
}

static void test_relax_model(void) {
  /* A path short enough that vm_load's messages naming it fit in err (-Wformat-truncation). */
  char err[2048], path[1024];
  VmModel m;
  HostArray x, want;
  TVMFFIObjectHandle tx = NULL, main_fn = NULL;
  TVMFFIAny arg, out;
  snprintf(path, sizeof(path), "%s/mlp.so", g_dir);
  if (!CHECK(vm_load(&m, path, 2, err, sizeof(err)) == 0, "mlp.so: %s", err)) return;
  main_fn = vm_module_function(&m, m.vm, "main");
  snprintf(path, sizeof(path), "%s/data/mlp.main.in0.npy", g_dir);
  if (CHECK(main_fn != NULL, "the VM has no main") &&
      CHECK(npy_read(path, &x) == 0, "reading %s", path)) {
    tx = host_tensor(&x);
    snprintf(path, sizeof(path), "%s/data/mlp.main.out0.npy", g_dir);
    if (CHECK(tx != NULL, "host tensor") && CHECK(npy_read(path, &want) == 0, "reading %s", path)) {
      arg = vm_obj(tx);
      if (CHECK(vm_call(main_fn, &arg, 1, &out, err, sizeof(err)) == 0, "mlp main: %s", err)) {
        if (CHECK(out.type_index == kTVMFFITensor, "mlp returned type %d", out.type_index)) {
          CHECK(close_f32(tensor_dl(out.v_obj), &want, 1e-5, 1e-6, err, sizeof(err)),
                "mlp output: %s", err);
        }
        vm_release(&out);
      }
      host_free(&want);
    }
    if (tx) TVMFFIObjectDecRef(tx);
    host_free(&x);
  }
  if (main_fn) TVMFFIObjectDecRef(main_fn);
  vm_unload(&m);
}

int main(int argc, char** argv) {
  void* handle;
  if (argc != 3) {
    fprintf(stderr, "usage: %s OBJECT FIXTURES_DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[2];
  handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  /* The premise: tvmrt's symbols are not in the global scope. */
  CHECK(dlsym(RTLD_DEFAULT, "TVMFFIErrorSetRaisedFromCStrParts") == NULL,
        "the runtime's symbols are global before any load: the test proves nothing");
  if (resolve_api(handle) == 0) {
    test_kernel_library();
    test_relax_model();
    /* The runtime's object was made global, and it is the one the kernels bound to. */
    CHECK(dlsym(RTLD_DEFAULT, "TVMFFIErrorSetRaisedFromCStrParts") ==
              dlsym(handle, "TVMFFIErrorSetRaisedFromCStrParts"),
          "the kernels' runtime symbol is not tvmrt's");
  }
  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("rtld_local: all checks passed (%s)\n", argv[1]);
  return 0;
}
