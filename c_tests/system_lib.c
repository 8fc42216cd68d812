/* The system library: kernels linked statically into this program register themselves at
 * start-up (as TVM's static deployments do, via a constructor calling
 * TVMFFIEnvModRegisterSystemLibSymbol / TVMBackendRegisterSystemLibSymbol), and are reached as a
 * module through `ffi.SystemLib` (tvm-ffi) and `runtime.SystemLib` + TVMModGetFunction (classic). */
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/runtime/c_backend_api.h>

#include "check.h"

/* A tvm-ffi kernel as TVM 0.21+ emits it: `__tvm_ffi_<name>`, safe-call signature. */
static int syslib_add_one(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  if (num_args != 1 || args[0].type_index != kTVMFFIInt) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "syslib_add_one expects one int");
    return -1;
  }
  *result = ffi_int(args[0].v_int64 + 1);
  return 0;
}

/* A classic kernel as TVM <= 0.20 emits it: the backend signature, the function's own name. */
static int syslib_twice(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                        void* resource) {
  (void)resource;
  if (num_args != 1 || codes[0] != kTVMArgInt) {
    TVMAPISetLastError("syslib_twice expects one int");
    return -1;
  }
  ret->v_int64 = args[0].v_int64 * 2;
  *ret_code = kTVMArgInt;
  return 0;
}

/* What the generated registration code does before main (TVM's system-lib static init). */
__attribute__((constructor)) static void register_kernels(void) {
  TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_syslib_add_one", (void*)syslib_add_one);
  TVMBackendRegisterSystemLibSymbol("syslib_twice", (void*)syslib_twice);
  /* A prefixed system library (`ffi.SystemLib("pfx_")`). */
  TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_pfx_syslib_add_one", (void*)syslib_add_one);
}

static void test_ffi_system_lib(void) {
  TVMFFIObjectHandle get_syslib = NULL, get_function = NULL;
  TVMFFIByteArray name = ffi_str("ffi.SystemLib");
  TVMFFIAny mod = ffi_none(), fn = ffi_none(), out = ffi_none();
  TVMFFIAny args[3];
  CHECK_OK(TVMFFIFunctionGetGlobal(&name, &get_syslib));
  name = ffi_str("ffi.ModuleGetFunction");
  CHECK_OK(TVMFFIFunctionGetGlobal(&name, &get_function));
  if (!CHECK(get_syslib && get_function, "globals missing")) return;

  CHECK_OK(TVMFFIFunctionCall(get_syslib, NULL, 0, &mod));
  CHECK(mod.type_index == kTVMFFIModule, "ffi.SystemLib returned type %d", mod.type_index);
  args[0] = mod;
  args[1] = ffi_none();
  args[1].type_index = kTVMFFIRawStr;
  args[1].v_c_str = "syslib_add_one";
  args[2] = ffi_int(0);
  CHECK_OK(TVMFFIFunctionCall(get_function, args, 3, &fn));
  if (CHECK(fn.type_index == kTVMFFIFunction, "function not found (type %d)", fn.type_index)) {
    TVMFFIAny x = ffi_int(41);
    CHECK_OK(TVMFFIFunctionCall(fn.v_obj, &x, 1, &out));
    CHECK(out.type_index == kTVMFFIInt && out.v_int64 == 42, "got %lld",
          (long long)out.v_int64);
    /* An error raised by the kernel reaches the caller with its kind. */
    x = ffi_none();
    CHECK(TVMFFIFunctionCall(fn.v_obj, &x, 1, &out) != 0, "bad argument accepted");
    {
      TVMFFIObjectHandle err = NULL;
      TVMFFIErrorMoveFromRaised(&err);
      if (CHECK(err != NULL, "no error raised")) {
        TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
        CHECK(bytes_contain(cell->kind, "TypeError"), "kind");
        CHECK(bytes_contain(cell->message, "expects one int"), "message");
        TVMFFIObjectDecRef(err);
      }
    }
  }
  ffi_release(&fn);

  /* A name nobody registered: None, not an error. */
  args[1].v_c_str = "syslib_missing";
  CHECK_OK(TVMFFIFunctionCall(get_function, args, 3, &fn));
  CHECK(fn.type_index == kTVMFFINone, "missing function gave type %d", fn.type_index);

  /* The same module object for the same prefix; the prefixed table finds its own symbol. */
  {
    TVMFFIAny again = ffi_none(), pfx_mod = ffi_none(), prefix = ffi_none();
    CHECK_OK(TVMFFIFunctionCall(get_syslib, NULL, 0, &again));
    CHECK(again.v_obj == mod.v_obj, "two system-lib modules for one prefix");
    ffi_release(&again);
    prefix.type_index = kTVMFFIRawStr;
    prefix.v_c_str = "pfx_";
    CHECK_OK(TVMFFIFunctionCall(get_syslib, &prefix, 1, &pfx_mod));
    args[0] = pfx_mod;
    args[1].v_c_str = "syslib_add_one";
    CHECK_OK(TVMFFIFunctionCall(get_function, args, 3, &fn));
    CHECK(fn.type_index == kTVMFFIFunction, "prefixed function not found");
    ffi_release(&fn);
    ffi_release(&pfx_mod);
  }
  ffi_release(&mod);
  TVMFFIObjectDecRef(get_syslib);
  TVMFFIObjectDecRef(get_function);
}

