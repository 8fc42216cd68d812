/* Per-launch cost of a tiny OpenCL kernel: through tvmrt against a minimal hand-written OpenCL
 * host program (the floor), in the same run, on the same device and the same kernel source.
 *
 *   tvmrt, host launcher   TVMFFIFunctionCall of `add` in tests/fixtures/opencl/elementwise.so
 *                          (the host code TVM 0.27 generated: argument checks,
 *                          __tvm_set_device, the kernel looked up once, then tvmrt's OpenCL
 *                          launch), on device arrays from TVMArrayAlloc passed as DLTensor*
 *   tvmrt, kernel directly TVMFFIFunctionCall of the `opencl` module's `add_kernel` with the
 *                          buffers and launch extents (tvmrt's launch path alone)
 *   floor                  clSetKernelArg x 4 + clEnqueueNDRangeKernel on a kernel built by
 *                          this program from the same OpenCL C (taken from the library)
 *
 * Each loop queues N launches and waits for the queue once (clFinish / TVMSynchronize), so a
 * launch's cost includes the device running it, alike for all three. The loops alternate for
 * ROUNDS rounds, in a rotated order; the figures are the median (and best) ns per launch over
 * the rounds.
 *
 * Usage: opencl_launch ELEMENTWISE_SO [N [ROUNDS [ELEMENTS]]] */
#define _POSIX_C_SOURCE 200809L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_ffi.h"
#include "bench_timing.h"

