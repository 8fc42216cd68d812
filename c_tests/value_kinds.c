/* Every value kind round trips through both doors: int, float, bool, string,
 * bytes, opaque handle, null, DLDataType, DLDevice, DLTensor* and functions,
 * sent to a classic echo and to a tvm-ffi echo from classic and tvm-ffi callers. */
#include "check.h"

static int g_seen_code = -100;
static int32_t g_seen_index = -100;

/* Classic echo: returns (a copy of) its argument, recording its type code. */
static int classic_echo(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                        void* resource) {
  (void)num_args;
  (void)resource;
  g_seen_code = codes[0];
  return TVMCFuncSetReturn(ret, &args[0], &codes[0], 1);
}

/* tvm-ffi echo: returns an owned copy of its argument, recording its type index. */
static int ffi_echo(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)num_args;
  g_seen_index = args[0].type_index;
  return TVMFFIAnyViewToOwnedAny(&args[0], result);
}

/* Classic call of `f` with one value; returns the result and its code. */
static int classic_call(TVMFunctionHandle f, TVMValue v, int code, TVMValue* out,
                        int* out_code) {
  *out_code = -1;
  return TVMFuncCall(f, &v, &code, 1, out, out_code);
}

static void classic_side(TVMFunctionHandle echo, TVMFunctionHandle fn, const char* who) {
  TVMValue v, out;
  int code;
  DLTensor tensor;
  TVMByteArray bytes;
  int64_t shape[2] = {2, 3};

  memset(&tensor, 0, sizeof(tensor));
  tensor.ndim = 2;
  tensor.shape = shape;
  tensor.dtype.code = kDLFloat;
  tensor.dtype.bits = 32;
  tensor.dtype.lanes = 1;
  tensor.device.device_type = kDLCPU;

  v.v_int64 = -123456789012LL;
  CHECK_OK(classic_call(echo, v, kTVMArgInt, &out, &code));
  CHECK(code == kTVMArgInt && out.v_int64 == -123456789012LL, "%s int: code %d", who, code);

  v.v_float64 = 3.25;
  CHECK_OK(classic_call(echo, v, kTVMArgFloat, &out, &code));
  CHECK(code == kTVMArgFloat && out.v_float64 == 3.25, "%s float: code %d", who, code);

  v.v_int64 = 1;
  CHECK_OK(classic_call(echo, v, kTVMArgBool, &out, &code));
  CHECK(code == kTVMArgBool && out.v_int64 == 1, "%s bool: code %d", who, code);

  v.v_str = "a classic string, longer than a small one";
  CHECK_OK(classic_call(echo, v, kTVMStr, &out, &code));
  CHECK(code == kTVMStr && strcmp(out.v_str, "a classic string, longer than a small one") == 0,
        "%s str: code %d", who, code);
  v.v_str = "";
  CHECK_OK(classic_call(echo, v, kTVMStr, &out, &code));
  CHECK(code == kTVMStr && strcmp(out.v_str, "") == 0, "%s empty str: code %d", who, code);

  bytes.data = "a\0b";
  bytes.size = 3;
  v.v_handle = &bytes;
  CHECK_OK(classic_call(echo, v, kTVMBytes, &out, &code));
  CHECK(code == kTVMBytes && ((TVMByteArray*)out.v_handle)->size == 3 &&
            memcmp(((TVMByteArray*)out.v_handle)->data, "a\0b", 3) == 0,
        "%s bytes with a NUL: code %d", who, code);
  if (code == kTVMBytes) CHECK_OK(TVMByteArrayFree((TVMByteArray*)out.v_handle));

  v.v_handle = (void*)(uintptr_t)0x1234;
  CHECK_OK(classic_call(echo, v, kTVMOpaqueHandle, &out, &code));
  CHECK(code == kTVMOpaqueHandle && out.v_handle == (void*)(uintptr_t)0x1234,
        "%s handle: code %d", who, code);

  v.v_handle = NULL;
  CHECK_OK(classic_call(echo, v, kTVMNullptr, &out, &code));
  CHECK(code == kTVMNullptr, "%s null: code %d", who, code);

  /* TVM's classic TVMFuncCall hands a DLDataType result back as its string. */
  v.v_type.code = kDLFloat;
  v.v_type.bits = 16;
  v.v_type.lanes = 4;
  CHECK_OK(classic_call(echo, v, kTVMDataType, &out, &code));
  CHECK(code == kTVMStr && strcmp(out.v_str, "float16x4") == 0, "%s dtype: code %d %s", who,
        code, code == kTVMStr ? out.v_str : "");

  v.v_device.device_type = kDLCUDA;
  v.v_device.device_id = 3;
  CHECK_OK(classic_call(echo, v, kDLDevice, &out, &code));
  CHECK(code == kDLDevice && out.v_device.device_type == kDLCUDA && out.v_device.device_id == 3,
        "%s device: code %d", who, code);

  v.v_handle = &tensor;
  CHECK_OK(classic_call(echo, v, kTVMDLTensorHandle, &out, &code));
  CHECK(code == kTVMDLTensorHandle && out.v_handle == &tensor, "%s DLTensor*: code %d", who,
        code);

  v.v_handle = fn;
  CHECK_OK(classic_call(echo, v, kTVMPackedFuncHandle, &out, &code));
  CHECK(code == kTVMPackedFuncHandle && out.v_handle == fn, "%s function: code %d", who, code);
  if (code == kTVMPackedFuncHandle) CHECK_OK(TVMFuncFree(out.v_handle));
}

