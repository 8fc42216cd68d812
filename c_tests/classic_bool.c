/* Bool across the two ABI generations. TVM <= 0.19 types a bool as uint1 (code 1, 1 bit, one
 * byte per element: graph JSON "bool", params blobs, NDArrays, and compiled kernels, which check
 * code*1000+bits == 1001); tvm-ffi as kDLBool (code 6, 8 bits). Each side must see its own:
 * - TVMArrayAlloc(uint1) from a classic program: a uint1 array of one byte per element;
 * - the classic bool model (tests/fixtures/graph/bool_model.so) through the classic door: bool
 *   input as an NDArray handle, get_output as a uint1 NDArray and into a uint1 DLTensor, the
 *   saved bool parameter as uint1, and its kernels accept the entries they are given;
 * - a tvm-ffi caller's kDLBool tensor reaches a classic callback as uint1, and a uint1 array
 *   the callback returns comes back as kDLBool; data types likewise, both ways;
 * - a classic kernel called through the tvm-ffi door with a kDLBool tensor accepts it.
 * Usage: classic_bool <tests/fixtures/graph/bool_model.so> */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static int is_uint1(const DLTensor* t) {
  return t->dtype.code == kDLUInt && t->dtype.bits == 1 && t->dtype.lanes == 1;
}

static int is_kdlbool(const DLTensor* t) {
  return t->dtype.code == kDLBool && t->dtype.bits == 8 && t->dtype.lanes == 1;
}

/* TVMArrayAlloc of uint1 as a TVM 0.19 program makes one. */
static void arrays(void) {
  int64_t shape[1] = {5};
  TVMArrayHandle a = NULL;
  CHECK_OK(TVMArrayAlloc(shape, 1, kDLUInt, 1, 1, kDLCPU, 0, &a));
  if (!a) return;
  CHECK(is_uint1(a), "TVMArrayAlloc(uint1) gave code %d bits %d", a->dtype.code, a->dtype.bits);
  uint8_t in[5] = {1, 0, 1, 1, 0}, out[5] = {9, 9, 9, 9, 9};
  CHECK_OK(TVMArrayCopyFromBytes(a, in, 5));
  CHECK_FAILS_WITH(TVMArrayCopyFromBytes(a, in, 1), "expected 5 bytes, got 1");
  CHECK_OK(TVMArrayCopyToBytes(a, out, 5));
  CHECK(memcmp(in, out, 5) == 0, "uint1 bytes did not round-trip");
  /* A C-owned uint1 tensor is one byte per element too. */
  uint8_t mine[5] = {0};
  DLTensor t = cpu_tensor(mine, shape, 1, kDLUInt, 1);
  CHECK_OK(TVMArrayCopyFromTo(a, &t, NULL));
  CHECK(memcmp(in, mine, 5) == 0, "TVMArrayCopyFromTo of uint1 copied the wrong bytes");
  CHECK_OK(TVMArrayFree(a));
}

/* The bool model from C: x, y float32[2, 4]; keep bool[2, 4]; flip (saved) bool[4].
 * Outputs z = where((x > y && keep) != flip, x, y) and the mask. */
