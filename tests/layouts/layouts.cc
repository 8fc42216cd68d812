// Prints the layouts tvmrt shares with C and C++ code as the target's compiler lays them out:
// tvm-ffi's C ABI structures and DLPack's (tvm-ffi's own headers, from its wheel), the classic
// TVMValue (tvmrt's drop-in header), and the C++ object classes whose fields tvm-ffi's clients
// read by reflection. One line per fact: `NAME BYTES`.
//
// tests/layouts/record.sh compiles it for each CPU (cross g++, run under qemu-user) into
// tests/layouts/<cpu>.txt; the Rust unit test `layout_tests` checks tvmrt's own layouts against
// the file of the CPU it runs on, and .ci/cross.sh recomputes the files and compares.
#include <cstddef>
#include <cstdio>

#include <tvm/ffi/big_int.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/enum.h>
#include <tvm/ffi/extra/structural_key.h>
#include <tvm/ffi/extra/structural_visit.h>
#include <tvm/ffi/extra/visit_error_context.h>
#include <tvm/ffi/reflection/access_path.h>
#include <tvm/runtime/c_runtime_api.h>

// The object classes' inline type-index lookups reference this tvm-ffi export; the program
// never calls it (it only reads sizes), so a stand-in links it without the library.
extern "C" int32_t TVMFFITypeGetOrAllocIndex(const TVMFFIByteArray*, int32_t, int32_t, int32_t,
                                             int32_t, int32_t) {
  return -1;
}

#define SIZE(T) std::printf("sizeof %s %zu\n", #T, sizeof(T))
#define FIELD(T, f) std::printf("%s.%s %zu\n", #T, #f, offsetof(T, f))
// A C++ object class: its reflected type key, size and field offsets.
#define CLASS_SIZE(key, T) std::printf("sizeof %s %zu\n", key, sizeof(T))
#define CLASS_FIELD(key, T, f) std::printf("%s.%s %zu\n", key, #f, offsetof(T, f))

int main() {
  using namespace tvm::ffi;
  SIZE(void*);
  SIZE(TVMFFIAny);
  FIELD(TVMFFIAny, v_int64);
  SIZE(TVMFFIObject);
  FIELD(TVMFFIObject, type_index);
  FIELD(TVMFFIObject, deleter);
  SIZE(TVMFFIByteArray);
  FIELD(TVMFFIByteArray, size);
  SIZE(TVMFFIShapeCell);
  FIELD(TVMFFIShapeCell, size);
  SIZE(TVMFFISeqCell);
  FIELD(TVMFFISeqCell, size);
  FIELD(TVMFFISeqCell, capacity);
  FIELD(TVMFFISeqCell, data_deleter);
  SIZE(TVMFFIErrorCell);
  FIELD(TVMFFIErrorCell, message);
  FIELD(TVMFFIErrorCell, backtrace);
  FIELD(TVMFFIErrorCell, update_backtrace);
  FIELD(TVMFFIErrorCell, cause_chain);
  FIELD(TVMFFIErrorCell, extra_context);
  SIZE(TVMFFIFunctionCell);
  FIELD(TVMFFIFunctionCell, cpp_call);
  SIZE(TVMFFIFieldInfo);
  FIELD(TVMFFIFieldInfo, flags);
  FIELD(TVMFFIFieldInfo, size);
  FIELD(TVMFFIFieldInfo, alignment);
  FIELD(TVMFFIFieldInfo, offset);
  FIELD(TVMFFIFieldInfo, getter);
  FIELD(TVMFFIFieldInfo, setter);
  FIELD(TVMFFIFieldInfo, default_value_or_factory);
  FIELD(TVMFFIFieldInfo, field_static_type_index);
  SIZE(TVMFFIMethodInfo);
  FIELD(TVMFFIMethodInfo, flags);
  FIELD(TVMFFIMethodInfo, method);
  SIZE(TVMFFITypeMetadata);
  FIELD(TVMFFITypeMetadata, creator);
  FIELD(TVMFFITypeMetadata, total_size);
  FIELD(TVMFFITypeMetadata, structural_eq_hash_kind);
  SIZE(TVMFFITypeInfo);
  FIELD(TVMFFITypeInfo, type_key);
  FIELD(TVMFFITypeInfo, type_ancestors);
  FIELD(TVMFFITypeInfo, type_key_hash);
  FIELD(TVMFFITypeInfo, num_fields);
  FIELD(TVMFFITypeInfo, fields);
  FIELD(TVMFFITypeInfo, methods);
  FIELD(TVMFFITypeInfo, metadata);
  SIZE(TVMFFITypeAttrColumn);
  FIELD(TVMFFITypeAttrColumn, size);
  SIZE(DLTensor);
  FIELD(DLTensor, device);
  FIELD(DLTensor, ndim);
  FIELD(DLTensor, dtype);
  FIELD(DLTensor, shape);
  FIELD(DLTensor, strides);
  FIELD(DLTensor, byte_offset);
  SIZE(DLManagedTensor);
  FIELD(DLManagedTensor, manager_ctx);
  FIELD(DLManagedTensor, deleter);
  SIZE(DLManagedTensorVersioned);
  FIELD(DLManagedTensorVersioned, manager_ctx);
  FIELD(DLManagedTensorVersioned, deleter);
  FIELD(DLManagedTensorVersioned, flags);
  FIELD(DLManagedTensorVersioned, dl_tensor);
  SIZE(TVMValue);

  CLASS_SIZE("ffi.EnumState", EnumStateObj);
  CLASS_FIELD("ffi.EnumState", EnumStateObj, entries);
  CLASS_FIELD("ffi.EnumState", EnumStateObj, indexes);
  CLASS_FIELD("ffi.EnumState", EnumStateObj, attrs);
  CLASS_SIZE("ffi.Enum", EnumObj);
  CLASS_FIELD("ffi.Enum", EnumObj, _int_index);
  CLASS_FIELD("ffi.Enum", EnumObj, _str_index);
  CLASS_SIZE("ffi.StructuralKey", StructuralKeyObj);
  CLASS_FIELD("ffi.StructuralKey", StructuralKeyObj, key);
  CLASS_FIELD("ffi.StructuralKey", StructuralKeyObj, hash_i64);
  CLASS_SIZE("ffi.VisitInterrupt", VisitInterruptObj);
  CLASS_FIELD("ffi.VisitInterrupt", VisitInterruptObj, value);
  CLASS_SIZE("ffi.VisitErrorContext", VisitErrorContextObj);
  CLASS_FIELD("ffi.VisitErrorContext", VisitErrorContextObj, reverse_visit_pattern);
  CLASS_FIELD("ffi.VisitErrorContext", VisitErrorContextObj, prev_error_context);
  // Made by tvmrt without a creator (no registered size): their fields only.
  CLASS_SIZE("ffi.reflection.AccessStep", reflection::AccessStepObj);
  CLASS_FIELD("ffi.reflection.AccessStep", reflection::AccessStepObj, kind);
  CLASS_FIELD("ffi.reflection.AccessStep", reflection::AccessStepObj, key);
  CLASS_SIZE("ffi.reflection.AccessPath", reflection::AccessPathObj);
  CLASS_FIELD("ffi.reflection.AccessPath", reflection::AccessPathObj, parent);
  CLASS_FIELD("ffi.reflection.AccessPath", reflection::AccessPathObj, step);
  CLASS_FIELD("ffi.reflection.AccessPath", reflection::AccessPathObj, depth);
  // A big integer's word count is its first field; its words start right after the object
  // (big_int.h reads them at `obj + 1`).
  CLASS_SIZE("ffi.BigInt", details::BigIntObj);
  return 0;
}
