/* OpenCL from C, through both doors, as a C application written against TVM's headers would
 * use it: libraries apache-tvm 0.27 built for OpenCL (tests/fixtures/opencl) and the classic
 * graph model of that folder, run on tvmrt's OpenCL back end (POCL in CI).
 *
 * Classic door: TVMArrayAlloc on kDLOpenCL, TVMArrayCopyFromBytes/ToBytes/CopyFromTo,
 * TVMModLoadFromFile, TVMModGetFunction, TVMFuncCall with device arrays, the graph executor
 * (`default(opencl(0))`), TVMSynchronize, TVMStreamCreate, TVMBackendAllocWorkspace, and bad
 * input (a CPU array given to an OpenCL kernel, a device that does not exist).
 * tvm-ffi door: runtime.TVMTensorAllocWithScope / TVMTensorCopyFromBytes / ToBytes, a Relax
 * model's VM on OpenCL (`vm_initialization(4, 0, 2, 1, 0, 2)`, `main` on a device tensor),
 * DLPack export and import keeping the device.
 *
 * Usage: opencl FIXTURES_OPENCL_DIR [--small]
 * (--small: the classic kernel section only, the case run under valgrind) */
#include "vm_common.h"

#include <math.h>
#include <tvm/runtime/c_backend_api.h>

#include "check.h"

static const char* g_dir;

static void path_of(char* out, size_t cap, const char* file) {
  snprintf(out, cap, "%s/%s", g_dir, file);
}

/* A float32 device array of `n` elements holding `values`. */
static DLTensor* device_array(int64_t n, const float* values) {
  DLTensor* t = NULL;
  CHECK_OK(TVMArrayAlloc(&n, 1, kDLFloat, 32, 1, kDLOpenCL, 0, &t));
  if (t && values) CHECK_OK(TVMArrayCopyFromBytes(t, (void*)values, (size_t)n * sizeof(float)));
  return t;
}

static void classic_kernels(void) {
  char path[1024];
  TVMModuleHandle lib = NULL;
  TVMFunctionHandle add = NULL;
  float a[100], b[100], c[100];
  int i, codes[3] = {kTVMDLTensorHandle, kTVMDLTensorHandle, kTVMDLTensorHandle};
  TVMValue args[3], ret;
  int ret_code;
  DLTensor *da, *db, *dc, *host = NULL;
  int64_t n = 100;

  path_of(path, sizeof(path), "elementwise.so");
  CHECK_OK(TVMModLoadFromFile(path, "so", &lib));
  if (!lib) return;
  CHECK_OK(TVMModGetFunction(lib, "add", 1, &add));
  if (!CHECK(add != NULL, "elementwise.so has add")) return;
  for (i = 0; i < 100; i++) {
    a[i] = (float)i * 0.5f;
    b[i] = 3.0f - (float)i;
  }
  da = device_array(n, a);
  db = device_array(n, b);
  dc = device_array(n, NULL);
  if (!da || !db || !dc) return;
  CHECK(da->device.device_type == kDLOpenCL && da->device.device_id == 0, "device");
  args[0].v_handle = da;
  args[1].v_handle = db;
  args[2].v_handle = dc;
  CHECK_OK(TVMFuncCall(add, args, codes, 3, &ret, &ret_code));
  CHECK_OK(TVMSynchronize(kDLOpenCL, 0, NULL));
  CHECK_OK(TVMArrayCopyToBytes(dc, c, sizeof(c)));
  for (i = 0; i < 100; i++) {
    if (!CHECK(c[i] == a[i] + b[i], "c[%d] = %g", i, c[i])) break;
  }
  /* Device to host through TVMArrayCopyFromTo. */
  CHECK_OK(TVMArrayAlloc(&n, 1, kDLFloat, 32, 1, kDLCPU, 0, &host));
  CHECK_OK(TVMArrayCopyFromTo(dc, host, NULL));
  CHECK(((float*)host->data)[99] == a[99] + b[99], "copied back");
  /* A CPU array given to the OpenCL kernel: the kernel's own (TVM-generated) check. */
  args[0].v_handle = host;
  CHECK_FAILS_WITH(TVMFuncCall(add, args, codes, 3, &ret, &ret_code),
                   "Mismatched A.device_type on argument #0");
  /* Streams: OpenCL has its queue only; workspaces come from the device. */
  {
    TVMStreamHandle s = (TVMStreamHandle)1;
    void* ws;
    CHECK_OK(TVMStreamCreate(kDLOpenCL, 0, &s));
    CHECK(s == NULL, "no OpenCL streams besides the queue");
    ws = TVMBackendAllocWorkspace(kDLOpenCL, 0, 4096, kDLFloat, 32);
    CHECK(ws != NULL, "workspace");
    CHECK_OK(TVMBackendFreeWorkspace(kDLOpenCL, 0, ws));
  }
  /* A device that does not exist. */
  {
    DLTensor* none = NULL;
    CHECK_FAILS_WITH(TVMArrayAlloc(&n, 1, kDLFloat, 32, 1, kDLOpenCL, 7, &none),
                     "OpenCL device 7 does not exist");
  }
  CHECK_OK(TVMArrayFree(da));
  CHECK_OK(TVMArrayFree(db));
  CHECK_OK(TVMArrayFree(dc));
  CHECK_OK(TVMArrayFree(host));
  CHECK_OK(TVMFuncFree(add));
  CHECK_OK(TVMModFree(lib));
}

