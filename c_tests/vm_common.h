/* Running a Relax model through the tvm-ffi C API only, the way a C application deploys a
 * model TVM compiled: load the library, make a VM from its executable, initialize it, call
 * `main` with tensors. Nothing here is specific to tvmrt, so the same code runs on Apache
 * TVM's runtime too (benches/vm_bench.c builds it against both).
 *
 * Functions used: TVMFFIFunctionGetGlobal, TVMFFIFunctionCall, TVMFFIObjectDecRef,
 * TVMFFITensorFromDLPack, TVMFFIErrorMoveFromRaised, and the global functions
 * `ffi.ModuleLoadFromFile` and `ffi.ModuleGetFunction`. */
#ifndef TVMRT_C_TESTS_VM_COMMON_H_
#define TVMRT_C_TESTS_VM_COMMON_H_

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The message of the error raised by the last failed call ("" if none), in `buf`. */
static inline const char* vm_take_error(char* buf, size_t cap) {
  TVMFFIObjectHandle err = NULL;
  buf[0] = 0;
  TVMFFIErrorMoveFromRaised(&err);
  if (err) {
    const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)((char*)err + sizeof(TVMFFIObject));
    snprintf(buf, cap, "%.*s: %.*s", (int)cell->kind.size, cell->kind.data,
             (int)cell->message.size, cell->message.data);
    TVMFFIObjectDecRef(err);
  }
  return buf;
}

static inline TVMFFIAny vm_none(void) {
  TVMFFIAny a;
  memset(&a, 0, sizeof(a));
  a.type_index = kTVMFFINone;
  return a;
}

static inline TVMFFIAny vm_int(int64_t v) {
  TVMFFIAny a = vm_none();
  a.type_index = kTVMFFIInt;
  a.v_int64 = v;
  return a;
}

static inline TVMFFIAny vm_str(const char* s) {
  TVMFFIAny a = vm_none();
  a.type_index = kTVMFFIRawStr;
  a.v_c_str = s;
  return a;
}

static inline TVMFFIAny vm_obj(TVMFFIObjectHandle h) {
  TVMFFIAny a = vm_none();
  a.type_index = ((TVMFFIObject*)h)->type_index;
  a.v_obj = (TVMFFIObject*)h;
  return a;
}

/* Releases an owned value (a call result). */
static inline void vm_release(TVMFFIAny* a) {
  if (a->type_index >= kTVMFFIStaticObjectBegin && a->v_obj) TVMFFIObjectDecRef(a->v_obj);
  *a = vm_none();
}

/* Calls `f`; returns 0 or -1 with the error message in `err` (when not NULL). */
static inline int vm_call(TVMFFIObjectHandle f, TVMFFIAny* args, int n, TVMFFIAny* out,
                          char* err, size_t cap) {
  *out = vm_none();
  if (TVMFFIFunctionCall(f, args, n, out) != 0) {
    char local[64];
    if (err) {
      vm_take_error(err, cap);
    } else {
      vm_take_error(local, sizeof(local));
    }
    return -1;
  }
  return 0;
}

/* A loaded model: the library module, its VM module and the VM's functions. */
typedef struct {
  TVMFFIObjectHandle lib;
  TVMFFIObjectHandle vm;
  TVMFFIObjectHandle get_function; /* ffi.ModuleGetFunction */
} VmModel;

static inline TVMFFIObjectHandle vm_global(const char* name) {
  TVMFFIByteArray n = {name, strlen(name)};
  TVMFFIObjectHandle f = NULL;
  if (TVMFFIFunctionGetGlobal(&n, &f) != 0) return NULL;
  return f;
}

/* `mod`'s function `name` (a new reference) or NULL. */
static inline TVMFFIObjectHandle vm_module_function(const VmModel* m, TVMFFIObjectHandle mod,
                                                    const char* name) {
  TVMFFIAny args[3] = {vm_obj(mod), vm_str(name), vm_int(0)};
  TVMFFIAny out;
  args[2].type_index = kTVMFFIBool;
  if (vm_call(m->get_function, args, 3, &out, NULL, 0) != 0) return NULL;
  if (out.type_index != kTVMFFIFunction) {
    vm_release(&out);
    return NULL;
  }
  return out.v_obj;
}

