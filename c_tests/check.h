/* Shared helpers of the C tests: failure reporting and small constructors.
 * Each test is a standalone program; it prints every failed check with its
 * location and exits non-zero if any failed.
 *
 * The tests are written against TVM's own C headers, as a TVM user's program
 * is; header_prototypes.c checks tvmrt.h against those headers separately, so
 * a drifted prototype fails that one test rather than every test's build. */
#ifndef TVMRT_C_TESTS_CHECK_H_
#define TVMRT_C_TESTS_CHECK_H_

#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_runtime_api.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

/* Records a failure unless `cond` holds; returns whether it held. */
#define CHECK(cond, ...) check_impl((cond) ? 1 : 0, __FILE__, __LINE__, #cond, __VA_ARGS__)

/* A call that must return 0; prints the last error otherwise. */
#define CHECK_OK(call)                                                                   \
  do {                                                                                   \
    int check_rc_ = (call);                                                              \
    if (check_rc_ != 0) {                                                                \
      fprintf(stderr, "%s:%d: FAILED: %s returned %d: %s\n", __FILE__, __LINE__, #call,  \
              check_rc_, TVMGetLastError());                                             \
      g_failures++;                                                                      \
    }                                                                                    \
  } while (0)

/* A call that must fail with a last error containing `needle`. */
#define CHECK_FAILS_WITH(call, needle) \
  check_fails_impl((call), (needle), __FILE__, __LINE__, #call)

static inline int check_impl(int ok, const char* file, int line, const char* expr, const char* fmt,
                      ...) __attribute__((format(printf, 5, 6)));

static inline int check_impl(int ok, const char* file, int line, const char* expr, const char* fmt,
                      ...) {
  va_list ap;
  if (ok) return 1;
  fprintf(stderr, "%s:%d: FAILED: %s: ", file, line, expr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  g_failures++;
  return 0;
}

static inline int check_fails_impl(int rc, const char* needle, const char* file, int line,
                            const char* expr) {
  const char* msg;
  if (rc == 0) {
    fprintf(stderr, "%s:%d: FAILED: %s succeeded, expected an error containing \"%s\"\n", file,
            line, expr, needle);
    g_failures++;
    return 0;
  }
  msg = TVMGetLastError();
  if (msg == NULL || strstr(msg, needle) == NULL) {
    fprintf(stderr, "%s:%d: FAILED: %s returned %d with error \"%s\", expected \"%s\" in it\n",
            file, line, expr, rc, msg ? msg : "(null)", needle);
    g_failures++;
    return 0;
  }
  return 1;
}

/* A tvm-ffi byte array viewing a C string. */
static inline TVMFFIByteArray ffi_str(const char* s) {
  TVMFFIByteArray b;
  b.data = s;
  b.size = strlen(s);
  return b;
}

static inline TVMFFIAny ffi_none(void) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = kTVMFFINone;
  return a;
}

static inline TVMFFIAny ffi_int(int64_t v) {
  TVMFFIAny a = ffi_none();
  a.type_index = kTVMFFIInt;
  a.v_int64 = v;
  return a;
}

/* The text of a string or bytes value (small or object); {NULL, 0} otherwise. */
static inline TVMFFIByteArray ffi_string_content(const TVMFFIAny* a) {
  TVMFFIByteArray none = {NULL, 0};
  if (a->type_index == kTVMFFISmallStr || a->type_index == kTVMFFISmallBytes) {
    return TVMFFISmallBytesGetContentByteArray(a);
  }
  if (a->type_index == kTVMFFIStr || a->type_index == kTVMFFIBytes) {
    return *TVMFFIBytesGetByteArrayPtr(a->v_obj);
  }
  return none;
}

/* Whether a string/bytes value holds exactly `s`. */
static inline int ffi_string_is(const TVMFFIAny* a, const char* s) {
  TVMFFIByteArray b = ffi_string_content(a);
  return b.data != NULL && b.size == strlen(s) && memcmp(b.data, s, b.size) == 0;
}

/* Whether `b` contains the C string `needle` (b need not be NUL-terminated). */
static inline int bytes_contain(TVMFFIByteArray b, const char* needle) {
  size_t n = strlen(needle), i;
  if (b.data == NULL || n > b.size) return 0;
  for (i = 0; i + n <= b.size; i++) {
    if (memcmp(b.data + i, needle, n) == 0) return 1;
  }
  return 0;
}

/* Releases the object a value owns, if any. */
static inline void ffi_release(TVMFFIAny* a) {
  if (a->type_index >= kTVMFFIStaticObjectBegin && a->v_obj != NULL) {
    TVMFFIObjectDecRef(a->v_obj);
  }
  *a = ffi_none();
}

static inline TVMValue tv_int(int64_t v) {
  TVMValue t;
  t.v_int64 = v;
  return t;
}

static inline TVMValue tv_handle(void* p) {
  TVMValue t;
  t.v_handle = p;
  return t;
}

static inline TVMValue tv_str(const char* s) {
  TVMValue t;
  t.v_str = s;
  return t;
}

/* Ends a classic callback (TVMPackedCFunc) by returning the int `v` to its caller. */
static inline int cb_return_int(TVMRetValueHandle ret, int64_t v) {
  TVMValue out = tv_int(v);
  int code = kTVMArgInt;
  return TVMCFuncSetReturn(ret, &out, &code, 1);
}

/* A classic callback that ignores its arguments, sets no result and succeeds. */
static inline int cb_noop(TVMValue* args, int* codes, int num_args, TVMRetValueHandle ret,
                          void* resource) {
  (void)args;
  (void)codes;
  (void)num_args;
  (void)ret;
  (void)resource;
  return 0;
}

/* A module's function (searching its imports when asked); exits the test when missing. */
static inline TVMFunctionHandle get_func(TVMModuleHandle m, const char* name, int imports) {
  TVMFunctionHandle f = NULL;
  CHECK_OK(TVMModGetFunction(m, name, imports, &f));
  if (f == NULL) {
    fprintf(stderr, "no function %s\n", name);
    exit(1);
  }
  return f;
}

/* A compact CPU tensor over `data`. */
static inline DLTensor cpu_tensor(void* data, int64_t* shape, int ndim, uint8_t code,
                                  uint8_t bits) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* The exit status of a test's main. */
static inline int test_result(const char* name) {
  if (g_failures != 0) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, g_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

#endif /* TVMRT_C_TESTS_CHECK_H_ */