static TVMFFIAny ffi_call1(TVMFFIObjectHandle f, TVMFFIAny arg) {
  TVMFFIAny out = ffi_none();
  out.type_index = -77;
  if (TVMFFIFunctionCall(f, &arg, 1, &out) != 0) {
    fprintf(stderr, "ffi call failed: %s\n", TVMGetLastError());
    g_failures++;
    out = ffi_none();
    out.type_index = -78;
  }
  return out;
}

static void ffi_side(TVMFFIObjectHandle echo, TVMFFIObjectHandle fn, const char* who) {
  TVMFFIAny a = ffi_none(), r;
  DLTensor tensor;
  TVMFFIByteArray bytes;
  memset(&tensor, 0, sizeof(tensor));

  r = ffi_call1(echo, ffi_int(INT64_MIN));
  CHECK(r.type_index == kTVMFFIInt && r.v_int64 == INT64_MIN, "%s int: index %d", who,
        r.type_index);

  a.type_index = kTVMFFIFloat;
  a.v_float64 = -0.5;
  r = ffi_call1(echo, a);
  CHECK(r.type_index == kTVMFFIFloat && r.v_float64 == -0.5, "%s float: index %d", who,
        r.type_index);

  a = ffi_none();
  a.type_index = kTVMFFIBool;
  a.v_int64 = 1;
  r = ffi_call1(echo, a);
  CHECK(r.type_index == kTVMFFIBool && r.v_int64 == 1, "%s bool: index %d", who, r.type_index);

  a = ffi_none();
  a.type_index = kTVMFFIOpaquePtr;
  a.v_ptr = (void*)(uintptr_t)0xbeef;
  r = ffi_call1(echo, a);
  CHECK(r.type_index == kTVMFFIOpaquePtr && r.v_ptr == (void*)(uintptr_t)0xbeef,
        "%s opaque: index %d", who, r.type_index);

  r = ffi_call1(echo, ffi_none());
  CHECK(r.type_index == kTVMFFINone, "%s none: index %d", who, r.type_index);

  a = ffi_none();
  a.type_index = kTVMFFIDataType;
  a.v_dtype.code = kDLInt;
  a.v_dtype.bits = 8;
  a.v_dtype.lanes = 1;
  r = ffi_call1(echo, a);
  CHECK(r.type_index == kTVMFFIDataType && r.v_dtype.code == kDLInt && r.v_dtype.bits == 8 &&
            r.v_dtype.lanes == 1,
        "%s dtype: index %d", who, r.type_index);

  a = ffi_none();
  a.type_index = kTVMFFIDevice;
  a.v_device.device_type = kDLCPU;
  a.v_device.device_id = 7;
  r = ffi_call1(echo, a);
  CHECK(r.type_index == kTVMFFIDevice && r.v_device.device_type == kDLCPU &&
            r.v_device.device_id == 7,
        "%s device: index %d", who, r.type_index);

  a = ffi_none();
  a.type_index = kTVMFFIDLTensorPtr;
  a.v_ptr = &tensor;
  r = ffi_call1(echo, a);
  CHECK(r.type_index == kTVMFFIDLTensorPtr && r.v_ptr == &tensor, "%s DLTensor*: index %d", who,
        r.type_index);

  /* Borrowed strings come back owned (small string or string object). */
  a = ffi_none();
  a.type_index = kTVMFFIRawStr;
  a.v_c_str = "tiny";
  r = ffi_call1(echo, a);
  CHECK(ffi_string_is(&r, "tiny") &&
            (r.type_index == kTVMFFISmallStr || r.type_index == kTVMFFIStr),
        "%s short raw str: index %d", who, r.type_index);
  ffi_release(&r);
  a.v_c_str = "a string too long to be stored inline";
  r = ffi_call1(echo, a);
  CHECK(ffi_string_is(&r, "a string too long to be stored inline"), "%s long raw str: index %d",
        who, r.type_index);
  ffi_release(&r);

  bytes.data = "x\0y\0z";
  bytes.size = 5;
  a = ffi_none();
  a.type_index = kTVMFFIByteArrayPtr;
  a.v_ptr = &bytes;
  r = ffi_call1(echo, a);
  {
    TVMFFIByteArray got = ffi_string_content(&r);
    CHECK((r.type_index == kTVMFFISmallBytes || r.type_index == kTVMFFIBytes) && got.size == 5 &&
              memcmp(got.data, "x\0y\0z", 5) == 0,
          "%s bytes: index %d", who, r.type_index);
  }
  ffi_release(&r);

  /* Owned string objects pass through as the same object. */
  {
    TVMFFIByteArray text = ffi_str("an owned string object, not inline");
    TVMFFIAny s = ffi_none();
    CHECK_OK(TVMFFIStringFromByteArray(&text, &s));
    r = ffi_call1(echo, s);
    CHECK(ffi_string_is(&r, "an owned string object, not inline"), "%s str object: index %d",
          who, r.type_index);
    ffi_release(&r);
    ffi_release(&s);
  }

  a = ffi_none();
  a.type_index = kTVMFFIFunction;
  a.v_obj = (TVMFFIObject*)fn;
  r = ffi_call1(echo, a);
  CHECK(r.type_index == kTVMFFIFunction && r.v_obj == (TVMFFIObject*)fn, "%s function: index %d",
        who, r.type_index);
  ffi_release(&r);
}

