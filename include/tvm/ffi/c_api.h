/* tvmrt: drop-in replacement for TVM's tvm/ffi/c_api.h (tvm-ffi ABI, 0.1.x). SPDX-License-Identifier: Apache-2.0 */
/*
 * The tvm-ffi C ABI used by TVM 0.21 and later: every value is a 16-byte
 * TVMFFIAny tagged with a type index, heap values are reference-counted
 * objects that start with a TVMFFIObject header. Names, values and layouts
 * match the tvm-ffi 0.1 header, so code written against it compiles unchanged
 * and links against libtvmrt.
 *
 * Errors: an int-returning function returns 0 on success and nonzero on
 * failure, and the failure is then held per thread until taken with
 * TVMFFIErrorMoveFromRaised.
 *
 * May be included together with <tvm/runtime/c_runtime_api.h> in either
 * order.
 */
#ifndef TVM_FFI_C_API_H_
#define TVM_FFI_C_API_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

/* Weak definition, for symbols generated code may also define. */
#ifndef TVM_FFI_WEAK
#ifdef _MSC_VER
#define TVM_FFI_WEAK __declspec(selectany)
#else
#define TVM_FFI_WEAK __attribute__((weak))
#endif
#endif

/* TVM_FFI_DLL marks the runtime's exported functions (imported by users);
 * TVM_FFI_DLL_EXPORT always exports, for symbols a user library provides. */
#if !defined(TVM_FFI_DLL) && defined(__EMSCRIPTEN__)
#include <emscripten/emscripten.h>
#define TVM_FFI_DLL EMSCRIPTEN_KEEPALIVE
#ifndef TVM_FFI_DLL_EXPORT
#define TVM_FFI_DLL_EXPORT EMSCRIPTEN_KEEPALIVE
#endif
#endif
#if !defined(TVM_FFI_DLL) && defined(_MSC_VER)
#ifdef TVM_FFI_EXPORTS
#define TVM_FFI_DLL __declspec(dllexport)
#else
#define TVM_FFI_DLL __declspec(dllimport)
#endif
#ifndef TVM_FFI_DLL_EXPORT
#define TVM_FFI_DLL_EXPORT __declspec(dllexport)
#endif
#endif
#ifndef TVM_FFI_DLL
#define TVM_FFI_DLL __attribute__((visibility("default")))
#endif
#ifndef TVM_FFI_DLL_EXPORT
#if defined(_MSC_VER)
#define TVM_FFI_DLL_EXPORT __declspec(dllexport)
#else
#define TVM_FFI_DLL_EXPORT __attribute__((visibility("default")))
#endif
#endif

/* The function only reads its arguments and memory; it has no side effects. */
#ifndef TVM_FFI_ATTRIBUTE_PURE
#if defined(__GNUC__) || defined(__clang__)
#define TVM_FFI_ATTRIBUTE_PURE __attribute__((__pure__))
#else
#define TVM_FFI_ATTRIBUTE_PURE
#endif
#endif

/* The tvm-ffi ABI version this header describes. */
#define TVM_FFI_VERSION_MAJOR 0
#define TVM_FFI_VERSION_MINOR 1
#define TVM_FFI_VERSION_PATCH 16

