/* CUDA from C through both doors, on a machine without a GPU: ctest runs this program with
 * TVMRT_CUDA_LIBRARY naming the test double of the NVIDIA driver (tests/cuda_double/fake_cuda.c,
 * two devices of compute capability 8.0), which keeps device memory in host memory and runs the
 * fixtures' elementwise kernels on the host. argv[1]: tests/fixtures/cuda.
 *
 * Classic API: a library TVM 0.27 exported (PTX payload) loaded with TVMModLoadFromFile, arrays
 * on kDLCUDA, copies both ways, TVMFuncCall on the library's launcher, data spaces with
 * TVMDeviceCopyDataFromTo between devices, page-locked kDLCUDAHost arrays, streams; tvm-ffi API:
 * the same launcher through TVMFFIFunctionCall, TVMFFIEnvGetStream. Errors: a device that does
 * not exist, a host array given to the CUDA launcher, a freed pointer.
 *
 * Usage: cuda FIXTURES_DIR [DEVICES]: DEVICES is how many CUDA devices the driver has (2, the
 * double's, by default); with 1 (a machine with one GPU) the cross-device copy stays on cuda:0. */
#include <stdio.h>
#include <stdlib.h>
#include <tvm/ffi/extra/c_env_api.h>

#include "check.h"

#define N 1000

static void fill(float* a, float* b) {
  int i;
  for (i = 0; i < N; i++) {
    a[i] = (float)i * 0.25f;
    b[i] = 3.0f - (float)i;
  }
}

