/* SPDX-License-Identifier: Apache-2.0
 *
 * kernel_bench: one C source, built twice, that loads TVM-compiled kernel
 * libraries through the tvm-ffi C API and times them. Linked against tvmrt
 * (libtvmrt.so) it measures tvmrt; linked against Apache TVM's runtime
 * (libtvm_ffi.so + libtvm_runtime.so from the apache-tvm wheel) it measures
 * TVM. Only public C API is used, so the same program must compile and run
 * unchanged against both (that is part of what it checks).
 *
 * Modes (FIXDIR = directory holding add_dyn.so and parallel.so):
 *   kernel_bench --bench FIXDIR
 *       per-call cost of `add` (n=16), `matmul_parallel` (512^3) and the
 *       workspace alloc/free pair; every kernel result is checked first.
 *   kernel_bench --only add|matmul|workspace FIXDIR
 *       one of those three alone (for profiling).
 *   kernel_bench --load-once add|matmul FIXDIR
 *       one sample of load-to-first-result, printed as `LOAD_NS <ns>`.
 *       Must run in a fresh process: a second dlopen of the same file in one
 *       process only bumps a reference count.
 *   kernel_bench --spawn N add|matmul FIXDIR BIN [BIN...]
 *       runs `BIN --load-once` N times for each BIN, alternating binaries so
 *       that machine load drifts affect all alike, and reports both the
 *       in-process figure and the process wall time (fork to exit).
 *
 * Output lines starting with `RESULT` are machine-readable:
 *   RESULT <metric> <median> <min> <unit>
 * and `CALLS <what> <n>` gives how often a measured entry point was called
 * in the whole run (warm-up included), to turn profiler totals into
 * per-call figures.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_backend_api.h>

#include "bench_timing.h"

#ifndef KB_RUNTIME
#define KB_RUNTIME "unknown"
#endif

/* ---------------------------------------------------------------- utils -- */

/* User + system CPU time of the whole process (all threads), in ns. */
static uint64_t process_cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
         ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

static void report(const char* metric, double* v, int n, const char* unit) {
  double med, mn;
  median_min(v, n, &med, &mn);
  printf("RESULT %s %.6g %.6g %s\n", metric, med, mn, unit);
  fflush(stdout);
}

/* The error object's cell follows the 24-byte object header. The accessor
 * helpers for it are C++-only in tvm-ffi's header, so compute it here. */
static void die_with_raised(const char* what) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == NULL) {
    fprintf(stderr, "[%s] %s failed (no error raised)\n", KB_RUNTIME, what);
  } else {
    const TVMFFIErrorCell* cell =
        (const TVMFFIErrorCell*)((const char*)err + sizeof(TVMFFIObject));
    fprintf(stderr, "[%s] %s failed: %.*s: %.*s\n", KB_RUNTIME, what, (int)cell->kind.size,
            cell->kind.data, (int)cell->message.size, cell->message.data);
    TVMFFIObjectDecRef(err);
  }
  exit(2);
}

static void die(const char* fmt, const char* arg) {
  fprintf(stderr, "[%s] ", KB_RUNTIME);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  exit(2);
}

static TVMFFIObjectHandle get_global(const char* name) {
  TVMFFIByteArray n = {name, strlen(name)};
  TVMFFIObjectHandle f = NULL;
  if (TVMFFIFunctionGetGlobal(&n, &f) != 0) die_with_raised("TVMFFIFunctionGetGlobal");
  if (f == NULL) die("global function %s is not registered", name);
  return f;
}

static TVMFFIAny none_any(void) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = kTVMFFINone;
  return a;
}

static TVMFFIAny str_arg(const char* s) {
  TVMFFIAny a = none_any();
  a.type_index = kTVMFFIRawStr;
  a.v_c_str = s;
  return a;
}

static TVMFFIAny obj_arg(TVMFFIObjectHandle obj) {
  TVMFFIAny a = none_any();
  a.type_index = ((TVMFFIObject*)obj)->type_index;
  a.v_obj = (TVMFFIObject*)obj;
  return a;
}

static TVMFFIAny bool_arg(int b) {
  TVMFFIAny a = none_any();
  a.type_index = kTVMFFIBool;
  a.v_int64 = b != 0;
  return a;
}

static TVMFFIAny tensor_arg(DLTensor* t) {
  TVMFFIAny a = none_any();
  a.type_index = kTVMFFIDLTensorPtr;
  a.v_ptr = t;
  return a;
}