#ifdef __cplusplus
extern "C" {
#endif

/* Version triple, as reported by TVMFFIGetVersion. */
typedef struct {
  uint32_t major;
  uint32_t minor;
  uint32_t patch;
} TVMFFIVersion;

/* ---- Type indexes ---- */

/*
 * Type index of a TVMFFIAny or of an object. Below kTVMFFIStaticObjectBegin
 * the value sits inline in the TVMFFIAny; from there on it is an object
 * pointer. Indexes from kTVMFFIDynObjectBegin are assigned at run time.
 */
#ifdef __cplusplus
enum TVMFFITypeIndex : int32_t {
#else
typedef enum {
#endif
  /* "Any type"; appears in reflection metadata, never in a value. */
  kTVMFFIAny = -1,
  kTVMFFINone = 0,
  kTVMFFIInt = 1,
  kTVMFFIBool = 2,
  kTVMFFIFloat = 3,
  kTVMFFIOpaquePtr = 4,
  kTVMFFIDataType = 5,
  kTVMFFIDevice = 6,
  kTVMFFIDLTensorPtr = 7,
  /* Borrowed NUL-terminated string; only in borrowed values (arguments). */
  kTVMFFIRawStr = 8,
  /* Borrowed TVMFFIByteArray*. */
  kTVMFFIByteArrayPtr = 9,
  /* An object passed so that the callee may move out of it. */
  kTVMFFIObjectRValueRef = 10,
  /* String of at most 7 bytes stored in v_bytes, length in small_str_len. */
  kTVMFFISmallStr = 11,
  /* Bytes of at most 7 bytes stored like kTVMFFISmallStr. */
  kTVMFFISmallBytes = 12,
  /* Returned by structural mutation when nothing changed. */
  kTVMFFIUnchanged = 13,
  kTVMFFIStaticObjectBegin = 64,
  /* Base of all objects. */
  kTVMFFIObject = 64,
  /* Header then TVMFFIByteArray. */
  kTVMFFIStr = 65,
  /* Header then TVMFFIByteArray. */
  kTVMFFIBytes = 66,
  /* Header then TVMFFIErrorCell. */
  kTVMFFIError = 67,
  /* Header then TVMFFIFunctionCell. */
  kTVMFFIFunction = 68,
  /* Header then TVMFFIShapeCell. */
  kTVMFFIShape = 69,
  /* Header then DLTensor. */
  kTVMFFITensor = 70,
  kTVMFFIArray = 71,
  kTVMFFIMap = 72,
  kTVMFFIModule = 73,
  /* Foreign (Python) object kept opaque; header then TVMFFIOpaqueObjectCell. */
  kTVMFFIOpaquePyObject = 74,
  kTVMFFIList = 75,
  kTVMFFIDict = 76,
  kTVMFFIVisitInterrupt = 77,
  /* Integer too large for int64: header, a size_t word count, then that many
   * int64 words, least significant first, in minimal form. */
  kTVMFFIBigInt = 78,
  kTVMFFIStaticObjectEnd,
  kTVMFFIDynObjectBegin = 128
#ifdef __cplusplus
};
#else
} TVMFFITypeIndex;
#endif

/* An object, as the C API passes it: a pointer to its TVMFFIObject header. */
typedef void* TVMFFIObjectHandle;

/* What a deleter is asked to do. */
#ifdef __cplusplus
enum TVMFFIObjectDeleterFlagBitMask : int32_t {
#else
typedef enum {
#endif
  /* Strong count reached zero: destroy the contents, keep the memory. */
  kTVMFFIObjectDeleterFlagBitMaskStrong = 1 << 0,
  /* Weak count reached zero: free the memory. */
  kTVMFFIObjectDeleterFlagBitMaskWeak = 1 << 1,
  /* Both at once (the usual case). */
  kTVMFFIObjectDeleterFlagBitMaskBoth =
      (kTVMFFIObjectDeleterFlagBitMaskStrong | kTVMFFIObjectDeleterFlagBitMaskWeak),
#ifdef __cplusplus
};
#else
} TVMFFIObjectDeleterFlagBitMask;
#endif

/* ---- Core layouts ---- */

/*
 * Header of every object (24 bytes). combined_ref_count holds the strong count
 * in its low 32 bits and the weak count in its high 32 bits; C++ code updates
 * it inline with 64-bit atomics, so the split is part of the ABI.
 */
typedef struct {
  uint64_t combined_ref_count;
  int32_t type_index;
  uint32_t __padding;
  union {
    /* Called with TVMFFIObjectDeleterFlagBitMask bits. */
    void (*deleter)(void* self, int flags);
    /* Keeps the header 8-byte aligned on 32-bit targets. */
    int64_t __ensure_align;
  };
} TVMFFIObject;

/*
 * A value (16 bytes): type index, 4 bytes that are zero except for the length
 * of a small string, then the 8-byte payload.
 */
typedef struct {
  int32_t type_index;
  union {
    uint32_t zero_padding;
    uint32_t small_str_len;
  };
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
    const char* v_c_str;
    TVMFFIObject* v_obj;
    DLDataType v_dtype;
    DLDevice v_device;
    char v_bytes[8];
    uint64_t v_uint64;
  };
} TVMFFIAny;

