/* tvmrt: the C++ part of tvm-ffi's C++ ABI. SPDX-License-Identifier: Apache-2.0
 *
 * Four groups of functions, all hidden (the Rust side exports what must be exported):
 *
 *  1. The non-inline C++ functions of libtvm_ffi.so (tvm::ffi::Module::LoadFromFile,
 *     json::Parse, StructuralEqual::Equal, ...), reached from their exported, mangled names by
 *     one jump each (src/cxx/mod.rs). Each calls the global function tvm-ffi registers for the
 *     same behaviour (tvm-ffi defines e.g. `ffi.StructuralEqual` as StructuralEqual::Equal), or,
 *     for modules, a hook into tvmrt's Rust module code, and throws tvm::ffi::Error on failure,
 *     as tvm-ffi's do.
 *  2. The virtual functions of tvmrt's own module objects (the slots of their vtable, a Rust
 *     static): each calls the Rust module behind the object through the same hooks.
 *  3. The default virtual functions of tvm::ffi::ModuleObj (the slots of its exported vtable,
 *     used only while a C++ subclass is being constructed), as tvm-ffi's header defines them.
 *  4. Calls from Rust into modules made by C++ code (a tvm::ffi::ModuleObj subclass of another
 *     library): a virtual call through the module's own vtable, with every exception caught and
 *     turned into the thread's raised error (status -1), so no exception reaches Rust frames.
 *
 * A member function and a free function whose first parameter is `this` have the same calling
 * convention in the Itanium C++ ABI (the hidden result pointer, if any, comes first in both), so
 * the functions of groups 1-3 are free functions given a symbol name with an asm label.
 */