/* Loads `path`, makes its VM and initializes it on `dev` (`allocator` 1 naive / 2 pooled; a
 * device other than the CPU gets the CPU as host device after it, as TVM's Python VM passes).
 * Returns 0, or -1 with the message in `err`. */
static inline int vm_load_on(VmModel* m, const char* path, DLDevice dev, int allocator, char* err,
                             size_t cap) {
  TVMFFIObjectHandle load = vm_global("ffi.ModuleLoadFromFile");
  TVMFFIAny arg, out;
  TVMFFIObjectHandle f;
  memset(m, 0, sizeof(*m));
  m->get_function = vm_global("ffi.ModuleGetFunction");
  if (!load || !m->get_function) {
    snprintf(err, cap, "ffi.ModuleLoadFromFile / ffi.ModuleGetFunction are not registered");
    return -1;
  }
  arg = vm_str(path);
  if (vm_call(load, &arg, 1, &out, err, cap) != 0) return -1;
  TVMFFIObjectDecRef(load);
  m->lib = out.v_obj;
  f = vm_module_function(m, m->lib, "vm_load_executable");
  if (!f) {
    snprintf(err, cap, "%s has no vm_load_executable (not a Relax model?)", path);
    return -1;
  }
  if (vm_call(f, NULL, 0, &out, err, cap) != 0) return -1;
  TVMFFIObjectDecRef(f);
  m->vm = out.v_obj;
  f = vm_module_function(m, m->vm, "vm_initialization");
  if (!f) {
    snprintf(err, cap, "the VM has no vm_initialization");
    return -1;
  }
  {
    TVMFFIAny init[6] = {vm_int(dev.device_type), vm_int(dev.device_id), vm_int(allocator),
                         vm_int(kDLCPU),          vm_int(0),             vm_int(allocator)};
    if (vm_call(f, init, dev.device_type == kDLCPU ? 3 : 6, &out, err, cap) != 0) return -1;
  }
  TVMFFIObjectDecRef(f);
  return 0;
}

/* vm_load_on the CPU. */
static inline int vm_load(VmModel* m, const char* path, int allocator, char* err, size_t cap) {
  DLDevice cpu = {kDLCPU, 0};
  return vm_load_on(m, path, cpu, allocator, err, cap);
}

static inline void vm_unload(VmModel* m) {
  if (m->vm) TVMFFIObjectDecRef(m->vm);
  if (m->lib) TVMFFIObjectDecRef(m->lib);
  if (m->get_function) TVMFFIObjectDecRef(m->get_function);
  memset(m, 0, sizeof(*m));
}

/* A host array: 64-byte aligned data with its shape and dtype. */
typedef struct {
  void* data;
  size_t nbytes;
  int ndim;
  int64_t shape[8];
  DLDataType dtype;
} HostArray;

static inline void host_free(HostArray* a) {
  free(a->data);
  a->data = NULL;
}

