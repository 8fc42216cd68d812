/* The ExampleJSON module from C: TVMModLoadFromFile(path, "examplejson"), the guide's subgraph
 * through TVMFuncCall and TVMFFIFunctionCall, module_create from text, a save/load round trip
 * through the registered globals, call-time errors, and one function called from 4 threads.
 * Usage: byoc_examplejson <examples/byoc/subgraph_0.examplejson> */
#include <pthread.h>
#include <tvm/ffi/c_api.h>

#include "byoc_common.h"

static TVMFunctionHandle g_shared;

static void* worker(void* arg) {
  unsigned base = (unsigned)(uintptr_t)arg;
  for (unsigned r = 0; r < 300; ++r)
    CHECK(guide_call_and_check(g_shared, base * 1000 + r) == kTVMNDArrayHandle);
  return NULL;
}

static TVMFunctionHandle global(const char* name) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMFuncGetGlobal(name, &f));
  CHECK(f != NULL);
  return f;
}

int main(int argc, char** argv) {
  CHECK(argc == 2);
  TVMModuleHandle mod = NULL;
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMModLoadFromFile(argv[1], "examplejson", &mod));
  CHECK_OK(TVMModGetFunction(mod, "subgraph_0", 0, &f));
  CHECK(f != NULL);
  /* Like the guide's module, a subgraph call returns its result as an NDArray (code 13). */
  CHECK(guide_call_and_check(f, 1) == kTVMNDArrayHandle);

  /* Unknown function: not found, no error. */
  TVMFunctionHandle none = (TVMFunctionHandle)1;
  CHECK_OK(TVMModGetFunction(mod, "subgraph_9", 1, &none));
  CHECK(none == NULL);

  /* The tvm-ffi door: TVMFFIAny arguments holding DLTensor* (type index 7). */
  {
    GuideCase g;
    TVMFFIAny args[5], result;
    guide_init(&g, 2);
    for (int k = 0; k < 5; ++k) {
      memset(&args[k], 0, sizeof(args[k]));
      args[k].type_index = kTVMFFIDLTensorPtr;
      args[k].v_ptr = &g.t[k];
    }
    memset(&result, 0, sizeof(result));
    CHECK(TVMFFIFunctionCall(f, args, 5, &result) == 0);
    guide_check(&g);
    /* ... and through tvm-ffi as a tensor object (type index 70), released by the caller. */
    CHECK(result.type_index == kTVMFFITensor);
    guide_check_returned(&g, TVMFFITensorGetDLTensorPtr(result.v_obj));
    CHECK_OK(TVMFFIObjectDecRef(result.v_obj));
  }

  /* Call-time errors. */
  {
    GuideCase g;
    TVMValue values[5], ret;
    int codes[5], ret_code;
    guide_init(&g, 3);
    guide_args(&g, values, codes);
    expect_error(TVMFuncCall(f, values, codes, 4, &ret, &ret_code),
                 "takes 5 arguments (4 inputs, then the output), got 4");
    int64_t bad_shape[2] = {10, 9};
    g.t[4].shape = bad_shape;
    expect_error(TVMFuncCall(f, values, codes, 5, &ret, &ret_code),
                 "argument 4 has shape [10, 9], expected shape [10, 10]");
    g.t[4].shape = g.shape;
    g.t[2].dtype.bits = 64;
    expect_error(TVMFuncCall(f, values, codes, 5, &ret, &ret_code),
                 "argument 2 has dtype float64 but argument 0 has float32");
    g.t[2].dtype.bits = 32;
    g.t[1].device.device_type = kDLCUDA;
    expect_error(TVMFuncCall(f, values, codes, 5, &ret, &ret_code), "argument 1 is on device");
    g.t[1].device.device_type = kDLCPU;
    values[3].v_int64 = 7;
    codes[3] = kDLInt;
    expect_error(TVMFuncCall(f, values, codes, 5, &ret, &ret_code),
                 "argument 3 must be a tensor");
  }

  /* Parse errors and a missing file. */
  TVMModuleHandle bad = NULL;
  expect_error(TVMModLoadFromFile("/nonexistent/g.examplejson", "examplejson", &bad),
               "cannot read ExampleJSON file");
  {
    TVMFunctionHandle create = global("module.examplejson_module_create");
    TVMValue v, ret;
    int code = kTVMStr, ret_code;
    v.v_str = "sub_x\ninput 0 2\nfrobnicate 1 inputs: 0 shape: 2\n";
    expect_error(TVMFuncCall(create, &v, &code, 1, &ret, &ret_code),
                 "line 3: unknown op 'frobnicate'");
    /* A module from text with two subgraphs. */
    v.v_str =
        "twice\ninput 0 3\nadd 1 inputs: 0 0 shape: 3\n"
        "clamp\ninput 0 3\ninput 1 1\nminimum 2 inputs: 0 1 shape: 3\n";
    CHECK_OK(TVMFuncCall(create, &v, &code, 1, &ret, &ret_code));
    CHECK(ret_code == kTVMModuleHandle);
    TVMModuleHandle two = ret.v_handle;

    /* Save it, load it back from the bytes, and run the copy. */
    TVMFunctionHandle save = global("ffi.ModuleSaveToBytes");
    TVMValue mv;
    int mcode = kTVMModuleHandle;
    mv.v_handle = two;
    CHECK_OK(TVMFuncCall(save, &mv, &mcode, 1, &ret, &ret_code));
    CHECK(ret_code == kTVMBytes);
    TVMByteArray* saved = (TVMByteArray*)ret.v_handle;
    CHECK(saved->size == 8 + strlen(v.v_str));
    CHECK(memcmp(saved->data + 8, v.v_str, strlen(v.v_str)) == 0);
    TVMFunctionHandle load = global("ffi.Module.load_from_bytes.examplejson");
    TVMValue bv;
    int bcode = kTVMBytes;
    bv.v_handle = saved;
    CHECK_OK(TVMFuncCall(load, &bv, &bcode, 1, &ret, &ret_code));
    CHECK(ret_code == kTVMModuleHandle);
    TVMModuleHandle copy = ret.v_handle;
    CHECK_OK(TVMByteArrayFree(saved));

    TVMFunctionHandle clamp = NULL;
    CHECK_OK(TVMModGetFunction(copy, "clamp", 0, &clamp));
    CHECK(clamp != NULL);
    float x[3] = {1.0f, 5.0f, -2.0f}, lim[1] = {2.0f}, y[3] = {0};
    int64_t s3[1] = {3}, s1[1] = {1};
    DLTensor tx = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, s3, NULL, 0};
    DLTensor tl = {lim, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, s1, NULL, 0};
    DLTensor ty = {y, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, s3, NULL, 0};
    TVMValue cv[3];
    int cc[3] = {kTVMDLTensorHandle, kTVMDLTensorHandle, kTVMDLTensorHandle};
    cv[0].v_handle = &tx;
    cv[1].v_handle = &tl;
    cv[2].v_handle = &ty;
    CHECK_OK(TVMFuncCall(clamp, cv, cc, 3, &ret, &ret_code));
    CHECK(y[0] == 1.0f && y[1] == 2.0f && y[2] == -2.0f);
    CHECK(ret_code == kTVMNDArrayHandle);
    const DLTensor* r = (const DLTensor*)ret.v_handle;
    CHECK(r->ndim == 1 && r->shape[0] == 3 && r->data != (void*)y);
    CHECK(memcmp(r->data, y, sizeof(y)) == 0);
    CHECK_OK(TVMArrayFree((TVMArrayHandle)ret.v_handle));
    CHECK_OK(TVMFuncFree(clamp));
    CHECK_OK(TVMModFree(copy));
    CHECK_OK(TVMModFree(two));
  }

  /* One function from four threads at once. */
  g_shared = f;
  pthread_t th[4];
  for (uintptr_t t = 0; t < 4; ++t) CHECK(pthread_create(&th[t], NULL, worker, (void*)(t + 1)) == 0);
  for (int t = 0; t < 4; ++t) CHECK(pthread_join(th[t], NULL) == 0);

  /* The function keeps the module alive. */
  CHECK_OK(TVMModFree(mod));
  guide_call_and_check(f, 4);
  CHECK_OK(TVMFuncFree(f));
  printf("byoc_examplejson: ok\n");
  return 0;
}