/* Bytes with a length; what follows the header in a string or bytes object.
 * size is size_t, so the layout differs between 32- and 64-bit targets. */
typedef struct {
  const char* data;
  size_t size;
} TVMFFIByteArray;

/* What follows the header in a shape object. */
typedef struct {
  const int64_t* data;
  size_t size;
} TVMFFIShapeCell;

/* Storage of array and list objects. data_deleter frees a separately
 * allocated buffer; it is NULL when the elements live inside the object. */
#ifdef __cplusplus
struct TVMFFISeqCell {
#else
typedef struct {
#endif
  void* data;
  int64_t size;
  int64_t capacity;
  void (*data_deleter)(void*);
#ifdef __cplusplus
};
#else
} TVMFFISeqCell;
#endif

/* How update_backtrace combines a new backtrace with the stored one. */
#ifdef __cplusplus
enum TVMFFIBacktraceUpdateMode : int32_t {
#else
typedef enum {
#endif
  kTVMFFIBacktraceUpdateModeReplace = 0,
  kTVMFFIBacktraceUpdateModeAppend = 1,
#ifdef __cplusplus
};
#else
} TVMFFIBacktraceUpdateMode;
#endif

/* What follows the header in an error object. The backtrace lists the most
 * recent frame first. cause_chain and extra_context are owned, may be NULL. */
typedef struct {
  TVMFFIByteArray kind;
  TVMFFIByteArray message;
  TVMFFIByteArray backtrace;
  void (*update_backtrace)(TVMFFIObjectHandle self, const TVMFFIByteArray* backtrace,
                           int32_t update_mode);
  TVMFFIObjectHandle cause_chain;
  TVMFFIObjectHandle extra_context;
} TVMFFIErrorCell;

/*
 * The calling convention of every tvm-ffi function. The caller sets
 * result->type_index to kTVMFFINone (or any non-object index) first. Returns
 * 0, or nonzero with the error raised (see TVMFFIErrorSetRaised).
 */
typedef int (*TVMFFISafeCallType)(void* handle, const TVMFFIAny* args, int32_t num_args,
                                  TVMFFIAny* result);

/* What follows the header in a function object. cpp_call is a C++ entry
 * point that throws instead of returning an error; NULL for functions not
 * made in C++. Across libraries use safe_call. */
typedef struct {
  TVMFFISafeCallType safe_call;
  void* cpp_call;
} TVMFFIFunctionCell;

/* What follows the header in an opaque object: the foreign handle. */
typedef struct {
  void* handle;
} TVMFFIOpaqueObjectCell;

/* ---- Version ---- */

/* The ABI version of the loaded runtime. */
TVM_FFI_DLL void TVMFFIGetVersion(TVMFFIVersion* out_version);

/* ---- Objects ---- */

/* Add one strong reference. */
TVM_FFI_DLL int TVMFFIObjectIncRef(TVMFFIObjectHandle obj);

/* Drop one strong reference, destroying the object with the last one. */
TVM_FFI_DLL int TVMFFIObjectDecRef(TVMFFIObjectHandle obj);

/* Wrap a foreign handle as an object of the given (opaque) type index;
 * deleter(handle) runs when it dies. */
TVM_FFI_DLL int TVMFFIObjectCreateOpaque(void* handle, int32_t type_index,
                                         void (*deleter)(void* handle), TVMFFIObjectHandle* out);