int main(void) {
  TVMFunctionHandle cecho = NULL, fecho = NULL, fn = NULL;

  CHECK_OK(TVMFuncCreateFromCFunc(classic_echo, NULL, NULL, &cecho));
  CHECK_OK(TVMFFIFunctionCreate(NULL, ffi_echo, NULL, &fecho));
  CHECK_OK(TVMFuncCreateFromCFunc(cb_noop, NULL, NULL, &fn));

  classic_side(cecho, fn, "classic->classic");
  classic_side(fecho, fn, "classic->ffi");
  ffi_side(fecho, fn, "ffi->ffi");
  ffi_side(cecho, fn, "ffi->classic");

  /* What the callees saw: classic codes become the matching tvm-ffi indexes and back. */
  {
    TVMValue v, out;
    int code;
    v.v_type.code = kDLFloat;
    v.v_type.bits = 32;
    v.v_type.lanes = 1;
    CHECK_OK(classic_call(fecho, v, kTVMDataType, &out, &code));
    CHECK(g_seen_index == kTVMFFIDataType, "ffi callee saw dtype as index %d", g_seen_index);
    v.v_handle = fn;
    CHECK_OK(classic_call(fecho, v, kTVMPackedFuncHandle, &out, &code));
    CHECK(g_seen_index == kTVMFFIFunction, "ffi callee saw a function as index %d",
          g_seen_index);
    if (code == kTVMPackedFuncHandle) TVMFuncFree(out.v_handle);
  }
  {
    TVMFFIAny a = ffi_none(), r;
    a.type_index = kTVMFFIDevice;
    r = ffi_call1(cecho, a);
    CHECK(g_seen_code == kDLDevice, "classic callee saw a device as code %d", g_seen_code);
    a.type_index = kTVMFFIRawStr;
    a.v_c_str = "s";
    r = ffi_call1(cecho, a);
    CHECK(g_seen_code == kTVMStr, "classic callee saw a string as code %d", g_seen_code);
    ffi_release(&r);
  }

  /* dtype strings, both directions. */
  {
    TVMFFIByteArray s = ffi_str("bfloat16");
    DLDataType t;
    TVMFFIAny back = ffi_none();
    CHECK_OK(TVMFFIDataTypeFromString(&s, &t));
    CHECK(t.code == kDLBfloat && t.bits == 16 && t.lanes == 1, "bfloat16 parsed");
    CHECK_OK(TVMFFIDataTypeToString(&t, &back));
    CHECK(ffi_string_is(&back, "bfloat16"), "bfloat16 printed");
    ffi_release(&back);
  }

  CHECK_OK(TVMFuncFree(cecho));
  CHECK_OK(TVMFuncFree(fecho));
  CHECK_OK(TVMFuncFree(fn));
  return test_result("value_kinds");
}
