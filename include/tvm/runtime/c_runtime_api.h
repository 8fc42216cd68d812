/* tvmrt: drop-in replacement for TVM's tvm/runtime/c_runtime_api.h (classic ABI, TVM 0.19). SPDX-License-Identifier: Apache-2.0 */
/*
 * The classic TVM runtime C API as TVM 0.7 - 0.20 shipped it: values travel as
 * an 8-byte TVMValue plus a separate int type code. Declarations match
 * apache/tvm v0.19.0, so a program written against TVM compiles unchanged and
 * links against libtvmrt.
 *
 * Every int-returning function returns 0 on success and nonzero on failure;
 * the message of the failure is then available from TVMGetLastError() on the
 * same thread.
 *
 * May be included together with <tvm/ffi/c_api.h> in either order.
 */
#ifndef TVM_RUNTIME_C_RUNTIME_API_H_
#define TVM_RUNTIME_C_RUNTIME_API_H_

/* Weak definition, for symbols generated code may also define. */
#ifndef TVM_WEAK
#ifdef _MSC_VER
#define TVM_WEAK __declspec(selectany)
#else
#define TVM_WEAK __attribute__((weak))
#endif
#endif

#if !defined(TVM_DLL) && defined(__EMSCRIPTEN__)
#include <emscripten/emscripten.h>
#define TVM_DLL EMSCRIPTEN_KEEPALIVE
#endif

/* Marks a definition as possibly unused, silencing the compiler warning. */
#ifndef TVM_ATTRIBUTE_UNUSED
#if defined(__GNUC__)
#define TVM_ATTRIBUTE_UNUSED __attribute__((unused))
#else
#define TVM_ATTRIBUTE_UNUSED
#endif
#endif

/* Visibility of the runtime's exported functions. */
#ifndef TVM_DLL
#ifdef _WIN32
#ifdef TVM_EXPORTS
#define TVM_DLL __declspec(dllexport)
#else
#define TVM_DLL __declspec(dllimport)
#endif
#else
#define TVM_DLL __attribute__((visibility("default")))
#endif
#endif

/* The TVM release whose classic API this header reproduces. */
#ifndef TVM_VERSION
#define TVM_VERSION "0.19.0"
#endif

#include <dlpack/dlpack.h>

#ifndef __cplusplus
#include <stdbool.h>
#endif
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Integer type of shapes and indexes. */
typedef int64_t tvm_index_t;

/* TVM's device kinds beyond DLPack's DLDeviceType, numbered from 32 so they
 * never collide with it. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLAOCL = 32,
  kDLSDAccel,
  kOpenGL,
  kDLMicroDev,
  /* One past the last extension device kind. */
  TVMDeviceExtType_End,
} TVMDeviceExtType;

/* Type code that travels next to each TVMValue in a packed call. The first
 * three agree with DLDataTypeCode; code 1 (unsigned) is left unused. */
typedef enum {
  kTVMArgInt = kDLInt,
  kTVMArgFloat = kDLFloat,
  kTVMOpaqueHandle = 3U,
  kTVMNullptr = 4U,
  kTVMDataType = 5U,
  kDLDevice = 6U,
  kTVMDLTensorHandle = 7U,
  kTVMObjectHandle = 8U,
  kTVMModuleHandle = 9U,
  kTVMPackedFuncHandle = 10U,
  kTVMStr = 11U,
  kTVMBytes = 12U,
  kTVMNDArrayHandle = 13U,
  kTVMObjectRValueRefArg = 14U,
  kTVMArgBool = 15U,
  /* Codes reserved for other frameworks' extension types. */
  kTVMExtBegin = 16U,
  kTVMNNVMFirst = 16U,
  kTVMNNVMLast = 20U,
  kTVMExtReserveEnd = 64U,
  kTVMExtEnd = 128U,
} TVMArgTypeCode;

/* A tensor as the classic API hands it around. */
typedef DLTensor* TVMArrayHandle;

/* One argument or return value; which member is live is given by the type
 * code that accompanies it. Always 8 bytes. */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

/* Bytes with an explicit length, passed by pointer under kTVMBytes. */
typedef struct {
  const char* data;
  size_t size;
} TVMByteArray;

/* Opaque handles. */
typedef void* TVMModuleHandle;
typedef void* TVMFunctionHandle;
/* Where a TVMPackedCFunc stores its result, through TVMCFuncSetReturn. */
typedef void* TVMRetValueHandle;
/* A device stream; NULL means the device's default stream. */
typedef void* TVMStreamHandle;
typedef void* TVMObjectHandle;

