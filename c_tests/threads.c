/* 8 threads at once, each registering, overriding, looking up, calling and
 * removing global functions, calling a shared function, and raising errors of
 * its own (the last error is per thread). */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define NUM_THREADS 8
#define ITERATIONS 2000

static atomic_long g_shared_calls;

static int shared_add(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                      void* resource) {
  (void)codes;
  (void)num_args;
  (void)resource;
  atomic_fetch_add(&g_shared_calls, 1);
  return cb_return_int(ret, args[0].v_int64 + args[1].v_int64);
}

static int times_k(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                   void* resource) {
  (void)codes;
  (void)num_args;
  return cb_return_int(ret, args[0].v_int64 * (int64_t)(intptr_t)resource);
}

static int fail_with_id(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                        void* resource) {
  char msg[64];
  (void)codes;
  (void)num_args;
  (void)ret;
  (void)resource;
  snprintf(msg, sizeof(msg), "ValueError: thread %lld", (long long)args[0].v_int64);
  TVMAPISetLastError(msg);
  return -1;
}

typedef struct {
  int id;
  int errors;
  char first_error[256];
} Worker;

static void fail(Worker* w, const char* what) {
  if (w->errors++ == 0) {
    snprintf(w->first_error, sizeof(w->first_error), "%s: %s", what, TVMGetLastError());
  }
}

static void* run(void* arg) {
  Worker* w = (Worker*)arg;
  TVMFunctionHandle shared = NULL, failing = NULL;
  char name[64], expected[64];
  int i;
  if (TVMFuncGetGlobal("c_tests.threads.shared", &shared) != 0 || shared == NULL) {
    fail(w, "lookup shared");
    return NULL;
  }
  TVMFuncGetGlobal("c_tests.threads.fail", &failing);
  snprintf(expected, sizeof(expected), "ValueError: thread %d", w->id);
  for (i = 0; i < ITERATIONS; i++) {
    TVMFunctionHandle mine = NULL, found = NULL;
    TVMValue a[2], out;
    int codes[2] = {kTVMArgInt, kTVMArgInt}, out_code = -1;
    int64_t k = (int64_t)(i % 7) + 1;

    a[0].v_int64 = w->id;
    a[1].v_int64 = i;
    if (TVMFuncCall(shared, a, codes, 2, &out, &out_code) != 0 || out.v_int64 != w->id + i) {
      fail(w, "shared call");
    }

    /* Names private to the thread, reused (override) and some removed. */
    snprintf(name, sizeof(name), "c_tests.threads.%d.%d", w->id, i % 16);
    if (TVMFuncCreateFromCFunc(times_k, (void*)(intptr_t)k, NULL, &mine) != 0) {
      fail(w, "create");
      continue;
    }
    if (TVMFuncRegisterGlobal(name, mine, 1) != 0) fail(w, "register");
    TVMFuncFree(mine);
    if (TVMFuncGetGlobal(name, &found) != 0 || found == NULL) {
      fail(w, "lookup own");
      continue;
    }
    a[0].v_int64 = 3;
    if (TVMFuncCall(found, a, codes, 1, &out, &out_code) != 0 || out.v_int64 != 3 * k) {
      fail(w, "call own");
    }
    TVMFuncFree(found);
    if (i % 5 == 0 && TVMFuncRemoveGlobal(name) != 0) fail(w, "remove own");

    if (i % 50 == 0) {
      int n = 0;
      const char** names = NULL;
      if (TVMFuncListGlobalNames(&n, &names) != 0 || n < 2) fail(w, "list");
    }
    /* Errors stay per thread, even while the others raise theirs. */
    if (failing != NULL && i % 10 == 0) {
      a[0].v_int64 = w->id;
      if (TVMFuncCall(failing, a, codes, 1, &out, &out_code) == 0) {
        fail(w, "failing call succeeded");
      } else if (strstr(TVMGetLastError(), expected) == NULL) {
        fail(w, "another thread's error");
      }
    }
  }
  TVMFuncFree(shared);
  if (failing) TVMFuncFree(failing);
  return NULL;
}

int main(void) {
  pthread_t threads[NUM_THREADS];
  Worker workers[NUM_THREADS];
  TVMFunctionHandle f = NULL;
  int t;

  atomic_init(&g_shared_calls, 0);
  CHECK_OK(TVMFuncCreateFromCFunc(shared_add, NULL, NULL, &f));
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.threads.shared", f, 0));
  CHECK_OK(TVMFuncFree(f));
  CHECK_OK(TVMFuncCreateFromCFunc(fail_with_id, NULL, NULL, &f));
  CHECK_OK(TVMFuncRegisterGlobal("c_tests.threads.fail", f, 0));
  CHECK_OK(TVMFuncFree(f));

  for (t = 0; t < NUM_THREADS; t++) {
    memset(&workers[t], 0, sizeof(Worker));
    workers[t].id = t;
    CHECK(pthread_create(&threads[t], NULL, run, &workers[t]) == 0, "pthread_create %d", t);
  }
  for (t = 0; t < NUM_THREADS; t++) {
    pthread_join(threads[t], NULL);
    CHECK(workers[t].errors == 0, "thread %d: %d errors, first: %s", t, workers[t].errors,
          workers[t].first_error);
  }
  CHECK(atomic_load(&g_shared_calls) == (long)NUM_THREADS * ITERATIONS,
        "shared function called %ld times", (long)atomic_load(&g_shared_calls));

  /* Every private name still registered resolves to a working function. */
  for (t = 0; t < NUM_THREADS; t++) {
    int j;
    for (j = 0; j < 16; j++) {
      char name[64];
      TVMFunctionHandle h = NULL;
      snprintf(name, sizeof(name), "c_tests.threads.%d.%d", t, j);
      CHECK_OK(TVMFuncGetGlobal(name, &h));
      if (h != NULL) {
        TVMFuncFree(h);
        CHECK_OK(TVMFuncRemoveGlobal(name));
      }
    }
  }
  CHECK_OK(TVMFuncRemoveGlobal("c_tests.threads.shared"));
  CHECK_OK(TVMFuncRemoveGlobal("c_tests.threads.fail"));
  return test_result("threads");
}
