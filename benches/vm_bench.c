/* SPDX-License-Identifier: Apache-2.0
 *
 * vm_bench: one C source, built twice (benches/vm_bench.sh), that runs TVM-compiled Relax
 * models through the tvm-ffi C API: linked against tvmrt (libtvmrt.so) it measures tvmrt,
 * linked against Apache TVM's runtime (libtvm_ffi.so + libtvm_runtime.so of the apache-tvm
 * wheel) it measures TVM's Relax VM. Same library files, same inputs, same code path
 * (c_tests/vm_common.h): ffi.ModuleLoadFromFile, vm_load_executable, vm_initialization(1, 0, 2),
 * then `main` on a tensor made with TVMFFITensorFromDLPack.
 *
 * Modes (FIXDIR = tests/fixtures):
 *   vm_bench --bench FIXDIR
 *       latency of one `main` call of mlp.so and cnn.so (outputs checked first).
 *   vm_bench --load-once mlp|cnn FIXDIR
 *       one sample of load-to-first-result in a fresh process: `LOAD_NS <ns>`, from
 *       ffi.ModuleLoadFromFile to the checked output of the first `main` call (the runtime's
 *       own start-up is in the process wall time that --spawn also reports).
 *   vm_bench --spawn N mlp|cnn FIXDIR BIN [BIN...]
 *       runs `BIN --load-once` N times per BIN, alternating binaries.
 *   vm_bench --calls N mlp|cnn FIXDIR
 *       N calls of `main` after loading, nothing else (for profilers such as callgrind).
 *   vm_bench --bench-pool MODEL DIR
 *       `main` of one model back to back, after 2 ms of sleep (the pool's workers may sleep),
 *       and the process CPU time over 200 ms of idleness right after a call (ms per s).
 * Machine-readable lines: RESULT <metric> <median> <min> <unit>.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../c_tests/vm_common.h"
#include "bench_timing.h"

#ifndef VB_RUNTIME
#define VB_RUNTIME "unknown"
#endif

static void report(const char* metric, double* v, int n, const char* unit) {
  double med, mn;
  median_min(v, n, &med, &mn);
  printf("RESULT %s %.4f %.4f %s\n", metric, med, mn, unit);
  fflush(stdout);
}

static void die(const char* what, const char* msg) {
  fprintf(stderr, "vm_bench (%s): %s: %s\n", VB_RUNTIME, what, msg);
  exit(1);
}

typedef struct {
  const char* name; /* mlp | cnn */
  const char* lib;
  const char* in;
  const char* out;
} Model;

static const Model kModels[] = {
    {"mlp", "mlp.so", "data/mlp.main.in0.npy", "data/mlp.main.out0.npy"},
    {"cnn", "cnn.so", "data/cnn.main.in0.npy", "data/cnn.main.out0.npy"},
    /* Made by benches/parallel_relax.py (run_parallel_relax.sh), not a fixture. */
    {"pcnn", "pcnn.so", "data/pcnn.main.in0.npy", "data/pcnn.main.out0.npy"},
};

static const Model* find_model(const char* name) {
  size_t i;
  for (i = 0; i < sizeof(kModels) / sizeof(kModels[0]); i++)
    if (!strcmp(kModels[i].name, name)) return &kModels[i];
  die("unknown model", name);
  return NULL;
}

static void join(char* out, size_t cap, const char* dir, const char* file) {
  snprintf(out, cap, "%s/%s", dir, file);
}

typedef struct {
  VmModel m;
  TVMFFIObjectHandle main_fn;
  HostArray x, want;
  TVMFFIObjectHandle xt;
} Loaded;

