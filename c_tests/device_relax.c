/* Relax models built by TVM 0.27 for a GPU, from C on device 0 (CUDA or Vulkan): the VM
 * initialized on the device (with the CPU as host device, as TVM's Python passes), the input
 * copied to an array on the device, `main` called through the tvm-ffi API with a DLTensor
 * pointer, the output (a tensor on the device) copied back and compared with what TVM's CPU
 * runtime recorded for the same IR; twice per model (the pooled allocator's reuse), and a wrong
 * input shape refused by the model's own check.
 *
 * Usage: device_relax cuda|vulkan FIXTURES_DIR LIBRARY:CASE... [--no-values]
 *   FIXTURES_DIR  e.g. tests/fixtures/cuda
 *   LIBRARY:CASE  a library under FIXTURES_DIR and its case: data/CASE.in0.npy is the input,
 *                 data/CASE.out0.npy the expected output (e.g. mlp_ptx.so:mlp.main)
 *   --no-values   do not compare values (the test double of the CUDA driver does not compute
 *                 these models' kernels; everything else is checked). On a GPU, leave it out. */
#include "vm_common.h"

#include "check.h"

typedef struct {
  char library[512]; /* under FIXTURES_DIR */
  char id[512];      /* data/<id>.in0.npy, data/<id>.out0.npy */
} Case;

static DLDevice g_dev = {kDLCUDA, 0};

/* Copies `host` to a new array on g_dev (NULL on failure). */
static DLTensor* to_device(const HostArray* host) {
  DLTensor* d = NULL;
  if (TVMArrayAlloc(host->shape, host->ndim, host->dtype.code, host->dtype.bits, 1,
                    g_dev.device_type, g_dev.device_id, &d) != 0) {
    return NULL;
  }
  if (TVMArrayCopyFromBytes(d, host->data, host->nbytes) != 0) {
    TVMArrayFree(d);
    return NULL;
  }
  return d;
}

/* Calls `main` on `input` and checks the result against `want` (values unless `no_values`). */
static void run_once(VmModel* m, TVMFFIObjectHandle main_fn, DLTensor* input,
                     const HostArray* want, int no_values, const char* what) {
  TVMFFIAny arg = vm_none(), out;
  char err[2048], why[256];
  float* back;
  const DLTensor* got;
  DLTensor host_view;
  (void)m;
  arg.type_index = kTVMFFIDLTensorPtr;
  arg.v_ptr = input;
  if (!CHECK(vm_call(main_fn, &arg, 1, &out, err, sizeof err) == 0, "%s: main failed: %s", what,
             err)) {
    return;
  }
  if (!CHECK(out.type_index == kTVMFFITensor, "%s: main returned type %d, not a tensor", what,
             out.type_index)) {
    vm_release(&out);
    return;
  }
  got = tensor_dl(out.v_obj);
  CHECK(got->device.device_type == g_dev.device_type && got->device.device_id == 0,
        "%s: the output is on device (%d, %d), not (%d, 0)", what, got->device.device_type,
        got->device.device_id, g_dev.device_type);
  back = (float*)calloc(want->nbytes, 1);
  CHECK_OK(TVMArrayCopyToBytes((DLTensor*)got, back, want->nbytes));
  host_view = *got;
  host_view.data = back;
  host_view.byte_offset = 0;
  host_view.device.device_type = kDLCPU;
  if (!no_values) {
    CHECK(close_f32(&host_view, want, 1e-4, 1e-4, why, sizeof why), "%s: %s", what, why);
  } else {
    CHECK(got->ndim == want->ndim && got->shape[0] == want->shape[0], "%s: output shape", what);
  }
  free(back);
  vm_release(&out);
}

static void run_case(const char* dir, const Case* c, int no_values) {
  char path[4096], err[8192];
  VmModel m;
  HostArray in = {0}, want = {0}, bad = {0};
  DLTensor *input = NULL, *wrong = NULL;
  TVMFFIObjectHandle main_fn;
  TVMFFIAny arg = vm_none(), out;

  snprintf(path, sizeof path, "%s/%s", dir, c->library);
  if (!CHECK(vm_load_on(&m, path, g_dev, 2, err, sizeof err) == 0, "load %s on device %d: %s",
             c->library, g_dev.device_type, err)) {
    vm_unload(&m);
    return;
  }
  main_fn = vm_module_function(&m, m.vm, "main");
  snprintf(path, sizeof path, "%s/data/%s.in0.npy", dir, c->id);
  CHECK(npy_read(path, &in) == 0, "read %s", path);
  snprintf(path, sizeof path, "%s/data/%s.out0.npy", dir, c->id);
  CHECK(npy_read(path, &want) == 0, "read %s", path);
  input = in.data ? to_device(&in) : NULL;
  if (CHECK(main_fn != NULL && input != NULL && want.data != NULL, "%s: set-up", c->library)) {
    run_once(&m, main_fn, input, &want, no_values, c->library);
    run_once(&m, main_fn, input, &want, no_values, c->library);

    /* One element more in the last dimension: the model's own shape check refuses it. */
    bad = in;
    bad.shape[bad.ndim - 1] += 1;
    bad.nbytes = bad.nbytes / in.shape[in.ndim - 1] * bad.shape[bad.ndim - 1];
    bad.data = calloc(bad.nbytes, 1);
    wrong = to_device(&bad);
    free(bad.data);
    if (CHECK(wrong != NULL, "%s: a wrong-shaped array on the device", c->library)) {
      arg.type_index = kTVMFFIDLTensorPtr;
      arg.v_ptr = wrong;
      CHECK(vm_call(main_fn, &arg, 1, &out, err, sizeof err) != 0, "%s: a wrong shape ran",
            c->library);
      CHECK(strstr(err, "mismatch") != NULL, "%s: wrong-shape message: %s", c->library, err);
      TVMArrayFree(wrong);
    }
  }
  if (input) TVMArrayFree(input);
  if (main_fn) TVMFFIObjectDecRef(main_fn);
  host_free(&in);
  host_free(&want);
  vm_unload(&m);
}

int main(int argc, char** argv) {
  int i, cases = 0, no_values = 0;
  Case c;
  const char* colon;
  if (argc < 4 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "vulkan") != 0)) {
    fprintf(stderr, "usage: %s cuda|vulkan FIXTURES_DIR LIBRARY:CASE... [--no-values]\n",
            argv[0]);
    return 2;
  }
  g_dev.device_type = strcmp(argv[1], "cuda") == 0 ? kDLCUDA : kDLVulkan;
  for (i = 3; i < argc; i++) no_values |= strcmp(argv[i], "--no-values") == 0;
  for (i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--no-values") == 0) continue;
    colon = strchr(argv[i], ':');
    if (!colon || (size_t)(colon - argv[i]) >= sizeof c.library || strlen(colon) > sizeof c.id) {
      fprintf(stderr, "%s: not LIBRARY:CASE\n", argv[i]);
      return 2;
    }
    snprintf(c.library, sizeof c.library, "%.*s", (int)(colon - argv[i]), argv[i]);
    snprintf(c.id, sizeof c.id, "%s", colon + 1);
    run_case(argv[2], &c, no_values);
    cases++;
  }
  if (g_failures) {
    fprintf(stderr, "device_relax: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("device_relax: %d model(s) on %s:0 passed%s\n", cases, argv[1],
         no_values ? " (values not compared)" : "");
  return 0;
}
