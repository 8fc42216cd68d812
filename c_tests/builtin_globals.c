/* Every subsystem's global functions are installed however the program links tvmrt.
 *
 * The registry names no subsystem: the library's top (src/globals.rs) hands it their globals
 * through one symbol the registry refers to. This program is built twice, against libtvmrt.so
 * and against libtvmrt.a: a static link keeps only the archive members something refers to,
 * and it refers here to nothing but the C doors, so a subsystem missing from the static build
 * would show up as a missing global. It also runs one subsystem's code (an ExampleJSON module
 * made from text and called), not just its registration. */
#include "check.h"

/* One global of each subsystem the library's top installs. */
static const char* const kGlobals[] = {
    "ffi.FunctionListGlobalNames",                   /* the registry's own */
    "runtime.module.loadfile_so",                    /* module loading */
    "runtime.SystemLib",                             /* the system library */
    "runtime.module.loadbinary_examplejson",         /* BYOC: ExampleJSON */
    "module.examplejson_module_create",              /* BYOC: ExampleJSON */
    "ffi.Module.load_from_bytes.relax.VMExecutable", /* the Relax VM */
    "vm.builtin.alloc_shape_heap",                   /* a VM builtin */
    "tvm.graph_executor.create",                     /* the graph executor */
    "vm.builtin.paged_attention_kv_cache_create",    /* the LLM state */
    "tvm.contrib.sort.argsort",                      /* contrib kernels */
    "runtime.config_threadpool",                     /* the thread pool */
    "ffi.Array",                                     /* containers */
    "ffi.StructuralEqual",                           /* reflection */
    "ffi.ReprPrint",                                 /* reflection */
};

int main(void) {
  size_t i;
  int n = 0;
  const char** names = NULL;
  for (i = 0; i < sizeof(kGlobals) / sizeof(kGlobals[0]); i++) {
    TVMFunctionHandle f = NULL;
    CHECK_OK(TVMFuncGetGlobal(kGlobals[i], &f));
    CHECK(f != NULL, "global %s is not registered", kGlobals[i]);
    if (f != NULL) CHECK_OK(TVMFuncFree(f));
  }
  CHECK_OK(TVMFuncListGlobalNames(&n, &names));
  CHECK(n > 200, "only %d globals are registered", n);

  /* ExampleJSON's code, not only its name: a module from text, called on CPU tensors. */
  {
    TVMFunctionHandle create = NULL, twice = NULL;
    TVMValue v, ret;
    int code = kTVMStr, ret_code = -1;
    CHECK_OK(TVMFuncGetGlobal("module.examplejson_module_create", &create));
    v.v_str = "twice\ninput 0 3\nadd 1 inputs: 0 0 shape: 3\n";
    CHECK_OK(TVMFuncCall(create, &v, &code, 1, &ret, &ret_code));
    CHECK(ret_code == kTVMModuleHandle, "got type code %d", ret_code);
    if (ret_code == kTVMModuleHandle) {
      TVMModuleHandle mod = ret.v_handle;
      float x[3] = {1.0f, 2.5f, -4.0f}, y[3] = {0};
      int64_t shape[1] = {3};
      DLTensor tx = cpu_tensor(x, shape, 1, kDLFloat, 32);
      DLTensor ty = cpu_tensor(y, shape, 1, kDLFloat, 32);
      TVMValue args[2];
      int codes[2] = {kTVMDLTensorHandle, kTVMDLTensorHandle};
      args[0].v_handle = &tx;
      args[1].v_handle = &ty;
      twice = get_func(mod, "twice", 0);
      CHECK_OK(TVMFuncCall(twice, args, codes, 2, &ret, &ret_code));
      CHECK(y[0] == 2.0f && y[1] == 5.0f && y[2] == -8.0f, "twice gave %g %g %g", y[0], y[1],
            y[2]);
      CHECK_OK(TVMFuncFree(twice));
      CHECK_OK(TVMModFree(mod));
    }
    CHECK_OK(TVMFuncFree(create));
  }
  return test_result("builtin_globals");
}