/* Load, make the VM, the input tensor; call main once and check it. */
static void load_and_first_call(const Model* md, const char* dir, Loaded* l) {
  char path[1024], err[2048], why[256];
  TVMFFIAny arg, out;
  join(path, sizeof(path), dir, md->lib);
  if (vm_load(&l->m, path, 2, err, sizeof(err)) != 0) die(md->lib, err);
  l->main_fn = vm_module_function(&l->m, l->m.vm, "main");
  if (!l->main_fn) die(md->lib, "no main");
  join(path, sizeof(path), dir, md->in);
  if (npy_read(path, &l->x) != 0) die("reading", path);
  l->xt = host_tensor(&l->x);
  if (!l->xt) die("TVMFFITensorFromDLPack", vm_take_error(err, sizeof(err)));
  arg = vm_obj(l->xt);
  if (vm_call(l->main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
  join(path, sizeof(path), dir, md->out);
  if (npy_read(path, &l->want) != 0) die("reading", path);
  if (out.type_index != kTVMFFITensor) die(md->name, "main did not return a tensor");
  if (!close_f32(tensor_dl(out.v_obj), &l->want, 1e-5, 1e-6, why, sizeof(why)))
    die(md->name, why);
  vm_release(&out);
}

static void unload(Loaded* l) {
  TVMFFIObjectDecRef(l->main_fn);
  TVMFFIObjectDecRef(l->xt);
  vm_unload(&l->m);
  host_free(&l->x);
  host_free(&l->want);
}

static void bench_main(const Model* md, const char* dir) {
  enum { kSamples = 31, kWarmup = 500 };
  Loaded l;
  TVMFFIAny arg, out;
  double per_call[kSamples];
  char err[2048], metric[64];
  int i, s, batch;
  uint64_t t0, t;
  load_and_first_call(md, dir, &l);
  arg = vm_obj(l.xt);
  for (i = 0; i < kWarmup; i++) {
    if (vm_call(l.main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
    vm_release(&out);
  }
  /* Batch size for ~20 ms per sample. */
  t0 = now_ns();
  for (i = 0; i < 100; i++) {
    vm_call(l.main_fn, &arg, 1, &out, err, sizeof(err));
    vm_release(&out);
  }
  t = now_ns() - t0;
  batch = (int)(20000000ull * 100 / (t ? t : 1));
  if (batch < 10) batch = 10;
  for (s = 0; s < kSamples; s++) {
    t0 = now_ns();
    for (i = 0; i < batch; i++) {
      if (vm_call(l.main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
      vm_release(&out);
    }
    per_call[s] = (double)(now_ns() - t0) / batch / 1000.0;
  }
  snprintf(metric, sizeof(metric), "%s_main_latency", md->name);
  report(metric, per_call, kSamples, "us");
  unload(&l);
}

static double process_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* What a parallel model meets: calls back to back, calls after the application slept, and
 * the CPU the pool burns while the application is idle. */
static void bench_pool(const Model* md, const char* dir) {
  enum { kRounds = 7, kCalls = 400, kSpaced = 40 };
  Loaded l;
  TVMFFIAny arg, out;
  double back[kRounds], spaced[kRounds], idle[kRounds], v[kCalls];
  char err[2048], metric[64];
  int r, i;
  load_and_first_call(md, dir, &l);
  arg = vm_obj(l.xt);
  for (i = 0; i < 200; i++) {
    if (vm_call(l.main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
    vm_release(&out);
  }
  for (r = 0; r < kRounds; r++) {
    for (i = 0; i < kCalls; i++) {
      uint64_t t0 = now_ns();
      if (vm_call(l.main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
      v[i] = (double)(now_ns() - t0) / 1000.0;
      vm_release(&out);
    }
    back[r] = median_of(v, kCalls);
    for (i = 0; i < kSpaced; i++) {
      sleep_ms(2);
      uint64_t t0 = now_ns();
      if (vm_call(l.main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
      v[i] = (double)(now_ns() - t0) / 1000.0;
      vm_release(&out);
    }
    spaced[r] = median_of(v, kSpaced);
    double c0 = process_cpu_ms();
    sleep_ms(200);
    idle[r] = (process_cpu_ms() - c0) / 0.2;
  }
  snprintf(metric, sizeof(metric), "%s_main_back_to_back", md->name);
  report(metric, back, kRounds, "us");
  snprintf(metric, sizeof(metric), "%s_main_every_2ms", md->name);
  report(metric, spaced, kRounds, "us");
  report("idle_cpu", idle, kRounds, "ms/s");
  unload(&l);
}

static int run_calls(int n, const char* which, const char* dir) {
  Loaded l;
  TVMFFIAny arg, out;
  char err[2048];
  int i;
  load_and_first_call(find_model(which), dir, &l);
  arg = vm_obj(l.xt);
  for (i = 0; i < n; i++) {
    if (vm_call(l.main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
    vm_release(&out);
  }
  printf("CALLS main %d\n", n + 1);
  unload(&l);
  return 0;
}

static int run_load_once(const char* which, const char* dir) {
  Loaded l;
  /* The runtime itself is ready first: TVM registers its global functions in static
   * initializers before main, tvmrt on the first registry use. The process wall time
   * (--spawn) covers that part for both. */
  TVMFFIObjectHandle ready = vm_global("ffi.ModuleLoadFromFile");
  uint64_t t0;
  if (!ready) die("runtime", "ffi.ModuleLoadFromFile is not registered");
  TVMFFIObjectDecRef(ready);
  t0 = now_ns();
  load_and_first_call(find_model(which), dir, &l);
  printf("LOAD_NS %llu\n", (unsigned long long)(now_ns() - t0));
  fflush(stdout);
  unload(&l);
  return 0;
}

/* One fresh process: `bin --load-once which dir`; returns its LOAD_NS and wall time. */
static double spawn_one(const char* bin, const char* which, const char* dir, double* wall_us) {
  int fds[2], status;
  char buf[256] = {0};
  ssize_t n;
  uint64_t t0 = now_ns();
  pid_t pid;
  if (pipe(fds) != 0) die("pipe", "failed");
  pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(bin, bin, "--load-once", which, dir, (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  n = read(fds[0], buf, sizeof(buf) - 1);
  close(fds[0]);
  waitpid(pid, &status, 0);
  *wall_us = (double)(now_ns() - t0) / 1000.0;
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || strncmp(buf, "LOAD_NS ", 8))
    die(bin, "--load-once failed");
  return strtod(buf + 8, NULL) / 1000.0;
}

static int run_spawn(int n, const char* which, const char* dir, int nbin, char** bins) {
  double* in_proc = calloc((size_t)(n * nbin), sizeof(double));
  double* wall = calloc((size_t)(n * nbin), sizeof(double));
  char metric[256];
  int i, b;
  for (i = 0; i < n; i++)
    for (b = 0; b < nbin; b++) in_proc[b * n + i] = spawn_one(bins[b], which, dir, &wall[b * n + i]);
  for (b = 0; b < nbin; b++) {
    snprintf(metric, sizeof(metric), "%s:%s_load_to_first_result", bins[b], which);
    report(metric, in_proc + b * n, n, "us");
    snprintf(metric, sizeof(metric), "%s:%s_process_wall", bins[b], which);
    report(metric, wall + b * n, n, "us");
  }
  free(in_proc);
  free(wall);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "--bench")) {
    printf("# vm_bench on %s\n", VB_RUNTIME);
    bench_main(find_model("mlp"), argv[2]);
    bench_main(find_model("cnn"), argv[2]);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "--bench-pool")) {
    printf("# vm_bench on %s\n", VB_RUNTIME);
    bench_pool(find_model(argv[2]), argv[3]);
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "--load-once")) return run_load_once(argv[2], argv[3]);
  if (argc == 5 && !strcmp(argv[1], "--calls")) return run_calls(atoi(argv[2]), argv[3], argv[4]);
  if (argc >= 6 && !strcmp(argv[1], "--spawn"))
    return run_spawn(atoi(argv[2]), argv[3], argv[4], argc - 5, argv + 5);
  fprintf(stderr,
          "usage: %s --bench FIXDIR | --load-once mlp|cnn FIXDIR |"
          " --spawn N mlp|cnn FIXDIR BIN... | --calls N mlp|cnn FIXDIR |"
          " --bench-pool MODEL DIR\n",
          argv[0]);
  return 2;
}
