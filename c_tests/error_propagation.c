/* Errors crossing nested calls: C caller -> TVMFuncCall -> C callback ->
 * TVMFuncCall -> C callback that fails. The innermost message reaches the
 * top; a callback may also replace it, or fail without setting one. */
#include "check.h"

/* Fails with a ValueError naming its argument. */
static int inner(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                 void* resource) {
  char msg[128];
  (void)codes;
  (void)num_args;
  (void)ret;
  (void)resource;
  snprintf(msg, sizeof(msg), "ValueError: inner rejected %lld", (long long)args[0].v_int64);
  TVMAPISetLastError(msg);
  return -1;
}

/* Calls the global named by the resource handle with its arguments and passes
 * a failure up unchanged, as generated code and TVM's frontends do. */
static int forward(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                   void* resource) {
  TVMFunctionHandle next = NULL;
  TVMValue out;
  int out_code = -1, rc;
  if (TVMFuncGetGlobal((const char*)resource, &next) != 0) return -1;
  if (next == NULL) {
    TVMAPISetLastError("RuntimeError: forward: callee not registered");
    return -1;
  }
  rc = TVMFuncCall(next, args, codes, num_args, &out, &out_code);
  TVMFuncFree(next);
  if (rc != 0) return rc;
  return TVMCFuncSetReturn(ret, &out, &out_code, 1);
}

/* Catches the callee's error and raises its own, which quotes it. */
static int wrap(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                void* resource) {
  TVMFunctionHandle next = NULL;
  TVMValue out;
  int out_code = -1;
  char msg[512];
  (void)ret;
  (void)resource;
  if (TVMFuncGetGlobal("c_tests.err.inner", &next) != 0 || next == NULL) return -1;
  if (TVMFuncCall(next, args, codes, num_args, &out, &out_code) == 0) {
    TVMFuncFree(next);
    TVMAPISetLastError("RuntimeError: wrap: expected the callee to fail");
    return -1;
  }
  TVMFuncFree(next);
  snprintf(msg, sizeof(msg), "InternalError: wrap caught [%s]", TVMGetLastError());
  TVMAPISetLastError(msg);
  return -1;
}

/* Returns -1 without saying why. */
static int silent(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                  void* resource) {
  (void)args;
  (void)codes;
  (void)num_args;
  (void)ret;
  (void)resource;
  return -1;
}

static int echo_int(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                    void* resource) {
  int code = kTVMArgInt;
  (void)codes;
  (void)num_args;
  (void)resource;
  return TVMCFuncSetReturn(ret, &args[0], &code, 1);
}

static void reg(const char* name, TVMPackedCFunc fn, void* resource) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMFuncCreateFromCFunc(fn, resource, NULL, &f));
  CHECK_OK(TVMFuncRegisterGlobal(name, f, 1));
  CHECK_OK(TVMFuncFree(f));
}

static int call_global(const char* name, int64_t x) {
  TVMFunctionHandle f = NULL;
  TVMValue arg = tv_int(x), out;
  int code = kTVMArgInt, out_code = -1, rc;
  if (TVMFuncGetGlobal(name, &f) != 0 || f == NULL) {
    fprintf(stderr, "lookup of %s failed\n", name);
    g_failures++;
    return 0;
  }
  rc = TVMFuncCall(f, &arg, &code, 1, &out, &out_code);
  TVMFuncFree(f);
  return rc;
}

int main(void) {
  const char* msg;
  reg("c_tests.err.inner", inner, NULL);
  reg("c_tests.err.depth1", forward, (void*)"c_tests.err.inner");
  reg("c_tests.err.depth2", forward, (void*)"c_tests.err.depth1");
  reg("c_tests.err.depth3", forward, (void*)"c_tests.err.depth2");
  reg("c_tests.err.wrap", wrap, NULL);
  reg("c_tests.err.via_wrap", forward, (void*)"c_tests.err.wrap");
  reg("c_tests.err.silent", silent, NULL);
  reg("c_tests.err.via_silent", forward, (void*)"c_tests.err.silent");
  reg("c_tests.err.ok", echo_int, NULL);

  /* A failing callback that set no message still produces one. This runs first: like TVM,
   * tvmrt reports the thread's last error when a callback fails without a new one. */
  CHECK(call_global("c_tests.err.via_silent", 1) == -1, "via_silent fails");
  msg = TVMGetLastError();
  CHECK(msg != NULL && strstr(msg, "returned -1 without setting an error") != NULL,
        "a message for a silent failure: %s", msg);

  /* Directly, then through 1 and 3 forwarding callbacks. */
  CHECK(call_global("c_tests.err.inner", 7) == -1, "inner fails");
  msg = TVMGetLastError();
  CHECK(strstr(msg, "inner rejected 7") != NULL, "message: %s", msg);
  CHECK(strncmp(msg, "ValueError", 10) == 0, "kind first: %s", msg);

  CHECK(call_global("c_tests.err.depth1", 8) == -1, "depth1 fails");
  msg = TVMGetLastError();
  CHECK(strstr(msg, "inner rejected 8") != NULL, "message: %s", msg);

  CHECK(call_global("c_tests.err.depth3", 9) == -1, "depth3 fails");
  msg = TVMGetLastError();
  CHECK(strncmp(msg, "ValueError", 10) == 0 && strstr(msg, "inner rejected 9") != NULL,
        "message after three levels: %s", msg);

  /* A callback that replaces the error: the outer message quotes the inner one. */
  CHECK(call_global("c_tests.err.via_wrap", 10) == -1, "via_wrap fails");
  msg = TVMGetLastError();
  CHECK(strstr(msg, "wrap caught [") != NULL && strstr(msg, "inner rejected 10") != NULL,
        "wrapped message: %s", msg);
  CHECK(strncmp(msg, "InternalError: wrap caught [", 28) == 0, "wrapped kind: %s", msg);


  /* Success after failure works. */
  CHECK(call_global("c_tests.err.ok", 3) == 0, "ok after errors");
  CHECK(call_global("c_tests.err.depth2", 11) == -1, "depth2 fails");
  CHECK(strstr(TVMGetLastError(), "inner rejected 11") != NULL, "depth2 message: %s",
        TVMGetLastError());

  /* The same error seen from the tvm-ffi side: an error object with kind and message. */
  {
    TVMFFIObjectHandle err = NULL;
    CHECK(call_global("c_tests.err.depth3", 12) == -1, "depth3 fails again");
    TVMFFIErrorMoveFromRaised(&err);
    CHECK(err != NULL, "an error object was raised");
    if (err != NULL) {
      TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
      CHECK(TVMFFIObjectGetTypeIndex(err) == kTVMFFIError, "error type index");
      CHECK(cell->kind.size == 10 && memcmp(cell->kind.data, "ValueError", 10) == 0,
            "kind %.*s", (int)cell->kind.size, cell->kind.data);
      CHECK(cell->message.size == strlen("inner rejected 12") &&
                memcmp(cell->message.data, "inner rejected 12", cell->message.size) == 0,
            "message %.*s", (int)cell->message.size, cell->message.data);
      TVMFFIObjectDecRef(err);
    }
    err = (TVMFFIObjectHandle)1;
    TVMFFIErrorMoveFromRaised(&err);
    CHECK(err == NULL, "moving out cleared the raised error");
  }

  return test_result("error_propagation");
}
