/* A C++ library built against tvm-ffi's headers: it makes CounterModule objects (global
 * `cxx_test.make_counter(start)`, and the loader `ffi.Module.load_from_bytes.cxx_counter`), and
 * exports one tvm-ffi function with its metadata and doc, so tvmrt also loads it as a library
 * module. SPDX-License-Identifier: Apache-2.0 */
#define TVM_FFI_DLL_EXPORT_INCLUDE_METADATA 1
#include "counter_module.h"

#include <tvm/ffi/reflection/registry.h>

namespace cxx_test {

static tvm::ffi::Module MakeCounter(int64_t start) {
  return tvm::ffi::Module(tvm::ffi::make_object<CounterModule>(start));
}

static tvm::ffi::Module LoadCounter(const tvm::ffi::Bytes& bytes) {
  return MakeCounter(std::stoll(std::string(bytes.data(), bytes.size())));
}

static int64_t AddOne(int64_t x) { return x + 1; }

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one, AddOne)
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(add_one, "Adds one.")

TVM_FFI_STATIC_INIT_BLOCK() {
  tvm::ffi::reflection::GlobalDef()
      .def("cxx_test.make_counter", MakeCounter)
      .def("ffi.Module.load_from_bytes.cxx_counter", LoadCounter);
}

}  // namespace cxx_test