/* Sits right before an object's header when the object came from a custom
 * allocator; delete_space (may be NULL) reclaims the storage. */
typedef struct {
  void (*delete_space)(void* ptr);
} TVMFFIObjectAllocHeader;

/* Allocator for object storage. allocate returns uninitialized memory for an
 * object of size bytes, preceded by an initialized TVMFFIObjectAllocHeader,
 * or NULL after raising an error. */
typedef struct {
  void* (*allocate)(size_t size, size_t alignment, int32_t type_index, void* context);
  void* context;
} TVMFFICustomAllocator;

/* The process-wide object allocator (never NULL). */
TVM_FFI_DLL TVMFFICustomAllocator* TVMFFIGetCustomAllocator(void);

/* Install a process-wide object allocator (NULL restores the default). Do it
 * once, before objects are created on other threads. */
TVM_FFI_DLL int TVMFFISetCustomAllocator(TVMFFICustomAllocator* allocator);

/* The type index registered under type_key. */
TVM_FFI_DLL int TVMFFITypeKeyToIndex(const TVMFFIByteArray* type_key, int32_t* out_tindex);

/* ---- Functions ---- */

/* Make a function object from a C callback; deleter(self) (may be NULL) runs
 * when it dies. */
TVM_FFI_DLL int TVMFFIFunctionCreate(void* self, TVMFFISafeCallType safe_call,
                                     void (*deleter)(void* self), TVMFFIObjectHandle* out);

/* Find a global function; *out is a new reference, or NULL if absent. */
TVM_FFI_DLL int TVMFFIFunctionGetGlobal(const TVMFFIByteArray* name, TVMFFIObjectHandle* out);

/* Copy a borrowed value into an owned one (taking references, turning raw
 * strings into string values). */
TVM_FFI_DLL int TVMFFIAnyViewToOwnedAny(const TVMFFIAny* any_view, TVMFFIAny* out);

/* Call a function object. result->type_index must be kTVMFFINone on entry;
 * on success the caller owns *result. */
TVM_FFI_DLL int TVMFFIFunctionCall(TVMFFIObjectHandle func, TVMFFIAny* args, int32_t num_args,
                                   TVMFFIAny* result);

/* ---- Errors ---- */

/* Take this thread's raised error (an error object, or NULL), clearing it. */
TVM_FFI_DLL void TVMFFIErrorMoveFromRaised(TVMFFIObjectHandle* result);

/* Raise an error object on this thread. The runtime takes its own
 * reference; the caller still owns the one it passed (error.cc). */
TVM_FFI_DLL void TVMFFIErrorSetRaised(TVMFFIObjectHandle error);

/* Raise a new error of the given kind (e.g. "ValueError") and message. */
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);

/* Raise a new error whose message is the concatenation of message_parts
 * (NULL parts are skipped); lets generated code share common fragments. */
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** message_parts,
                                                   int32_t num_parts);

/* Make an error object. Does not raise on failure (it is used while handling
 * errors); a nonzero return means out of memory. */
TVM_FFI_DLL int TVMFFIErrorCreate(const TVMFFIByteArray* kind, const TVMFFIByteArray* message,
                                  const TVMFFIByteArray* backtrace, TVMFFIObjectHandle* out);

/* Make an error object with a cause and extra context (both may be NULL). */
TVM_FFI_DLL int TVMFFIErrorCreateWithCauseAndExtraContext(
    const TVMFFIByteArray* kind, const TVMFFIByteArray* message, const TVMFFIByteArray* backtrace,
    TVMFFIObjectHandle cause_chain, TVMFFIObjectHandle extra_context, TVMFFIObjectHandle* out);

/* ---- DLPack ---- */

/* Adopt a DLPack tensor as a tensor object, checking that data + byte_offset
 * is aligned to require_alignment and, if asked, that it is contiguous. */
TVM_FFI_DLL int TVMFFITensorFromDLPack(DLManagedTensor* from, int32_t require_alignment,
                                       int32_t require_contiguous, TVMFFIObjectHandle* out);

