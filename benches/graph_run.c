/* Per-`run` overhead of a classic graph-executor model: the same program, the same library
 * (tests/fixtures/graph/shared_storage.so: 6 nodes, 3 tiny kernels, a __nop and a __copy),
 * against a runtime chosen at run time (TVM 0.19's libtvm_runtime.so or libtvmrt.so, dlopened),
 * through the classic C API only.
 * Usage: graph_run <runtime.so> <model.so> <runs> */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_timing.h"
#include "classic_dlopen.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s <runtime.so> <model.so> <runs>\n", argv[0]);
    return 2;
  }
  int runs = atoi(argv[3]);
  classic_open(argv[1]);
  void* exec = classic_graph_executor(argv[2]);
  void* set_input = classic_function(exec, "set_input");
  void* run = classic_function(exec, "run");
  Value v[2], ret;
  int codes[2], rc;
  int (*call)(void*, Value*, int*, int, Value*, int*) = g_api.call;

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
