/* Compile-and-run check of tvmrt's drop-in headers from C11: the classic and
 * tvm-ffi headers together in one translation unit, with the layouts and
 * constants that compiled TVM code and C callers depend on pinned down.
 * Links against nothing but libc: only header-defined helpers are called. */
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Versions and macros. */
_Static_assert(DLPACK_MAJOR_VERSION == 1, "DLPack major version");
_Static_assert(DLPACK_MINOR_VERSION == 3, "DLPack minor version");
_Static_assert(DLPACK_VERSION >= 80, "legacy DLPACK_VERSION above the 0.8 numbering");
_Static_assert(DLPACK_ABI_VERSION == 1, "legacy DLPACK_ABI_VERSION");
_Static_assert(TVM_FFI_VERSION_MAJOR == 0 && TVM_FFI_VERSION_MINOR == 1, "tvm-ffi 0.1");
_Static_assert(sizeof(TVM_VERSION) == sizeof("0.19.0"), "TVM_VERSION string");
_Static_assert(DLPACK_FLAG_BITMASK_READ_ONLY == 1, "read-only flag");
_Static_assert(DLPACK_FLAG_BITMASK_IS_COPIED == 2, "is-copied flag");
_Static_assert(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED == 4, "padded flag");

/* DLPack constants. */
_Static_assert(kDLCPU == 1 && kDLCUDA == 2 && kDLCUDAHost == 3 && kDLOpenCL == 4, "device codes");
_Static_assert(kDLVulkan == 7 && kDLMetal == 8 && kDLROCM == 10 && kDLExtDev == 12, "device codes");
_Static_assert(kDLOneAPI == 14 && kDLWebGPU == 15 && kDLHexagon == 16 && kDLTrn == 18, "device codes");
_Static_assert(kDLInt == 0 && kDLUInt == 1 && kDLFloat == 2 && kDLBfloat == 4 && kDLBool == 6,
               "dtype codes");
_Static_assert(kDLFloat4_e2m1fn == 17, "last dtype code");

/* Classic constants: the argument type codes of TVM 0.19. */
_Static_assert(kTVMArgInt == 0 && kTVMArgFloat == 2 && kTVMOpaqueHandle == 3 && kTVMNullptr == 4,
               "arg codes");
_Static_assert(kTVMDataType == 5 && kDLDevice == 6 && kTVMDLTensorHandle == 7, "arg codes");
_Static_assert(kTVMObjectHandle == 8 && kTVMModuleHandle == 9 && kTVMPackedFuncHandle == 10,
               "arg codes");
_Static_assert(kTVMStr == 11 && kTVMBytes == 12 && kTVMNDArrayHandle == 13, "arg codes");
_Static_assert(kTVMObjectRValueRefArg == 14 && kTVMArgBool == 15, "arg codes");
_Static_assert(kTVMExtBegin == 16 && kTVMNNVMLast == 20 && kTVMExtReserveEnd == 64 &&
                   kTVMExtEnd == 128,
               "extension arg codes");
_Static_assert(kDLAOCL == 32 && kDLSDAccel == 33 && kOpenGL == 34 && kDLMicroDev == 35,
               "TVM extension devices");

/* tvm-ffi constants. */
_Static_assert(kTVMFFIAny == -1 && kTVMFFINone == 0 && kTVMFFIInt == 1 && kTVMFFIBool == 2,
               "type index");
_Static_assert(kTVMFFIFloat == 3 && kTVMFFIOpaquePtr == 4 && kTVMFFIDataType == 5 &&
                   kTVMFFIDevice == 6,
               "type index");
_Static_assert(kTVMFFIDLTensorPtr == 7 && kTVMFFIRawStr == 8 && kTVMFFIByteArrayPtr == 9 &&
                   kTVMFFIObjectRValueRef == 10,
               "type index");
_Static_assert(kTVMFFISmallStr == 11 && kTVMFFISmallBytes == 12 && kTVMFFIUnchanged == 13,
               "type index");
_Static_assert(kTVMFFIStaticObjectBegin == 64 && kTVMFFIObject == 64 && kTVMFFIStr == 65 &&
                   kTVMFFIBytes == 66 && kTVMFFIError == 67 && kTVMFFIFunction == 68,
               "object type index");
_Static_assert(kTVMFFIShape == 69 && kTVMFFITensor == 70 && kTVMFFIArray == 71 &&
                   kTVMFFIMap == 72 && kTVMFFIModule == 73 && kTVMFFIOpaquePyObject == 74,
               "object type index");
