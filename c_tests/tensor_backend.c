/* Tensors and the backend API from C: TVMArrayAlloc (64-byte alignment), copies and their
 * errors, DLPack round trips with a deleter called exactly once, workspace reuse, and parallel
 * launches (each task writes its slice, barrier, then reads the others'), an error from a task,
 * a nested launch, and launches from 4 application threads at once. */
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/runtime/c_backend_api.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static void test_alloc_and_copy(void) {
  int64_t shape[2] = {3, 5};
  float src[15], dst[15];
  TVMArrayHandle a = NULL, b = NULL, c = NULL;
  int i;
  for (i = 0; i < 15; i++) src[i] = (float)i * 0.5f;
  CHECK_OK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &a));
  if (!CHECK(a != NULL, "no array")) return;
  CHECK(((uintptr_t)a->data % 64) == 0, "data %p not 64-byte aligned", a->data);
  CHECK(a->ndim == 2 && a->shape[0] == 3 && a->shape[1] == 5, "shape");
  CHECK_OK(TVMArrayCopyFromBytes(a, src, sizeof(src)));
  CHECK_FAILS_WITH(TVMArrayCopyFromBytes(a, src, sizeof(src) - 4), "bytes");
  CHECK_OK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &b));
  CHECK_OK(TVMArrayCopyFromTo(a, b, NULL));
  CHECK_OK(TVMArrayCopyToBytes(b, dst, sizeof(dst)));
  CHECK(memcmp(src, dst, sizeof(src)) == 0, "copy changed the data");
  /* Shape mismatch in a copy, and devices tvmrt does not serve. */
  {
    int64_t other[1] = {7};
    CHECK_OK(TVMArrayAlloc(other, 1, kDLFloat, 32, 1, kDLCPU, 0, &c));
    CHECK(TVMArrayCopyFromTo(a, c, NULL) != 0, "copy between different sizes accepted");
    CHECK_OK(TVMArrayFree(c));
  }
  CHECK_FAILS_WITH(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLROCM, 0, &c), "rocm");
  CHECK_FAILS_WITH(TVMArrayAlloc(shape, -1, kDLFloat, 32, 1, kDLCPU, 0, &c), "ndim");
  CHECK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, NULL) != 0, "null out accepted");
  CHECK_OK(TVMArrayFree(a));
  CHECK_OK(TVMArrayFree(b));
}

static int g_deleter_calls = 0;
static void count_deleter(DLManagedTensorVersioned* self) {
  g_deleter_calls++;
  free(self->dl_tensor.data);
  free(self->dl_tensor.shape);
  free(self);
}

static void test_dlpack(void) {
  DLManagedTensorVersioned* m = calloc(1, sizeof(*m));
  DLManagedTensorVersioned* back = NULL;
  TVMFFIObjectHandle t = NULL;
  float* data = aligned_alloc(64, 64 * sizeof(float));
  int i;
  for (i = 0; i < 64; i++) data[i] = (float)i;
  m->version.major = DLPACK_MAJOR_VERSION;
  m->version.minor = DLPACK_MINOR_VERSION;
  m->deleter = count_deleter;
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = 2;
  m->dl_tensor.dtype.code = kDLFloat;
  m->dl_tensor.dtype.bits = 32;
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = malloc(2 * sizeof(int64_t));
  m->dl_tensor.shape[0] = 8;
  m->dl_tensor.shape[1] = 8;
  CHECK_OK(TVMFFITensorFromDLPackVersioned(m, 64, 1, &t));
  if (!CHECK(t != NULL, "no tensor")) return;
  {
    DLTensor* dl = TVMFFITensorGetDLTensorPtr(t);
    CHECK(dl->data == data && dl->shape[1] == 8, "imported tensor differs");
  }
  CHECK_OK(TVMFFITensorToDLPackVersioned(t, &back));
  CHECK(back != NULL && back->dl_tensor.data == data, "export differs");
  TVMFFIObjectDecRef(t);
  CHECK(g_deleter_calls == 0, "deleter ran while the export still holds the tensor");
  if (back) back->deleter(back);
  CHECK(g_deleter_calls == 1, "deleter ran %d times, expected once", g_deleter_calls);
}

static void test_workspace(void) {
  void* p = TVMBackendAllocWorkspace(kDLCPU, 0, 10000, kDLFloat, 32);
  void* q;
  CHECK(p != NULL && ((uintptr_t)p % 64) == 0, "workspace %p", p);
  CHECK_OK(TVMBackendFreeWorkspace(kDLCPU, 0, p));
  q = TVMBackendAllocWorkspace(kDLCPU, 0, 10000, kDLFloat, 32);
  CHECK(q == p, "a LIFO free/alloc of the same size did not reuse the block");
  CHECK_OK(TVMBackendFreeWorkspace(kDLCPU, 0, q));
  CHECK_FAILS_WITH(TVMBackendFreeWorkspace(kDLCPU, 0, q), "");
  CHECK(TVMBackendAllocWorkspace(kDLROCM, 0, 16, kDLFloat, 32) == NULL, "rocm workspace");
}

#define SLOTS 64
typedef struct {
  int values[SLOTS];
  int ok;
  int fail_task;
} Shared;

static int slice_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  Shared* s = cdata;
  int n = penv->num_task, i;
  for (i = task_id; i < SLOTS; i += n) s->values[i] = i * 3;
  if (TVMBackendParallelBarrier(task_id, penv) != 0) return -1;
  for (i = 0; i < SLOTS; i++) {
    if (s->values[i] != i * 3) return -2;
  }
  if (task_id == s->fail_task) {
    TVMAPISetLastError("task failed on purpose");
    return -1;
  }
  return 0;
}

static int inner_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)penv;
  __atomic_fetch_add((int*)cdata, task_id + 1, __ATOMIC_SEQ_CST);
  return 0;
}

static int outer_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  int sum = 0;
  (void)task_id;
  (void)penv;
  (void)cdata;
  /* Nested: runs inline on this thread. */
  if (TVMBackendParallelLaunch(inner_task, &sum, 0) != 0) return -1;
  return sum >= 1 ? 0 : -3;
}

static void* launch_many(void* arg) {
  int i;
  (void)arg;
  for (i = 0; i < 200; i++) {
    Shared s;
    memset(&s, 0, sizeof(s));
    s.fail_task = -1;
    if (TVMBackendParallelLaunch(slice_task, &s, 0) != 0) return (void*)1;
  }
  return NULL;
}

static void test_parallel(void) {
  Shared s;
  pthread_t threads[4];
  int i;
  memset(&s, 0, sizeof(s));
  s.fail_task = -1;
  CHECK_OK(TVMBackendParallelLaunch(slice_task, &s, 0));
  memset(&s, 0, sizeof(s));
  s.fail_task = 1;
  CHECK_FAILS_WITH(TVMBackendParallelLaunch(slice_task, &s, 2), "task failed on purpose");
  CHECK_OK(TVMBackendParallelLaunch(outer_task, NULL, 0));
  for (i = 0; i < 4; i++) pthread_create(&threads[i], NULL, launch_many, NULL);
  for (i = 0; i < 4; i++) {
    void* r = NULL;
    pthread_join(threads[i], &r);
    CHECK(r == NULL, "thread %d: a launch failed: %s", i, TVMGetLastError());
  }
}

int main(void) {
  test_alloc_and_copy();
  test_dlpack();
  test_workspace();
  test_parallel();
  return test_result("tensor_backend");
}