static void model(const char* path) {
  TVMModuleHandle factory = NULL;
  CHECK_OK(TVMModLoadFromFile(path, "so", &factory));
  TVMValue v[2], ret;
  int codes[2], rc;
  v[0].v_device.device_type = kDLCPU;
  v[0].v_device.device_id = 0;
  codes[0] = kDLDevice;
  TVMFunctionHandle create = get_func(factory, "default", 0);
  CHECK_OK(TVMFuncCall(create, v, codes, 1, &ret, &rc));
  TVMModuleHandle exec = ret.v_handle;
  TVMFunctionHandle set_input = get_func(exec, "set_input", 0);
  TVMFunctionHandle run = get_func(exec, "run", 0);
  TVMFunctionHandle get_output = get_func(exec, "get_output", 0);

  /* The saved parameter: TVM 0.19's uint1. */
  v[0].v_str = "flip";
  codes[0] = kTVMStr;
  TVMFunctionHandle get_input = get_func(exec, "get_input", 0);
  CHECK_OK(TVMFuncCall(get_input, v, codes, 1, &ret, &rc));
  DLTensor* flip = (DLTensor*)ret.v_handle;
  CHECK(rc == kTVMNDArrayHandle && is_uint1(flip), "flip is not a uint1 array");
  const uint8_t want_flip[4] = {1, 0, 0, 1};
  CHECK(memcmp(flip->data, want_flip, 4) == 0, "flip's saved values differ");
  CHECK_OK(TVMArrayFree(flip));

  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {8, 1, 6, 3, 4, 7, 2, 9};
  int64_t s24[2] = {2, 4};
  DLTensor xt = cpu_tensor(x, s24, 2, kDLFloat, 32);
  DLTensor yt = cpu_tensor(y, s24, 2, kDLFloat, 32);
  const char* names[2] = {"x", "y"};
  DLTensor* ts[2] = {&xt, &yt};
  for (int i = 0; i < 2; ++i) {
    v[0].v_str = names[i];
    codes[0] = kTVMStr;
    v[1].v_handle = ts[i];
    codes[1] = kTVMDLTensorHandle;
    CHECK_OK(TVMFuncCall(set_input, v, codes, 2, &ret, &rc));
  }
  /* `keep` as an NDArray handle of the program's own uint1 array. */
  TVMArrayHandle keep = NULL;
  uint8_t keep_values[8] = {1, 1, 0, 1, 1, 0, 1, 1};
  CHECK_OK(TVMArrayAlloc(s24, 2, kDLUInt, 1, 1, kDLCPU, 0, &keep));
  CHECK_OK(TVMArrayCopyFromBytes(keep, keep_values, 8));
  v[0].v_str = "keep";
  codes[0] = kTVMStr;
  v[1].v_handle = keep;
  codes[1] = kTVMNDArrayHandle;
  CHECK_OK(TVMFuncCall(set_input, v, codes, 2, &ret, &rc));
  CHECK_OK(TVMFuncCall(run, v, codes, 0, &ret, &rc));

  /* x > y:     0 1 0 1 1 0 1 0;  && keep: 0 1 0 1 1 0 1 0;  != flip (1 0 0 1): 1 1 0 0 0 0 1 1 */
  const uint8_t want_mask[8] = {1, 1, 0, 0, 0, 0, 1, 1};
  const float want_z[8] = {1, 2, 6, 3, 4, 7, 7, 8};
  v[0].v_int64 = 1;
  codes[0] = kDLInt;
  CHECK_OK(TVMFuncCall(get_output, v, codes, 1, &ret, &rc));
  DLTensor* mask = (DLTensor*)ret.v_handle;
  if (CHECK(rc == kTVMNDArrayHandle && is_uint1(mask), "the bool output is not uint1")) {
    CHECK(memcmp(mask->data, want_mask, 8) == 0, "mask values differ");
  }
  CHECK_OK(TVMArrayFree(mask));
  v[0].v_int64 = 0;
  CHECK_OK(TVMFuncCall(get_output, v, codes, 1, &ret, &rc));
  DLTensor* z = (DLTensor*)ret.v_handle;
  CHECK(memcmp(z->data, want_z, sizeof(want_z)) == 0, "z values differ");
  CHECK_OK(TVMArrayFree(z));
  /* get_output into a C-owned uint1 tensor (8 bytes). */
  uint8_t got[8] = {0};
  DLTensor gt = cpu_tensor(got, s24, 2, kDLUInt, 1);
  v[0].v_int64 = 1;
  v[1].v_handle = &gt;
  codes[1] = kTVMDLTensorHandle;
  CHECK_OK(TVMFuncCall(get_output, v, codes, 2, &ret, &rc));
  CHECK(memcmp(got, want_mask, 8) == 0, "get_output into a uint1 tensor differs");

  /* A classic kernel called through the tvm-ffi door with kDLBool tensors (as Python or any
   * tvm-ffi caller passes a bool array) sees uint1 and accepts them. */
  TVMFunctionHandle greater = get_func(factory, "tvmgen_default_fused_greater", 1);
  uint8_t out[8] = {7, 7, 7, 7, 7, 7, 7, 7};
  DLTensor ot = cpu_tensor(out, s24, 2, kDLBool, 8);
  TVMFFIAny args[3], result = ffi_none();
  DLTensor* targs[3] = {&xt, &yt, &ot};
  for (int i = 0; i < 3; ++i) {
    args[i] = ffi_none();
    args[i].type_index = kTVMFFIDLTensorPtr;
    args[i].v_ptr = targs[i];
  }
  CHECK_OK(TVMFFIFunctionCall(greater, args, 3, &result));
  const uint8_t want_greater[8] = {0, 1, 0, 1, 1, 0, 1, 0};
  CHECK(memcmp(out, want_greater, 8) == 0, "greater through the tvm-ffi door differs");
  CHECK(is_kdlbool(&ot), "the caller's descriptor was changed");

  CHECK_OK(TVMArrayFree(keep));
  TVMFunctionHandle funcs[6] = {greater, create, get_input, set_input, run, get_output};
  for (int i = 0; i < 6; ++i) CHECK_OK(TVMFuncFree(funcs[i]));
  CHECK_OK(TVMModFree(exec));
  CHECK_OK(TVMModFree(factory));
}

/* A classic callback: records what it sees of argument 0 (a tensor or a data type) and returns
 * a new uint1 array of 3 elements. */
static int seen_code, seen_dtype_code, seen_dtype_bits;