_Static_assert(kTVMFFIList == 75 && kTVMFFIDict == 76 && kTVMFFIVisitInterrupt == 77 &&
                   kTVMFFIBigInt == 78 && kTVMFFIStaticObjectEnd == 79,
               "object type index");
_Static_assert(kTVMFFIDynObjectBegin == 128, "dynamic type index");
_Static_assert(kTVMFFIObjectDeleterFlagBitMaskStrong == 1 &&
                   kTVMFFIObjectDeleterFlagBitMaskWeak == 2 &&
                   kTVMFFIObjectDeleterFlagBitMaskBoth == 3,
               "deleter flags");
_Static_assert(kTVMFFIBacktraceUpdateModeReplace == 0 && kTVMFFIBacktraceUpdateModeAppend == 1,
               "backtrace update modes");
_Static_assert(kTVMFFIFieldFlagBitMaskWritable == 1 && kTVMFFIFieldFlagBitMaskKwOnly == 1024 &&
                   kTVMFFIFieldFlagBitSetterIsFunctionObj == 2048 &&
                   kTVMFFIFieldFlagBitMaskSEqHashDefSimple == 4096,
               "field flags");
_Static_assert(kTVMFFISEqHashKindUniqueInstance == 5 && kTVMFFIDefRegionKindSimple == 2,
               "structural kinds");

/* Layouts that are the same on every target: the value types and the object
 * header are padded to fixed sizes by design. */
_Static_assert(sizeof(DLDevice) == 8, "DLDevice");
_Static_assert(sizeof(DLDataType) == 4, "DLDataType");
_Static_assert(sizeof(TVMValue) == 8, "TVMValue");
_Static_assert(sizeof(TVMFFIAny) == 16, "TVMFFIAny");
_Static_assert(offsetof(TVMFFIAny, small_str_len) == 4, "TVMFFIAny.small_str_len");
_Static_assert(offsetof(TVMFFIAny, v_int64) == 8, "TVMFFIAny payload");
_Static_assert(offsetof(TVMFFIAny, v_bytes) == 8, "TVMFFIAny.v_bytes");
_Static_assert(sizeof(TVMFFIObject) == 24, "TVMFFIObject");
_Static_assert(offsetof(TVMFFIObject, type_index) == 8, "TVMFFIObject.type_index");
_Static_assert(offsetof(TVMFFIObject, deleter) == 16, "TVMFFIObject.deleter");
_Static_assert(sizeof(TVMFFIVersion) == 12, "TVMFFIVersion");

/* Layouts that depend on pointer size, pinned for 64-bit targets, then for 32-bit ones (the
   ARM EABI: 4-byte pointers, 8-byte aligned int64_t; tests/layouts/armv7.txt). */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(DLTensor) == 48, "DLTensor");