/* graph_cl.so: outputs relu(x + b) and 0.5 * relu(x + b), on OpenCL. */
static void classic_graph(void) {
  char path[1024];
  TVMModuleHandle lib = NULL, gmod;
  TVMFunctionHandle create = NULL, set_input = NULL, run = NULL, get_output = NULL;
  TVMValue v[2], ret;
  int codes[2], ret_code, i;
  float x[70], t[70], z[70];
  DLTensor *hx = NULL, *out0, *out1;
  int64_t shape[2] = {1, 70};

  path_of(path, sizeof(path), "graph_cl.so");
  CHECK_OK(TVMModLoadFromFile(path, "so", &lib));
  if (!lib) return;
  CHECK_OK(TVMModGetFunction(lib, "default", 0, &create));
  v[0].v_device.device_type = kDLOpenCL;
  v[0].v_device.device_id = 0;
  codes[0] = kDLDevice;
  CHECK_OK(TVMFuncCall(create, v, codes, 1, &ret, &ret_code));
  if (!CHECK(ret_code == kTVMModuleHandle, "default() returns a module")) return;
  gmod = ret.v_handle;
  CHECK_OK(TVMModGetFunction(gmod, "set_input", 0, &set_input));
  CHECK_OK(TVMModGetFunction(gmod, "run", 0, &run));
  CHECK_OK(TVMModGetFunction(gmod, "get_output", 0, &get_output));
  for (i = 0; i < 70; i++) x[i] = (float)(i % 7) - 3.0f;
  CHECK_OK(TVMArrayAlloc(shape, 2, kDLFloat, 32, 1, kDLCPU, 0, &hx));
  CHECK_OK(TVMArrayCopyFromBytes(hx, x, sizeof(x)));
  v[0].v_str = "x";
  codes[0] = kTVMStr;
  v[1].v_handle = hx;
  codes[1] = kTVMDLTensorHandle;
  CHECK_OK(TVMFuncCall(set_input, v, codes, 2, &ret, &ret_code));
  CHECK_OK(TVMFuncCall(run, NULL, NULL, 0, &ret, &ret_code));
  v[0].v_int64 = 0;
  codes[0] = kDLInt;
  CHECK_OK(TVMFuncCall(get_output, v, codes, 1, &ret, &ret_code));
  out0 = (DLTensor*)ret.v_handle;
  CHECK(out0->device.device_type == kDLOpenCL, "outputs stay on the device");
  CHECK_OK(TVMArrayCopyToBytes(out0, t, sizeof(t)));
  v[0].v_int64 = 1;
  CHECK_OK(TVMFuncCall(get_output, v, codes, 1, &ret, &ret_code));
  out1 = (DLTensor*)ret.v_handle;
  CHECK_OK(TVMArrayCopyToBytes(out1, z, sizeof(z)));
  for (i = 0; i < 70; i++) {
    if (!CHECK(t[i] >= 0.0f && z[i] == 0.5f * t[i], "output %d: %g, %g", i, t[i], z[i])) break;
  }
  CHECK_OK(TVMArrayFree(out0));
  CHECK_OK(TVMArrayFree(out1));
  CHECK_OK(TVMArrayFree(hx));
  CHECK_OK(TVMFuncFree(set_input));
  CHECK_OK(TVMFuncFree(run));
  CHECK_OK(TVMFuncFree(get_output));
  CHECK_OK(TVMFuncFree(create));
  CHECK_OK(TVMModFree(gmod));
  CHECK_OK(TVMModFree(lib));
}