/* Drops the reference a result holds, if it holds one. */
static void release_any(TVMFFIAny* a) {
  if (a->type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(a->v_obj);
  *a = none_any();
}

/* ffi.ModuleLoadFromFile takes the path only (tvm-ffi module.cc,
 * Module::LoadFromFile: the format comes from the extension). */
static TVMFFIObjectHandle load_module(TVMFFIObjectHandle f_load, const char* path) {
  TVMFFIAny args[1] = {str_arg(path)};
  TVMFFIAny res = none_any();
  if (TVMFFIFunctionCall(f_load, args, 1, &res) != 0) die_with_raised("ffi.ModuleLoadFromFile");
  if (res.type_index < kTVMFFIStaticObjectBegin) die("%s: loader returned a non-object", path);
  return res.v_obj;
}

/* ffi.ModuleGetFunction(mod, name, query_imports) -> Optional<Function>. */
static TVMFFIObjectHandle get_function(TVMFFIObjectHandle f_getfn, TVMFFIObjectHandle mod,
                                       const char* name) {
  TVMFFIAny args[3] = {obj_arg(mod), str_arg(name), bool_arg(0)};
  TVMFFIAny res = none_any();
  if (TVMFFIFunctionCall(f_getfn, args, 3, &res) != 0) die_with_raised("ffi.ModuleGetFunction");
  if (res.type_index != kTVMFFIFunction) die("function %s not found in the module", name);
  return res.v_obj;
}

static void* aligned_alloc64(size_t nbytes) {
  void* p = NULL;
  if (posix_memalign(&p, 64, nbytes ? nbytes : 64) != 0) die("%s", "out of memory");
  return p;
}

static DLTensor make_tensor(void* data, int ndim, int64_t* shape) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL;
  t.byte_offset = 0;
  return t;
}

static void call_kernel(TVMFFIObjectHandle f, TVMFFIAny* args, int n, const char* what) {
  TVMFFIAny res = none_any();
  if (TVMFFIFunctionCall(f, args, n, &res) != 0) die_with_raised(what);
  release_any(&res);
}

/* ------------------------------------------------------------- kernels -- */

enum { ADD_N = 16, MM = 512 };

/* The pattern inputs of the fixture case parallel.matmul_parallel.512x512x512
 * (tests/fixtures/manifest.json): multiples of 1/4 in [-1.5, 1.75], so every
 * dot product of length 512 is exact in float32 whatever the summation
 * order, and the kernel's result can be compared for exact equality. */
static float pattern_a(int i, int k) { return (float)(((7 * i + 3 * k + 1) % 11) - 5) * 0.25f; }
static float pattern_b(int k, int j) { return (float)(((5 * k + 2 * j + 3) % 13) - 6) * 0.25f; }

typedef struct {
  float *a, *b, *c;
  int64_t shape[2];
  DLTensor ta, tb, tc;
  TVMFFIAny args[3];
} Problem;

static void setup_add(Problem* p) {
  p->a = aligned_alloc64(ADD_N * sizeof(float));
  p->b = aligned_alloc64(ADD_N * sizeof(float));
  p->c = aligned_alloc64(ADD_N * sizeof(float));
  for (int i = 0; i < ADD_N; i++) {
    p->a[i] = (float)i * 0.5f;
    p->b[i] = 100.0f - (float)i;
    p->c[i] = -1.0f;
  }
  p->shape[0] = ADD_N;
  p->ta = make_tensor(p->a, 1, p->shape);
  p->tb = make_tensor(p->b, 1, p->shape);
  p->tc = make_tensor(p->c, 1, p->shape);
  p->args[0] = tensor_arg(&p->ta);
  p->args[1] = tensor_arg(&p->tb);
  p->args[2] = tensor_arg(&p->tc);
}

static void check_add(const Problem* p) {
  for (int i = 0; i < ADD_N; i++) {
    if (p->c[i] != p->a[i] + p->b[i]) {
      fprintf(stderr, "[%s] add: c[%d] = %g, expected %g\n", KB_RUNTIME, i, p->c[i],
              p->a[i] + p->b[i]);
      exit(3);
    }
  }
}

