/* SPDX-License-Identifier: Apache-2.0
 *
 * model_memory: one C source, built twice (benches/model_memory/run.sh), that loads a
 * TVM-compiled Relax model through the tvm-ffi C API and measures what deploying it costs: linked
 * against tvmrt it measures tvmrt, linked against Apache TVM's runtime (libtvm_ffi.so +
 * libtvm_runtime.so of the apache-tvm wheel) it measures TVM's Relax VM. Same library file,
 * same input, same code path (c_tests/vm_common.h).
 *
 *   model_memory LIB INPUT.npy STEADY_CALLS
 *
 * One process, one sample. Prints:
 *   RSS_START_KB   resident memory once the runtime is ready, before the model is loaded
 *   LOAD_US        ffi.ModuleLoadFromFile + vm_load_executable + vm_initialization
 *   RSS_LOADED_KB  resident memory after loading
 *   FIRST_US       the first `main` call
 *   STEADY_US      median of STEADY_CALLS further `main` calls
 *   PEAK_KB        peak resident memory of the process (VmHWM)
 *   RSS_END_KB     resident memory after the calls
 *   OUTPUT_HASH    FNV-1a of the output's bytes, and its first values (the runtimes must agree)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../c_tests/vm_common.h"
#include "../bench_timing.h"

#ifndef MM_RUNTIME
#define MM_RUNTIME "unknown"
#endif

static void die(const char* what, const char* msg) {
  fprintf(stderr, "model_memory (%s): %s: %s\n", MM_RUNTIME, what, msg);
  exit(1);
}

/* A `VmRSS:` / `VmHWM:` figure of /proc/self/status, in kB. */
static long status_kb(const char* field) {
  char line[256];
  long kb = -1;
  size_t n = strlen(field);
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) die("reading", "/proc/self/status");
  while (fgets(line, sizeof(line), f)) {
    if (!strncmp(line, field, n)) {
      kb = strtol(line + n, NULL, 10);
      break;
    }
  }
  fclose(f);
  if (kb < 0) die("no such field in /proc/self/status", field);
  return kb;
}

static uint64_t fnv1a(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

int main(int argc, char** argv) {
  VmModel m;
  HostArray x;
  TVMFFIObjectHandle main_fn, xt, ready;
  TVMFFIAny arg, out;
  char err[4096];
  double* steady;
  int calls, i;
  uint64_t t0;
  const DLTensor* y;
  size_t ybytes;
  int64_t k;
  if (argc != 4) {
    fprintf(stderr, "usage: %s LIB INPUT.npy STEADY_CALLS\n", argv[0]);
    return 2;
  }
  calls = atoi(argv[3]);
  if (calls < 1) die("STEADY_CALLS", "must be at least 1");
  if (npy_read(argv[2], &x) != 0) die("reading", argv[2]);
  /* The runtime is ready first (TVM registers its globals in static initializers, tvmrt on
   * first use), so RSS_START_KB counts the runtime and not the model. */
  ready = vm_global("ffi.ModuleLoadFromFile");
  if (!ready) die("runtime", "ffi.ModuleLoadFromFile is not registered");
  TVMFFIObjectDecRef(ready);
  printf("RSS_START_KB %ld\n", status_kb("VmRSS:"));

  t0 = now_ns();
  if (vm_load(&m, argv[1], 2, err, sizeof(err)) != 0) die(argv[1], err);
  printf("LOAD_US %.1f\n", (double)(now_ns() - t0) / 1e3);
  printf("RSS_LOADED_KB %ld\n", status_kb("VmRSS:"));

  main_fn = vm_module_function(&m, m.vm, "main");
  if (!main_fn) die(argv[1], "no main");
  xt = host_tensor(&x);
  if (!xt) die("TVMFFITensorFromDLPack", vm_take_error(err, sizeof(err)));
  arg = vm_obj(xt);
  t0 = now_ns();
  if (vm_call(main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
  printf("FIRST_US %.1f\n", (double)(now_ns() - t0) / 1e3);
  if (out.type_index != kTVMFFITensor) die("main", "did not return a tensor");
  y = tensor_dl(out.v_obj);
  if (y->dtype.code != kDLFloat || y->dtype.bits != 32 || y->dtype.lanes != 1)
    die("main", "did not return float32");
  ybytes = 4;
  for (k = 0; k < y->ndim; k++) ybytes *= (size_t)y->shape[k];
  {
    const float* v = (const float*)((const char*)y->data + y->byte_offset);
    printf("OUTPUT_HASH %016llx %zu bytes, first %.6g %.6g %.6g\n",
           (unsigned long long)fnv1a((const unsigned char*)v, ybytes), ybytes, v[0], v[1], v[2]);
  }
  vm_release(&out);

  steady = (double*)calloc((size_t)calls, sizeof(double));
  for (i = 0; i < calls; i++) {
    t0 = now_ns();
    if (vm_call(main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
    steady[i] = (double)(now_ns() - t0) / 1e3;
    vm_release(&out);
  }
  printf("STEADY_US %.1f\n", median_of(steady, calls));
  printf("PEAK_KB %ld\n", status_kb("VmHWM:"));
  printf("RSS_END_KB %ld\n", status_kb("VmRSS:"));
  free(steady);
  TVMFFIObjectDecRef(main_fn);
  TVMFFIObjectDecRef(xt);
  vm_unload(&m);
  host_free(&x);
  return 0;
}
