/* Parallel kernels inside a classic model: the per-`run` time of
 * tests/fixtures/graph/parallel_conv.so (four kernels, three of them parallel launches with
 * workspaces inside their tasks and barriers, host work between them) on a runtime chosen at
 * run time (TVM 0.19's libtvm_runtime.so or libtvmrt.so, dlopened), through the classic C API
 * only, and the CPU the runtime burns while the application is idle.
 *
 * Usage: parallel_model <runtime.so> <model.so> <runs> <rounds>
 * Measures (each a median over `rounds` rounds; RESULT <metric> <median> <min> <unit> lines):
 *   run_back_to_back    `run` called in a loop (the workers never idle for long);
 *   run_every_200us     `run` after 200 us of the application's own (busy) work;
 *   run_every_2ms       `run` after 2 ms of sleep (the workers may have gone to sleep);
 *   idle_cpu            process CPU time over 200 ms of sleep right after a run, in ms per s.
 * TVM_NUM_THREADS sets the pool size of both runtimes. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_timing.h"
#include "classic_dlopen.h"

static double process_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void sleep_ns(long ns) {
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
  nanosleep(&ts, NULL);
}

static void busy_ns(uint64_t ns) {
  volatile uint64_t sink = 0;
  uint64_t end = now_ns() + ns;
  while (now_ns() < end) sink++;
}

static void* run_fn;

static void run_once(void) {
  Value ret;
  int rc;
  check(g_api.call(run_fn, NULL, NULL, 0, &ret, &rc), "run");
}

static void report(const char* metric, double* v, int n, const char* unit) {
  double med, mn;
  median_min(v, n, &med, &mn);
  printf("RESULT %s %.4f %.4f %s\n", metric, med, mn, unit);
  fflush(stdout);
}

/* Median ns of one `run`, each preceded by `gap` (busy or asleep). */
static double timed_runs(int runs, int gap_kind, long gap_ns) {
  double* v = malloc(sizeof(double) * (size_t)runs);
  for (int i = 0; i < runs; ++i) {
    if (gap_kind == 1) busy_ns((uint64_t)gap_ns);
    if (gap_kind == 2) sleep_ns(gap_ns);
    uint64_t t0 = now_ns();
    run_once();
    v[i] = (double)(now_ns() - t0);
  }
  double m = median_of(v, runs);
  free(v);
  return m;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <runtime.so> <model.so> <runs> <rounds>\n", argv[0]);
    return 2;
  }
  int runs = atoi(argv[3]), rounds = atoi(argv[4]);
  if (runs < 1 || rounds < 1 || rounds > 64) return 2;
  classic_open(argv[1]);
  void* exec = classic_graph_executor(argv[2]);
  void* set_input = classic_function(exec, "set_input");
  void* get_output = classic_function(exec, "get_output");
  run_fn = classic_function(exec, "run");
  Value v[2], ret;
  int codes[2], rc;
  int (*call)(void*, Value*, int*, int, Value*, int*) = g_api.call;

  /* x: float32[1, 4, 12, 12] */
  static float x[4 * 12 * 12];
  for (int i = 0; i < 4 * 12 * 12; ++i) x[i] = (float)((i * 37) % 17 - 8) / 8.0f;
  int64_t shape[4] = {1, 4, 12, 12};
  struct {
    void* data;
    int32_t device_type, device_id, ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
  } t = {x, 1, 0, 4, 2, 32, 1, shape, NULL, 0};
  v[0].v_str = "x";
  codes[0] = 11; /* kTVMStr */
  v[1].v_handle = &t;
  codes[1] = 7; /* kTVMDLTensorHandle */
  check(call(set_input, v, codes, 2, &ret, &rc), "set_input");
  run_once();
  /* A checksum of the output, so both runtimes are seen to compute the same thing. */
  v[0].v_int64 = 0;
  codes[0] = 0;
  check(call(get_output, v, codes, 1, &ret, &rc), "get_output");
  const float* y = (const float*)((void**)ret.v_handle)[0];
  double sum = 0;
  for (int i = 0; i < 10; ++i) sum += y[i] * (i + 1);
  printf("CHECKSUM %.6f\n", sum);

  for (int i = 0; i < 2000; ++i) run_once(); /* warm up */
  double back[64], busy[64], slept[64], idle[64];
  for (int r = 0; r < rounds; ++r) {
    back[r] = timed_runs(runs, 0, 0);
    busy[r] = timed_runs(runs / 10 + 1, 1, 200000);
    slept[r] = timed_runs(runs / 100 + 1, 2, 2000000);
    run_once();
    double c0 = process_cpu_ns();
    sleep_ns(200000000L);
    idle[r] = (process_cpu_ns() - c0) / 1e6 / 0.2; /* ms of CPU per s */
  }
  report("run_back_to_back", back, rounds, "ns");
  report("run_every_200us", busy, rounds, "ns");
  report("run_every_2ms", slept, rounds, "ns");
  report("idle_cpu", idle, rounds, "ms/s");
  return 0;
}
