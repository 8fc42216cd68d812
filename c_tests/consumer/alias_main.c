/* Loads the library of alias_ext.c (argv[1]) in a program that links nothing of TVM, as Python
 * or a plugin host loads a tvm-ffi extension, and checks the runtime it bound to answers with
 * the version of the installed headers. */
#include <dlfcn.h>
#include <stdio.h>
#include <tvm/ffi/c_api.h>

int main(int argc, char** argv) {
  void* lib;
  int (*version)(void);
  int want = TVM_FFI_VERSION_MAJOR * 10000 + TVM_FFI_VERSION_MINOR * 100 + TVM_FFI_VERSION_PATCH;
  if (argc != 2) return 2;
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "alias_main: %s\n", dlerror());
    return 1;
  }
  *(void**)&version = dlsym(lib, "alias_ext_version");
  if (version == NULL || version() != want) {
    fprintf(stderr, "alias_main: version %d, expected %d\n", version ? version() : -1, want);
    return 1;
  }
  printf("alias_main: a library built against libtvm_ffi.so runs on tvmrt (version %d)\n", want);
  return 0;
}
