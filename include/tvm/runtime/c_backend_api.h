/* tvmrt: drop-in replacement for TVM's tvm/runtime/c_backend_api.h (classic ABI, TVM 0.19). SPDX-License-Identifier: Apache-2.0 */
/*
 * Functions that TVM-generated kernels call into the runtime (workspace
 * memory, parallel loops, function lookup) and the signature of the functions
 * a classic compiled library exports. Declarations match apache/tvm v0.19.0.
 * Application code rarely needs this header.
 */
#ifndef TVM_RUNTIME_C_BACKEND_API_H_
#define TVM_RUNTIME_C_BACKEND_API_H_

#include <tvm/runtime/c_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Signature of every function in a classic compiled library: arguments with
 * their type codes in, one value and its type code out. resource_handle is
 * the module context. Returns 0, or nonzero after TVMAPISetLastError. */
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode,
                                     void* resource_handle);

/* Find func_name for the module mod_node: its imports first, then the global
 * table. The handle stays owned by the module; do not free it. */
TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out);

/* Register a symbol of a statically linked system library (done by its
 * start-up code). */
TVM_DLL int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr);

/* Scratch memory for a kernel, at least 64-byte aligned. The dtype hints
 * matter only to some devices. Returns NULL on failure. */
TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                       int dtype_code_hint, int dtype_bits_hint);

/* Return memory from TVMBackendAllocWorkspace on the same device. */
TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

/* Register a C function provided by the host environment (e.g. Python's
 * signal check) under name. */
TVM_DLL int TVMBackendRegisterEnvCAPI(const char* name, void* ptr);

/* Shared state of one parallel launch, passed to every task. */
typedef struct {
  /* Runtime-private synchronization state. */
  void* sync_handle;
  /* Number of tasks in the launch. */
  int32_t num_task;
} TVMParallelGroupEnv;

/* Body of a parallel loop, run once per task_id in [0, penv->num_task). */
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

/* Run flambda on num_task tasks (0: one per worker thread) and wait for all
 * of them. */
TVM_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);

/* Wait until every task of penv's launch has reached this barrier. */
TVM_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);

/* Run f(cdata) once per *handle: afterwards *handle is non-NULL and later
 * calls do nothing. */
TVM_DLL int TVMBackendRunOnce(void** handle, int (*f)(void*), void* cdata, int nbytes);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* TVM_RUNTIME_C_BACKEND_API_H_ */
