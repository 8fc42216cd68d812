/* A module written in C++ against tvm-ffi's headers, as TVM 0.21+ writes its runtime modules:
 * a tvm::ffi::ModuleObj subclass. Shared by the library that makes it (counter_module_lib.cc)
 * and the test that drives it (cxx_modules.cc), so both see the same class (dynamic_cast).
 * SPDX-License-Identifier: Apache-2.0 */
#ifndef TVMRT_C_TESTS_CXX_COUNTER_MODULE_H_
#define TVMRT_C_TESTS_CXX_COUNTER_MODULE_H_

#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/tvm_ffi.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace cxx_test {

/* Kind "cxx_counter": `cxx_add(a, b)`, `cxx_count()` (calls so far, the module's state, saved
 * by SaveToBytes), two functions whose lookup throws (a tvm::ffi::Error, a std::exception),
 * and a doc and metadata for `cxx_add`. */
class CounterModule : public tvm::ffi::ModuleObj {
 public:
  explicit CounterModule(int64_t start = 0) : count_(start) {}

  const char* kind() const override { return "cxx_counter"; }

  int GetPropertyMask() const override {
    return tvm::ffi::Module::kBinarySerializable | tvm::ffi::Module::kRunnable;
  }

  tvm::ffi::Optional<tvm::ffi::Function> GetFunction(const tvm::ffi::String& name) override {
    tvm::ffi::Module self = tvm::ffi::GetRef<tvm::ffi::Module>(this);
    if (name == "cxx_add") {
      return tvm::ffi::Function::FromTyped([self, this](int64_t a, int64_t b) {
        ++count_;
        return a + b;
      });
    }
    if (name == "cxx_count") {
      return tvm::ffi::Function::FromTyped([self, this]() -> int64_t { return count_.load(); });
    }
    if (name == "cxx_throw_ffi") {
      TVM_FFI_THROW(ValueError) << "lookup of cxx_throw_ffi refused by the C++ module";
    }
    if (name == "cxx_throw_std") {
      throw std::runtime_error("std::runtime_error from the C++ module");
    }
    return std::nullopt;
  }

  tvm::ffi::Optional<tvm::ffi::String> GetFunctionDoc(const tvm::ffi::String& name) override {
    if (name == "cxx_add") return tvm::ffi::String("Adds two integers.");
    return std::nullopt;
  }

  tvm::ffi::Optional<tvm::ffi::String> GetFunctionMetadata(
      const tvm::ffi::String& name) override {
    if (name == "cxx_add") return tvm::ffi::String("{\"arity\": 2}");
    return std::nullopt;
  }

  tvm::ffi::Bytes SaveToBytes() const override {
    std::string s = std::to_string(count_.load());
    return tvm::ffi::Bytes(s.data(), s.size());
  }

  tvm::ffi::String InspectSource(const tvm::ffi::String& format) const override {
    return tvm::ffi::String("// counter module source, format '" + std::string(format) + "'");
  }

  /* The imports, read inline as C++ code does (ModuleObj::imports_). */
  size_t NumImports() const { return imports().size(); }

 private:
  std::atomic<int64_t> count_;
};

}  // namespace cxx_test

#endif  // TVMRT_C_TESTS_CXX_COUNTER_MODULE_H_
