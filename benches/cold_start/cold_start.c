/* SPDX-License-Identifier: Apache-2.0
 *
 * cold_start: what a fresh process pays to run a model once (issue 35). One C source, built
 * twice by benches/cold_start/run.sh: against libtvmrt.so, and against Apache TVM's runtime
 * (libtvm_ffi.so + libtvm_runtime.so of the apache-tvm wheel).
 *
 *   cold_start LIB INPUT.npy
 *       loads LIB (ffi.ModuleLoadFromFile, vm_load_executable, vm_initialization), calls
 *       `main` once on INPUT, prints the output's first value and exits: the whole process is
 *       the sample (exec, dynamic loading of the runtime, its initialization, the model).
 *   cold_start --spawn N BIN_A BIN_B LIB INPUT.npy
 *       runs `BIN_X LIB INPUT.npy` N times each, alternating, every run a fresh process, and
 *       prints "RESULT <bin> wall_us <median> <min>" per binary (fork to exit, output
 *       discarded).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../c_tests/vm_common.h"
#include "../bench_timing.h"

#ifndef CS_RUNTIME
#define CS_RUNTIME "unknown"
#endif

static void die(const char* what, const char* msg) {
  fprintf(stderr, "cold_start (%s): %s: %s\n", CS_RUNTIME, what, msg);
  exit(1);
}

/* One fresh process running `bin lib input`, in microseconds from fork to its exit. */
static double spawn_once(const char* bin, const char* lib, const char* input) {
  uint64_t t0 = now_ns();
  int status = 0;
  pid_t pid = fork();
  if (pid < 0) die("fork", "failed");
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    execl(bin, bin, lib, input, (char*)NULL);
    _exit(127);
  }
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    die(bin, "the run failed");
  return (double)(now_ns() - t0) / 1e3;
}

static int spawn_main(int argc, char** argv) {
  int n, i, b;
  double* t[2];
  if (argc != 7) die("usage", "--spawn N BIN_A BIN_B LIB INPUT.npy");
  n = atoi(argv[2]);
  if (n < 1) die("N", "must be at least 1");
  t[0] = (double*)calloc((size_t)n, sizeof(double));
  t[1] = (double*)calloc((size_t)n, sizeof(double));
  for (b = 0; b < 2; b++) spawn_once(argv[3 + b], argv[5], argv[6]); /* page cache warm */
  for (i = 0; i < n; i++)
    for (b = 0; b < 2; b++) t[b][i] = spawn_once(argv[3 + b], argv[5], argv[6]);
  for (b = 0; b < 2; b++) {
    double median, min;
    median_min(t[b], n, &median, &min);
    printf("RESULT %s wall_us %.1f %.1f\n", argv[3 + b], median, min);
    free(t[b]);
  }
  return 0;
}

int main(int argc, char** argv) {
  VmModel m;
  HostArray x;
  TVMFFIObjectHandle main_fn, xt;
  TVMFFIAny arg, out;
  char err[4096];
  const DLTensor* y;
  if (argc > 1 && !strcmp(argv[1], "--spawn")) return spawn_main(argc, argv);
  if (argc != 3) {
    fprintf(stderr, "usage: %s LIB INPUT.npy | --spawn N BIN_A BIN_B LIB INPUT.npy\n", argv[0]);
    return 2;
  }
  if (npy_read(argv[2], &x) != 0) die("reading", argv[2]);
  if (vm_load(&m, argv[1], 2, err, sizeof(err)) != 0) die(argv[1], err);
  main_fn = vm_module_function(&m, m.vm, "main");
  if (!main_fn) die(argv[1], "no main");
  xt = host_tensor(&x);
  if (!xt) die("TVMFFITensorFromDLPack", vm_take_error(err, sizeof(err)));
  arg = vm_obj(xt);
  if (vm_call(main_fn, &arg, 1, &out, err, sizeof(err)) != 0) die("main", err);
  if (out.type_index != kTVMFFITensor) die("main", "did not return a tensor");
  y = tensor_dl(out.v_obj);
  printf("%s first output %.6g\n", CS_RUNTIME,
         (double)((const float*)((const char*)y->data + y->byte_offset))[0]);
  vm_release(&out);
  TVMFFIObjectDecRef(main_fn);
  TVMFFIObjectDecRef(xt);
  vm_unload(&m);
  host_free(&x);
  return 0;
}