/* ---- Errors ---- */

/* Record msg as this thread's last error (for callbacks about to fail). */
TVM_DLL void TVMAPISetLastError(const char* msg);

/* Record a Python exception object as this thread's last error. */
TVM_DLL void TVMAPISetLastPythonError(void* py_object);

/* The Python exception recorded by TVMAPISetLastPythonError, or NULL. */
TVM_DLL void* TVMGetLastPythonError(void);

/* This thread's last error message. The string stays valid until the next
 * API call on this thread. */
TVM_DLL const char* TVMGetLastError(void);

/* The backtrace of this thread's last error, or NULL if it has none. */
TVM_DLL const char* TVMGetLastBacktrace(void);

/* Forget the Python exception recorded by TVMAPISetLastPythonError. */
TVM_DLL void TVMDropLastPythonError(void);

/* Raise the last recorded error again (a C++ exception in TVM). */
TVM_DLL void TVMThrowLastError(void);

/* ---- Modules ---- */

/* Load a module from a file; format selects the loader ("so", ...) and may be
 * empty to use the extension. Release *out with TVMModFree. */
TVM_DLL int TVMModLoadFromFile(const char* file_name, const char* format, TVMModuleHandle* out);

/* Make dep an import of mod, so mod's functions can find dep's. */
TVM_DLL int TVMModImport(TVMModuleHandle mod, TVMModuleHandle dep);

/* Look up func_name in mod, and in its imports when query_imports is nonzero.
 * *out is NULL when not found; otherwise release it with TVMFuncFree. */
TVM_DLL int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                              TVMFunctionHandle* out);

/* Drop a module handle. Functions taken from it stay valid. */
TVM_DLL int TVMModFree(TVMModuleHandle mod);

/* ---- Packed functions ---- */

/* Drop a function handle obtained from TVMModGetFunction,
 * TVMFuncCreateFromCFunc or a call result. */
TVM_DLL int TVMFuncFree(TVMFunctionHandle func);

/* Call func with num_args values and their type codes. The result is written
 * to *ret_val / *ret_type_code; a returned handle (function, module, object,
 * string as kTVMStr...) belongs to the caller. */
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                        TVMValue* ret_val, int* ret_type_code);

/* From inside a TVMPackedCFunc: set its return value (num_ret must be 1). */
TVM_DLL int TVMCFuncSetReturn(TVMRetValueHandle ret, TVMValue* value, int* type_code, int num_ret);

/* Turn a callback argument into a value that may be returned, in place,
 * taking a reference where the code names an object. */
TVM_DLL int TVMCbArgToReturn(TVMValue* value, int* code);

/* A function implemented by the caller. Returns 0, or nonzero after
 * TVMAPISetLastError. */
typedef int (*TVMPackedCFunc)(TVMValue* args, int* type_codes, int num_args, TVMRetValueHandle ret,
                              void* resource_handle);

/* Releases the resource_handle of a TVMPackedCFunc when its function dies. */
typedef void (*TVMPackedCFuncFinalizer)(void* resource_handle);

/* Extension hook that registers functions through register_func_handle. */
typedef int (*TVMExtensionFuncDeclarer)(TVMFunctionHandle register_func_handle);

/* Wrap a C callback as a function handle. fin (may be NULL) is called with
 * resource_handle when the last reference goes away. */
TVM_DLL int TVMFuncCreateFromCFunc(TVMPackedCFunc func, void* resource_handle,
                                   TVMPackedCFuncFinalizer fin, TVMFunctionHandle* out);

/* Register f under name in the global table; an existing entry is an error
 * unless override is nonzero. */
TVM_DLL int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle f, int override);

/* Find a global function; *out is NULL when there is none. As in TVM 0.19
 * (registry.cc), a found handle is a new reference: release it with
 * TVMFuncFree. */
TVM_DLL int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out);

/* Names of all global functions. The array belongs to the runtime and stays
 * valid until the next call on this thread. */
TVM_DLL int TVMFuncListGlobalNames(int* out_size, const char*** out_array);

/* Remove a global function. */
TVM_DLL int TVMFuncRemoveGlobal(const char* name);

/* ---- Arrays ---- */

/* Allocate a compact tensor with its own copy of shape. Free with
 * TVMArrayFree. */