/* Reads a little-endian C-order .npy file (<f4, <f8, <i4, <i8, |b1). Returns 0 or -1. */
static inline int npy_read(const char* path, HostArray* out) {
  FILE* f = fopen(path, "rb");
  unsigned char pre[12];
  char header[1024];
  size_t hlen, start, i;
  long end;
  const char *d, *s;
  memset(out, 0, sizeof(*out));
  if (!f) return -1;
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) goto fail;
  if (pre[6] == 1) {
    hlen = pre[8] | (pre[9] << 8);
    start = 10;
  } else {
    if (fread(pre + 10, 1, 2, f) != 2) goto fail;
    hlen = pre[8] | (pre[9] << 8) | ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
    start = 12;
  }
  if (hlen >= sizeof(header) || fread(header, 1, hlen, f) != hlen) goto fail;
  header[hlen] = 0;
  d = strstr(header, "'descr': '");
  s = strstr(header, "'shape': (");
  if (!d || !s || !strstr(header, "'fortran_order': False")) goto fail;
  d += 10;
  if (!strncmp(d, "<f4", 3)) {
    out->dtype.code = kDLFloat, out->dtype.bits = 32;
  } else if (!strncmp(d, "<f8", 3)) {
    out->dtype.code = kDLFloat, out->dtype.bits = 64;
  } else if (!strncmp(d, "<i4", 3)) {
    out->dtype.code = kDLInt, out->dtype.bits = 32;
  } else if (!strncmp(d, "<i8", 3)) {
    out->dtype.code = kDLInt, out->dtype.bits = 64;
  } else if (!strncmp(d, "|b1", 3)) {
    out->dtype.code = kDLBool, out->dtype.bits = 8;
  } else {
    goto fail;
  }
  out->dtype.lanes = 1;
  s += 10;
  while (*s && *s != ')') {
    char* e;
    long long v = strtoll(s, &e, 10);
    if (e == s) break;
    if (out->ndim == 8) goto fail;
    out->shape[out->ndim++] = v;
    s = e;
    while (*s == ',' || *s == ' ') s++;
  }
  if (fseek(f, 0, SEEK_END) != 0) goto fail;
  end = ftell(f);
  out->nbytes = (size_t)end - start - hlen;
  {
    size_t want = out->dtype.bits / 8;
    for (i = 0; i < (size_t)out->ndim; i++) want *= (size_t)out->shape[i];
    if (want != out->nbytes) goto fail;
  }
  out->data = aligned_alloc(64, (out->nbytes + 63) / 64 * 64 + 64);
  if (!out->data) goto fail;
  if (fseek(f, (long)(start + hlen), SEEK_SET) != 0 || fread(out->data, 1, out->nbytes, f) != out->nbytes)
    goto fail;
  fclose(f);
  return 0;
fail:
  fclose(f);
  host_free(out);
  return -1;
}

/* A tvm-ffi tensor object viewing `a` (which must outlive it), through DLPack. */
static inline TVMFFIObjectHandle host_tensor(HostArray* a) {
  DLManagedTensor* m = (DLManagedTensor*)calloc(1, sizeof(DLManagedTensor));
  TVMFFIObjectHandle t = NULL;
  m->dl_tensor.data = a->data;
  m->dl_tensor.device.device_type = kDLCPU;
  m->dl_tensor.ndim = a->ndim;
  m->dl_tensor.dtype = a->dtype;
  m->dl_tensor.shape = a->shape;
  m->manager_ctx = m;
  m->deleter = (void (*)(DLManagedTensor*))free;
  if (TVMFFITensorFromDLPack(m, 64, 1, &t) != 0) {
    free(m);
    return NULL;
  }
  return t;
}

/* The DLTensor of a tensor object (it follows the object header). */
static inline const DLTensor* tensor_dl(TVMFFIObjectHandle t) {
  return (const DLTensor*)((const char*)t + sizeof(TVMFFIObject));
}

/* Whether float32 tensor `got` matches `want` within rtol/atol (message in `why`). */
static inline int close_f32(const DLTensor* got, const HostArray* want, double rtol, double atol,
                            char* why, size_t cap) {
  int64_t n = 1, i;
  if (got->ndim != want->ndim || got->dtype.code != kDLFloat || got->dtype.bits != 32) {
    snprintf(why, cap, "rank/dtype differ (ndim %d vs %d)", got->ndim, want->ndim);
    return 0;
  }
  for (i = 0; i < got->ndim; i++) {
    if (got->shape[i] != want->shape[i]) {
      snprintf(why, cap, "dim %d: %lld vs %lld", (int)i, (long long)got->shape[i],
               (long long)want->shape[i]);
      return 0;
    }
    n *= got->shape[i];
  }
  for (i = 0; i < n; i++) {
    double g = ((const float*)((const char*)got->data + got->byte_offset))[i];
    double w = ((const float*)want->data)[i];
    double diff = g > w ? g - w : w - g;
    double lim = atol + rtol * (w < 0 ? -w : w);
    if (diff > lim) {
      snprintf(why, cap, "element %lld: got %g, want %g", (long long)i, g, w);
      return 0;
    }
  }
  return 1;
}

#endif /* TVMRT_C_TESTS_VM_COMMON_H_ */