_Static_assert(offsetof(DLTensor, device) == 8, "DLTensor.device");
_Static_assert(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim");
_Static_assert(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype");
_Static_assert(offsetof(DLTensor, shape) == 24, "DLTensor.shape");
_Static_assert(offsetof(DLTensor, strides) == 32, "DLTensor.strides");
_Static_assert(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");
_Static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor");
_Static_assert(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned");
_Static_assert(offsetof(DLManagedTensorVersioned, manager_ctx) == 8, "versioned.manager_ctx");
_Static_assert(offsetof(DLManagedTensorVersioned, deleter) == 16, "versioned.deleter");
_Static_assert(offsetof(DLManagedTensorVersioned, flags) == 24, "versioned.flags");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "versioned.dl_tensor");
_Static_assert(sizeof(TVMByteArray) == 16, "TVMByteArray");
_Static_assert(sizeof(TVMParallelGroupEnv) == 16, "TVMParallelGroupEnv");
_Static_assert(offsetof(TVMParallelGroupEnv, num_task) == 8, "TVMParallelGroupEnv.num_task");
_Static_assert(sizeof(TVMFFIByteArray) == 16, "TVMFFIByteArray");
_Static_assert(sizeof(TVMFFIShapeCell) == 16, "TVMFFIShapeCell");
_Static_assert(sizeof(TVMFFISeqCell) == 32, "TVMFFISeqCell");
_Static_assert(sizeof(TVMFFIFunctionCell) == 16, "TVMFFIFunctionCell");
_Static_assert(sizeof(TVMFFIOpaqueObjectCell) == 8, "TVMFFIOpaqueObjectCell");
_Static_assert(sizeof(TVMFFIErrorCell) == 72, "TVMFFIErrorCell");
_Static_assert(offsetof(TVMFFIErrorCell, message) == 16, "TVMFFIErrorCell.message");
_Static_assert(offsetof(TVMFFIErrorCell, backtrace) == 32, "TVMFFIErrorCell.backtrace");
_Static_assert(offsetof(TVMFFIErrorCell, update_backtrace) == 48, "ErrorCell.update_backtrace");
_Static_assert(offsetof(TVMFFIErrorCell, cause_chain) == 56, "TVMFFIErrorCell.cause_chain");
_Static_assert(offsetof(TVMFFIErrorCell, extra_context) == 64, "TVMFFIErrorCell.extra_context");
_Static_assert(sizeof(TVMFFIFieldInfo) == 120, "TVMFFIFieldInfo");
_Static_assert(offsetof(TVMFFIFieldInfo, default_value_or_factory) == 96, "FieldInfo default");
_Static_assert(sizeof(TVMFFIMethodInfo) == 72, "TVMFFIMethodInfo");
_Static_assert(sizeof(TVMFFITypeMetadata) == 32, "TVMFFITypeMetadata");
_Static_assert(sizeof(TVMFFITypeAttrColumn) == 16, "TVMFFITypeAttrColumn");
_Static_assert(sizeof(TVMFFITypeInfo) == 72, "TVMFFITypeInfo");
_Static_assert(offsetof(TVMFFITypeInfo, type_key_hash) == 32, "TVMFFITypeInfo.type_key_hash");
_Static_assert(sizeof(TVMFFICustomAllocator) == 16, "TVMFFICustomAllocator");
#else
_Static_assert(sizeof(DLTensor) == 40, "DLTensor");
_Static_assert(offsetof(DLTensor, device) == 4, "DLTensor.device");
_Static_assert(offsetof(DLTensor, ndim) == 12, "DLTensor.ndim");
_Static_assert(offsetof(DLTensor, dtype) == 16, "DLTensor.dtype");
_Static_assert(offsetof(DLTensor, shape) == 20, "DLTensor.shape");
_Static_assert(offsetof(DLTensor, strides) == 24, "DLTensor.strides");
_Static_assert(offsetof(DLTensor, byte_offset) == 32, "DLTensor.byte_offset");
_Static_assert(sizeof(DLManagedTensor) == 48, "DLManagedTensor");
_Static_assert(offsetof(DLManagedTensor, deleter) == 44, "DLManagedTensor.deleter");
_Static_assert(sizeof(DLManagedTensorVersioned) == 64, "DLManagedTensorVersioned");
_Static_assert(offsetof(DLManagedTensorVersioned, manager_ctx) == 8, "versioned.manager_ctx");
_Static_assert(offsetof(DLManagedTensorVersioned, deleter) == 12, "versioned.deleter");
_Static_assert(offsetof(DLManagedTensorVersioned, flags) == 16, "versioned.flags");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 24, "versioned.dl_tensor");
_Static_assert(sizeof(TVMByteArray) == 8, "TVMByteArray");
_Static_assert(sizeof(TVMParallelGroupEnv) == 8, "TVMParallelGroupEnv");
_Static_assert(offsetof(TVMParallelGroupEnv, num_task) == 4, "TVMParallelGroupEnv.num_task");
_Static_assert(sizeof(TVMFFIByteArray) == 8, "TVMFFIByteArray");
_Static_assert(sizeof(TVMFFIShapeCell) == 8, "TVMFFIShapeCell");
_Static_assert(sizeof(TVMFFISeqCell) == 32, "TVMFFISeqCell");
_Static_assert(sizeof(TVMFFIFunctionCell) == 8, "TVMFFIFunctionCell");
_Static_assert(sizeof(TVMFFIOpaqueObjectCell) == 4, "TVMFFIOpaqueObjectCell");
_Static_assert(sizeof(TVMFFIErrorCell) == 36, "TVMFFIErrorCell");
_Static_assert(offsetof(TVMFFIErrorCell, message) == 8, "TVMFFIErrorCell.message");
_Static_assert(offsetof(TVMFFIErrorCell, backtrace) == 16, "TVMFFIErrorCell.backtrace");
_Static_assert(offsetof(TVMFFIErrorCell, update_backtrace) == 24, "ErrorCell.update_backtrace");
_Static_assert(offsetof(TVMFFIErrorCell, cause_chain) == 28, "TVMFFIErrorCell.cause_chain");
_Static_assert(offsetof(TVMFFIErrorCell, extra_context) == 32, "TVMFFIErrorCell.extra_context");
_Static_assert(sizeof(TVMFFIFieldInfo) == 88, "TVMFFIFieldInfo");
_Static_assert(offsetof(TVMFFIFieldInfo, default_value_or_factory) == 64, "FieldInfo default");
_Static_assert(sizeof(TVMFFIMethodInfo) == 48, "TVMFFIMethodInfo");
_Static_assert(sizeof(TVMFFITypeMetadata) == 20, "TVMFFITypeMetadata");
_Static_assert(sizeof(TVMFFITypeAttrColumn) == 12, "TVMFFITypeAttrColumn");
_Static_assert(sizeof(TVMFFITypeInfo) == 56, "TVMFFITypeInfo");
_Static_assert(offsetof(TVMFFITypeInfo, type_key_hash) == 24, "TVMFFITypeInfo.type_key_hash");
_Static_assert(sizeof(TVMFFICustomAllocator) == 8, "TVMFFICustomAllocator");
#endif /* pointer size */

/* Function pointer types must accept functions of the documented shapes. */
static int classic_kernel(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                          int* out_ret_tcode, void* resource_handle) {
  (void)args;
  (void)type_codes;
  (void)resource_handle;
  out_ret_value->v_int64 = num_args;
  *out_ret_tcode = kTVMArgInt;
  return 0;
}

static int ffi_kernel(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)args;
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = num_args;
  return 0;
}

static int parallel_body(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  (void)penv;
  (void)cdata;
  return task_id;
}

int main(void) {
  TVMBackendPackedCFunc classic = classic_kernel;
  TVMFFISafeCallType ffi = ffi_kernel;
  FTVMParallelLambda lambda = parallel_body;
  TVMValue ret;
  int ret_code = -1;
  TVMFFIAny result;
  DLDevice dev;

  /* An error object laid out as the runtime lays it out. */
  struct {
    TVMFFIObject header;
    TVMFFIErrorCell cell;
  } error;
  /* A tensor object: header, then the DLTensor. */
  struct {
    TVMFFIObject header;
    DLTensor tensor;
  } tensor;
  /* A string object: header, then the byte array. */
  struct {
    TVMFFIObject header;
    TVMFFIByteArray bytes;
  } str;
  struct {
    TVMFFIObject header;
    TVMFFIFunctionCell cell;
  } func;
  struct {
    TVMFFIObject header;
    TVMFFIShapeCell cell;
  } shape;
  TVMFFIAny small;
  TVMFFIByteArray content;

  if (classic(NULL, NULL, 3, &ret, &ret_code, NULL) != 0 || ret.v_int64 != 3 ||
      ret_code != kTVMArgInt) {
    return 1;
  }
  memset(&result, 0, sizeof(result));
  if (ffi(NULL, NULL, 2, &result) != 0 || result.type_index != kTVMFFIInt ||
      result.v_int64 != 2) {
    return 2;
  }
  if (lambda(5, NULL, NULL) != 5) {
    return 3;
  }

  memset(&error, 0, sizeof(error));
  error.header.type_index = kTVMFFIError;
  error.cell.message.data = "boom";
  error.cell.message.size = 4;
  if (TVMFFIObjectGetTypeIndex(&error) != kTVMFFIError ||
      TVMFFIErrorGetCellPtr(&error)->message.size != 4 ||
      (void*)TVMFFIErrorGetCellPtr(&error) != (void*)&error.cell) {
    return 4;
  }

  memset(&tensor, 0, sizeof(tensor));
  tensor.header.type_index = kTVMFFITensor;
  tensor.tensor.ndim = 2;
  if (TVMFFITensorGetDLTensorPtr(&tensor) != &tensor.tensor ||
      TVMFFITensorGetDLTensorPtr(&tensor)->ndim != 2) {
    return 5;
  }

  memset(&str, 0, sizeof(str));
  if (TVMFFIBytesGetByteArrayPtr(&str) != &str.bytes) {
    return 6;
  }
  memset(&func, 0, sizeof(func));
  func.cell.safe_call = ffi_kernel;
  if (TVMFFIFunctionGetCellPtr(&func)->safe_call != ffi_kernel) {
    return 7;
  }
  memset(&shape, 0, sizeof(shape));
  if (TVMFFIShapeGetCellPtr(&shape) != &shape.cell ||
      (void*)TVMFFIOpaqueObjectGetCellPtr(&shape) != (void*)&shape.cell) {
    return 8;
  }

  memset(&small, 0, sizeof(small));
  small.type_index = kTVMFFISmallStr;
  small.small_str_len = 3;
  memcpy(small.v_bytes, "abc", 4);
  content = TVMFFISmallBytesGetContentByteArray(&small);
  if (content.size != 3 || memcmp(content.data, "abc", 3) != 0 || content.data != small.v_bytes) {
    return 9;
  }

  dev = TVMFFIDLDeviceFromIntPair(kDLCUDA, 1);
  if (dev.device_type != kDLCUDA || dev.device_id != 1) {
    return 10;
  }
  return 0;
}
