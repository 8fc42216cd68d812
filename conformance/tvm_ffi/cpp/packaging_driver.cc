/* tvm-ffi's python_packaging example (examples/python_packaging of the sdist) driven from C++:
 * the four flows of its run_example.py, on the extension built from its src/extension.cc.
 *
 *   packaging_driver <my_ffi_extension.so>
 *
 * 1. add_two through the tvm-ffi ABI (an exported function of the library module);
 * 2. add_one through the global registry (registered by the extension's static initializer);
 * 3. raise_error: the extension's exception comes back as tvm::ffi::Error;
 * 4. the IntPair object: constructed through its reflected __ffi_init__, fields a and b read
 *    through reflection, its method sum called.
 *
 * Prints one line per flow; exits non-zero if a result is not what the example prints.
 * Built by conformance/tvm_ffi/cpp.sh against the sdist's headers, once linked with libtvm_ffi.so
 * and once with tvmrt. SPDX-License-Identifier: Apache-2.0 */
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/reflection/accessor.h>
#include <tvm/ffi/tvm_ffi.h>

#include <cstdio>
#include <string>

namespace ffi = tvm::ffi;

static int g_failures = 0;

static void Expect(bool ok, const char* what) {
  std::printf("%s: %s\n", what, ok ? "ok" : "FAILED");
  if (!ok) ++g_failures;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <my_ffi_extension.so>\n", argv[0]);
    return 2;
  }
  try {
    ffi::Module mod = ffi::Module::LoadFromFile(argv[1]);

    ffi::Function add_two = mod->GetFunction("add_two").value();
    Expect(add_two(1).cast<int>() == 3, "add_two(1) == 3 (tvm-ffi ABI)");

    ffi::Function add_one = ffi::Function::GetGlobalRequired("my_ffi_extension.add_one");
    Expect(add_one(3).cast<int>() == 4, "add_one(3) == 4 (global registry)");

    bool raised = false;
    try {
      ffi::Function::GetGlobalRequired("my_ffi_extension.raise_error")("This is an error");
    } catch (const ffi::Error& e) {
      raised = e.kind() == "RuntimeError" && e.message() == "This is an error";
    }
    Expect(raised, "raise_error throws RuntimeError: This is an error");

    const char* key = "my_ffi_extension.IntPair";
    ffi::Any pair = ffi::reflection::GetMethod(key, "__ffi_init__")(1, 2);
    const ffi::Object* obj = pair.cast<ffi::ObjectRef>().get();
    int64_t a = ffi::reflection::FieldGetter(key, "a")(obj).cast<int64_t>();
    int64_t b = ffi::reflection::FieldGetter(key, "b")(obj).cast<int64_t>();
    int64_t sum = ffi::reflection::GetMethod(key, "sum")(pair).cast<int64_t>();
    Expect(pair.GetTypeKey() == key && a == 1 && b == 2 && sum == 3,
           "IntPair(1, 2): a=1 b=2 sum=3 (reflection)");
  } catch (const ffi::Error& e) {
    std::printf("uncaught %s: %s\n", e.kind().c_str(), e.message().c_str());
    return 1;
  }
  return g_failures == 0 ? 0 : 1;
}
