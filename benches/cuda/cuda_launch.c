/* Per-launch cost of a tiny CUDA kernel (add_kernel of tests/fixtures/cuda, n = 1) three ways,
 * in one process on one device, alternating rounds:
 *   floor     a minimal hand-written driver-API host program: cuLaunchKernel on the PTX the
 *             library holds, loaded with cuModuleLoadDataEx (what any CUDA runtime must do);
 *   kernel    tvmrt's kernel function (the cuda module's add_kernel) called through
 *             TVMFFIFunctionCall with the device pointers and launch extents, as TVM's generated
 *             host code calls it;
 *   launcher  the library's own host function `add` on three DLTensors (TVM's argument checks,
 *             __tvm_set_device, the kernel lookup, then the kernel function).
 * Each round queues LAUNCHES launches on the default stream and waits for them; the figure is
 * the median of ROUNDS rounds, in ns per launch.
 *
 * usage: cuda_launch FIXTURES_DIR [LAUNCHES [ROUNDS]]
 * The driver is libcuda.so.1, or the file TVMRT_CUDA_LIBRARY names (the same one tvmrt opens). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_runtime_api.h>

#include "../bench_timing.h"

typedef int CUresult;
static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int*, int);
static CUresult (*cuDevicePrimaryCtxRetain)(void**, int);
static CUresult (*cuCtxSetCurrent)(void*);
static CUresult (*cuModuleLoadDataEx)(void**, const void*, unsigned, int*, void**);
static CUresult (*cuModuleGetFunction)(void**, void*, const char*);
static CUresult (*cuMemAlloc)(uint64_t*, size_t);
static CUresult (*cuMemFree)(uint64_t);
static CUresult (*cuStreamSynchronize)(void*);
static CUresult (*cuLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, void*, void**, void**);

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CU(call) do { CUresult rc_ = (call); if (rc_) DIE("%s failed: %d", #call, rc_); } while (0)
#define TVM(call) do { if ((call) != 0) DIE("%s failed: %s", #call, TVMGetLastError()); } while (0)

static void* sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) DIE("the driver lacks %s", name);
  return p;
}

/* The PTX of the library's cuda module (its first import), through tvmrt's globals. */
static char* module_ptx(TVMModuleHandle lib) {
  TVMFunctionHandle get_import, inspect;
  TVMValue args[2], ret;
  int codes[2], code;
  char* out;
  TVM(TVMFuncGetGlobal("runtime.ModuleGetImport", &get_import));
  TVM(TVMFuncGetGlobal("ffi.ModuleInspectSource", &inspect));
  args[0].v_handle = lib;
  codes[0] = kTVMModuleHandle;
  args[1].v_int64 = 0;
  codes[1] = kDLInt;
  TVM(TVMFuncCall(get_import, args, codes, 2, &ret, &code));
  args[0].v_handle = ret.v_handle;
  args[1].v_str = "ptx";
  codes[1] = kTVMStr;
  TVM(TVMFuncCall(inspect, args, codes, 2, &ret, &code));
  out = strdup(ret.v_str);
  TVMModFree(args[0].v_handle);
  return out;
}

