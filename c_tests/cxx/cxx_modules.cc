/* tvm-ffi's C++ module API on tvmrt (issue 25): a program written against tvm-ffi's headers,
 * linked with -ltvmrt.
 *
 *   cxx_modules <counter_module_lib.so> <tests/fixtures>
 *
 * - modules tvmrt loads (a TVM-built library, and the C++ library itself loaded as a tvm-ffi
 *   library) used through tvm::ffi::Module: LoadFromFile, kind, GetFunction, doc and metadata,
 *   property mask, unsupported operations, RTTI;
 * - a module made by C++ code (CounterModule, made by the library) imported into a module
 *   tvmrt loaded, found through the imports from C++, from the C API and from compiled code's
 *   lookup, called through its own vtable, its exceptions turned into errors;
 * - a tvmrt module imported into the C++ module (tvm-ffi's ModuleObj::ImportModule, then
 *   GetFunction(name, true) through the imports), import cycles refused, ClearImports;
 * - save/load through the loader the C++ library registers, from the C API.
 * SPDX-License-Identifier: Apache-2.0 */
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/tvm_ffi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <typeinfo>
#include <vector>

#include "counter_module.h"

namespace ffi = tvm::ffi;

static int g_failures = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                          \
    }                                                                        \
  } while (0)

/* `body` must throw tvm::ffi::Error of `kind` whose message contains `needle`. */
template <typename F>
static void CheckThrows(int line, F body, const char* kind, const char* needle) {
  try {
    body();
    std::fprintf(stderr, "%s:%d: FAILED: no error thrown (expected %s)\n", __FILE__, line, kind);
    ++g_failures;
  } catch (const ffi::Error& e) {
    if (e.kind() != kind || e.message().find(needle) == std::string::npos) {
      std::fprintf(stderr, "%s:%d: FAILED: got %s: %s, expected %s containing \"%s\"\n",
                   __FILE__, line, e.kind().c_str(), e.message().c_str(), kind, needle);
      ++g_failures;
    }
  }
}
#define CHECK_THROWS(body, kind, needle) CheckThrows(__LINE__, [&] { body; }, kind, needle)

static ffi::Module MakeCounter(int64_t start) {
  return ffi::Function::GetGlobalRequired("cxx_test.make_counter")(start).cast<ffi::Module>();
}

/* Modules tvmrt made, used through the C++ API. */
static void TvmrtModulesFromCxx(const std::string& counter_lib, const std::string& fixtures) {
  ffi::Module lib = ffi::Module::LoadFromFile(counter_lib);
  CHECK(std::strcmp(lib->kind(), "library") == 0);
  CHECK(lib->GetPropertyMask() == (ffi::Module::kBinarySerializable | ffi::Module::kRunnable));
  ffi::Optional<ffi::Function> add_one = lib->GetFunction("add_one");
  CHECK(add_one.has_value() && (*add_one)(41).cast<int64_t>() == 42);
  CHECK(!lib->GetFunction("no_such_function").has_value());
  CHECK(lib->ImplementsFunction("add_one"));
  CHECK(!lib->ImplementsFunction("no_such_function"));
  ffi::Optional<ffi::String> metadata = lib->GetFunctionMetadata("add_one");
  CHECK(metadata.has_value() && std::string(*metadata).find("type_schema") != std::string::npos);
  CHECK(lib->GetFunctionDoc("add_one").value_or("") == "Adds one.");
  CHECK(!lib->GetFunctionDoc("no_such_function").has_value());
  CHECK(lib->InspectSource("").empty());
  CHECK(lib->GetWriteFormats().empty());
  CHECK_THROWS(lib->WriteToFile("/nonexistent/x.so", "so"), "RuntimeError",
               "does not support WriteToFile");
  // RTTI walks tvmrt's typeinfo: a tvmrt module is a ModuleObj, not a CounterModule.
  const ffi::ModuleObj* base = lib.operator->();
  CHECK(dynamic_cast<const cxx_test::CounterModule*>(base) == nullptr);
  CHECK(std::string(typeid(*base).name()) == "N5tvmrt13RustModuleObjE");
  CHECK(lib->imports().empty());

  // A TVM-built library: its function, called with tensors built by tvm-ffi's C++ API.
  ffi::Module add = ffi::Module::LoadFromFile(fixtures + "/add_dyn.so");
  ffi::Function fadd = add->GetFunction("add").value();
  struct Alloc {
    void AllocData(DLTensor* t) { t->data = std::calloc(t->shape[0], sizeof(float)); }
    void FreeData(DLTensor* t) { std::free(t->data); }
  };
  DLDataType f32{kDLFloat, 32, 1};
  DLDevice cpu{kDLCPU, 0};
  ffi::Tensor a = ffi::Tensor::FromNDAlloc(Alloc(), {4}, f32, cpu);
  ffi::Tensor b = ffi::Tensor::FromNDAlloc(Alloc(), {4}, f32, cpu);
  ffi::Tensor c = ffi::Tensor::FromNDAlloc(Alloc(), {4}, f32, cpu);
  for (int i = 0; i < 4; ++i) {
    static_cast<float*>(a.data_ptr())[i] = static_cast<float>(i);
    static_cast<float*>(b.data_ptr())[i] = 10.0f;
  }
  fadd(a, b, c);
  CHECK(static_cast<float*>(c.data_ptr())[3] == 13.0f);
  // A wrong argument is an error from the library, thrown to C++ as tvm::ffi::Error.
  CHECK_THROWS(fadd(a, b), "TypeError", "");

  CHECK_THROWS(ffi::Module::LoadFromFile(fixtures + "/no_such_file.so"), "ValueError",
               "no_such_file.so");
  CHECK_THROWS(ffi::Module::LoadFromFile(fixtures + "/README.unknownformat"), "ValueError",
               "unknownformat");
}

