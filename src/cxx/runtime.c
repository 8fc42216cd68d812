/* tvmrt: the C++ runtime of the C++ part, bound at first use. SPDX-License-Identifier: Apache-2.0
 *
 * The C++ part (shim.cc) needs a dozen things of the C++ runtime: throwing and catching
 * (`__cxa_throw`, `__cxa_begin_catch`, the personality routine...), the guards of function-local
 * statics, std::exception's destructor and typeinfo, and the vtables of the typeinfo classes
 * (the vptr of every typeinfo object, tvm::ffi::ModuleObj's in src/capi/cxx_abi.rs included).
 * Linking libstdc++ for them made every process that loads tvmrt load and relocate libstdc++
 * and libm: 2/3 of a C program's whole cold start (BENCHMARKS.md, "Cold start"), though only
 * C++ code ever reaches the C++ part, and C++ code brings libstdc++ with it.
 *
 * So tvmrt defines those symbols itself, hidden (the linker binds shim.cc's and the Rust code's
 * references to them, and no DT_NEEDED libstdc++ is recorded), and each forwards to the process's
 * libstdc++.so.6, found at first use (`ensure`): the functions through pointers looked up then,
 * the vtables (the three typeinfo classes', std::exception's) as copies of libstdc++'s (same slots, so every virtual call on a
 * typeinfo runs libstdc++'s code), std::exception's typeinfo as an object of our own (type
 * matching compares typeinfo names, never addresses, on GNU/Linux). Exceptions thus go through
 * the one C++ runtime of the process, as when libstdc++ was linked.
 *
 * `ensure` runs at load when libstdc++ is already in the process (a C++ program), so the
 * typeinfo vtables are filled before any C++ code can look at them; otherwise at the first throw,
 * catch, guard or call from C++ into tvmrt (the C++ part is only reached from C++ code: a C++
 * program, or a module made by a C++ library, which loads libstdc++ first).
 *
 * Not on 32-bit Arm, whose exception ABI (EHABI) calls the runtime with other conventions
 * (`__cxa_end_cleanup`, a three-argument personality): build.rs links libstdc++ there.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* A typeinfo class's vtable: room for libstdc++'s (13 words in GCC 12-14). */
#define VTABLE_WORDS 32

HIDDEN void* tvmrt_class_ti_vtable[VTABLE_WORDS] __asm__("_ZTVN10__cxxabiv117__class_type_infoE");
HIDDEN void* tvmrt_si_class_ti_vtable[VTABLE_WORDS] __asm__(
    "_ZTVN10__cxxabiv120__si_class_type_infoE");
HIDDEN void* tvmrt_vmi_class_ti_vtable[VTABLE_WORDS] __asm__(
    "_ZTVN10__cxxabiv121__vmi_class_type_infoE");

/* `vtable for std::exception` (what a tvm::ffi::Error's base points at while it is built). */
HIDDEN void* tvmrt_exception_vtable[VTABLE_WORDS] __asm__("_ZTVSt9exception");

/* `typeinfo for std::exception`: a `__class_type_info` (vptr, name). */
HIDDEN const void* const tvmrt_exception_ti[2] __asm__("_ZTISt9exception") = {
    &tvmrt_class_ti_vtable[2], "St9exception"};

/* operator delete(void*, size_t): size_t is `unsigned long` (m) on 64-bit targets, `unsigned
 * int` (j) on 32-bit x86. */
#if __SIZEOF_SIZE_T__ == 8
#define SIZED_DELETE "_ZdlPvm"
#else
#define SIZED_DELETE "_ZdlPvj"
#endif
/* The functions forwarded, in the order of `kNames`. */
enum {
  kAllocateException,
  kBeginCatch,
  kEndCatch,
  kThrow,
  kGuardAcquire,
  kGuardRelease,
  kGuardAbort,
  kExceptionDtor,
  kSizedDelete,
  kPersonality,
  kCount
};
static const char* const kNames[kCount] = {
    "__cxa_allocate_exception", "__cxa_begin_catch",   "__cxa_end_catch",
    "__cxa_throw",              "__cxa_guard_acquire", "__cxa_guard_release",
    "__cxa_guard_abort",        "_ZNSt9exceptionD2Ev", SIZED_DELETE,
    "__gxx_personality_v0",
};
static void* real[kCount];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fail(const char* what, const char* detail) {
  fprintf(stderr, "tvmrt: the C++ part cannot use libstdc++.so.6: %s%s%s\n", what,
          detail ? ": " : "", detail ? detail : "");
  abort();
}

