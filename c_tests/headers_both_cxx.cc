// C++17 twin of headers_both.c: the tvm-ffi headers first, then the classic
// ones, checked with static_assert. Links against nothing but the C++ runtime.
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/c_api.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

static_assert(DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION == 3, "DLPack 1.3");
static_assert(TVM_FFI_VERSION_MAJOR == 0 && TVM_FFI_VERSION_MINOR == 1, "tvm-ffi 0.1");

// Enumerations that are 32-bit in C++ by declaration.
static_assert(std::is_same<std::underlying_type<DLDeviceType>::type, int32_t>::value,
              "DLDeviceType is int32");
static_assert(std::is_same<std::underlying_type<TVMDeviceExtType>::type, int32_t>::value,
              "TVMDeviceExtType is int32");
static_assert(std::is_same<std::underlying_type<TVMFFITypeIndex>::type, int32_t>::value,
              "TVMFFITypeIndex is int32");
static_assert(sizeof(TVMFFITypeIndex) == 4 && sizeof(TVMFFISEqHashKind) == 4, "enum sizes");

// Pointers and size_t are 4 bytes on 32-bit targets (armv7), 8 elsewhere; int64_t stays
// 8-byte aligned on every target tvmrt supports (tests/layouts records each CPU in full).
constexpr size_t P = sizeof(void*);
constexpr size_t round8(size_t n) { return (n + 7) / 8 * 8; }
static_assert(sizeof(DLTensor) == round8(3 * P + 16) + 8 &&
                  offsetof(DLTensor, byte_offset) == round8(3 * P + 16),
              "DLTensor");
static_assert(sizeof(DLManagedTensorVersioned) == round8(8 + 2 * P) + 8 + sizeof(DLTensor) &&
                  offsetof(DLManagedTensorVersioned, dl_tensor) == round8(8 + 2 * P) + 8,
              "DLManagedTensorVersioned");
static_assert(sizeof(TVMValue) == 8, "TVMValue");
static_assert(sizeof(TVMByteArray) == 2 * P, "TVMByteArray");
static_assert(kTVMArgInt == 0 && kTVMArgFloat == 2 && kTVMNullptr == 4 && kDLDevice == 6 &&
                  kTVMDLTensorHandle == 7 && kTVMPackedFuncHandle == 10 && kTVMStr == 11 &&
                  kTVMNDArrayHandle == 13 && kTVMArgBool == 15,
              "classic arg codes");
static_assert(kDLAOCL == 32 && kDLMicroDev == 35, "TVM extension devices");

static_assert(sizeof(TVMFFIObject) == 24 && offsetof(TVMFFIObject, type_index) == 8 &&
                  offsetof(TVMFFIObject, deleter) == 16,
              "TVMFFIObject");
static_assert(sizeof(TVMFFIAny) == 16 && offsetof(TVMFFIAny, small_str_len) == 4 &&
                  offsetof(TVMFFIAny, v_ptr) == 8,
              "TVMFFIAny");
static_assert(sizeof(TVMFFIErrorCell) == 9 * P && offsetof(TVMFFIErrorCell, message) == 2 * P &&
                  offsetof(TVMFFIErrorCell, backtrace) == 4 * P &&
                  offsetof(TVMFFIErrorCell, update_backtrace) == 6 * P &&
                  offsetof(TVMFFIErrorCell, cause_chain) == 7 * P &&
                  offsetof(TVMFFIErrorCell, extra_context) == 8 * P,
              "TVMFFIErrorCell");
static_assert(sizeof(TVMFFISeqCell) == 32 && sizeof(TVMFFITypeInfo) == (P == 8 ? 72 : 56) &&
                  sizeof(TVMFFIFieldInfo) == (P == 8 ? 120 : 88) &&
                  sizeof(TVMFFIMethodInfo) == (P == 8 ? 72 : 48),
              "reflection layouts");
static_assert(kTVMFFIAny == -1 && kTVMFFINone == 0 && kTVMFFIDLTensorPtr == 7 &&
                  kTVMFFISmallStr == 11 && kTVMFFIUnchanged == 13,
              "POD type indexes");
static_assert(kTVMFFIObject == 64 && kTVMFFIStr == 65 && kTVMFFIError == 67 &&
                  kTVMFFIFunction == 68 && kTVMFFIShape == 69 && kTVMFFITensor == 70 &&
                  kTVMFFIModule == 73 && kTVMFFIBigInt == 78 && kTVMFFIStaticObjectEnd == 79 &&
                  kTVMFFIDynObjectBegin == 128,
              "object type indexes");
static_assert(kTVMFFIObjectDeleterFlagBitMaskBoth == 3, "deleter flags");

namespace {
int FfiKernel(void*, const TVMFFIAny*, int32_t num_args, TVMFFIAny* result) {
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = num_args;
  return 0;
}

struct TensorObj {
  TVMFFIObject header;
  DLTensor tensor;
};
}  // namespace

int main() {
  TVMFFISafeCallType call = FfiKernel;
  TVMFFIAny result{};
  if (call(nullptr, nullptr, 4, &result) != 0 || result.v_int64 != 4) return 1;

  TensorObj obj{};
  obj.header.type_index = kTVMFFITensor;
  obj.tensor.ndim = 3;
  if (TVMFFIObjectGetTypeIndex(&obj) != kTVMFFITensor) return 2;
  if (TVMFFITensorGetDLTensorPtr(&obj) != &obj.tensor) return 3;

  TVMFFIAny small{};
  small.type_index = kTVMFFISmallBytes;
  small.small_str_len = 2;
  std::memcpy(small.v_bytes, "hi", 2);
  TVMFFIByteArray content = TVMFFISmallBytesGetContentByteArray(&small);
  if (content.size != 2 || std::memcmp(content.data, "hi", 2) != 0) return 4;

  DLDevice dev = TVMFFIDLDeviceFromIntPair(kDLCPU, 0);
  if (dev.device_type != kDLCPU || dev.device_id != 0) return 5;
  return 0;
}