static int check_sum(const float* a, const float* b, const float* c, const char* what) {
  int i;
  for (i = 0; i < N; i++) {
    if (!CHECK(c[i] == a[i] + b[i], "%s: element %d is %f, expected %f", what, i, c[i],
               a[i] + b[i])) {
      return 0;
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  char path[4096];
  TVMModuleHandle lib = NULL;
  TVMFunctionHandle add = NULL;
  DLTensor *da = NULL, *db = NULL, *dc = NULL, *host = NULL, *pinned = NULL;
  int64_t shape[1] = {N};
  static float a[N], b[N], c[N];
  TVMValue args[3], ret;
  int codes[3], ret_code;
  DLDevice cuda0 = {kDLCUDA, 0}, cuda1 = {kDLCUDA, 1};
  int devices = argc > 2 ? atoi(argv[2]) : 2;
  char no_device[128];
  DLDataType f32 = {kDLFloat, 32, 1};
  void *p0 = NULL, *p1 = NULL;
  TVMStreamHandle stream = NULL;

  if (argc < 2) {
    fprintf(stderr, "usage: %s tests/fixtures/cuda\n", argv[0]);
    return 2;
  }
  if (devices < 2) cuda1.device_id = 0;
  snprintf(no_device, sizeof no_device, "cuda:7 does not exist: the driver sees %d CUDA device%s",
           devices, devices == 1 ? "" : "s");
  fill(a, b);
  snprintf(path, sizeof path, "%s/elementwise_ptx.so", argv[1]);

  /* Classic door. */
  CHECK_OK(TVMModLoadFromFile(path, "so", &lib));
  CHECK_OK(TVMModGetFunction(lib, "add", 0, &add));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &da));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &db));
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 0, &dc));
  CHECK_OK(TVMArrayCopyFromBytes(da, a, sizeof a));
  CHECK_OK(TVMArrayCopyFromBytes(db, b, sizeof b));
  args[0].v_handle = da;
  args[1].v_handle = db;
  args[2].v_handle = dc;
  codes[0] = codes[1] = codes[2] = kTVMDLTensorHandle;
  CHECK_OK(TVMFuncCall(add, args, codes, 3, &ret, &ret_code));
  memset(c, 0, sizeof c);
  CHECK_OK(TVMArrayCopyToBytes(dc, c, sizeof c));
  check_sum(a, b, c, "classic TVMFuncCall");

  /* A host array to the CUDA launcher: TVM's generated check refuses it. */
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &host));
  args[0].v_handle = host;
  CHECK_FAILS_WITH(TVMFuncCall(add, args, codes, 3, &ret, &ret_code), "device_type");
  CHECK_FAILS_WITH(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDA, 7, &pinned), no_device);

  /* Data spaces: cuda:0 -> cuda:1 -> page-locked host array. */
  CHECK_OK(TVMDeviceAllocDataSpace(cuda0, sizeof a, 256, f32, &p0));
  CHECK_OK(TVMDeviceAllocDataSpace(cuda1, sizeof a, 256, f32, &p1));
  CHECK(((uintptr_t)p0 % 256) == 0, "alignment");
  CHECK_FAILS_WITH(TVMDeviceAllocDataSpace(cuda0, 16, 512, f32, &p0),
                   "aligned at 256 bytes");
  {
    DLTensor src = *da, dst = *da;
    src.data = da->data;
    dst.data = p0;
    CHECK_OK(TVMDeviceCopyDataFromTo(&src, &dst, NULL));
    src.data = p0;
    dst.data = p1;
    dst.device = cuda1;
    CHECK_OK(TVMDeviceCopyDataFromTo(&src, &dst, NULL));
  }
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCUDAHost, 0, &pinned));
  {
    DLTensor src = *da;
    src.data = p1;
    src.device = cuda1;
    CHECK_OK(TVMArrayCopyFromTo(&src, pinned, NULL));
  }
  /* Page-locked memory is host memory: read in place. */
  CHECK(memcmp(pinned->data, a, sizeof a) == 0, "cuda:0 -> cuda:1 -> cuda_host lost data");
  CHECK_OK(TVMDeviceFreeDataSpace(cuda1, p1));
  CHECK_FAILS_WITH(TVMDeviceFreeDataSpace(cuda1, p1), "not a live CUDA allocation");

  /* Streams: created non-blocking, made current, synchronized, freed. */
  CHECK_OK(TVMStreamCreate(kDLCUDA, 0, &stream));
  CHECK(stream != NULL, "a CUDA stream");
  CHECK_OK(TVMSetStream(kDLCUDA, 0, stream));
  CHECK(TVMFFIEnvGetStream(kDLCUDA, 0) == stream, "the current stream");

  /* tvm-ffi door: the same launcher on the current stream. */
  {
    TVMFFIAny fargs[3], fret = ffi_none();
    int i;
    for (i = 0; i < 3; i++) {
      fargs[i] = ffi_none();
      fargs[i].type_index = kTVMFFIDLTensorPtr;
    }
    fargs[0].v_ptr = db;
    fargs[1].v_ptr = db;
    fargs[2].v_ptr = dc;
    CHECK(TVMFFIFunctionCall(add, fargs, 3, &fret) == 0, "TVMFFIFunctionCall(add)");
    ffi_release(&fret);
  }
  CHECK_OK(TVMSynchronize(kDLCUDA, 0, stream));
  CHECK_OK(TVMArrayCopyToBytes(dc, c, sizeof c));
  check_sum(b, b, c, "tvm-ffi TVMFFIFunctionCall");
  CHECK_OK(TVMSetStream(kDLCUDA, 0, NULL));
  CHECK_OK(TVMStreamFree(kDLCUDA, 0, stream));

  CHECK_OK(TVMDeviceFreeDataSpace(cuda0, p0));
  CHECK_OK(TVMArrayFree(pinned));
  CHECK_OK(TVMArrayFree(host));
  CHECK_OK(TVMArrayFree(da));
  CHECK_OK(TVMArrayFree(db));
  CHECK_OK(TVMArrayFree(dc));
  CHECK_OK(TVMFuncFree(add));
  CHECK_OK(TVMModFree(lib));
  if (g_failures) {
    fprintf(stderr, "cuda: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("cuda: all checks passed\n");
  return 0;
}
