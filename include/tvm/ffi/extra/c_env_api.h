/* tvmrt: drop-in replacement for TVM's tvm/ffi/extra/c_env_api.h (tvm-ffi ABI, 0.1.x). SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-thread environment of the tvm-ffi runtime (current stream, tensor
 * allocator) and the symbol hooks compiled libraries rely on. Declarations
 * match the tvm-ffi 0.1 header.
 */
#ifndef TVM_FFI_EXTRA_C_ENV_API_H_
#define TVM_FFI_EXTRA_C_ENV_API_H_

#include <tvm/ffi/c_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A device stream (cudaStream_t, ...); the runtime only records it. */
typedef void* TVMFFIStreamHandle;

/* Make stream this thread's current stream for the device; the previous one
 * is stored in *opt_out_original_stream unless that pointer is NULL. */
TVM_FFI_DLL int TVMFFIEnvSetStream(int32_t device_type, int32_t device_id,
                                   TVMFFIStreamHandle stream,
                                   TVMFFIStreamHandle* opt_out_original_stream);

/* This thread's current stream for the device (NULL if none was set). */
TVM_FFI_DLL TVMFFIStreamHandle TVMFFIEnvGetStream(int32_t device_type, int32_t device_id);

/* Set this thread's DLPack tensor allocator, and the process-wide one too if
 * write_to_global_context is nonzero; the previous thread allocator goes to
 * *opt_out_original_allocator unless that pointer is NULL. */
TVM_FFI_DLL int TVMFFIEnvSetDLPackManagedTensorAllocator(
    DLPackManagedTensorAllocator allocator, int write_to_global_context,
    DLPackManagedTensorAllocator* opt_out_original_allocator);

/* The tensor allocator in effect (process-wide first, then this thread's). */
TVM_FFI_DLL DLPackManagedTensorAllocator TVMFFIEnvGetDLPackManagedTensorAllocator(void);

/* Allocate a tensor object shaped like prototype (dtype, ndim, shape and
 * device are read) with the allocator in effect. */
TVM_FFI_DLL int TVMFFIEnvTensorAlloc(DLTensor* prototype, TVMFFIObjectHandle* out);

/* Poll the host environment for pending signals (Ctrl-C under Python);
 * nonzero with an error raised if one is pending. */
TVM_FFI_DLL int TVMFFIEnvCheckSignals(void);

/* Provide a host-environment C function under name (e.g. a signal check). */
TVM_FFI_DLL int TVMFFIEnvRegisterCAPI(const char* name, void* symbol);

/* For generated code: find func_name among the imports of the library module
 * library_ctx. *out is borrowed (cached by the module). */
TVM_FFI_DLL int TVMFFIEnvModLookupFromImports(TVMFFIObjectHandle library_ctx, const char* func_name,
                                              TVMFFIObjectHandle* out);

/* Record a value to store into the context symbol `name` of every library
 * loaded afterwards that defines it. */
TVM_FFI_DLL int TVMFFIEnvModRegisterContextSymbol(const char* name, void* symbol);

/* Register a symbol of a statically linked system library (done by its
 * start-up code). */
TVM_FFI_DLL int TVMFFIEnvModRegisterSystemLibSymbol(const char* name, void* symbol);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* TVM_FFI_EXTRA_C_ENV_API_H_ */