#include "abi.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace tvmrt {
namespace cxx {
namespace {

/* What the Rust side provides to C++ (src/module/cxx.rs, `CxxHooks`): calls on any module,
 * tvmrt's or C++-made, given its header. Status 0, or -1 with the error raised on the thread. */
struct Hooks {
  /* The kind of a tvmrt module, NUL-terminated, owned by the module. */
  const char* (*kind)(void* module);
  int (*property_mask)(void* module, int32_t* out);
  /* `query_imports` 0: the module's own function; 1: then depth-first through its imports. */
  int (*get_function)(void* module, const TVMFFIAny* name, int32_t query_imports,
                      TVMFFIObjectHandle* out);
  int (*implements_function)(void* module, const TVMFFIAny* name, int32_t query_imports,
                             int32_t* out);
  /* `what` 0: metadata, 1: doc. `out`: a string or None. */
  int (*function_info)(void* module, const TVMFFIAny* name, int32_t what, int32_t query_imports,
                       TVMFFIAny* out);
  int (*write_to_file)(void* module, const TVMFFIAny* file_name, const TVMFFIAny* format);
  int (*write_formats)(void* module, TVMFFIAny* out);
  int (*save_to_bytes)(void* module, TVMFFIAny* out);
  int (*inspect_source)(void* module, const TVMFFIAny* format, TVMFFIAny* out);
  /* ModuleObj::ImportModule / ClearImports as tvm-ffi defines them (not the virtual call). */
  int (*import_module)(void* module, void* other);
  int (*clear_imports)(void* module);
  /* The context symbols (Module::VisitContextSymbols): an array of name, pointer, ... */
  int (*context_symbols)(TVMFFIAny* out);
};

TVMFFIByteArray Bytes(const char* s) { return TVMFFIByteArray{s, std::strlen(s)}; }

/* Throws the error raised on this thread as tvm::ffi::Error. */
[[noreturn]] void ThrowRaised() {
  TVMFFIObjectHandle error = nullptr;
  TVMFFIErrorMoveFromRaised(&error);
  if (error == nullptr) {
    TVMFFIErrorSetRaisedFromCStr("RuntimeError", "tvmrt: a call failed without raising an error");
    TVMFFIErrorMoveFromRaised(&error);
  }
  throw tvm::ffi::Error(static_cast<TVMFFIObject*>(error));
}

[[noreturn]] void Throw(const char* kind, const char* message) {
  TVMFFIErrorSetRaisedFromCStr(kind, message);
  ThrowRaised();
}

void Check(int status) {
  if (status != 0) ThrowRaised();
}

/* The global function `name`, looked up once per call site by the caller's static. */
TVMFFIObjectHandle Global(const char* name) {
  TVMFFIByteArray n = Bytes(name);
  TVMFFIObjectHandle f = nullptr;
  Check(TVMFFIFunctionGetGlobal(&n, &f));
  if (f == nullptr) Throw("RuntimeError", name);
  return f;
}

const Hooks& GetHooks() {
  static const Hooks* hooks = [] {
    TVMFFIObjectHandle f = Global("tvmrt.cxx.Hooks");
    TVMFFIAny result;
    result.type_index = kTVMFFINone;
    result.zero_padding = 0;
    result.v_int64 = 0;
    Check(TVMFFIFunctionCall(f, nullptr, 0, &result));
    if (result.type_index != kTVMFFIOpaquePtr || result.v_ptr == nullptr) {
      Throw("RuntimeError", "tvmrt.cxx.Hooks did not return the hook table");
    }
    return static_cast<const Hooks*>(result.v_ptr);
  }();
  return *hooks;
}

TVMFFIAny View(const TVMFFIAny& v) { return v; }

TVMFFIAny Bool(bool b) {
  TVMFFIAny v;
  v.type_index = kTVMFFIBool;
  v.zero_padding = 0;
  v.v_int64 = b ? 1 : 0;
  return v;
}

TVMFFIAny Obj(TVMFFIObject* obj) {
  TVMFFIAny v;
  v.type_index = obj == nullptr ? kTVMFFINone : obj->type_index;
  v.zero_padding = 0;
  v.v_obj = obj;
  return v;
}

/* Calls `f` with borrowed arguments; the result is owned. */
template <int N>
Value Call(TVMFFIObjectHandle f, TVMFFIAny (&&args)[N]) {
  TVMFFIAny result;
  result.type_index = kTVMFFINone;
  result.zero_padding = 0;
  result.v_int64 = 0;
  Check(TVMFFIFunctionCall(f, args, N, &result));
  return Value(result);
}

/* An object result (None allowed: a null reference). */
Ref ToRef(Value&& v, const char* what) {
  TVMFFIAny raw = v.release();
  if (raw.type_index == kTVMFFINone) return Ref();
  if (raw.type_index < kTVMFFIStaticObjectBegin) {
    { Value discard(raw); }
    Throw("TypeError", what);
  }
  return Ref(raw.v_obj);
}

bool ToBool(const Value& v, const char* what) {
  const TVMFFIAny& raw = v.raw();
  if (raw.type_index != kTVMFFIBool && raw.type_index != kTVMFFIInt) Throw("TypeError", what);
  return raw.v_int64 != 0;
}

int64_t ToInt(const Value& v, const char* what) {
  const TVMFFIAny& raw = v.raw();
  if (raw.type_index != kTVMFFIInt) Throw("TypeError", what);
  return raw.v_int64;
}

Value ToString(Value&& v, const char* what) {
  int32_t t = v.raw().type_index;
  if (t != kTVMFFISmallStr && t != kTVMFFIStr) Throw("TypeError", what);
  return Value(v.release());
}

Value NewString(const char* data, size_t size) {
  TVMFFIByteArray bytes{data, size};
  TVMFFIAny out;
  Check(TVMFFIStringFromByteArray(&bytes, &out));
  return Value(out);
}

#define TVMRT_GLOBAL(name)                   \
  [] {                                       \
    static TVMFFIObjectHandle f = Global(name); \
    return f;                                \
  }()

}  // namespace

/* ---- 1. libtvm_ffi.so's non-inline functions ------------------------------------------- */

/* tvm::ffi::Module::LoadFromFile(const String&) */
Ref LoadFromFile(const Value& file_name) __asm__("tvmrt_cxx_Module_LoadFromFile");
Ref LoadFromFile(const Value& file_name) {
  return ToRef(Call(TVMRT_GLOBAL("ffi.ModuleLoadFromFile"), {View(file_name.raw())}),
               "ffi.ModuleLoadFromFile did not return a module");
}

/* tvm::ffi::Module::VisitContextSymbols(const TypedFunction<void(String, void*)>&) */
void VisitContextSymbols(const Ref& callback) __asm__("tvmrt_cxx_Module_VisitContextSymbols");
void VisitContextSymbols(const Ref& callback) {
  TVMFFIAny list_raw;
  Check(GetHooks().context_symbols(&list_raw));
  Value list(list_raw);
  const TVMFFISeqCell* seq = reinterpret_cast<const TVMFFISeqCell*>(list.raw().v_obj + 1);
  const TVMFFIAny* items = static_cast<const TVMFFIAny*>(seq->data);
  for (int64_t i = 0; i + 1 < seq->size; i += 2) {
    TVMFFIAny symbol = items[i + 1];
    Call(callback.get(), {View(items[i]), View(symbol)});
  }
}

/* tvm::ffi::ModuleObj::GetFunction(const String&, bool) */
Ref GetFunctionQ(ModuleView* self, const Value& name, bool query_imports) __asm__(
    "tvmrt_cxx_ModuleObj_GetFunction");
Ref GetFunctionQ(ModuleView* self, const Value& name, bool query_imports) {
  TVMFFIObjectHandle out = nullptr;
  Check(GetHooks().get_function(self->header(), &name.raw(), query_imports, &out));
  return Ref(static_cast<TVMFFIObject*>(out));
}

/* tvm::ffi::ModuleObj::ImplementsFunction(const String&, bool) */
bool ImplementsFunctionQ(ModuleView* self, const Value& name, bool query_imports) __asm__(
    "tvmrt_cxx_ModuleObj_ImplementsFunction");
bool ImplementsFunctionQ(ModuleView* self, const Value& name, bool query_imports) {
  int32_t out = 0;
  Check(GetHooks().implements_function(self->header(), &name.raw(), query_imports, &out));
  return out != 0;
}

namespace {
Value FunctionInfo(ModuleView* self, const Value& name, int32_t what, bool query_imports) {
  TVMFFIAny out;
  Check(GetHooks().function_info(self->header(), &name.raw(), what, query_imports, &out));
  return Value(out);
}
}  // namespace

/* tvm::ffi::ModuleObj::GetFunctionMetadata(const String&, bool) */
Value GetFunctionMetadataQ(ModuleView* self, const Value& name, bool query_imports) __asm__(
    "tvmrt_cxx_ModuleObj_GetFunctionMetadata");
Value GetFunctionMetadataQ(ModuleView* self, const Value& name, bool query_imports) {
  return FunctionInfo(self, name, 0, query_imports);
}

/* tvm::ffi::ModuleObj::GetFunctionDoc(const String&, bool) */
Value GetFunctionDocQ(ModuleView* self, const Value& name, bool query_imports) __asm__(
    "tvmrt_cxx_ModuleObj_GetFunctionDoc");
Value GetFunctionDocQ(ModuleView* self, const Value& name, bool query_imports) {
  return FunctionInfo(self, name, 1, query_imports);
}

/* tvm::ffi::ModuleObj::ImportModule(const Module&): cycle check, then append. */
void ImportModule(ModuleView* self, const Ref& other) __asm__("tvmrt_cxx_ModuleObj_ImportModule");
void ImportModule(ModuleView* self, const Ref& other) {
  Check(GetHooks().import_module(self->header(), other.get()));
}

/* tvm::ffi::ModuleObj::ClearImports() */
void ClearImports(ModuleView* self) __asm__("tvmrt_cxx_ModuleObj_ClearImports");
void ClearImports(ModuleView* self) { Check(GetHooks().clear_imports(self->header())); }

/* tvm::ffi::json::Parse(const String&, String* error_msg): with `error_msg`, a parse error is
 * written there (and None returned) instead of thrown; on success it is set to "". */
Value JsonParse(const Value& text, Value* error_msg) __asm__("tvmrt_cxx_json_Parse");
Value JsonParse(const Value& text, Value* error_msg) {
  if (error_msg == nullptr) return Call(TVMRT_GLOBAL("ffi.json.Parse"), {View(text.raw())});
  try {
    Value out = Call(TVMRT_GLOBAL("ffi.json.Parse"), {View(text.raw())});
    Value empty = NewString("", 0);
    error_msg->~Value();
    new (error_msg) Value(empty.release());
    return out;
  } catch (const tvm::ffi::Error& e) {
    Value message = NewString(e.what(), std::strlen(e.what()));
    error_msg->~Value();
    new (error_msg) Value(message.release());
    return Value();
  }
}

/* tvm::ffi::json::Stringify(const Any&, const Optional<int>& indent) */
Value JsonStringify(const Value& value, const Value& indent) __asm__("tvmrt_cxx_json_Stringify");
Value JsonStringify(const Value& value, const Value& indent) {
  return ToString(Call(TVMRT_GLOBAL("ffi.json.Stringify"), {View(value.raw()), View(indent.raw())}),
                  "ffi.json.Stringify did not return a string");
}

/* tvm::ffi::StructuralEqual::Equal(const Any&, const Any&, bool, bool) */
bool StructuralEqual(const Value& lhs, const Value& rhs, bool map_free_vars,
                     bool skip_tensor_content) __asm__("tvmrt_cxx_StructuralEqual_Equal");
bool StructuralEqual(const Value& lhs, const Value& rhs, bool map_free_vars,
                     bool skip_tensor_content) {
  return ToBool(Call(TVMRT_GLOBAL("ffi.StructuralEqual"),
                     {View(lhs.raw()), View(rhs.raw()), Bool(map_free_vars),
                      Bool(skip_tensor_content)}),
                "ffi.StructuralEqual did not return a bool");
}

/* tvm::ffi::StructuralEqual::GetFirstMismatch(const Any&, const Any&, bool, bool) */
Ref FirstMismatch(const Value& lhs, const Value& rhs, bool map_free_vars,
                  bool skip_tensor_content) __asm__("tvmrt_cxx_StructuralEqual_GetFirstMismatch");
Ref FirstMismatch(const Value& lhs, const Value& rhs, bool map_free_vars,
                  bool skip_tensor_content) {
  return ToRef(Call(TVMRT_GLOBAL("ffi.GetFirstStructuralMismatch"),
                    {View(lhs.raw()), View(rhs.raw()), Bool(map_free_vars),
                     Bool(skip_tensor_content)}),
               "ffi.GetFirstStructuralMismatch did not return a pair of paths");
}

/* tvm::ffi::StructuralHash::Hash(const Any&, bool, bool) */
uint64_t StructuralHash(const Value& value, bool map_free_vars, bool skip_tensor_content) __asm__(
    "tvmrt_cxx_StructuralHash_Hash");
uint64_t StructuralHash(const Value& value, bool map_free_vars, bool skip_tensor_content) {
  // The global returns the hash bit-cast to int64 (tvm-ffi's FFIStructuralHash).
  return static_cast<uint64_t>(ToInt(Call(TVMRT_GLOBAL("ffi.StructuralHash"),
                                          {View(value.raw()), Bool(map_free_vars),
                                           Bool(skip_tensor_content)}),
                                     "ffi.StructuralHash did not return an int"));
}

/* tvm::ffi::ReprPrint(const Any&) */
Value ReprPrint(const Value& value) __asm__("tvmrt_cxx_ReprPrint");
Value ReprPrint(const Value& value) {
  return ToString(Call(TVMRT_GLOBAL("ffi.ReprPrint"), {View(value.raw())}),
                  "ffi.ReprPrint did not return a string");
}

/* tvm::ffi::VisitErrorContext::FindAccessPaths(const ObjectRef&, const VisitErrorContext&,
 * bool) */
Ref FindAccessPaths(const Ref& root, const Ref& context, bool allow_prefix_match) __asm__(
    "tvmrt_cxx_VisitErrorContext_FindAccessPaths");
Ref FindAccessPaths(const Ref& root, const Ref& context, bool allow_prefix_match) {
  return ToRef(Call(TVMRT_GLOBAL("ffi.VisitErrorContext.FindAccessPaths"),
                    {Obj(root.get()), Obj(context.get()), Bool(allow_prefix_match)}),
               "ffi.VisitErrorContext.FindAccessPaths did not return an array");
}

/* tvm::ffi::DeepCopy, RecursiveHash, RecursiveEq/Lt/Le/Gt/Ge, ToJSONGraph, FromJSONGraph */
Value DeepCopy(const Value& value) __asm__("tvmrt_cxx_DeepCopy");
Value DeepCopy(const Value& value) {
  return Call(TVMRT_GLOBAL("ffi.DeepCopy"), {View(value.raw())});
}

int64_t RecursiveHash(const Value& value) __asm__("tvmrt_cxx_RecursiveHash");
int64_t RecursiveHash(const Value& value) {
  return ToInt(Call(TVMRT_GLOBAL("ffi.RecursiveHash"), {View(value.raw())}),
               "ffi.RecursiveHash did not return an int");
}

#define TVMRT_RECURSIVE_COMPARE(Name, label)                                              \
  bool Name(const Value& lhs, const Value& rhs) __asm__(label);                           \
  bool Name(const Value& lhs, const Value& rhs) {                                         \
    return ToBool(Call(TVMRT_GLOBAL("ffi." #Name), {View(lhs.raw()), View(rhs.raw())}),   \
                  "ffi." #Name " did not return a bool");                                 \
  }
TVMRT_RECURSIVE_COMPARE(RecursiveEq, "tvmrt_cxx_RecursiveEq")
TVMRT_RECURSIVE_COMPARE(RecursiveLt, "tvmrt_cxx_RecursiveLt")
TVMRT_RECURSIVE_COMPARE(RecursiveLe, "tvmrt_cxx_RecursiveLe")
TVMRT_RECURSIVE_COMPARE(RecursiveGt, "tvmrt_cxx_RecursiveGt")
TVMRT_RECURSIVE_COMPARE(RecursiveGe, "tvmrt_cxx_RecursiveGe")
#undef TVMRT_RECURSIVE_COMPARE

Value ToJSONGraph(const Value& value, const Value& metadata) __asm__("tvmrt_cxx_ToJSONGraph");
Value ToJSONGraph(const Value& value, const Value& metadata) {
  return Call(TVMRT_GLOBAL("ffi.ToJSONGraph"), {View(value.raw()), View(metadata.raw())});
}

Value FromJSONGraph(const Value& value) __asm__("tvmrt_cxx_FromJSONGraph");
Value FromJSONGraph(const Value& value) {
  return Call(TVMRT_GLOBAL("ffi.FromJSONGraph"), {View(value.raw())});
}

/* ---- 2. tvmrt's modules: the virtual functions of their C++ face ---------------------- */

const char* RustKind(const ModuleView* self) __asm__("tvmrt_cxx_rust_module_kind");
const char* RustKind(const ModuleView* self) {
  return GetHooks().kind(const_cast<ModuleView*>(self)->header());
}

int RustPropertyMask(const ModuleView* self) __asm__("tvmrt_cxx_rust_module_property_mask");
int RustPropertyMask(const ModuleView* self) {
  int32_t out = 0;
  Check(GetHooks().property_mask(const_cast<ModuleView*>(self)->header(), &out));
  return out;
}

Ref RustGetFunction(ModuleView* self, const Value& name) __asm__(
    "tvmrt_cxx_rust_module_get_function");
Ref RustGetFunction(ModuleView* self, const Value& name) { return GetFunctionQ(self, name, false); }

bool RustImplementsFunction(ModuleView* self, const Value& name) __asm__(
    "tvmrt_cxx_rust_module_implements_function");
bool RustImplementsFunction(ModuleView* self, const Value& name) {
  return ImplementsFunctionQ(self, name, false);
}

Value RustGetFunctionDoc(ModuleView* self, const Value& name) __asm__(
    "tvmrt_cxx_rust_module_get_function_doc");
Value RustGetFunctionDoc(ModuleView* self, const Value& name) {
  return FunctionInfo(self, name, 1, false);
}

Value RustGetFunctionMetadata(ModuleView* self, const Value& name) __asm__(
    "tvmrt_cxx_rust_module_get_function_metadata");
Value RustGetFunctionMetadata(ModuleView* self, const Value& name) {
  return FunctionInfo(self, name, 0, false);
}

void RustWriteToFile(const ModuleView* self, const Value& file_name, const Value& format) __asm__(
    "tvmrt_cxx_rust_module_write_to_file");
void RustWriteToFile(const ModuleView* self, const Value& file_name, const Value& format) {
  Check(GetHooks().write_to_file(const_cast<ModuleView*>(self)->header(), &file_name.raw(),
                                 &format.raw()));
}

Ref RustGetWriteFormats(const ModuleView* self) __asm__("tvmrt_cxx_rust_module_get_write_formats");
Ref RustGetWriteFormats(const ModuleView* self) {
  TVMFFIAny out;
  Check(GetHooks().write_formats(const_cast<ModuleView*>(self)->header(), &out));
  return ToRef(Value(out), "write formats: not an array");
}

Value RustSaveToBytes(const ModuleView* self) __asm__("tvmrt_cxx_rust_module_save_to_bytes");
Value RustSaveToBytes(const ModuleView* self) {
  TVMFFIAny out;
  Check(GetHooks().save_to_bytes(const_cast<ModuleView*>(self)->header(), &out));
  return Value(out);
}

Value RustInspectSource(const ModuleView* self, const Value& format) __asm__(
    "tvmrt_cxx_rust_module_inspect_source");
Value RustInspectSource(const ModuleView* self, const Value& format) {
  TVMFFIAny out;
  Check(GetHooks().inspect_source(const_cast<ModuleView*>(self)->header(), &format.raw(), &out));
  return Value(out);
}

/* ---- 3. tvm::ffi::ModuleObj's own virtual functions (module.h's inline defaults) ------- */

int DefaultPropertyMask(const ModuleView*) __asm__("tvmrt_cxx_module_default_property_mask");
int DefaultPropertyMask(const ModuleView*) { return 0; }

bool DefaultImplementsFunction(ModuleView* self, const Value& name) __asm__(
    "tvmrt_cxx_module_default_implements_function");
bool DefaultImplementsFunction(ModuleView* self, const Value& name) {
  return self->GetFunction(name).get() != nullptr;
}

Value DefaultFunctionInfo(ModuleView*, const Value&) __asm__(
    "tvmrt_cxx_module_default_function_info");
Value DefaultFunctionInfo(ModuleView*, const Value&) { return Value(); }

namespace {
[[noreturn]] void Unsupported(const ModuleView* self, const char* what) {
  const char* kind = self->kind();
  const char* parts[] = {"Module[", kind, "] does not support ", what, nullptr};
  TVMFFIErrorSetRaisedFromCStrParts("RuntimeError", parts, 4);
  ThrowRaised();
}
}  // namespace

void DefaultWriteToFile(const ModuleView* self, const Value&, const Value&) __asm__(
    "tvmrt_cxx_module_default_write_to_file");
void DefaultWriteToFile(const ModuleView* self, const Value&, const Value&) {
  Unsupported(self, "WriteToFile");
}

Ref DefaultGetWriteFormats(const ModuleView*) __asm__(
    "tvmrt_cxx_module_default_get_write_formats");
Ref DefaultGetWriteFormats(const ModuleView*) {
  TVMFFIAny none[1];
  TVMFFIAny result;
  result.type_index = kTVMFFINone;
  result.zero_padding = 0;
  result.v_int64 = 0;
  Check(TVMFFIFunctionCall(TVMRT_GLOBAL("ffi.Array"), none, 0, &result));
  return ToRef(Value(result), "ffi.Array did not return an array");
}

Value DefaultSaveToBytes(const ModuleView* self) __asm__(
    "tvmrt_cxx_module_default_save_to_bytes");
Value DefaultSaveToBytes(const ModuleView* self) { Unsupported(self, "SaveToBytes"); }

Value DefaultInspectSource(const ModuleView*, const Value&) __asm__(
    "tvmrt_cxx_module_default_inspect_source");
Value DefaultInspectSource(const ModuleView*, const Value&) { return NewString("", 0); }

/* ---- 4. Rust calling modules made by C++ code --------------------------------------------- */

namespace {
/* Runs `body`, turning any exception into the raised error and -1 (tvm-ffi's
 * TVM_FFI_SAFE_CALL_END, which reports a std::exception as an InternalError). */
template <typename F>
int Guard(F body) noexcept {
  try {
    body();
    return 0;
  } catch (const tvm::ffi::Error& e) {
    // Borrowed: TVMFFIErrorSetRaised takes its own reference.
    TVMFFIErrorSetRaised(e.get());
  } catch (const std::exception& e) {
    TVMFFIErrorSetRaisedFromCStr("InternalError", e.what());
  } catch (...) {
    TVMFFIErrorSetRaisedFromCStr("InternalError",
                                 "a C++ module threw an exception that is not a std::exception");
  }
  return -1;
}

/* A borrowed TVMFFIAny seen as the C++ value it holds (no reference taken or released). */
const Value& Borrow(const TVMFFIAny* v) { return *reinterpret_cast<const Value*>(v); }
}  // namespace

extern "C" {

int tvmrt_cxx_foreign_kind(void* module, const char** out) noexcept {
  return Guard([&] { *out = ModuleView::FromHeader(module)->kind(); });
}

int tvmrt_cxx_foreign_property_mask(void* module, int32_t* out) noexcept {
  return Guard([&] { *out = ModuleView::FromHeader(module)->GetPropertyMask(); });
}

int tvmrt_cxx_foreign_get_function(void* module, const TVMFFIAny* name,
                                   TVMFFIObjectHandle* out) noexcept {
  return Guard([&] {
    Ref f = ModuleView::FromHeader(module)->GetFunction(Borrow(name));
    TVMFFIObject* p = f.get();
    if (p != nullptr) TVMFFIObjectIncRef(p);
    *out = p;
  });
}

int tvmrt_cxx_foreign_implements_function(void* module, const TVMFFIAny* name,
                                          int32_t* out) noexcept {
  return Guard([&] { *out = ModuleView::FromHeader(module)->ImplementsFunction(Borrow(name)); });
}

int tvmrt_cxx_foreign_function_info(void* module, const TVMFFIAny* name, int32_t what,
                                    TVMFFIAny* out) noexcept {
  return Guard([&] {
    ModuleView* m = ModuleView::FromHeader(module);
    Value v = what == 0 ? m->GetFunctionMetadata(Borrow(name)) : m->GetFunctionDoc(Borrow(name));
    *out = v.release();
  });
}

int tvmrt_cxx_foreign_write_to_file(void* module, const TVMFFIAny* file_name,
                                    const TVMFFIAny* format) noexcept {
  return Guard(
      [&] { ModuleView::FromHeader(module)->WriteToFile(Borrow(file_name), Borrow(format)); });
}

int tvmrt_cxx_foreign_write_formats(void* module, TVMFFIAny* out) noexcept {
  return Guard([&] {
    Ref formats = ModuleView::FromHeader(module)->GetWriteFormats();
    if (formats.get() != nullptr) TVMFFIObjectIncRef(formats.get());
    *out = Obj(formats.get());
  });
}

int tvmrt_cxx_foreign_save_to_bytes(void* module, TVMFFIAny* out) noexcept {
  return Guard([&] { *out = ModuleView::FromHeader(module)->SaveToBytes().release(); });
}

int tvmrt_cxx_foreign_inspect_source(void* module, const TVMFFIAny* format,
                                     TVMFFIAny* out) noexcept {
  return Guard(
      [&] { *out = ModuleView::FromHeader(module)->InspectSource(Borrow(format)).release(); });
}

int tvmrt_cxx_foreign_import_module(void* module, void* other) noexcept {
  return Guard([&] {
    // The callee takes `const Module&`: a reference to a pointer-sized holder of `other`.
    TVMFFIObject* holder = static_cast<TVMFFIObject*>(other);
    ModuleView::FromHeader(module)->ImportModule(*reinterpret_cast<const Ref*>(&holder));
  });
}

int tvmrt_cxx_foreign_clear_imports(void* module) noexcept {
  return Guard([&] { ModuleView::FromHeader(module)->ClearImports(); });
}

}  // extern "C"

}  // namespace cxx
}  // namespace tvmrt