static TVMFFIAny dev_any(int type, int id) {
  TVMFFIAny a = vm_none();
  a.type_index = kTVMFFIDevice;
  a.v_device.device_type = (DLDeviceType)type;
  a.v_device.device_id = id;
  return a;
}

static TVMFFIAny ptr_any(void* p) {
  TVMFFIAny a = vm_none();
  a.type_index = kTVMFFIOpaquePtr;
  a.v_ptr = p;
  return a;
}

/* A tensor object on OpenCL holding `a`, through TVM's global functions. */
static TVMFFIObjectHandle ffi_device_tensor(HostArray* a) {
  char err[512];
  TVMFFIObjectHandle alloc = vm_global("runtime.TVMTensorAllocWithScope");
  TVMFFIObjectHandle copy = vm_global("runtime.TVMTensorCopyFromBytes");
  TVMFFIObjectHandle make_shape = vm_global("ffi.Shape");
  TVMFFIAny dims[8], out, args[4], shape;
  TVMFFIObjectHandle t = NULL;
  int i;
  if (!CHECK(alloc && copy && make_shape, "tensor globals registered")) return NULL;
  for (i = 0; i < a->ndim; i++) dims[i] = vm_int(a->shape[i]);
  if (vm_call(make_shape, dims, a->ndim, &shape, err, sizeof(err)) == 0) {
    args[0] = shape;
    args[1] = vm_none();
    args[1].type_index = kTVMFFIDataType;
    args[1].v_dtype = a->dtype;
    args[2] = dev_any(kDLOpenCL, 0);
    args[3] = vm_str("global");
    if (CHECK(vm_call(alloc, args, 4, &out, err, sizeof(err)) == 0, "%s", err)) {
      TVMFFIAny c[3] = {out, ptr_any(a->data), vm_int((int64_t)a->nbytes)};
      TVMFFIAny r;
      CHECK(vm_call(copy, c, 3, &r, err, sizeof(err)) == 0, "%s", err);
      t = out.v_obj;
    }
    vm_release(&shape);
  }
  TVMFFIObjectDecRef(alloc);
  TVMFFIObjectDecRef(copy);
  TVMFFIObjectDecRef(make_shape);
  return t;
}

