/*
 * Test helper: makes tvmrt's C entry points that compiled kernels import as plain symbols
 * visible to libraries opened with RTLD_LOCAL.
 *
 * A Rust test executable links tvmrt statically and does not export its symbols to the dynamic
 * linker (no -rdynamic), so a kernel library importing `TVMFFIErrorSetRaisedFromCStrParts`
 * could not be loaded. The tests open this shim with RTLD_GLOBAL and hand it the addresses of
 * tvmrt's own functions; each definition here forwards to them. A program linking libtvmrt.so
 * needs none of this.
 */
#include <stdint.h>
#include <stddef.h>

typedef void (*set_raised_parts_fn)(const char* kind, const char** parts, int32_t num_parts);
typedef void (*set_raised_fn)(const char* kind, const char* message);
typedef void (*set_last_error_fn)(const char* msg);

static set_raised_parts_fn g_set_raised_parts;
static set_raised_fn g_set_raised;
static set_last_error_fn g_set_last_error;

void tvmrt_test_shim_init(void* set_raised_parts, void* set_raised, void* set_last_error) {
  g_set_raised_parts = (set_raised_parts_fn)set_raised_parts;
  g_set_raised = (set_raised_fn)set_raised;
  g_set_last_error = (set_last_error_fn)set_last_error;
}

void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** parts, int32_t num_parts) {
  g_set_raised_parts(kind, parts, num_parts);
}

void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message) {
  g_set_raised(kind, message);
}

void TVMAPISetLastError(const char* msg) { g_set_last_error(msg); }