static void setup_matmul(Problem* p) {
  size_t nbytes = (size_t)MM * MM * sizeof(float);
  p->a = aligned_alloc64(nbytes);
  p->b = aligned_alloc64(nbytes);
  p->c = aligned_alloc64(nbytes);
  for (int i = 0; i < MM; i++) {
    for (int j = 0; j < MM; j++) {
      p->a[i * MM + j] = pattern_a(i, j);
      p->b[i * MM + j] = pattern_b(i, j);
    }
  }
  memset(p->c, 0, nbytes);
  p->shape[0] = MM;
  p->shape[1] = MM;
  p->ta = make_tensor(p->a, 2, p->shape);
  p->tb = make_tensor(p->b, 2, p->shape);
  p->tc = make_tensor(p->c, 2, p->shape);
  p->args[0] = tensor_arg(&p->ta);
  p->args[1] = tensor_arg(&p->tb);
  p->args[2] = tensor_arg(&p->tc);
}

/* Compares every entry against a naive matmul (exact, see pattern_a). With
 * full=0 only every 31st row is checked (for the load-once samples). */
static void check_matmul(const Problem* p, int full) {
  double* row = malloc(MM * sizeof(double));
  if (row == NULL) die("%s", "out of memory");
  for (int i = 0; i < MM; i += full ? 1 : 31) {
    for (int j = 0; j < MM; j++) row[j] = 0.0;
    for (int k = 0; k < MM; k++) {
      double aik = p->a[i * MM + k];
      const float* brow = p->b + (size_t)k * MM;
      for (int j = 0; j < MM; j++) row[j] += aik * brow[j];
    }
    for (int j = 0; j < MM; j++) {
      if ((double)p->c[i * MM + j] != row[j]) {
        fprintf(stderr, "[%s] matmul_parallel: C[%d][%d] = %g, expected %g\n", KB_RUNTIME, i, j,
                p->c[i * MM + j], row[j]);
        exit(3);
      }
    }
  }
  free(row);
}

static void path_join(char* out, size_t cap, const char* dir, const char* file) {
  if ((size_t)snprintf(out, cap, "%s/%s", dir, file) >= cap) die("path too long: %s", dir);
}

/* ------------------------------------------------------------ load-once -- */

static int run_load_once(const char* which, const char* fixdir) {
  int is_add = strcmp(which, "add") == 0;
  if (!is_add && strcmp(which, "matmul") != 0) die("unknown load-once kernel %s", which);
  char path[4096];
  path_join(path, sizeof(path), fixdir, is_add ? "add_dyn.so" : "parallel.so");
  Problem p;
  if (is_add) setup_add(&p); else setup_matmul(&p);
  TVMFFIObjectHandle f_load = get_global("ffi.ModuleLoadFromFile");
  TVMFFIObjectHandle f_getfn = get_global("ffi.ModuleGetFunction");

  uint64_t t0 = now_ns();
  TVMFFIObjectHandle mod = load_module(f_load, path);
  TVMFFIObjectHandle fn = get_function(f_getfn, mod, is_add ? "add" : "matmul_parallel");
  call_kernel(fn, p.args, 3, is_add ? "add" : "matmul_parallel");
  uint64_t t1 = now_ns();

  if (is_add) check_add(&p); else check_matmul(&p, 0);
  printf("LOAD_NS %llu\n", (unsigned long long)(t1 - t0));
  TVMFFIObjectDecRef(fn);
  TVMFFIObjectDecRef(mod);
  TVMFFIObjectDecRef(f_getfn);
  TVMFFIObjectDecRef(f_load);
  return 0;
}

/* Runs `bin --load-once which fixdir`; returns the wall time in ns and stores
 * the child's LOAD_NS figure in *inproc_ns. */