/* Copies libstdc++'s vtable `name` over ours. */
static void copy_vtable(void* lib, const char* name, void** ours) {
  void* theirs = dlsym(lib, name);
  Dl_info info;
  const ElfW(Sym)* sym = NULL;
  if (!theirs || !dladdr1(theirs, &info, (void**)&sym, RTLD_DL_SYMENT) || !sym) fail(name, dlerror());
  if (sym->st_size > sizeof(void*) * VTABLE_WORDS) fail(name, "larger than tvmrt's copy");
  memcpy(ours, theirs, sym->st_size);
}

static void bind(void) {
  void* lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
  int i;
  if (!lib) fail("dlopen", dlerror());
  for (i = 0; i < kCount; i++) {
    real[i] = dlsym(lib, kNames[i]);
    if (!real[i]) fail(kNames[i], dlerror());
  }
  copy_vtable(lib, "_ZTVN10__cxxabiv117__class_type_infoE", tvmrt_class_ti_vtable);
  copy_vtable(lib, "_ZTVN10__cxxabiv120__si_class_type_infoE", tvmrt_si_class_ti_vtable);
  copy_vtable(lib, "_ZTVN10__cxxabiv121__vmi_class_type_infoE", tvmrt_vmi_class_ti_vtable);
  copy_vtable(lib, "_ZTVSt9exception", tvmrt_exception_vtable);
  /* The handle stays open: the process keeps libstdc++ as long as tvmrt. */
}

/* Binds the C++ runtime once (any thread; later calls return at once). */
HIDDEN void tvmrt_cxx_runtime_ensure(void) {
  if (pthread_once(&once, bind) != 0) fail("pthread_once", NULL);
}

static int find_libstdcxx(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  return info->dlpi_name && strstr(info->dlpi_name, "/libstdc++.so") != NULL;
}

/* At load: bind now when a C++ program (or library) has brought libstdc++ already. Looks at
 * the loaded objects' names only: a C program pays no search of the file system. */
__attribute__((constructor)) static void bind_if_present(void) {
  if (dl_iterate_phdr(find_libstdcxx, NULL)) tvmrt_cxx_runtime_ensure();
}

#define REAL(i, type) ((type)(tvmrt_cxx_runtime_ensure(), real[i]))

HIDDEN void* __cxa_allocate_exception(size_t size) {
  return REAL(kAllocateException, void* (*)(size_t))(size);
}
HIDDEN void* __cxa_begin_catch(void* e) { return REAL(kBeginCatch, void* (*)(void*))(e); }
HIDDEN void __cxa_end_catch(void) { REAL(kEndCatch, void (*)(void))(); }
HIDDEN __attribute__((noreturn)) void __cxa_throw(void* obj, void* type, void (*dtor)(void*)) {
  REAL(kThrow, void (*)(void*, void*, void (*)(void*)))(obj, type, dtor);
  abort(); /* __cxa_throw does not return */
}
HIDDEN int __cxa_guard_acquire(void* g) { return REAL(kGuardAcquire, int (*)(void*))(g); }
HIDDEN void __cxa_guard_release(void* g) { REAL(kGuardRelease, void (*)(void*))(g); }
HIDDEN void __cxa_guard_abort(void* g) { REAL(kGuardAbort, void (*)(void*))(g); }
HIDDEN void tvmrt_exception_dtor(void* self) __asm__("_ZNSt9exceptionD2Ev");
void tvmrt_exception_dtor(void* self) { REAL(kExceptionDtor, void (*)(void*))(self); }
HIDDEN void tvmrt_sized_delete(void* p, size_t n) __asm__(SIZED_DELETE);
void tvmrt_sized_delete(void* p, size_t n) { REAL(kSizedDelete, void (*)(void*, size_t))(p, n); }
/* The DWARF personality routine (every target here but 32-bit Arm). */
HIDDEN int __gxx_personality_v0(int version, int actions, uint64_t exception_class, void* ue,
                                void* context) {
  return REAL(kPersonality, int (*)(int, int, uint64_t, void*, void*))(version, actions,
                                                                       exception_class, ue, context);
}
/* What a pure virtual slot points at (libstdc++ prints the same and terminates). */
HIDDEN void __cxa_pure_virtual(void) {
  fputs("pure virtual method called\n", stderr);
  abort();
}