int main(int argc, char** argv) {
  char path[4096];
  int launches = argc > 2 ? atoi(argv[2]) : 20000, rounds = argc > 3 ? atoi(argv[3]) : 9;
  const char* driver = getenv("TVMRT_CUDA_LIBRARY") ? getenv("TVMRT_CUDA_LIBRARY") : "libcuda.so.1";
  void* cuda;
  void *ctx, *mod, *fn;
  int dev, r, i;
  uint64_t a, b, c;
  int32_t n = 1;
  void* params[4];
  TVMModuleHandle lib;
  TVMFunctionHandle kernel, launcher;
  DLTensor *ta, *tb, *tc;
  int64_t shape[1] = {1};
  TVMFFIAny kargs[6], largs[3], ret;
  double floor_ns[64], kernel_ns[64], launcher_ns[64], floor_min, kernel_min, launcher_min;
  double floor_med, kernel_med, launcher_med;
  char* ptx;

  if (argc < 2 || rounds < 1 || rounds > 64 || launches < 1) {
    fprintf(stderr, "usage: %s FIXTURES_DIR [LAUNCHES [ROUNDS<=64]]\n", argv[0]);
    return 2;
  }
  snprintf(path, sizeof path, "%s/elementwise_ptx.so", argv[1]);
  TVM(TVMModLoadFromFile(path, "so", &lib));
  TVM(TVMModGetFunction(lib, "add_kernel", 1, &kernel));
  TVM(TVMModGetFunction(lib, "add", 0, &launcher));
  ptx = module_ptx(lib);

  /* The floor's own driver setup: device 0's primary context (the one tvmrt uses too). */
  cuda = dlopen(driver, RTLD_NOW | RTLD_LOCAL);
  if (!cuda) DIE("cannot open %s: %s", driver, dlerror());
  *(void**)&cuInit = sym(cuda, "cuInit");
  *(void**)&cuDeviceGet = sym(cuda, "cuDeviceGet");
  *(void**)&cuDevicePrimaryCtxRetain = sym(cuda, "cuDevicePrimaryCtxRetain");
  *(void**)&cuCtxSetCurrent = sym(cuda, "cuCtxSetCurrent");
  *(void**)&cuModuleLoadDataEx = sym(cuda, "cuModuleLoadDataEx");
  *(void**)&cuModuleGetFunction = sym(cuda, "cuModuleGetFunction");
  *(void**)&cuMemAlloc = sym(cuda, "cuMemAlloc_v2");
  *(void**)&cuMemFree = sym(cuda, "cuMemFree_v2");
  *(void**)&cuStreamSynchronize = sym(cuda, "cuStreamSynchronize");
  *(void**)&cuLaunchKernel = sym(cuda, "cuLaunchKernel");
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CU(cuModuleLoadDataEx(&mod, ptx, 0, NULL, NULL));
  CU(cuModuleGetFunction(&fn, mod, "add_kernel"));
  CU(cuMemAlloc(&a, 256));
  CU(cuMemAlloc(&b, 256));
  CU(cuMemAlloc(&c, 256));
  params[0] = &a;
  params[1] = &b;
  params[2] = &c;
  params[3] = &n;

  /* tvmrt's arguments: the kernel's (pointers, n), then grid x and block x, as TVM's host
   * code passes them; the launcher's three tensors. */
  TVM(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &ta));
  TVM(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &tb));
  TVM(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &tc));
  memset(kargs, 0, sizeof kargs);
  for (i = 0; i < 3; i++) kargs[i].type_index = kTVMFFIOpaquePtr;
  kargs[0].v_ptr = ta->data;
  kargs[1].v_ptr = tb->data;
  kargs[2].v_ptr = tc->data;
  for (i = 3; i < 6; i++) kargs[i].type_index = kTVMFFIInt;
  kargs[3].v_int64 = 1;
  kargs[4].v_int64 = 1;
  kargs[5].v_int64 = 64;
  memset(largs, 0, sizeof largs);
  for (i = 0; i < 3; i++) largs[i].type_index = kTVMFFIDLTensorPtr;
  largs[0].v_ptr = ta;
  largs[1].v_ptr = tb;
  largs[2].v_ptr = tc;

  for (r = -1; r < rounds; r++) { /* round -1 warms up (module loads, first launches) */
    uint64_t t0 = now_ns();
    for (i = 0; i < launches; i++) CU(cuLaunchKernel(fn, 1, 1, 1, 64, 1, 1, 0, NULL, params, NULL));
    CU(cuStreamSynchronize(NULL));
    uint64_t t1 = now_ns();
    for (i = 0; i < launches; i++) {
      memset(&ret, 0, sizeof ret);
      if (TVMFFIFunctionCall(kernel, kargs, 6, &ret) != 0) DIE("kernel: %s", TVMGetLastError());
    }
    TVM(TVMSynchronize(kDLCUDA, 0, NULL));
    uint64_t t2 = now_ns();
    for (i = 0; i < launches; i++) {
      memset(&ret, 0, sizeof ret);
      if (TVMFFIFunctionCall(launcher, largs, 3, &ret) != 0) DIE("add: %s", TVMGetLastError());
    }
    TVM(TVMSynchronize(kDLCUDA, 0, NULL));
    uint64_t t3 = now_ns();
    if (r >= 0) {
      floor_ns[r] = (double)(t1 - t0) / launches;
      kernel_ns[r] = (double)(t2 - t1) / launches;
      launcher_ns[r] = (double)(t3 - t2) / launches;
    }
  }
  median_min(floor_ns, rounds, &floor_med, &floor_min);
  median_min(kernel_ns, rounds, &kernel_med, &kernel_min);
  median_min(launcher_ns, rounds, &launcher_med, &launcher_min);
  printf("launch cost, ns per launch (median of %d rounds of %d launches; min in brackets)\n",
         rounds, launches);
  printf("  floor (cuLaunchKernel)            %8.0f  [%.0f]\n", floor_med, floor_min);
  printf("  tvmrt kernel function             %8.0f  [%.0f]  %.2fx the floor\n", kernel_med,
         kernel_min, kernel_med / floor_med);
  printf("  tvmrt launcher add(A, B, C)       %8.0f  [%.0f]  %.2fx the floor\n", launcher_med,
         launcher_min, launcher_med / floor_med);

  CU(cuMemFree(a));
  CU(cuMemFree(b));
  CU(cuMemFree(c));
  TVM(TVMArrayFree(ta));
  TVM(TVMArrayFree(tb));
  TVM(TVMArrayFree(tc));
  TVMFuncFree(kernel);
  TVMFuncFree(launcher);
  TVMModFree(lib);
  free(ptx);
  return 0;
}