#define CHECK_TVM(call)                                                     \
  do {                                                                      \
    if ((call) != 0) {                                                      \
      fprintf(stderr, "%s failed: %s\n", #call, TVMGetLastError());         \
      exit(1);                                                              \
    }                                                                       \
  } while (0)
#define CHECK_CL(call)                                                      \
  do {                                                                      \
    cl_int rc_ = (call);                                                    \
    if (rc_ != CL_SUCCESS) {                                                \
      fprintf(stderr, "%s failed: %d\n", #call, rc_);                       \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

/* The OpenCL C of the library's opencl module (ffi.ModuleInspectSource), malloc'd. */
static char* library_source(TVMModuleHandle lib, size_t* len) {
  TVMFFIObjectHandle get_import = global("runtime.ModuleGetImport");
  TVMFFIObjectHandle inspect = global("ffi.ModuleInspectSource");
  TVMFFIAny a[2] = {any_obj(lib), any_int(0)};
  TVMFFIAny dev_mod = call(get_import, a, 2);
  TVMFFIAny b[1] = {dev_mod};
  TVMFFIAny src = call(inspect, b, 1);
  const TVMFFIByteArray* s = (const TVMFFIByteArray*)((char*)src.v_obj + sizeof(TVMFFIObject));
  char* out = malloc(s->size + 1);
  memcpy(out, s->data, s->size);
  out[s->size] = 0;
  *len = s->size;
  TVMFFIObjectDecRef(src.v_obj);
  TVMFFIObjectDecRef(dev_mod.v_obj);
  TVMFFIObjectDecRef(get_import);
  TVMFFIObjectDecRef(inspect);
  return out;
}

/* The three loops, one function each so that callgrind can count the instructions each
 * launch costs the calling thread (--toggle-collect=loop_*, --separate-threads=yes), which the
 * machine's load does not change. The wait for the queue is the caller's (`drain`). */
typedef struct {
  cl_kernel kernel;
  cl_command_queue queue;
  cl_mem bufs[3];
  int n;
  size_t global_size, local_size;
  TVMFunctionHandle add, add_kernel;
  TVMFFIAny hargs[3];
  TVMFFIAny kargs[6];
} Loops;

static inline void body_floor(Loops* l, int count) {
  int i;
  for (i = 0; i < count; i++) {
    CHECK_CL(clSetKernelArg(l->kernel, 0, sizeof(cl_mem), &l->bufs[0]));
    CHECK_CL(clSetKernelArg(l->kernel, 1, sizeof(cl_mem), &l->bufs[1]));
    CHECK_CL(clSetKernelArg(l->kernel, 2, sizeof(cl_mem), &l->bufs[2]));
    CHECK_CL(clSetKernelArg(l->kernel, 3, sizeof(int), &l->n));
    CHECK_CL(clEnqueueNDRangeKernel(l->queue, l->kernel, 1, NULL, &l->global_size,
                                    &l->local_size, 0, NULL, NULL));
  }
}

static inline void body_host(Loops* l, int count) {
  int i;
  for (i = 0; i < count; i++) {
    TVMFFIAny out;
    out.type_index = kTVMFFINone;
    if (TVMFFIFunctionCall(l->add, l->hargs, 3, &out) != 0) {
      fprintf(stderr, "add failed: %s\n", TVMGetLastError());
      exit(1);
    }
  }
}

static inline void body_direct(Loops* l, int count) {
  int i;
  for (i = 0; i < count; i++) {
    TVMFFIAny out;
    out.type_index = kTVMFFINone;
    if (TVMFFIFunctionCall(l->add_kernel, l->kargs, 6, &out) != 0) {
      fprintf(stderr, "add_kernel failed: %s\n", TVMGetLastError());
      exit(1);
    }
  }
}

/* Timed (and counted) loops, and the warm-up, which builds the kernels outside them. */
__attribute__((noinline)) static void loop_floor(Loops* l, int count) { body_floor(l, count); }
__attribute__((noinline)) static void loop_host(Loops* l, int count) { body_host(l, count); }
__attribute__((noinline)) static void loop_direct(Loops* l, int count) { body_direct(l, count); }
__attribute__((noinline)) static void warm_up(Loops* l) {
  body_floor(l, 100);
  body_host(l, 100);
  body_direct(l, 100);
}

/* Waits until every launch has run (both queues). */
static void drain(Loops* l) {
  CHECK_CL(clFinish(l->queue));
  CHECK_TVM(TVMSynchronize(kDLOpenCL, 0, NULL));
}

int main(int argc, char** argv) {
  int n_launch = argc > 2 ? atoi(argv[2]) : 20000;
  int rounds = argc > 3 ? atoi(argv[3]) : 9;
  int64_t elements = argc > 4 ? atoll(argv[4]) : 256;
  const int64_t threads = 64, groups = (elements + threads - 1) / threads;
  double floor_ns[64], host_ns[64], direct_ns[64];
  int r;
  if (argc < 2 || rounds < 1 || rounds > 64 || n_launch < 1) {
    fprintf(stderr, "usage: %s ELEMENTWISE_SO [N [ROUNDS<=64 [ELEMENTS]]]\n", argv[0]);
    return 2;
  }

  /* tvmrt: the library, its host launcher and its kernel. */
  TVMModuleHandle lib = NULL;
  TVMFunctionHandle add = NULL, add_kernel = NULL;
  DLTensor *a, *b, *c;
  CHECK_TVM(TVMModLoadFromFile(argv[1], "so", &lib));
  CHECK_TVM(TVMModGetFunction(lib, "add", 1, &add));
  CHECK_TVM(TVMModGetFunction(lib, "add_kernel", 1, &add_kernel));
  CHECK_TVM(TVMArrayAlloc(&elements, 1, kDLFloat, 32, 1, kDLOpenCL, 0, &a));
  CHECK_TVM(TVMArrayAlloc(&elements, 1, kDLFloat, 32, 1, kDLOpenCL, 0, &b));
  CHECK_TVM(TVMArrayAlloc(&elements, 1, kDLFloat, 32, 1, kDLOpenCL, 0, &c));
  TVMFFIAny hargs[3] = {any_dltensor(a), any_dltensor(b), any_dltensor(c)};
  TVMFFIAny kargs[6] = {any_ptr(a->data), any_ptr(b->data), any_ptr(c->data),
                        any_int(elements), any_int(groups), any_int(threads)};

  /* The floor: its own context, queue, program, kernel and buffers on the same device. */
  size_t src_len;
  char* src = library_source(lib, &src_len);
  const char* marker = "// Function: add_kernel\n";
  const char* body = strstr(src, marker);
  if (!body) {
    fprintf(stderr, "no add_kernel in the library's source\n");
    return 1;
  }
  body += strlen(marker);
  const char* end = strstr(body, "// Function: ");
  size_t body_len = end ? (size_t)(end - body) : strlen(body);
  cl_platform_id platform;
  cl_device_id device;
  cl_int err;
  CHECK_CL(clGetPlatformIDs(1, &platform, NULL));
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_GPU, 1, &device, NULL) != CL_SUCCESS)
    CHECK_CL(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL));
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  CHECK_CL(err);
  cl_command_queue queue = clCreateCommandQueue(ctx, device, 0, &err);
  CHECK_CL(err);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &body, &body_len, &err);
  CHECK_CL(err);
  CHECK_CL(clBuildProgram(prog, 1, &device, NULL, NULL, NULL));
  cl_kernel kernel = clCreateKernel(prog, "add_kernel", &err);
  CHECK_CL(err);
  cl_mem ba = clCreateBuffer(ctx, CL_MEM_READ_WRITE, elements * 4, NULL, &err);
  cl_mem bb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, elements * 4, NULL, &err);
  cl_mem bc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, elements * 4, NULL, &err);
  CHECK_CL(err);
  size_t global_size = (size_t)(groups * threads), local_size = (size_t)threads;
  int n_arg = (int)elements;

  Loops l;
  l.kernel = kernel;
  l.queue = queue;
  l.bufs[0] = ba;
  l.bufs[1] = bb;
  l.bufs[2] = bc;
  l.n = n_arg;
  l.global_size = global_size;
  l.local_size = local_size;
  l.add = add;
  l.add_kernel = add_kernel;
  memcpy(l.hargs, hargs, sizeof(hargs));
  memcpy(l.kargs, kargs, sizeof(kargs));

  /* Warm up all three (kernel builds, first launches). */
  warm_up(&l);
  drain(&l);

  /* Each round runs the three loops in a rotated order, so none always goes first. */
  for (r = 0; r < rounds; r++) {
    int k;
    for (k = 0; k < 3; k++) {
      int which = (r + k) % 3;
      uint64_t t0 = now_ns();
      if (which == 0) loop_floor(&l, n_launch);
      if (which == 1) loop_host(&l, n_launch);
      if (which == 2) loop_direct(&l, n_launch);
      drain(&l);
      double ns = (double)(now_ns() - t0) / n_launch;
      if (which == 0) floor_ns[r] = ns;
      if (which == 1) host_ns[r] = ns;
      if (which == 2) direct_ns[r] = ns;
    }
  }

  double fm, fb, hm, hb, dm, db;
  median_min(floor_ns, rounds, &fm, &fb);
  median_min(host_ns, rounds, &hm, &hb);
  median_min(direct_ns, rounds, &dm, &db);
  printf("tiny kernel add_kernel, %lld float32 elements (%lld x %lld work items), %d launches x "
         "%d rounds\n",
         (long long)elements, (long long)groups, (long long)threads, n_launch, rounds);
  printf("%-34s %10s %10s %8s\n", "", "median ns", "best ns", "vs floor");
  printf("%-34s %10.0f %10.0f %8s\n", "floor: hand-written OpenCL host", fm, fb, "1.00x");
  printf("%-34s %10.0f %10.0f %7.2fx\n", "tvmrt: kernel function directly", dm, db, dm / fm);
  printf("%-34s %10.0f %10.0f %7.2fx\n", "tvmrt: TVM's host launcher `add`", hm, hb, hm / fm);

  clReleaseMemObject(ba);
  clReleaseMemObject(bb);
  clReleaseMemObject(bc);
  clReleaseKernel(kernel);
  clReleaseProgram(prog);
  clReleaseCommandQueue(queue);
  clReleaseContext(ctx);
  free(src);
  TVMArrayFree(a);
  TVMArrayFree(b);
  TVMArrayFree(c);
  TVMFuncFree(add);
  TVMFuncFree(add_kernel);
  TVMModFree(lib);
  return 0;
}
