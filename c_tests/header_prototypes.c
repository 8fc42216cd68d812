/* tvmrt.h next to TVM's headers, in C11 and (as header_prototypes_cxx) C++17.
 *
 * tvmrt.h is generated from the Rust sources and declares each export again
 * after TVM's own headers declared it, so a Rust signature that disagrees with
 * TVM's declaration (a different pointer type, constness, integer width or
 * return type) fails to compile here. The checks below pin a few exports to
 * TVM's typedefs as well, and the program links to prove the symbols exist. */
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvmrt.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>

#include <stdio.h>
#include <string.h>

typedef int (*ClassicCall)(TVMFunctionHandle, TVMValue*, int*, int, TVMValue*, int*);
typedef int (*FfiCall)(TVMFFIObjectHandle, TVMFFIAny*, int32_t, TVMFFIAny*);
typedef int (*CreateFromC)(TVMPackedCFunc, void*, TVMPackedCFuncFinalizer, TVMFunctionHandle*);
typedef const char* (*LastError)(void);

int main(void) {
  ClassicCall classic_call = TVMFuncCall;
  FfiCall ffi_call = TVMFFIFunctionCall;
  CreateFromC create = TVMFuncCreateFromCFunc;
  LastError last_error = TVMGetLastError;
  TVMFFIVersion version;

  memset(&version, 0, sizeof(version));
  TVMFFIGetVersion(&version);
  if (classic_call == NULL || ffi_call == NULL || create == NULL || last_error == NULL) {
    fprintf(stderr, "FAILED: an export resolved to NULL\n");
    return 1;
  }
  if (version.major != TVM_FFI_VERSION_MAJOR || version.minor != TVM_FFI_VERSION_MINOR) {
    fprintf(stderr, "FAILED: runtime speaks tvm-ffi %u.%u, headers are %d.%d\n", version.major,
            version.minor, TVM_FFI_VERSION_MAJOR, TVM_FFI_VERSION_MINOR);
    return 1;
  }
  printf("header_prototypes: tvmrt.h agrees with TVM's headers (tvm-ffi %u.%u.%u)\n",
         version.major, version.minor, version.patch);
  return 0;
}