/* A C++ module imported into a module tvmrt loaded. */
static void CxxModuleInsideTvmrt(const std::string& counter_lib, const std::string& fixtures) {
  ffi::Module lib = ffi::Module::LoadFromFile(fixtures + "/add_dyn.so");
  ffi::Module counter = MakeCounter(100);
  CHECK(dynamic_cast<cxx_test::CounterModule*>(counter.operator->()) != nullptr);

  lib->ImportModule(counter);
  CHECK(lib->imports().size() == 1);
  CHECK(lib->imports()[0].cast<ffi::Module>().same_as(counter));
  // Not the library's own function; found through its imports (tvmrt searches them).
  CHECK(!lib->GetFunction("cxx_add").has_value());
  ffi::Optional<ffi::Function> cxx_add = lib->GetFunction("cxx_add", true);
  CHECK(cxx_add.has_value() && (*cxx_add)(2, 3).cast<int64_t>() == 5);
  CHECK(lib->ImplementsFunction("cxx_add", true));
  CHECK(!lib->ImplementsFunction("cxx_add", false));
  CHECK(lib->GetFunctionDoc("cxx_add", true).value_or("") == "Adds two integers.");
  CHECK(lib->GetFunctionMetadata("cxx_add", true).value_or("") == "{\"arity\": 2}");

  // The same through the C API (tvmrt's Rust side calls the C++ module's vtable).
  TVMFFIObjectHandle lib_handle = ffi::detail::ObjectUnsafe::TVMFFIObjectPtrFromObjectRef(lib);
  ffi::Function get_function = ffi::Function::GetGlobalRequired("ffi.ModuleGetFunction");
  ffi::Optional<ffi::Function> via_global =
      get_function(lib, "cxx_add", true).cast<ffi::Optional<ffi::Function>>();
  CHECK(via_global.has_value() && (*via_global)(20, 22).cast<int64_t>() == 42);
  // Compiled code's lookup with the module as its context: cached in the module.
  TVMFFIObjectHandle found = nullptr;
  CHECK(TVMFFIEnvModLookupFromImports(lib_handle, "cxx_count", &found) == 0 && found != nullptr);
  TVMFFIObjectHandle again = nullptr;
  CHECK(TVMFFIEnvModLookupFromImports(lib_handle, "cxx_count", &again) == 0 && again == found);
  // ... and with the C++ module as the context (its import cache holds tvmrt's then).
  TVMFFIObjectHandle counter_handle =
      ffi::detail::ObjectUnsafe::TVMFFIObjectPtrFromObjectRef(counter);
  CHECK(TVMFFIEnvModLookupFromImports(counter_handle, "ffi.ModuleGetKind", &found) == 0);
  ffi::Function kind_of = ffi::Function::GetGlobalRequired("ffi.ModuleGetKind");
  CHECK(kind_of(counter).cast<ffi::String>() == "cxx_counter");
  CHECK(kind_of(lib).cast<ffi::String>() == "library");
  ffi::Function count = lib->GetFunction("cxx_count", true).value();
  CHECK(count().cast<int64_t>() == 102);

  // The C++ module's exceptions come back as tvm-ffi errors, through tvmrt's Rust code.
  CHECK_THROWS(lib->GetFunction("cxx_throw_ffi", true), "ValueError", "refused by the C++");
  CHECK_THROWS(lib->GetFunction("cxx_throw_std", true), "InternalError", "std::runtime_error");
  CHECK_THROWS(get_function(lib, "cxx_throw_ffi", true), "ValueError", "refused by the C++");

  // Import cycles are refused, whichever side imports.
  CHECK_THROWS(counter->ImportModule(lib), "RuntimeError", "Cyclic dependency");
  CHECK_THROWS(lib->ImportModule(lib), "RuntimeError", "Cyclic dependency");

  // Save and restore through the C++ library's loader, from the C API.
  ffi::Bytes saved =
      ffi::Function::GetGlobalRequired("ffi.ModuleSaveToBytes")(counter).cast<ffi::Bytes>();
  CHECK(std::string(saved.data(), saved.size()) == "102");
  ffi::Module restored = ffi::Function::GetGlobalRequired("ffi.Module.load_from_bytes.cxx_counter")(
                             saved)
                             .cast<ffi::Module>();
  CHECK(restored->GetFunction("cxx_count").value()().cast<int64_t>() == 102);
  CHECK(ffi::Function::GetGlobalRequired("ffi.ModuleGetPropertyMask")(counter).cast<int>() == 3);
  CHECK(ffi::Function::GetGlobalRequired("ffi.ModuleInspectSource")(counter, "cc")
            .cast<ffi::String>() == "// counter module source, format 'cc'");

  lib->ClearImports();
  CHECK(lib->imports().empty());
  CHECK(!lib->GetFunction("cxx_add", true).has_value());
  (void)counter_lib;
}

