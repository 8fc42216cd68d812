/* runtime.config_threadpool from C, as a TVM C program (or TVM's RPC server) calls it:
 * (mode, nthreads, Array<String> cpus) through TVMFuncCall. The pool's worker (found by its
 * thread name in /proc/self/task) and the calling thread are read back with sched_getaffinity;
 * runtime.NumThreads and a launch's penv->num_task show the thread count; bad modes and CPU
 * strings are errors. Runs with TVM_NUM_THREADS=2 (set by ctest). */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <tvm/runtime/c_backend_api.h>
#include <unistd.h>

#include "check.h"

static TVMFunctionHandle g_array, g_config, g_num_threads;

static TVMFunctionHandle global(const char* name) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMFuncGetGlobal(name, &f));
  if (!f) {
    fprintf(stderr, "no global %s\n", name);
    exit(1);
  }
  return f;
}

/* The CPUs of kernel thread `tid` (0: the caller) as a bit mask of the first 64. */
static uint64_t mask_of(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(tid, sizeof(set), &set) != 0) return 0;
  uint64_t m = 0;
  for (int i = 0; i < 64; ++i)
    if (CPU_ISSET(i, &set)) m |= 1ull << i;
  return m;
}

/* The kernel id of the thread named `name` in this process, or 0. */
static pid_t thread_named(const char* name) {
  DIR* d = opendir("/proc/self/task");
  struct dirent* e;
  pid_t found = 0;
  while (d && (e = readdir(d)) != NULL) {
    char path[300], comm[64] = {0};
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    FILE* f = fopen(path, "r");
    if (!f) continue;
    if (fgets(comm, sizeof(comm), f) && strncmp(comm, name, strlen(name)) == 0) {
      found = (pid_t)atoi(e->d_name);
    }
    fclose(f);
  }
  if (d) closedir(d);
  return found;
}

static int seen_num_task;
static int record(int task, TVMParallelGroupEnv* penv, void* cdata) {
  (void)task;
  (void)cdata;
  seen_num_task = penv->num_task;
  return 0;
}

/* config_threadpool(mode, nthreads, [cpu]) with the CPU as a string (or no list if cpu < 0). */
static int config(int mode, int nthreads, int cpu) {
  TVMValue v[3], ret;
  int codes[3], rc, n = 2;
  v[0].v_int64 = mode;
  v[1].v_int64 = nthreads;
  codes[0] = codes[1] = kDLInt;
  char text[16];
  if (cpu >= -1) {
    snprintf(text, sizeof(text), cpu >= 0 ? "%d" : "x%d", cpu >= 0 ? cpu : 1);
    TVMValue s;
    int sc = kTVMStr;
    s.v_str = text;
    CHECK_OK(TVMFuncCall(g_array, &s, &sc, 1, &ret, &rc));
    v[2].v_handle = ret.v_handle;
    codes[2] = rc;
    n = 3;
  }
  int status = TVMFuncCall(g_config, v, codes, n, &ret, &rc);
  if (n == 3) TVMObjectFree(v[2].v_handle);
  return status;
}

static int64_t num_threads(void) {
  TVMValue ret;
  int rc;
  CHECK_OK(TVMFuncCall(g_num_threads, NULL, NULL, 0, &ret, &rc));
  return ret.v_int64;
}

int main(void) {
  g_array = global("ffi.Array");
  g_config = global("runtime.config_threadpool");
  g_num_threads = global("runtime.NumThreads");
  uint64_t all = mask_of(0);
  int first = __builtin_ctzll(all), last = 63 - __builtin_clzll(all);
  CHECK(num_threads() == 2, "NumThreads %lld with TVM_NUM_THREADS=2", (long long)num_threads());
  CHECK_OK(TVMBackendParallelLaunch(record, NULL, 0));
  CHECK(seen_num_task == 2, "a launch used %d threads", seen_num_task);
  /* The worker names itself when it first runs, which a busy machine may delay. */
  pid_t worker = 0;
  for (int tries = 0; tries < 500 && worker == 0; ++tries) {
    worker = thread_named("tvmrt-worker-1");
    if (worker == 0) usleep(10000);
  }
  if (!CHECK(worker > 0, "no pool worker thread")) return 1;
  /* As TVM's pool starts: worker 1 bound to the second core (all cores are "big" on a chip of
   * one kind; TVM_BIND_THREADS=0 would leave it free). */
  if (first != last) {
    uint64_t second = all & ~(1ull << first);
    second &= ~(second - 1);
    CHECK(mask_of(worker) == second, "worker mask at start %llx",
          (unsigned long long)mask_of(worker));
  }

  /* kSpecifyThreadShareAllCore on the last CPU: both threads there, one thread used. */
  CHECK_OK(config(-3, 0, last));
  CHECK(mask_of(worker) == 1ull << last, "worker mask %llx", (unsigned long long)mask_of(worker));
  CHECK(mask_of(0) == 1ull << last, "caller mask %llx", (unsigned long long)mask_of(0));
  CHECK(num_threads() == 1, "NumThreads %lld", (long long)num_threads());
  CHECK_OK(TVMBackendParallelLaunch(record, NULL, 0));
  CHECK(seen_num_task == 1, "a launch used %d threads", seen_num_task);

  /* kSpecifyOneCorePerThread on the first CPU, two threads: more threads than listed CPUs, so
   * every thread gets the whole list (TVM's rule). */
  CHECK_OK(config(-2, 2, first));
  CHECK(mask_of(worker) == 1ull << first, "worker mask %llx", (unsigned long long)mask_of(worker));
  CHECK(num_threads() == 2, "NumThreads %lld (nthreads wins over the list)",
        (long long)num_threads());

  /* Bad input: an unknown mode, a CPU that is not a number. */
  CHECK_FAILS_WITH(config(7, 0, -2), "unknown affinity mode 7");
  CHECK_FAILS_WITH(config(-3, 0, -1), "is not a number");

  /* Back to all CPUs. */
  TVMValue v[3], ret;
  int codes[3] = {kDLInt, kDLInt, 0}, rc;
  v[0].v_int64 = 0;
  v[1].v_int64 = 2;
  CHECK_OK(TVMFuncCall(g_config, v, codes, 2, &ret, &rc));
  CHECK(num_threads() == 2, "NumThreads %lld", (long long)num_threads());
  TVMFuncFree(g_array);
  TVMFuncFree(g_config);
  TVMFuncFree(g_num_threads);
  return test_result("thread_pool_config");
}
