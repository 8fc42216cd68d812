/* Per-`run` overhead of a classic graph-executor model: the same program, the same library
 * (tests/fixtures/graph/shared_storage.so: 6 nodes, 3 tiny kernels, a __nop and a __copy),
 * against a runtime chosen at run time (TVM 0.19's libtvm_runtime.so or libtvmrt.so, dlopened),
 * through the classic C API only.
 * Usage: graph_run <runtime.so> <model.so> <runs> */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_timing.h"

typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  struct {
    int32_t device_type, device_id;
  } v_device;
} Value;

typedef int (*LoadFn)(const char*, const char*, void**);
typedef int (*GetFn)(void*, const char*, int, void**);
typedef int (*CallFn)(void*, Value*, int*, int, Value*, int*);
typedef const char* (*ErrFn)(void);

static ErrFn last_error;

static void check(int rc, const char* what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed: %s\n", what, last_error());
    exit(1);
  }
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s <runtime.so> <model.so> <runs>\n", argv[0]);
    return 2;
  }
  int runs = atoi(argv[3]);
  void* rt = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!rt) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  LoadFn load = (LoadFn)dlsym(rt, "TVMModLoadFromFile");
  GetFn get = (GetFn)dlsym(rt, "TVMModGetFunction");
  CallFn call = (CallFn)dlsym(rt, "TVMFuncCall");
  last_error = (ErrFn)dlsym(rt, "TVMGetLastError");

  void *factory, *create, *set_input, *run;
  check(load(argv[2], "so", &factory), "TVMModLoadFromFile");
  check(get(factory, "default", 0, &create), "default");
  Value v[2], ret;
  int codes[2], rc;
  v[0].v_device.device_type = 1;
  v[0].v_device.device_id = 0;
  codes[0] = 6; /* kDLDevice */
  check(call(create, v, codes, 1, &ret, &rc), "default(cpu)");
  void* exec = ret.v_handle;
  check(get(exec, "set_input", 0, &set_input), "set_input");
  check(get(exec, "run", 0, &run), "run");

  float x[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  int64_t shape[1] = {4};
  struct {
    void* data;
    int32_t device_type, device_id, ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
  } t = {x, 1, 0, 1, 2, 32, 1, shape, NULL, 0};
  v[0].v_str = "x";
  codes[0] = 11; /* kTVMStr */
  v[1].v_handle = &t;
  codes[1] = 7; /* kTVMDLTensorHandle */

  enum { ROUNDS = 9 };
  double run_ns[ROUNDS], set_ns[ROUNDS];
  for (int i = 0; i < runs / 10; ++i) check(call(run, v, codes, 0, &ret, &rc), "run");
  for (int r = 0; r < ROUNDS; ++r) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < runs; ++i) call(run, v, codes, 0, &ret, &rc);
    uint64_t t1 = now_ns();
    for (int i = 0; i < runs; ++i) call(set_input, v, codes, 2, &ret, &rc);
    uint64_t t2 = now_ns();
    run_ns[r] = (double)(t1 - t0) / runs;
    set_ns[r] = (double)(t2 - t1) / runs;
  }
  double run_med, run_min, set_med, set_min;
  median_min(run_ns, ROUNDS, &run_med, &run_min);
  median_min(set_ns, ROUNDS, &set_med, &set_min);
  printf("%-40s run %8.1f ns (min %8.1f)   set_input %8.1f ns (min %8.1f)\n", argv[1], run_med,
         run_min, set_med, set_min);
  return 0;
}