/* A tvmrt module imported into the C++ module: tvm-ffi's base-class functions, which tvmrt
 * implements. */
static void TvmrtModuleInsideCxx(const std::string& fixtures) {
  ffi::Module counter = MakeCounter(0);
  ffi::Module lib = ffi::Module::LoadFromFile(fixtures + "/add_dyn.so");
  counter->ImportModule(lib);
  auto* typed = dynamic_cast<cxx_test::CounterModule*>(counter.operator->());
  CHECK(typed != nullptr && typed->NumImports() == 1);
  CHECK(counter->GetFunction("add", true).has_value());
  CHECK(!counter->GetFunction("add", false).has_value());
  CHECK(counter->ImplementsFunction("add", true));
  CHECK(counter->GetFunction("cxx_add", true).has_value());
  CHECK_THROWS(lib->ImportModule(counter), "RuntimeError", "Cyclic dependency");

  // Two levels: outer (C++) -> counter (C++) -> lib (tvmrt).
  ffi::Module outer = MakeCounter(0);
  outer->ImportModule(counter);
  CHECK(outer->GetFunction("add", true).has_value());
  CHECK_THROWS(lib->ImportModule(outer), "RuntimeError", "Cyclic dependency");

  // The import list through the C API (tvmrt reads the C++ module's imports_).
  CHECK(ffi::Function::GetGlobalRequired("runtime.ModuleImportsSize")(outer).cast<int64_t>() == 1);
  counter->ClearImports();
  CHECK(typed->NumImports() == 0);
  CHECK(!outer->GetFunction("add", true).has_value());
}

/* Every visitor sees the context symbols tvmrt fills in libraries. */
static void ContextSymbols() {
  std::vector<std::string> names;
  ffi::Module::VisitContextSymbols([&](ffi::String name, void* symbol) {
    if (symbol != nullptr) names.push_back(std::string(name));
  });
  bool has_call = false;
  for (const std::string& n : names) has_call |= n == "__TVMFFIFunctionCall";
  CHECK(has_call);
  // An exception thrown by the visitor reaches the caller.
  CHECK_THROWS(ffi::Module::VisitContextSymbols([](ffi::String, void*) {
                 TVM_FFI_THROW(IndexError) << "stop";
               }),
               "IndexError", "stop");
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <counter_module_lib.so> <tests/fixtures>\n", argv[0]);
    return 2;
  }
  std::string counter_lib = argv[1], fixtures = argv[2];
  try {
    // Loading the C++ library registers its globals (its static initializers run).
    ffi::Module keep_loaded = ffi::Module::LoadFromFile(counter_lib);
    TvmrtModulesFromCxx(counter_lib, fixtures);
    CxxModuleInsideTvmrt(counter_lib, fixtures);
    TvmrtModuleInsideCxx(fixtures);
    ContextSymbols();
  } catch (const ffi::Error& e) {
    std::fprintf(stderr, "FAILED: uncaught %s: %s\n", e.kind().c_str(), e.message().c_str());
    ++g_failures;
  }
  if (g_failures != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  std::printf("cxx_modules: all checks passed\n");
  return 0;
}