static double spawn_one(const char* bin, const char* which, const char* fixdir,
                        double* inproc_ns) {
  int fds[2];
  if (pipe(fds) != 0) die("pipe: %s", strerror(errno));
  uint64_t t0 = now_ns();
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(bin, bin, "--load-once", which, fixdir, (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[256];
  size_t len = 0;
  ssize_t r;
  while (len < sizeof(buf) - 1 && (r = read(fds[0], buf + len, sizeof(buf) - 1 - len)) > 0) {
    len += (size_t)r;
  }
  buf[len] = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  uint64_t t1 = now_ns();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("load-once child %s failed", bin);
  unsigned long long v = 0;
  const char* at = strstr(buf, "LOAD_NS ");
  if (at == NULL || sscanf(at, "LOAD_NS %llu", &v) != 1) die("no LOAD_NS from %s", bin);
  *inproc_ns = (double)v;
  return (double)(t1 - t0);
}

static int run_spawn(int n, const char* which, const char* fixdir, int nbin, char** bins) {
  double* inproc = calloc((size_t)n * (size_t)nbin, sizeof(double));
  double* wall = calloc((size_t)n * (size_t)nbin, sizeof(double));
  if (inproc == NULL || wall == NULL) die("%s", "out of memory");
  for (int b = 0; b < nbin; b++) {  // one unmeasured run each warms the page cache
    double ignored;
    spawn_one(bins[b], which, fixdir, &ignored);
  }
  for (int i = 0; i < n; i++) {
    for (int b = 0; b < nbin; b++) {
      wall[b * n + i] = spawn_one(bins[b], which, fixdir, &inproc[b * n + i]) / 1e6;
      inproc[b * n + i] /= 1e6;
    }
  }
  for (int b = 0; b < nbin; b++) {
    char metric[512];
    snprintf(metric, sizeof(metric), "%s:load_first_%s_inproc", bins[b], which);
    report(metric, inproc + b * n, n, "ms");
    snprintf(metric, sizeof(metric), "%s:load_first_%s_process", bins[b], which);
    report(metric, wall + b * n, n, "ms");
  }
  free(inproc);
  free(wall);
  return 0;
}

/* ---------------------------------------------------------------- bench -- */

enum { ADD_CALLS = 100000, ADD_REPS = 11, MM_WARMUP = 3, MM_REPS = 30, WS_PAIRS = 1000000,
       WS_REPS = 11 };

static void bench_add(TVMFFIObjectHandle f_load, TVMFFIObjectHandle f_getfn, const char* fixdir) {
  char path[4096];
  path_join(path, sizeof(path), fixdir, "add_dyn.so");
  TVMFFIObjectHandle mod = load_module(f_load, path);
  TVMFFIObjectHandle fn = get_function(f_getfn, mod, "add");
  Problem p;
  setup_add(&p);
  for (int i = 0; i < 1000; i++) call_kernel(fn, p.args, 3, "add");
  check_add(&p);

  double samples[ADD_REPS];
  for (int r = 0; r < ADD_REPS; r++) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < ADD_CALLS; i++) {
      TVMFFIAny res;
      res.type_index = kTVMFFINone;
      res.zero_padding = 0;
      res.v_int64 = 0;
      if (TVMFFIFunctionCall(fn, p.args, 3, &res) != 0) die_with_raised("add");
    }
    samples[r] = (double)(now_ns() - t0) / ADD_CALLS;
  }
  check_add(&p);
  report("add_n16_TVMFFIFunctionCall", samples, ADD_REPS, "ns/call");

  /* Baseline: the function object's own safe_call entry, skipping the
   * runtime's TVMFFIFunctionCall (cell right after the object header). */
  const TVMFFIFunctionCell* cell =
      (const TVMFFIFunctionCell*)((const char*)fn + sizeof(TVMFFIObject));
  for (int r = 0; r < ADD_REPS; r++) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < ADD_CALLS; i++) {
      TVMFFIAny res;
      res.type_index = kTVMFFINone;
      res.zero_padding = 0;
      res.v_int64 = 0;
      if (cell->safe_call(fn, p.args, 3, &res) != 0) die_with_raised("add (safe_call)");
    }
    samples[r] = (double)(now_ns() - t0) / ADD_CALLS;
  }
  check_add(&p);
  report("add_n16_safe_call_direct", samples, ADD_REPS, "ns/call");
  /* Call counts, for turning profiler totals (callgrind) into per-call costs. */
  printf("CALLS TVMFFIFunctionCall %d\nCALLS kernel_add %d\n", 1000 + ADD_REPS * ADD_CALLS,
         1000 + 2 * ADD_REPS * ADD_CALLS);
  TVMFFIObjectDecRef(fn);
  TVMFFIObjectDecRef(mod);
}

