/* The classic C API of a runtime chosen at run time (TVM 0.19's libtvm_runtime.so or
 * libtvmrt.so, dlopened), for the benchmarks that run one program on both: graph_run.c and
 * parallel_model.c. Include after defining _GNU_SOURCE. */
#ifndef TVMRT_BENCH_CLASSIC_DLOPEN_H_
#define TVMRT_BENCH_CLASSIC_DLOPEN_H_

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  struct {
    int32_t device_type, device_id;
  } v_device;
} Value;

/* TVMModLoadFromFile, TVMModGetFunction, TVMFuncCall and TVMGetLastError of one runtime. */
typedef struct {
  int (*load)(const char*, const char*, void**);
  int (*get)(void*, const char*, int, void**);
  int (*call)(void*, Value*, int*, int, Value*, int*);
  const char* (*last_error)(void);
} ClassicApi;

static ClassicApi g_api;

/* Loads the runtime at `path` (exits on failure). */
static inline void classic_open(const char* path) {
  void* rt = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!rt) {
    fprintf(stderr, "%s\n", dlerror());
    exit(1);
  }
  *(void**)&g_api.load = dlsym(rt, "TVMModLoadFromFile");
  *(void**)&g_api.get = dlsym(rt, "TVMModGetFunction");
  *(void**)&g_api.call = dlsym(rt, "TVMFuncCall");
  *(void**)&g_api.last_error = dlsym(rt, "TVMGetLastError");
}

/* Exits with the runtime's message when `rc` is not 0. */
static inline void check(int rc, const char* what) {
  if (rc != 0) {
    fprintf(stderr, "%s failed: %s\n", what, g_api.last_error());
    exit(1);
  }
}

/* The graph executor of a model library on the CPU: its factory's `default(cpu)`. */
static inline void* classic_graph_executor(const char* model) {
  void *factory, *create;
  Value v[1], ret;
  int codes[1], rc;
  check(g_api.load(model, "so", &factory), "TVMModLoadFromFile");
  check(g_api.get(factory, "default", 0, &create), "default");
  v[0].v_device.device_type = 1;
  v[0].v_device.device_id = 0;
  codes[0] = 6; /* kDLDevice */
  check(g_api.call(create, v, codes, 1, &ret, &rc), "default(cpu)");
  return ret.v_handle;
}

/* A function of `mod` (exits when missing). */
static inline void* classic_function(void* mod, const char* name) {
  void* f = NULL;
  check(g_api.get(mod, name, 0, &f), name);
  if (!f) {
    fprintf(stderr, "no function %s\n", name);
    exit(1);
  }
  return f;
}

#endif /* TVMRT_BENCH_CLASSIC_DLOPEN_H_ */
