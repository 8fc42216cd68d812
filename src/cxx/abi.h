/* tvmrt: the C++ side of tvm-ffi's C++ ABI (libtvm_ffi.so's non-inline C++ functions and the
 * ModuleObj vtable). SPDX-License-Identifier: Apache-2.0
 *
 * tvmrt's own declarations of the few tvm-ffi C++ types its C++ part (shim.cc) handles. Only
 * what the Itanium C++ ABI makes observable is reproduced, from tvm-ffi 0.1's public headers
 * and `nm -DC libtvm_ffi.so`:
 *
 *  - sizes, and whether a type is "non-trivial for the purposes of calls" (every one of these
 *    has a user-provided destructor, so it is passed by invisible reference and returned
 *    through a hidden result pointer, exactly like tvm-ffi's);
 *  - the layout of a ModuleObj: vtable pointer, then the 24-byte TVMFFIObject header, then
 *    `imports_` (an Array<Any>) and `import_lookup_cache_`; and the order of its 12 virtual
 *    functions (tvm-ffi `include/tvm/ffi/extra/module.h`);
 *  - tvm::ffi::Error: `class Error : public ObjectRef, public std::exception`, so the exception
 *    tvmrt throws is caught by `catch (const tvm::ffi::Error&)` in code built against tvm-ffi's
 *    headers (libstdc++ matches exception types by their mangled name).
 *
 * Names matter only for Error and its base ObjectRef (the exception's type name); every other
 * type lives in namespace tvmrt::cxx, and the exported C++ symbols get their mangled names from
 * the Rust side (src/cxx/mod.rs), which jumps to the functions below (`asm` labels).
 */
#ifndef TVMRT_CXX_ABI_H_
#define TVMRT_CXX_ABI_H_

#include <tvm/ffi/c_api.h>

#include <cstddef>
#include <cstdint>
#include <exception>

namespace tvm {
namespace ffi {

/* ObjectRef: one pointer to an object header (null allowed). */
class ObjectRef {
 public:
  ObjectRef() noexcept : data_(nullptr) {}
  /* Takes over one strong reference. */
  explicit ObjectRef(TVMFFIObject* owned) noexcept : data_(owned) {}
  ObjectRef(const ObjectRef& other) noexcept : data_(other.data_) {
    if (data_ != nullptr) TVMFFIObjectIncRef(data_);
  }
  ObjectRef& operator=(const ObjectRef&) = delete;
  ~ObjectRef() {
    if (data_ != nullptr) TVMFFIObjectDecRef(data_);
  }
  TVMFFIObject* get() const noexcept { return data_; }

 protected:
  TVMFFIObject* data_;
};

/* The exception type of tvm-ffi's C++ API: an ffi.Error object behind std::exception. */
class Error : public ObjectRef, public std::exception {
 public:
  /* Takes over one strong reference to an error object. */
  explicit Error(TVMFFIObject* owned) noexcept : ObjectRef(owned) {}
  Error(const Error& other) noexcept : ObjectRef(other), std::exception(other) {}
  /* tvm-ffi's what(): the message, NUL-terminated by every error object producer. */
  const char* what() const noexcept override {
    const TVMFFIErrorCell* cell = reinterpret_cast<const TVMFFIErrorCell*>(data_ + 1);
    return cell->message.data;
  }
};

}  // namespace ffi
}  // namespace tvm

namespace tvmrt {
namespace cxx {

/* An owned object reference (ObjectRef, Module, Function, Array<T>, TypedFunction<...>,
 * Optional<ObjectRef subclass>: all one nullable pointer). */
using Ref = tvm::ffi::ObjectRef;

/* An owned TVMFFIAny (Any, String, Bytes, Optional<String>, Optional<int>: all 16 bytes,
 * None meaning nullopt). */
class Value {
 public:
  Value() noexcept {
    v_.type_index = kTVMFFINone;
    v_.zero_padding = 0;
    v_.v_int64 = 0;
  }
  /* Takes over an owned TVMFFIAny. */
  explicit Value(const TVMFFIAny& owned) noexcept : v_(owned) {}
  Value(const Value& other) noexcept : v_(other.v_) {
    if (v_.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectIncRef(v_.v_obj);
  }
  Value& operator=(const Value&) = delete;
  ~Value() {
    if (v_.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(v_.v_obj);
  }
  const TVMFFIAny& raw() const noexcept { return v_; }
  /* Gives up the value. */
  TVMFFIAny release() noexcept {
    TVMFFIAny out = v_;
    v_.type_index = kTVMFFINone;
    v_.zero_padding = 0;
    v_.v_int64 = 0;
    return out;
  }

 private:
  TVMFFIAny v_;
};

static_assert(sizeof(Ref) == sizeof(void*), "ObjectRef is one pointer");
static_assert(sizeof(Value) == 16, "Any/String are one TVMFFIAny");
static_assert(sizeof(tvm::ffi::Error) == 2 * sizeof(void*), "Error: vptr, then ObjectRef");

/* The object header, as the non-polymorphic base of a module. */
struct Object {
  TVMFFIObject header;
};

/* tvm::ffi::ModuleObj as the ABI sees it, to call a module's virtual functions whoever made
 * it. Never constructed by tvmrt's C++ (its modules are allocated by Rust with a vtable of
 * their own); the order of the virtual functions is the vtable's. */
class ModuleView : public Object {
 public:
  virtual const char* kind() const = 0;
  virtual int GetPropertyMask() const = 0;
  /* Optional<Function> */
  virtual Ref GetFunction(const Value& name) = 0;
  virtual bool ImplementsFunction(const Value& name) = 0;
  /* Optional<String> */
  virtual Value GetFunctionDoc(const Value& name) = 0;
  /* Optional<String> */
  virtual Value GetFunctionMetadata(const Value& name) = 0;
  virtual void WriteToFile(const Value& file_name, const Value& format) const = 0;
  /* Array<String> */
  virtual Ref GetWriteFormats() const = 0;
  /* Bytes */
  virtual Value SaveToBytes() const = 0;
  /* String */
  virtual Value InspectSource(const Value& format) const = 0;
  /* const Module& */
  virtual void ImportModule(const Ref& other) = 0;
  virtual void ClearImports() = 0;

  /* Array<Any> imports_; Map<String, Function> import_lookup_cache_. */
  TVMFFIObject* imports_;
  TVMFFIObject* import_lookup_cache_;

  TVMFFIObject* header() noexcept { return &static_cast<Object*>(this)->header; }
  static ModuleView* FromHeader(void* header) noexcept {
    return static_cast<ModuleView*>(static_cast<Object*>(header));
  }
};

/* The one layout fact C++ code compiled against tvm-ffi's headers relies on: the header
 * 8 bytes into the object (the vptr, padded to the header's alignment), the imports after it. */
static_assert(sizeof(ModuleView) == 8 + sizeof(TVMFFIObject) + 2 * sizeof(void*),
              "ModuleObj: vptr, header, imports_, import_lookup_cache_");

}  // namespace cxx
}  // namespace tvmrt

#endif  // TVMRT_CXX_ABI_H_