/* Share a tensor object's memory as a DLPack tensor that keeps it alive. */
TVM_FFI_DLL int TVMFFITensorToDLPack(TVMFFIObjectHandle from, DLManagedTensor** out);

/* TVMFFITensorFromDLPack for a DLPack 1.x tensor. */
TVM_FFI_DLL int TVMFFITensorFromDLPackVersioned(DLManagedTensorVersioned* from,
                                                int32_t require_alignment,
                                                int32_t require_contiguous,
                                                TVMFFIObjectHandle* out);

/* TVMFFITensorToDLPack producing a DLPack 1.x tensor. */
TVM_FFI_DLL int TVMFFITensorToDLPackVersioned(TVMFFIObjectHandle from,
                                              DLManagedTensorVersioned** out);

/* A tensor object viewing source's memory with prototype's metadata (shape
 * and strides are copied). Unchecked: prototype->data must point into source. */
TVM_FFI_DLL int TVMFFITensorCreateUnsafeView(TVMFFIObjectHandle source, const DLTensor* prototype,
                                             TVMFFIObjectHandle* out);

/* ---- Strings, bytes, big integers ---- */

/* Copy bytes into a string value (small string or string object). */
TVM_FFI_DLL int TVMFFIStringFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);

/* Copy bytes into a bytes value (small bytes or bytes object). */
TVM_FFI_DLL int TVMFFIBytesFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);

/* Make an integer from native-endian int64 words, least significant first
 * (length a multiple of 8; empty is zero). */
TVM_FFI_DLL int TVMFFIBigIntFromByteArray(const TVMFFIByteArray* input, TVMFFIAny* out);

/* Borrow the int64 words of an int or big-int value, least significant
 * first; valid while the value lives. */
TVM_FFI_DLL TVMFFIByteArray TVMFFIBigIntGetContentByteArray(const TVMFFIAny* value);

/* ---- Data types ---- */

/* Parse a dtype string such as "float32" or "int8x4". */
TVM_FFI_DLL int TVMFFIDataTypeFromString(const TVMFFIByteArray* str, DLDataType* out);

/* Print a dtype as a string value owned by the caller. */
TVM_FFI_DLL int TVMFFIDataTypeToString(const DLDataType* dtype, TVMFFIAny* out);

/* ---- Reflection ---- */

/* Read the field at address field into *result. */
typedef int (*TVMFFIFieldGetter)(void* field, TVMFFIAny* result);

/* Write value into the field at address field. */
typedef int (*TVMFFIFieldSetter)(void* field, const TVMFFIAny* value);

/* Create an empty instance of a type. */
typedef int (*TVMFFIObjectCreator)(TVMFFIObjectHandle* result);

/* TVMFFIFieldInfo::flags bits. */
#ifdef __cplusplus
enum TVMFFIFieldFlagBitMask : int32_t {
#else
typedef enum {
#endif
  kTVMFFIFieldFlagBitMaskWritable = 1 << 0,
  kTVMFFIFieldFlagBitMaskHasDefault = 1 << 1,
  kTVMFFIFieldFlagBitMaskIsStaticMethod = 1 << 2,
  /* Skipped by structural equality and hashing. */
  kTVMFFIFieldFlagBitMaskSEqHashIgnore = 1 << 3,
  /* Opens a pattern definition region (see TVMFFIDefRegionKind). */
  kTVMFFIFieldFlagBitMaskSEqHashDefPattern = 1 << 4,
  /* default_value_or_factory is a function producing the default. */
  kTVMFFIFieldFlagBitMaskDefaultFromFactory = 1 << 5,
  kTVMFFIFieldFlagBitMaskReprOff = 1 << 6,
  kTVMFFIFieldFlagBitMaskCompareOff = 1 << 7,
  kTVMFFIFieldFlagBitMaskHashOff = 1 << 8,
  /* Not a parameter of the generated constructor. */
  kTVMFFIFieldFlagBitMaskInitOff = 1 << 9,
  /* Keyword-only parameter of the generated constructor. */
  kTVMFFIFieldFlagBitMaskKwOnly = 1 << 10,
  /* TVMFFIFieldInfo::setter is a function object, called with
   * (field address as opaque pointer, value). */
  kTVMFFIFieldFlagBitSetterIsFunctionObj = 1 << 11,
  /* Opens a simple definition region (see TVMFFIDefRegionKind). */
  kTVMFFIFieldFlagBitMaskSEqHashDefSimple = 1 << 12,
#ifdef __cplusplus
};
#else
} TVMFFIFieldFlagBitMask;
#endif

