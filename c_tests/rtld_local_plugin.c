/* A plugin that links tvmrt statically (as a Rust cdylib such as a Triton backend does): the
 * table below makes the linker take the C API from libtvmrt.a, and a shared object exports
 * what it links, so rtld_local.c can dlopen this plugin with RTLD_LOCAL and call tvmrt through
 * it. tvmrt must then find its object by address, not by the name libtvmrt.so. */
#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_runtime_api.h>

typedef void (*AnyFunction)(void);

/* The functions rtld_local.c resolves with dlsym. */
const AnyFunction tvmrt_plugin_api[] = {
    (AnyFunction)TVMGetLastError,         (AnyFunction)TVMModLoadFromFile,
    (AnyFunction)TVMModGetFunction,       (AnyFunction)TVMModFree,
    (AnyFunction)TVMFuncCall,             (AnyFunction)TVMFuncFree,
    (AnyFunction)TVMCFuncSetReturn,       (AnyFunction)TVMFFIFunctionGetGlobal,
    (AnyFunction)TVMFFIFunctionCall,      (AnyFunction)TVMFFIObjectDecRef,
    (AnyFunction)TVMFFITensorFromDLPack,  (AnyFunction)TVMFFIErrorMoveFromRaised,
    (AnyFunction)TVMFFIErrorSetRaisedFromCStrParts,
};