static int classic_callback(TVMValue* args, int* codes, int n, TVMRetValueHandle ret,
                            void* resource) {
  (void)resource;
  if (n != 1) return -1;
  seen_code = codes[0];
  if (codes[0] == kTVMDataType) {
    seen_dtype_code = args[0].v_type.code;
    seen_dtype_bits = args[0].v_type.bits;
    return 0;
  }
  const DLTensor* t = (const DLTensor*)args[0].v_handle;
  seen_dtype_code = t->dtype.code;
  seen_dtype_bits = t->dtype.bits;
  int64_t shape[1] = {3};
  TVMArrayHandle a = NULL;
  if (TVMArrayAlloc(shape, 1, kDLUInt, 1, 1, kDLCPU, 0, &a) != 0) return -1;
  uint8_t bytes[3] = {1, 0, 1};
  if (TVMArrayCopyFromBytes(a, bytes, 3) != 0) return -1;
  TVMValue rv;
  int rcode = kTVMNDArrayHandle;
  rv.v_handle = a;
  int status = TVMCFuncSetReturn(ret, &rv, &rcode, 1);
  TVMArrayFree(a);
  return status;
}

/* A tvm-ffi callback: returns the data type it received, as code * 1000 + bits. */
static int ffi_callback(void* self, const TVMFFIAny* args, int32_t n, TVMFFIAny* result) {
  (void)self;
  if (n != 1 || args[0].type_index != kTVMFFIDataType) return -1;
  *result = ffi_int(args[0].v_dtype.code * 1000 + args[0].v_dtype.bits);
  return 0;
}

static void callbacks(void) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMFuncCreateFromCFunc(classic_callback, NULL, NULL, &f));
  /* A kDLBool tensor from a tvm-ffi caller. */
  uint8_t data[2] = {1, 0};
  int64_t shape[1] = {2};
  DLTensor t = cpu_tensor(data, shape, 1, kDLBool, 8);
  TVMFFIAny arg = ffi_none(), result = ffi_none();
  arg.type_index = kTVMFFIDLTensorPtr;
  arg.v_ptr = &t;
  CHECK_OK(TVMFFIFunctionCall(f, &arg, 1, &result));
  CHECK(seen_code == kTVMDLTensorHandle && seen_dtype_code == kDLUInt && seen_dtype_bits == 1,
        "the classic callback saw code %d dtype %d/%d", seen_code, seen_dtype_code,
        seen_dtype_bits);
  CHECK(is_kdlbool(&t), "the caller's descriptor was changed");
  if (CHECK(result.type_index == kTVMFFITensor, "result type index %d", result.type_index)) {
    DLTensor* r = (DLTensor*)((char*)result.v_obj + sizeof(TVMFFIObject));
    CHECK(is_kdlbool(r) && r->shape[0] == 3, "the uint1 result did not come back as kDLBool");
    const uint8_t want[3] = {1, 0, 1};
    CHECK(memcmp(r->data, want, 3) == 0, "result values differ");
  }
  ffi_release(&result);
  /* A data type from a tvm-ffi caller: kDLBool reaches the classic side as uint1. */
  arg = ffi_none();
  arg.type_index = kTVMFFIDataType;
  arg.v_dtype.code = kDLBool;
  arg.v_dtype.bits = 8;
  arg.v_dtype.lanes = 1;
  CHECK_OK(TVMFFIFunctionCall(f, &arg, 1, &result));
  CHECK(seen_code == kTVMDataType && seen_dtype_code == kDLUInt && seen_dtype_bits == 1,
        "the classic callback saw data type %d/%d", seen_dtype_code, seen_dtype_bits);
  ffi_release(&result);
  CHECK_OK(TVMFuncFree(f));

  /* And a classic caller's uint1 data type reaches a tvm-ffi function as kDLBool. */
  TVMFFIObjectHandle g = NULL;
  if (TVMFFIFunctionCreate(NULL, ffi_callback, NULL, &g) != 0) {
    CHECK(0, "TVMFFIFunctionCreate failed");
    return;
  }
  TVMValue v, ret;
  int code = kTVMDataType, rc;
  v.v_type.code = kDLUInt;
  v.v_type.bits = 1;
  v.v_type.lanes = 1;
  CHECK_OK(TVMFuncCall(g, &v, &code, 1, &ret, &rc));
  CHECK(rc == kDLInt && ret.v_int64 == 6008, "the tvm-ffi function saw %lld",
        (long long)ret.v_int64);
  /* Other types pass unchanged. */
  v.v_type.code = kDLUInt;
  v.v_type.bits = 8;
  CHECK_OK(TVMFuncCall(g, &v, &code, 1, &ret, &rc));
  CHECK(ret.v_int64 == 1008, "uint8 became %lld", (long long)ret.v_int64);
  CHECK_OK(TVMFuncFree(g));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <bool_model.so>\n", argv[0]);
    return 2;
  }
  arrays();
  model(argv[1]);
  callbacks();
  return test_result("classic_bool");
}