/* How structural equality and hashing treat objects of a type. */
#ifdef __cplusplus
enum TVMFFISEqHashKind : int32_t {
#else
typedef enum {
#endif
  kTVMFFISEqHashKindUnsupported = 0,
  /* Compared by content, as a tree. */
  kTVMFFISEqHashKindTreeNode = 1,
  /* A variable, equal to the one it is bound to in a definition region. */
  kTVMFFISEqHashKindFreeVar = 2,
  /* Compared by content, sharing respected (a DAG). */
  kTVMFFISEqHashKindDAGNode = 3,
  /* A tree with no free variables inside; pointer equality implies equality. */
  kTVMFFISEqHashKindConstTreeNode = 4,
  /* One instance per value: pointer equality. */
  kTVMFFISEqHashKindUniqueInstance = 5,
#ifdef __cplusplus
};
#else
} TVMFFISEqHashKind;
#endif

/* Kind of definition region a field is visited in, for structural eq/hash. */
#ifdef __cplusplus
enum TVMFFIDefRegionKind : int32_t {
#else
typedef enum {
#endif
  /* Variables reached here are uses. */
  kTVMFFIDefRegionKindNone = 0,
  /* Variables in the value and its type bind on first occurrence. */
  kTVMFFIDefRegionKindPattern = 1,
  /* Only the variable itself is defined; its type is walked as uses. */
  kTVMFFIDefRegionKindSimple = 2,
#ifdef __cplusplus
};
#else
} TVMFFIDefRegionKind;
#endif

/* Reflection record of one field of an object type. */
typedef struct {
  TVMFFIByteArray name;
  TVMFFIByteArray doc;
  /* JSON metadata. */
  TVMFFIByteArray metadata;
  /* TVMFFIFieldFlagBitMask bits. */
  int64_t flags;
  int64_t size;
  int64_t alignment;
  /* Byte offset of the field from the object header. */
  int64_t offset;
  TVMFFIFieldGetter getter;
  /* A TVMFFIFieldSetter, or a function object when flags has
   * kTVMFFIFieldFlagBitSetterIsFunctionObj. Set even for read-only fields. */
  void* setter;
  /* Default value, or a factory function (see the flags). */
  TVMFFIAny default_value_or_factory;
  /* Declared (compile-time) type index; not the runtime type. */
  int32_t field_static_type_index;
} TVMFFIFieldInfo;

/* Reflection record of one method; method is a function whose first argument
 * is self for instance methods. */
typedef struct {
  TVMFFIByteArray name;
  TVMFFIByteArray doc;
  /* JSON metadata. */
  TVMFFIByteArray metadata;
  int64_t flags;
  TVMFFIAny method;
} TVMFFIMethodInfo;

/* Optional extra reflection data of a type. */
typedef struct {
  TVMFFIByteArray doc;
  /* Creates an empty instance, or NULL. */
  TVMFFIObjectCreator creator;
  /* Size of the object, or 0 if unknown. */
  int32_t total_size;
  TVMFFISEqHashKind structural_eq_hash_kind;
} TVMFFITypeMetadata;

/* One attribute for many types: the entry of type index t is
 * data[t - begin_index] when begin_index <= t < begin_index + size. */