static void bench_matmul(TVMFFIObjectHandle f_load, TVMFFIObjectHandle f_getfn,
                         const char* fixdir) {
  char path[4096];
  path_join(path, sizeof(path), fixdir, "parallel.so");
  TVMFFIObjectHandle mod = load_module(f_load, path);
  TVMFFIObjectHandle fn = get_function(f_getfn, mod, "matmul_parallel");
  Problem p;
  setup_matmul(&p);
  for (int i = 0; i < MM_WARMUP; i++) call_kernel(fn, p.args, 3, "matmul_parallel");
  check_matmul(&p, 1);
  memset(p.c, 0, (size_t)MM * MM * sizeof(float));

  double samples[MM_REPS];
  uint64_t cpu0 = process_cpu_ns(), wall0 = now_ns();
  for (int r = 0; r < MM_REPS; r++) {
    uint64_t t0 = now_ns();
    call_kernel(fn, p.args, 3, "matmul_parallel");
    samples[r] = (double)(now_ns() - t0) / 1e6;
  }
  /* CPU time of all threads over the whole loop, per call: shows pool
   * threads that keep spinning after a launch has returned. */
  double cpu_per_call = (double)(process_cpu_ns() - cpu0) / 1e6 / MM_REPS;
  double wall_per_call = (double)(now_ns() - wall0) / 1e6 / MM_REPS;
  check_matmul(&p, 0);
  report("matmul_parallel_512", samples, MM_REPS, "ms");
  report("matmul_parallel_512_cpu_per_call", &cpu_per_call, 1, "ms");
  report("matmul_parallel_512_wall_per_call", &wall_per_call, 1, "ms");
  TVMFFIObjectDecRef(fn);
  TVMFFIObjectDecRef(mod);
}

static void bench_workspace(void) {
  for (int i = 0; i < 1000; i++) {
    void* w = TVMBackendAllocWorkspace(kDLCPU, 0, 4096, kDLFloat, 32);
    if (w == NULL) die_with_raised("TVMBackendAllocWorkspace");
    if ((uintptr_t)w % 64 != 0) die("%s", "TVMBackendAllocWorkspace: block not 64-byte aligned");
    ((volatile char*)w)[4095] = 1;
    if (TVMBackendFreeWorkspace(kDLCPU, 0, w) != 0) die_with_raised("TVMBackendFreeWorkspace");
  }
  double samples[WS_REPS];
  for (int r = 0; r < WS_REPS; r++) {
    uint64_t t0 = now_ns();
    for (int i = 0; i < WS_PAIRS; i++) {
      void* w = TVMBackendAllocWorkspace(kDLCPU, 0, 4096, kDLFloat, 32);
      if (w == NULL) die_with_raised("TVMBackendAllocWorkspace");
      if (TVMBackendFreeWorkspace(kDLCPU, 0, w) != 0) die_with_raised("TVMBackendFreeWorkspace");
    }
    samples[r] = (double)(now_ns() - t0) / WS_PAIRS;
  }
  report("workspace_alloc_free_4096", samples, WS_REPS, "ns/pair");
  printf("CALLS workspace_pair %d\n", 1000 + WS_REPS * WS_PAIRS);
}

/* only: NULL for all three measurements, else "add", "matmul" or "workspace"
 * (one section alone, e.g. under valgrind --tool=callgrind). */
static int run_bench(const char* fixdir, const char* only) {
  if (only && strcmp(only, "add") && strcmp(only, "matmul") && strcmp(only, "workspace")) {
    die("unknown section %s (add, matmul, workspace)", only);
  }
  const char* nt = getenv("TVM_NUM_THREADS");
  printf("# runtime=%s TVM_NUM_THREADS=%s\n", KB_RUNTIME, nt ? nt : "(unset)");
  fflush(stdout);
  TVMFFIObjectHandle f_load = get_global("ffi.ModuleLoadFromFile");
  TVMFFIObjectHandle f_getfn = get_global("ffi.ModuleGetFunction");
  if (!only || !strcmp(only, "add")) bench_add(f_load, f_getfn, fixdir);
  if (!only || !strcmp(only, "matmul")) bench_matmul(f_load, f_getfn, fixdir);
  if (!only || !strcmp(only, "workspace")) bench_workspace();
  TVMFFIObjectDecRef(f_getfn);
  TVMFFIObjectDecRef(f_load);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--bench") == 0) return run_bench(argv[2], NULL);
  if (argc == 4 && strcmp(argv[1], "--only") == 0) return run_bench(argv[3], argv[2]);
  if (argc == 4 && strcmp(argv[1], "--load-once") == 0) return run_load_once(argv[2], argv[3]);
  if (argc >= 6 && strcmp(argv[1], "--spawn") == 0) {
    int n = atoi(argv[2]);
    if (n <= 0 || n > 100000) die("bad sample count %s", argv[2]);
    return run_spawn(n, argv[3], argv[4], argc - 5, argv + 5);
  }
  fprintf(stderr,
          "usage: %s --bench FIXDIR\n"
          "       %s --only add|matmul|workspace FIXDIR\n"
          "       %s --load-once add|matmul FIXDIR\n"
          "       %s --spawn N add|matmul FIXDIR BIN [BIN...]\n",
          argv[0], argv[0], argv[0], argv[0]);
  return 1;
}