TVM_DLL int TVMArrayAlloc(const tvm_index_t* shape, int ndim, int dtype_code, int dtype_bits,
                          int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out);

/* Release a tensor from TVMArrayAlloc or TVMArrayFromDLPack. */
TVM_DLL int TVMArrayFree(TVMArrayHandle handle);

/* Fill the tensor from host memory; nbytes must equal its size in bytes. */
TVM_DLL int TVMArrayCopyFromBytes(TVMArrayHandle handle, void* data, size_t nbytes);

/* Copy the tensor into host memory; nbytes must equal its size in bytes. */
TVM_DLL int TVMArrayCopyToBytes(TVMArrayHandle handle, void* data, size_t nbytes);

/* Copy one tensor into another of the same size, on stream (may be NULL). */
TVM_DLL int TVMArrayCopyFromTo(TVMArrayHandle from, TVMArrayHandle to, TVMStreamHandle stream);

/* Adopt a DLPack tensor without copying; its deleter runs when the array is
 * freed. */
TVM_DLL int TVMArrayFromDLPack(DLManagedTensor* from, TVMArrayHandle* out);

/* Share an array's memory as a DLPack tensor that keeps the array alive. */
TVM_DLL int TVMArrayToDLPack(TVMArrayHandle from, DLManagedTensor** out);

/* Call dltensor->deleter(dltensor), if there is one. */
TVM_DLL void TVMDLManagedTensorCallDeleter(DLManagedTensor* dltensor);

/* ---- Streams ---- */

/* Create a stream on a device. */
TVM_DLL int TVMStreamCreate(int device_type, int device_id, TVMStreamHandle* out);

/* Destroy a stream made by TVMStreamCreate. */
TVM_DLL int TVMStreamFree(int device_type, int device_id, TVMStreamHandle stream);

/* Use handle for later work on this device from this thread. */
TVM_DLL int TVMSetStream(int device_type, int device_id, TVMStreamHandle handle);

/* Block until the work queued on stream has finished. */
TVM_DLL int TVMSynchronize(int device_type, int device_id, TVMStreamHandle stream);

/* Make dst wait for the work queued so far on src. */
TVM_DLL int TVMStreamStreamSynchronize(int device_type, int device_id, TVMStreamHandle src,
                                       TVMStreamHandle dst);

/* ---- Objects ---- */

/* The runtime type index of an object. */
TVM_DLL int TVMObjectGetTypeIndex(TVMObjectHandle obj, unsigned* out_tindex);

/* The type index registered under type_key. */
TVM_DLL int TVMObjectTypeKey2Index(const char* type_key, unsigned* out_tindex);

/* The type key of a type index, malloc-ed: the caller releases it with free(). */
TVM_DLL int TVMObjectTypeIndex2Key(unsigned tindex, char** out_type_key);

/* Take one more reference to an object. */
TVM_DLL int TVMObjectRetain(TVMObjectHandle obj);

/* Drop one reference to an object, destroying it with the last one. */
TVM_DLL int TVMObjectFree(TVMObjectHandle obj);

/* Free a TVMByteArray that a call returned as kTVMBytes. */
TVM_DLL int TVMByteArrayFree(TVMByteArray* arr);

/* *is_derived = whether child_type_index equals or derives from
 * parent_type_index. */
TVM_DLL int TVMObjectDerivedFrom(uint32_t child_type_index, uint32_t parent_type_index,
                                 int* is_derived);

/* ---- Device memory ---- */

/* Allocate nbytes on dev, aligned to alignment. type_hint is advisory. */
TVM_DLL int TVMDeviceAllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                    DLDataType type_hint, void** out_data);

/* Allocate room for a tensor of the given shape and dtype in memory scope
 * mem_scope (NULL for the device's global memory). */
TVM_DLL int TVMDeviceAllocDataSpaceWithScope(DLDevice dev, int ndim, const int64_t* shape,
                                             DLDataType dtype, const char* mem_scope,
                                             void** out_data);

/* Free memory from TVMDeviceAllocDataSpace(WithScope). */
TVM_DLL int TVMDeviceFreeDataSpace(DLDevice dev, void* ptr);

/* Copy between two tensors of the same size, possibly on different devices,
 * on stream (may be NULL). */
TVM_DLL int TVMDeviceCopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* TVM_RUNTIME_C_RUNTIME_API_H_ */
