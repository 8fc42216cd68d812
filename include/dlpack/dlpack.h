/* tvmrt: drop-in replacement for DLPack's dlpack/dlpack.h (DLPack 1.3 as bundled by tvm-ffi). SPDX-License-Identifier: Apache-2.0 */
/*
 * Declarations match DLPack 1.3 exactly (names, values, layouts), so code built
 * against the upstream header builds against this one and the two are
 * interchangeable within one program. The include guard is the upstream one on
 * purpose: whichever dlpack.h is seen first wins and the other is skipped.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

/* Version of the DLPack ABI described here. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3

/*
 * DLPack before 1.0 (the 0.7 copy TVM <= 0.20 bundled) had a single version
 * number, major * 100 + minor * 10, and an ABI number. They are kept so that
 * code testing them, e.g. `#if DLPACK_VERSION >= 70`, still compiles.
 */
#ifndef DLPACK_VERSION
#define DLPACK_VERSION 130
#endif
#ifndef DLPACK_ABI_VERSION
#define DLPACK_ABI_VERSION 1
#endif

#ifdef _WIN32
#ifdef DLPACK_EXPORTS
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL __declspec(dllimport)
#endif
#else
#define DLPACK_DLL
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version carried by a DLManagedTensorVersioned. A consumer that sees a
 * different major version may only call the deleter. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

/* Kind of memory a tensor lives in. 32-bit in C++ so TVM's extension device
 * codes (32 and up) fit the same storage. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  /* Host memory pinned through cudaMallocHost. */
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  /* Host memory pinned through hipMallocHost. */
  kDLROCMHost = 11,
  /* Free slot for experimenting with a new device. */
  kDLExtDev = 12,
  /* Unified memory from cudaMallocManaged. */
  kDLCUDAManaged = 13,
  /* oneAPI unified shared memory. */
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18,
} DLDeviceType;

/* A device: its kind plus an index among devices of that kind (0 for CPU). */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/* Values allowed in DLDataType::code. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  /* Opaque handle; producer and consumer must agree on its meaning. */
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  /* Complex: real and imaginary parts stored next to each other. */
  kDLComplex = 5U,
  kDLBool = 6U,
  /* 8-bit floating point formats. */
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  /* 6-bit floating point formats (bits must be 6). */
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  /* 4-bit floating point format (bits must be 4). */
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;

/* Element type: e.g. float32 is {kDLFloat, 32, 1}, a 4-wide int8 vector is
 * {kDLInt, 8, 4}. bool is stored as 8 bits. Sub-byte types are packed
 * little-bit-endian unless the producer flags them as padded. */
typedef struct {
  /* A DLDataTypeCode value, stored in one byte. */
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/* A strided view of memory. It owns nothing. The first element is at
 * (char*)data + byte_offset; shape and strides have ndim entries each and
 * strides count elements, not bytes. data may be NULL for an empty tensor. */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  /* Required when ndim != 0 since DLPack 1.2; older producers pass NULL for
   * a compact row-major tensor. */
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/* Pre-1.0 exchange record: a tensor plus what its producer needs to release
 * it. The consumer calls deleter(self) once when done; deleter may be NULL. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

/* Bits of DLManagedTensorVersioned::flags. */
/* The consumer must not write through the tensor. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/* The producer made a copy; the consumer owns it exclusively. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/* A sub-byte element type is padded to whole bytes rather than packed. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/* Exchange record of DLPack 1.x. version, manager_ctx and deleter stay at
 * these offsets in every future version, so a mismatched consumer can still
 * release the tensor. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  /* DLPACK_FLAG_BITMASK_* bits; 0 by default. */
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

/*
 * The C exchange table that array libraries publish through the Python
 * attribute __dlpack_c_exchange_api__. Every callback returns 0 on success and
 * nonzero on failure and must not throw.
 */

/* Allocate a new tensor shaped like prototype (dtype, ndim, shape and device
 * are read). On failure calls SetError(error_ctx, kind, message) and returns
 * nonzero. */
typedef int (*DLPackManagedTensorAllocator)(DLTensor* prototype, DLManagedTensorVersioned** out,
                                            void* error_ctx,
                                            void (*SetError)(void* error_ctx, const char* kind,
                                                             const char* message));

/* Export a Python tensor object as an owning DLManagedTensorVersioned, with no
 * stream synchronization. */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void* py_object,
                                                     DLManagedTensorVersioned** out);

/* Fill a caller-provided DLTensor that borrows from a Python tensor object;
 * valid only until control returns to the producer. No synchronization. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void* py_object, DLTensor* out);

/* The producer's current work stream for a device (may be NULL for CPU). */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void** out_current_stream);

/* Wrap an owning DLManagedTensorVersioned (ownership moves) into a Python
 * tensor object of the producer. No synchronization. */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned* tensor,
                                                   void** out_py_object);

/* Part of the exchange table that never changes layout: its version and a
 * link to an older table, or NULL. */
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader* prev_api;
} DLPackExchangeAPIHeader;

/* The exchange table itself. Only dltensor_from_py_object_no_sync may be
 * NULL. It must live as long as the process. */
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  DLPackManagedTensorAllocator managed_tensor_allocator;
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync;
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* DLPACK_DLPACK_H_ */
