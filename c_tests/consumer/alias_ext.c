/* A library built the way a tvm-ffi extension is: against libtvm_ffi.so only (its one
 * DT_NEEDED runtime), here the installed alias, which binds it to tvmrt. */
#include <tvm/ffi/c_api.h>

int alias_ext_version(void) {
  TVMFFIVersion v;
  TVMFFIGetVersion(&v);
  return (int)(v.major * 10000 + v.minor * 100 + v.patch);
}