typedef struct {
  const TVMFFIAny* data;
  int32_t size;
  int32_t begin_index;
} TVMFFITypeAttrColumn;

/* Runtime information about a registered type. type_ancestors[d] is the
 * ancestor at depth d, for d < type_depth (single inheritance). */
#ifdef __cplusplus
struct TVMFFITypeInfo {
#else
typedef struct TVMFFITypeInfo {
#endif
  int32_t type_index;
  int32_t type_depth;
  TVMFFIByteArray type_key;
  const struct TVMFFITypeInfo** type_ancestors;
  /* Hash of type_key, used by structural hashing. */
  uint64_t type_key_hash;
  int32_t num_fields;
  int32_t num_methods;
  const TVMFFIFieldInfo* fields;
  const TVMFFIMethodInfo* methods;
  const TVMFFITypeMetadata* metadata;
#ifdef __cplusplus
};
#else
} TVMFFITypeInfo;
#endif

/* Register function object f as a global under name; replacing an existing
 * one is an error unless allow_override is nonzero. */
TVM_FFI_DLL int TVMFFIFunctionSetGlobal(const TVMFFIByteArray* name, TVMFFIObjectHandle f,
                                        int allow_override);

/* Register a global function described by a method record (name, doc,
 * metadata, function). */
TVM_FFI_DLL int TVMFFIFunctionSetGlobalFromMethodInfo(const TVMFFIMethodInfo* method_info,
                                                      int allow_override);

/* Add a field record to a type. */
TVM_FFI_DLL int TVMFFITypeRegisterField(int32_t type_index, const TVMFFIFieldInfo* info);

/* Add a method record to a type. */
TVM_FFI_DLL int TVMFFITypeRegisterMethod(int32_t type_index, const TVMFFIMethodInfo* info);

/* Set a type's extra metadata. */
TVM_FFI_DLL int TVMFFITypeRegisterMetadata(int32_t type_index, const TVMFFITypeMetadata* metadata);

/* Set attribute attr_name of a type. */
TVM_FFI_DLL int TVMFFITypeRegisterAttr(int32_t type_index, const TVMFFIByteArray* attr_name,
                                       const TVMFFIAny* attr_value);

/* The column of attribute attr_name, or NULL if never registered. */
TVM_FFI_DLL const TVMFFITypeAttrColumn* TVMFFIGetTypeAttrColumn(const TVMFFIByteArray* attr_name);

/* ---- Start-up and shutdown helpers (they abort rather than fail) ---- */

/* The current stack trace, most recent frame first. filename and func may be
 * NULL. */
TVM_FFI_DLL const TVMFFIByteArray* TVMFFIBacktrace(const char* filename, int lineno,
                                                   const char* func, int cross_ffi_boundary);

/* Register type_key, or return its index if already registered. A
 * static_type_index of -1 asks for a dynamic index; parent_type_index is -1
 * for a root type, or -2 to only look up (returning -2 when absent). */
TVM_FFI_DLL int32_t TVMFFITypeGetOrAllocIndex(const TVMFFIByteArray* type_key,
                                              int32_t static_type_index, int32_t type_depth,
                                              int32_t num_child_slots,
                                              int32_t child_slots_can_overflow,
                                              int32_t parent_type_index);

/* Information about a registered type index. */
TVM_FFI_DLL TVM_FFI_ATTRIBUTE_PURE const TVMFFITypeInfo* TVMFFIGetTypeInfo(int32_t type_index);

/* If *handle_addr is NULL, set it to what init_func produces; thread-safe and
 * done at most once. An init_func error (raised, nonzero) is passed on. */
TVM_FFI_DLL int TVMFFIHandleInitOnce(void** handle_addr, int (*init_func)(void** result));

/* If *handle_addr is not NULL, pass it to deinit_func and reset it to NULL;
 * thread-safe. */
TVM_FFI_DLL int TVMFFIHandleDeinitOnce(void** handle_addr, int (*deinit_func)(void* handle));