static void test_classic_system_lib(void) {
  TVMFunctionHandle get_syslib = NULL, fn = NULL;
  TVMValue ret, arg;
  int ret_code = 0, code = kTVMArgInt;
  TVMModuleHandle mod;
  CHECK_OK(TVMFuncGetGlobal("runtime.SystemLib", &get_syslib));
  if (!CHECK(get_syslib != NULL, "runtime.SystemLib missing")) return;
  CHECK_OK(TVMFuncCall(get_syslib, NULL, NULL, 0, &ret, &ret_code));
  CHECK(ret_code == kTVMModuleHandle, "got type code %d", ret_code);
  mod = ret.v_handle;
  CHECK_OK(TVMModGetFunction(mod, "syslib_twice", 0, &fn));
  if (CHECK(fn != NULL, "syslib_twice not found")) {
    arg.v_int64 = 21;
    CHECK_OK(TVMFuncCall(fn, &arg, &code, 1, &ret, &ret_code));
    CHECK(ret_code == kTVMArgInt && ret.v_int64 == 42, "got %lld", (long long)ret.v_int64);
    arg.v_str = "not an int";
    code = kTVMStr;
    CHECK_FAILS_WITH(TVMFuncCall(fn, &arg, &code, 1, &ret, &ret_code), "expects one int");
    CHECK_OK(TVMFuncFree(fn));
  }
  /* The tvm-ffi kernel is reachable from the classic door too. */
  fn = NULL;
  CHECK_OK(TVMModGetFunction(mod, "syslib_add_one", 0, &fn));
  if (CHECK(fn != NULL, "syslib_add_one not found classically")) {
    arg.v_int64 = 1;
    code = kTVMArgInt;
    CHECK_OK(TVMFuncCall(fn, &arg, &code, 1, &ret, &ret_code));
    CHECK(ret.v_int64 == 2, "got %lld", (long long)ret.v_int64);
    CHECK_OK(TVMFuncFree(fn));
  }
  /* Registration errors are reported, not crashes. */
  CHECK_FAILS_WITH(TVMBackendRegisterSystemLibSymbol(NULL, (void*)syslib_twice), "name");
  CHECK_OK(TVMModFree(mod));
  CHECK_OK(TVMFuncFree(get_syslib));
}

int main(void) {
  test_ffi_system_lib();
  test_classic_system_lib();
  return test_result("system_lib");
}