static void ffi_relax_model(void) {
  char path[1024], err[1024];
  VmModel m;
  TVMFFIObjectHandle load = vm_global("ffi.ModuleLoadFromFile"), f, x;
  TVMFFIObjectHandle to_bytes = vm_global("runtime.TVMTensorCopyToBytes");
  TVMFFIAny arg, out, y;
  HostArray in, want;
  float got[8];
  int i;
  memset(&m, 0, sizeof(m));
  m.get_function = vm_global("ffi.ModuleGetFunction");
  path_of(path, sizeof(path), "mlp.so");
  arg = vm_str(path);
  if (!CHECK(vm_call(load, &arg, 1, &out, err, sizeof(err)) == 0, "%s", err)) return;
  m.lib = out.v_obj;
  f = vm_module_function(&m, m.lib, "vm_load_executable");
  CHECK(vm_call(f, NULL, 0, &out, err, sizeof(err)) == 0, "%s", err);
  TVMFFIObjectDecRef(f);
  m.vm = out.v_obj;
  f = vm_module_function(&m, m.vm, "vm_initialization");
  {
    /* TVM 0.27's relax.VirtualMachine(ex, tvm.opencl(0)): the device, then the CPU host. */
    TVMFFIAny init[6] = {vm_int(kDLOpenCL), vm_int(0), vm_int(2),
                         vm_int(kDLCPU),    vm_int(0), vm_int(2)};
    CHECK(vm_call(f, init, 6, &out, err, sizeof(err)) == 0, "%s", err);
  }
  TVMFFIObjectDecRef(f);
  path_of(path, sizeof(path), "data/mlp.main.in0.npy");
  CHECK(npy_read(path, &in) == 0, "%s", path);
  path_of(path, sizeof(path), "data/mlp.main.out0.npy");
  CHECK(npy_read(path, &want) == 0, "%s", path);
  x = ffi_device_tensor(&in);
  f = vm_module_function(&m, m.vm, "main");
  arg = vm_obj(x);
  if (CHECK(vm_call(f, &arg, 1, &y, err, sizeof(err)) == 0, "%s", err)) {
    DLTensor* dl = (DLTensor*)((char*)y.v_obj + sizeof(TVMFFIObject));
    TVMFFIAny c[3] = {y, ptr_any(got), vm_int(sizeof(got))};
    CHECK(dl->device.device_type == kDLOpenCL, "the output stays on the device");
    CHECK(vm_call(to_bytes, c, 3, &out, err, sizeof(err)) == 0, "%s", err);
    for (i = 0; i < 8; i++) {
      float w = ((float*)want.data)[i];
      if (!CHECK(fabsf(got[i] - w) <= 1e-5f + 1e-5f * fabsf(w), "y[%d] = %g, TVM %g", i, got[i],
                 w))
        break;
    }
    /* DLPack keeps the device, both ways. */
    {
      DLManagedTensorVersioned* m2 = NULL;
      TVMFFIObjectHandle back = NULL;
      CHECK(TVMFFITensorToDLPackVersioned(y.v_obj, &m2) == 0, "export");
      CHECK(m2->dl_tensor.device.device_type == kDLOpenCL && m2->dl_tensor.data == dl->data,
            "the export is the device buffer");
      CHECK(TVMFFITensorFromDLPackVersioned(m2, 0, 0, &back) == 0, "import");
      CHECK(((DLTensor*)((char*)back + sizeof(TVMFFIObject)))->device.device_type == kDLOpenCL,
            "the import stays on OpenCL");
      TVMFFIObjectDecRef(back);
    }
    vm_release(&y);
  }
  /* A host tensor given to main: the model's kernel refuses it by name. */
  {
    TVMFFIObjectHandle h = host_tensor(&in);
    arg = vm_obj(h);
    CHECK(vm_call(f, &arg, 1, &y, err, sizeof(err)) != 0 && strstr(err, "expected opencl"),
          "%s", err);
    TVMFFIObjectDecRef(h);
  }
  TVMFFIObjectDecRef(f);
  TVMFFIObjectDecRef(x);
  TVMFFIObjectDecRef(load);
  TVMFFIObjectDecRef(to_bytes);
  host_free(&in);
  host_free(&want);
  vm_unload(&m);
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--small") != 0)) {
    fprintf(stderr, "usage: %s FIXTURES_OPENCL_DIR [--small]\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  classic_kernels();
  if (argc == 2) {
    classic_graph();
    ffi_relax_model();
  }
  if (g_failures) {
    fprintf(stderr, "opencl: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("opencl: all checks passed\n");
  return 0;
}