#ifdef __cplusplus
} /* extern "C" */
#endif

/*
 * Field accessors that only do address arithmetic on the public layouts.
 * tvm-ffi provides them to C++ only; here they are static inline so C can use
 * them too. They touch no runtime symbol.
 */
#ifdef __cplusplus
#define TVMRT_FFI_PTR_CAST_(T, p) reinterpret_cast<T>(p)
#define TVMRT_FFI_VAL_CAST_(T, v) static_cast<T>(v)
#else
#define TVMRT_FFI_PTR_CAST_(T, p) ((T)(p))
#define TVMRT_FFI_VAL_CAST_(T, v) ((T)(v))
#endif

/* Type index of an object. */
static inline int32_t TVMFFIObjectGetTypeIndex(TVMFFIObjectHandle obj) {
  return TVMRT_FFI_PTR_CAST_(TVMFFIObject*, obj)->type_index;
}

/* The content of a small string or small bytes value (borrowed from value). */
static inline TVMFFIByteArray TVMFFISmallBytesGetContentByteArray(const TVMFFIAny* value) {
  TVMFFIByteArray out;
  out.data = value->v_bytes;
  out.size = TVMRT_FFI_VAL_CAST_(size_t, value->small_str_len);
  return out;
}

/* The byte array of a string or bytes object. */
static inline TVMFFIByteArray* TVMFFIBytesGetByteArrayPtr(TVMFFIObjectHandle obj) {
  return TVMRT_FFI_PTR_CAST_(TVMFFIByteArray*,
                             TVMRT_FFI_PTR_CAST_(char*, obj) + sizeof(TVMFFIObject));
}

/* The cell of an error object. */
static inline TVMFFIErrorCell* TVMFFIErrorGetCellPtr(TVMFFIObjectHandle obj) {
  return TVMRT_FFI_PTR_CAST_(TVMFFIErrorCell*,
                             TVMRT_FFI_PTR_CAST_(char*, obj) + sizeof(TVMFFIObject));
}

/* The cell of a function object. */
static inline TVMFFIFunctionCell* TVMFFIFunctionGetCellPtr(TVMFFIObjectHandle obj) {
  return TVMRT_FFI_PTR_CAST_(TVMFFIFunctionCell*,
                             TVMRT_FFI_PTR_CAST_(char*, obj) + sizeof(TVMFFIObject));
}

/* The cell of an opaque object. */
static inline TVMFFIOpaqueObjectCell* TVMFFIOpaqueObjectGetCellPtr(TVMFFIObjectHandle obj) {
  return TVMRT_FFI_PTR_CAST_(TVMFFIOpaqueObjectCell*,
                             TVMRT_FFI_PTR_CAST_(char*, obj) + sizeof(TVMFFIObject));
}

/* The cell of a shape object. */
static inline TVMFFIShapeCell* TVMFFIShapeGetCellPtr(TVMFFIObjectHandle obj) {
  return TVMRT_FFI_PTR_CAST_(TVMFFIShapeCell*,
                             TVMRT_FFI_PTR_CAST_(char*, obj) + sizeof(TVMFFIObject));
}

/* The DLTensor inside a tensor object. */
static inline DLTensor* TVMFFITensorGetDLTensorPtr(TVMFFIObjectHandle obj) {
  return TVMRT_FFI_PTR_CAST_(DLTensor*, TVMRT_FFI_PTR_CAST_(char*, obj) + sizeof(TVMFFIObject));
}

/* A DLDevice from its two integers. */
static inline DLDevice TVMFFIDLDeviceFromIntPair(int32_t device_type, int32_t device_id) {
  DLDevice out;
  out.device_type = TVMRT_FFI_VAL_CAST_(DLDeviceType, device_type);
  out.device_id = device_id;
  return out;
}

#undef TVMRT_FFI_PTR_CAST_
#undef TVMRT_FFI_VAL_CAST_

#endif /* TVM_FFI_C_API_H_ */
