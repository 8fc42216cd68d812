/* tvmrt._core: the calls a Python program makes over and over, in C.
 *
 * The package (tvmrt/_ffi.py) is written against libtvmrt's tvm-ffi C ABI through ctypes;
 * this extension gives its hot paths a compiled form with the same behaviour:
 *   - Object: the base of every runtime object's wrapper; owns one reference (released when
 *     the wrapper goes), `_handle` the object's address;
 *   - Function(Object): calling converts the arguments (None, bool, int, float, str, bytes,
 *     runtime objects, Device, anything with __dlpack__ such as numpy arrays), calls
 *     TVMFFIFunctionCall with the GIL released (as TVM's Python does), and converts the result
 *     (tensors, functions, modules, scalars, strings, bytes); everything else goes through the
 *     package's Python converters (hooks), so there is one definition of each conversion;
 *   - Tensor(Object): __dlpack__ / __dlpack_device__ (capsules whose destructor releases an
 *     unconsumed export);
 *   - from_dlpack(obj): a runtime tensor over another library's array, without a copy.
 * Built for CPython's stable ABI (abi3, 3.10+): one binary for every CPython from 3.10. The
 * library's functions are looked up in the libtvmrt the package loaded (init), so the
 * extension links against nothing but libc.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

/* ------------------------------------------------------------------------------------------ */
/* The library's functions, resolved by init(). */

static int (*p_call)(TVMFFIObjectHandle, const TVMFFIAny*, int32_t, TVMFFIAny*);
static int (*p_inc_ref)(TVMFFIObjectHandle);
static int (*p_dec_ref)(TVMFFIObjectHandle);
static void (*p_move_from_raised)(TVMFFIObjectHandle*);
static int (*p_from_dlpack)(DLManagedTensor*, int32_t, int32_t, TVMFFIObjectHandle*);
static int (*p_from_dlpack_versioned)(DLManagedTensorVersioned*, int32_t, int32_t,
                                      TVMFFIObjectHandle*);
static int (*p_to_dlpack)(TVMFFIObjectHandle, DLManagedTensor**);
static int (*p_to_dlpack_versioned)(TVMFFIObjectHandle, DLManagedTensorVersioned**);
static int (*p_string_from_byte_array)(const TVMFFIByteArray*, TVMFFIAny*);
static void* (*p_env_get_stream)(int32_t, int32_t);

/* Python classes and converters registered by the package (set_hooks). */
static PyObject* g_tensor_cls;   /* tvmrt.Tensor */
static PyObject* g_function_cls; /* tvmrt.Function */
static PyObject* g_module_cls;   /* tvmrt.Module */
static PyObject* g_device_cls;   /* tvmrt.Device */
static PyObject* g_convert_arg;  /* value -> object to pass, or (type_index, payload) */
static PyObject* g_from_any;     /* (type_index, payload, small_len) -> value (owns it) */
static PyObject* g_error;        /* error handle -> exception instance (owns it) */
static PyObject* g_kw_max_version; /* {"max_version": (1, 0)} */
static PyObject* g_str_dlpack;     /* "__dlpack__", interned */
static PyObject* g_empty_tuple;
static allocfunc g_tensor_alloc;   /* tp_alloc of the classes results are made of */
static allocfunc g_function_alloc;
static allocfunc g_module_alloc;

/* Bytes from the start of an object to its public cell (tvm-ffi's object header). */
#define HEADER_BYTES 24

static int ready(void) {
  if (p_call == NULL || g_tensor_cls == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "tvmrt._core is not initialized (init, set_hooks)");
    return 0;
  }
  return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Object */

typedef struct {
  PyObject_HEAD
  void* handle;
} ObjectStruct;

static PyTypeObject* g_object_type;
static PyTypeObject* g_function_type;
static PyTypeObject* g_tensor_type;

static PyObject* object_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  PyObject* h = NULL;
  if (!PyArg_ParseTuple(args, "O:Object", &h)) return NULL;
  void* handle = PyLong_AsVoidPtr(h);
  if (handle == NULL && PyErr_Occurred()) return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  ObjectStruct* self = (ObjectStruct*)alloc(type, 0);
  if (self == NULL) return NULL;
  self->handle = handle; /* takes over the caller's reference */
  (void)kwds;
  return (PyObject*)self;
}

static void object_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  void* h = ((ObjectStruct*)self)->handle;
  ((ObjectStruct*)self)->handle = NULL;
  if (h != NULL && p_dec_ref != NULL) p_dec_ref(h);
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(self);
  Py_DECREF(type);
}

/* A new wrapper of class `cls` (allocated by `alloc`) owning `handle`. */
static PyObject* wrap(PyObject* cls, allocfunc alloc, void* handle) {
  PyTypeObject* type = (PyTypeObject*)cls;
  ObjectStruct* self = (ObjectStruct*)alloc(type, 0);
  if (self == NULL) {
    p_dec_ref(handle);
    return NULL;
  }
  self->handle = handle;
  return (PyObject*)self;
}

static PyMemberDef object_members[] = {
    {"_handle", T_ULONGLONG, offsetof(ObjectStruct, handle), READONLY,
     "The object's address (the wrapper owns one reference)."},
    {NULL, 0, 0, 0, NULL},
};

/* ------------------------------------------------------------------------------------------ */
/* Errors */

/* Raises the error the library raised for the failed call `what`. */
static PyObject* raise_from_library(const char* what) {
  TVMFFIObjectHandle err = NULL;
  p_move_from_raised(&err);
  if (err == NULL) {
    PyErr_Format(PyExc_RuntimeError, "%s failed without an error message", what);
    return NULL;
  }
  PyObject* h = PyLong_FromVoidPtr(err);
  if (h == NULL) return NULL;
  PyObject* exc = PyObject_CallFunctionObjArgs(g_error, h, NULL);
  Py_DECREF(h);
  if (exc == NULL) return NULL;
  PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* DLPack in */

/* A runtime tensor (new handle) over `obj`'s memory through its __dlpack__; NULL with an
 * exception set on failure, or NULL without one when the array is not compact (the caller
 * then lets the package make it compact). `numpy` (obj is exactly a numpy.ndarray): ask for
 * the legacy capsule first, which numpy makes faster and refuses for read-only arrays (then
 * the DLPack 1.x one, which carries the flag). */
/* The DLPack protocol: a consumer of a CUDA or ROCm array names the stream it will use, so
 * the producer (PyTorch, CuPy) can order its pending work before it: tvmrt's current stream
 * for the device, or 1 (CUDA's legacy default stream) when none was set. Returns a new
 * {"stream": s} dict, Py_None (new reference) for other devices, NULL with an exception. */
static PyObject* consumer_stream_kwargs(PyObject* obj) {
  PyObject* dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
  if (dev == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  long type = -1, id = 0;
  if (PyTuple_Check(dev) && PyTuple_Size(dev) == 2) {
    type = PyLong_AsLong(PyTuple_GetItem(dev, 0));
    id = PyLong_AsLong(PyTuple_GetItem(dev, 1));
  }
  Py_DECREF(dev);
  if (PyErr_Occurred()) return NULL;
  if (type != 2 && type != 10) Py_RETURN_NONE; /* kDLCUDA, kDLROCM */
  void* s = p_env_get_stream((int32_t)type, (int32_t)id);
  return Py_BuildValue("{s:n}", "stream", s ? (Py_ssize_t)(intptr_t)s : (Py_ssize_t)1);
}

static void* handle_from_dlpack(PyObject* obj, int numpy) {
  PyObject* meth = PyObject_GetAttr(obj, g_str_dlpack);
  if (meth == NULL) return NULL;
  PyObject* capsule = NULL;
  if (numpy) {
    capsule = PyObject_Call(meth, g_empty_tuple, NULL);
    if (capsule == NULL && PyErr_ExceptionMatches(PyExc_BufferError)) PyErr_Clear();
  }
  if (capsule == NULL && !PyErr_Occurred()) {
    PyObject* stream = numpy ? (Py_INCREF(Py_None), Py_None) : consumer_stream_kwargs(obj);
    if (stream == NULL) {
      Py_DECREF(meth);
      return NULL;
    }
    PyObject* kwargs = g_kw_max_version;
    if (stream != Py_None) {
      if (PyDict_Update(stream, g_kw_max_version) != 0) {
        Py_DECREF(stream);
        Py_DECREF(meth);
        return NULL;
      }
      kwargs = stream;
    }
    capsule = PyObject_Call(meth, g_empty_tuple, kwargs);
    if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear(); /* a producer without DLPack 1.x keywords: the stream alone */
      PyObject* legacy = NULL;
      if (stream != Py_None && PyDict_DelItemString(stream, "max_version") == 0) legacy = stream;
      if (!PyErr_Occurred()) capsule = PyObject_Call(meth, g_empty_tuple, legacy);
    }
    Py_DECREF(stream);
  }
  Py_DECREF(meth);
  if (capsule == NULL) return NULL;
  TVMFFIObjectHandle out = NULL;
  int rc;
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    DLManagedTensorVersioned* m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    rc = p_from_dlpack_versioned(m, 0, 0, &out);
    if (rc == 0) PyCapsule_SetName(capsule, "used_dltensor_versioned");
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* m = PyCapsule_GetPointer(capsule, "dltensor");
    rc = p_from_dlpack(m, 0, 0, &out);
    if (rc == 0) PyCapsule_SetName(capsule, "used_dltensor");
  } else {
    Py_DECREF(capsule);
    PyErr_SetString(PyExc_TypeError, "__dlpack__ did not return a DLPack capsule");
    return NULL;
  }
  Py_DECREF(capsule);
  if (rc != 0) {
    raise_from_library("from_dlpack");
    return NULL;
  }
  /* Compiled kernels expect compact row-major tensors. */
  DLTensor* t = (DLTensor*)((char*)out + HEADER_BYTES);
  if (t->strides != NULL) {
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; --d) {
      if (t->shape[d] != 1 && t->strides[d] != expect) {
        p_dec_ref(out);
        return NULL;
      }
      expect *= t->shape[d];
    }
  }
  return out;
}

static PyObject* core_from_dlpack(PyObject* module, PyObject* obj) {
  (void)module;
  if (!ready()) return NULL;
  if (PyObject_TypeCheck(obj, g_tensor_type)) {
    Py_INCREF(obj);
    return obj;
  }
  void* h = handle_from_dlpack(obj, 0);
  if (h == NULL) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE; /* not compact: the package copies it first */
  }
  return wrap(g_tensor_cls, g_tensor_alloc, h);
}

/* ------------------------------------------------------------------------------------------ */
/* Calls */

#define INLINE_ARGS 8

/* What one call keeps alive until it returns. */
typedef struct {
  TVMFFIAny inline_args[INLINE_ARGS];
  TVMFFIByteArray inline_bytes[INLINE_ARGS];
  TVMFFIAny* args;
  TVMFFIByteArray* bytes;
  PyObject* py_keep; /* a list, made on first need */
  void* handles[INLINE_ARGS]; /* runtime objects made for the call (tensors) */
  void** heap_handles;
  int num_handles, cap_handles;
} CallFrame;

static int keep_py(CallFrame* f, PyObject* o) {
  if (f->py_keep == NULL) {
    f->py_keep = PyList_New(0);
    if (f->py_keep == NULL) return -1;
  }
  return PyList_Append(f->py_keep, o);
}

static int keep_handle(CallFrame* f, void* h) {
  if (f->num_handles < INLINE_ARGS && f->heap_handles == NULL) {
    f->handles[f->num_handles++] = h;
    return 0;
  }
  if (f->heap_handles == NULL) {
    f->cap_handles = 2 * INLINE_ARGS;
    f->heap_handles = PyMem_Malloc(sizeof(void*) * (size_t)f->cap_handles);
    if (f->heap_handles == NULL) return -1;
    memcpy(f->heap_handles, f->handles, sizeof(void*) * (size_t)f->num_handles);
  } else if (f->num_handles == f->cap_handles) {
    void** grown = PyMem_Realloc(f->heap_handles, sizeof(void*) * (size_t)f->cap_handles * 2);
    if (grown == NULL) return -1;
    f->heap_handles = grown;
    f->cap_handles *= 2;
  }
  f->heap_handles[f->num_handles++] = h;
  return 0;
}

static void frame_release(CallFrame* f) {
  void** hs = f->heap_handles ? f->heap_handles : f->handles;
  for (int i = 0; i < f->num_handles; ++i) p_dec_ref(hs[i]);
  if (f->heap_handles) PyMem_Free(f->heap_handles);
  if (f->args != f->inline_args) PyMem_Free(f->args);
  if (f->bytes != f->inline_bytes) PyMem_Free(f->bytes);
  Py_XDECREF(f->py_keep);
}

/* Type -> whether it exports DLPack (0 no, 1 yes, 2 it is numpy.ndarray), for the types seen
 * lately (strong references). */
#define TYPE_CACHE 16
static PyObject* g_cache_types[TYPE_CACHE];
static char g_cache_dlpack[TYPE_CACHE];
static int g_cache_next;

static int is_numpy_ndarray(PyObject* t) {
  PyObject* mod = PyObject_GetAttrString(t, "__module__");
  PyObject* name = PyObject_GetAttrString(t, "__qualname__");
  int yes = mod && name && PyUnicode_Check(mod) && PyUnicode_Check(name) &&
            PyUnicode_CompareWithASCIIString(mod, "numpy") == 0 &&
            PyUnicode_CompareWithASCIIString(name, "ndarray") == 0;
  Py_XDECREF(mod);
  Py_XDECREF(name);
  PyErr_Clear();
  return yes;
}

static int dlpack_kind(PyObject* v) {
  PyObject* t = (PyObject*)Py_TYPE(v);
  for (int i = 0; i < TYPE_CACHE; ++i)
    if (g_cache_types[i] == t) return g_cache_dlpack[i];
  int kind = PyObject_HasAttrString(t, "__dlpack__") ? (is_numpy_ndarray(t) ? 2 : 1) : 0;
  int slot = g_cache_next++ % TYPE_CACHE;
  Py_XDECREF(g_cache_types[slot]);
  Py_INCREF(t);
  g_cache_types[slot] = t;
  g_cache_dlpack[slot] = (char)kind;
  return kind;
}

/* Fills `out` with argument `v` (borrowed for the call); `depth` bounds the hook's answers. */
static int fill_arg(CallFrame* f, int i, PyObject* v, int depth) {
  TVMFFIAny* out = &f->args[i];
  out->zero_padding = 0;
  out->v_int64 = 0;
  if (v == Py_None) {
    out->type_index = kTVMFFINone;
    return 0;
  }
  if (PyObject_TypeCheck(v, g_object_type)) {
    void* h = ((ObjectStruct*)v)->handle;
    if (h == NULL) {
      out->type_index = kTVMFFINone;
      return 0;
    }
    out->type_index = ((TVMFFIObject*)h)->type_index;
    out->v_obj = h;
    return 0;
  }
  if (PyBool_Check(v)) {
    out->type_index = kTVMFFIBool;
    out->v_int64 = v == Py_True;
    return 0;
  }
  if (PyLong_Check(v)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
      PyErr_Format(PyExc_OverflowError, "%S does not fit in int64", v);
      return -1;
    }
    if (x == -1 && PyErr_Occurred()) return -1;
    out->type_index = kTVMFFIInt;
    out->v_int64 = x;
    return 0;
  }
  if (PyFloat_Check(v)) {
    out->type_index = kTVMFFIFloat;
    out->v_float64 = PyFloat_AsDouble(v);
    return 0;
  }
  if (g_device_cls != NULL && PyObject_TypeCheck(v, (PyTypeObject*)g_device_cls)) {
    long long dt = PyLong_AsLongLong(PyTuple_GetItem(v, 0));
    long long id = PyLong_AsLongLong(PyTuple_GetItem(v, 1));
    if (PyErr_Occurred()) return -1;
    out->type_index = kTVMFFIDevice;
    out->v_device.device_type = (int32_t)dt;
    out->v_device.device_id = (int32_t)id;
    return 0;
  }
  if (PyUnicode_Check(v)) {
    /* UTF-8 kept by the str object itself, alive for the call. */
    Py_ssize_t n;
    const char* data = PyUnicode_AsUTF8AndSize(v, &n);
    if (data == NULL) return -1;
    if (n < 8) { /* tvm-ffi's small string, inline */
      out->type_index = kTVMFFISmallStr;
      out->small_str_len = (uint32_t)n;
      memcpy(out->v_bytes, data, (size_t)n);
      return 0;
    }
    if ((Py_ssize_t)strlen(data) == n) {
      out->type_index = kTVMFFIRawStr;
      out->v_c_str = data;
      return 0;
    }
    /* A NUL inside: a string object, which keeps the length. */
    TVMFFIByteArray bytes = {data, (size_t)n};
    if (p_string_from_byte_array(&bytes, out) != 0) {
      raise_from_library("str argument");
      return -1;
    }
    if (out->type_index >= kTVMFFIStaticObjectBegin && keep_handle(f, out->v_obj) != 0) return -1;
    return 0;
  }
  if (PyBytes_Check(v)) {
    char* data;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(v, &data, &n) != 0) return -1;
    f->bytes[i].data = data;
    f->bytes[i].size = (size_t)n;
    out->type_index = kTVMFFIByteArrayPtr;
    out->v_ptr = &f->bytes[i];
    return 0;
  }
  int kind = dlpack_kind(v);
  if (kind != 0) {
    void* h = handle_from_dlpack(v, kind == 2);
    if (h != NULL) {
      if (keep_handle(f, h) != 0) {
        p_dec_ref(h);
        return -1;
      }
      out->type_index = kTVMFFITensor;
      out->v_obj = h;
      return 0;
    }
    if (PyErr_Occurred()) return -1;
    /* Not compact: the package's converter makes a compact copy. */
  }
  if (depth > 0) {
    PyErr_Format(PyExc_TypeError, "cannot pass a %s to a tvmrt function",
                 Py_TYPE(v) == NULL ? "?" : "value of this type");
    return -1;
  }
  PyObject* conv = PyObject_CallFunctionObjArgs(g_convert_arg, v, NULL);
  if (conv == NULL) return -1;
  int rc;
  if (PyTuple_Check(conv) && PyTuple_Size(conv) == 2 && PyLong_Check(PyTuple_GetItem(conv, 0)) &&
      !PyObject_TypeCheck(conv, (PyTypeObject*)g_device_cls)) {
    /* (type_index, payload): a plain value the converter worked out (a DLTensor*, ...). */
    out->type_index = (int32_t)PyLong_AsLong(PyTuple_GetItem(conv, 0));
    out->v_uint64 = PyLong_AsUnsignedLongLongMask(PyTuple_GetItem(conv, 1));
    rc = PyErr_Occurred() ? -1 : 0;
  } else {
    rc = fill_arg(f, i, conv, depth + 1);
  }
  if (rc == 0 && keep_py(f, conv) != 0) rc = -1;
  Py_DECREF(conv);
  return rc;
}

/* The Python value of an owned result (takes it over). */
static PyObject* from_result(TVMFFIAny* r) {
  switch (r->type_index) {
    case kTVMFFITensor:
      return wrap(g_tensor_cls, g_tensor_alloc, r->v_obj);
    case kTVMFFINone:
      Py_RETURN_NONE;
    case kTVMFFIInt:
      return PyLong_FromLongLong(r->v_int64);
    case kTVMFFIBool:
      return PyBool_FromLong(r->v_int64 != 0);
    case kTVMFFIFloat:
      return PyFloat_FromDouble(r->v_float64);
    case kTVMFFIFunction:
      return wrap(g_function_cls, g_function_alloc, r->v_obj);
    case kTVMFFIModule:
      return wrap(g_module_cls, g_module_alloc, r->v_obj);
    case kTVMFFISmallStr:
    case kTVMFFISmallBytes: {
      Py_ssize_t n = r->small_str_len > 8 ? 8 : (Py_ssize_t)r->small_str_len;
      if (r->type_index == kTVMFFISmallStr) return PyUnicode_DecodeUTF8(r->v_bytes, n, "replace");
      return PyBytes_FromStringAndSize(r->v_bytes, n);
    }
    case kTVMFFIStr:
    case kTVMFFIBytes: {
      TVMFFIByteArray* cell = (TVMFFIByteArray*)((char*)r->v_obj + HEADER_BYTES);
      PyObject* out = r->type_index == kTVMFFIStr
                          ? PyUnicode_DecodeUTF8(cell->data, (Py_ssize_t)cell->size, "replace")
                          : PyBytes_FromStringAndSize(cell->data, (Py_ssize_t)cell->size);
      p_dec_ref(r->v_obj);
      return out;
    }
    default: {
      PyObject* out = PyObject_CallFunction(g_from_any, "iKI", (int)r->type_index,
                                            (unsigned long long)r->v_uint64,
                                            (unsigned int)r->small_str_len);
      return out;
    }
  }
}

static PyObject* function_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (!ready()) return NULL;
  if (kwargs != NULL && PyDict_Size(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "tvmrt functions take positional arguments only");
    return NULL;
  }
  void* fn = ((ObjectStruct*)self)->handle;
  if (fn == NULL) {
    PyErr_SetString(PyExc_ValueError, "the function was released");
    return NULL;
  }
  Py_ssize_t n = PyTuple_Size(args);
  CallFrame f;
  memset(&f, 0, sizeof(f));
  f.args = f.inline_args;
  f.bytes = f.inline_bytes;
  if (n > INLINE_ARGS) {
    f.args = PyMem_Calloc((size_t)n, sizeof(TVMFFIAny));
    f.bytes = PyMem_Calloc((size_t)n, sizeof(TVMFFIByteArray));
    if (f.args == NULL || f.bytes == NULL) {
      if (f.args) PyMem_Free(f.args);
      if (f.bytes) PyMem_Free(f.bytes);
      return PyErr_NoMemory();
    }
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (fill_arg(&f, (int)i, PyTuple_GetItem(args, i), 0) != 0) {
      frame_release(&f);
      return NULL;
    }
  }
  TVMFFIAny result;
  result.type_index = kTVMFFINone;
  result.zero_padding = 0;
  result.v_int64 = 0;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = p_call(fn, f.args, (int32_t)n, &result);
  Py_END_ALLOW_THREADS
  frame_release(&f);
  if (rc != 0) return raise_from_library("function call");
  return from_result(&result);
}

/* ------------------------------------------------------------------------------------------ */
/* DLPack out */

static void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    DLManagedTensorVersioned* m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (m && m->deleter) m->deleter(m);
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* m = PyCapsule_GetPointer(capsule, "dltensor");
    if (m && m->deleter) m->deleter(m);
  }
  /* A consumed capsule ("used_...") belongs to its consumer. */
}

/* The keyword arguments of __dlpack__ (interned; compared by identity first). */
static PyObject* g_kw_names[4]; /* stream, max_version, dl_device, copy */

static PyObject* tensor_dlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                               PyObject* kwnames) {
  /* Vectorcall, keywords parsed by hand: np.from_dlpack calls this with keywords, and both a
   * keyword dict and PyArg_ParseTupleAndKeywords (which decodes its names on every call) cost
   * more than the export itself. */
  PyObject* given[4] = {NULL, NULL, NULL, NULL};
  if (nargs != 0) {
    PyErr_SetString(PyExc_TypeError, "__dlpack__ takes keyword arguments only");
    return NULL;
  }
  Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* key = PyTuple_GetItem(kwnames, i);
    int k = 0;
    while (k < 4 && key != g_kw_names[k]) ++k;
    for (int j = 0; k == 4 && j < 4; ++j) {
      int eq = PyObject_RichCompareBool(key, g_kw_names[j], Py_EQ);
      if (eq < 0) return NULL;
      if (eq) k = j;
    }
    if (k == 4) {
      PyErr_Format(PyExc_TypeError, "__dlpack__() got an unexpected keyword argument %R", key);
      return NULL;
    }
    given[k] = args[i];
  }
  PyObject *max_version = given[1], *copy = given[3];
  if (!ready()) return NULL;
  if (copy != NULL && PyObject_IsTrue(copy) == 1) {
    PyErr_SetString(PyExc_BufferError,
                    "tvmrt tensors export without copies (copy=True unsupported)");
    return NULL;
  }
  void* h = ((ObjectStruct*)self)->handle;
  long major = 0;
  if (max_version != NULL && max_version != Py_None) {
    PyObject* first = PySequence_GetItem(max_version, 0);
    if (first == NULL) return NULL;
    major = PyLong_AsLong(first);
    Py_DECREF(first);
    if (major == -1 && PyErr_Occurred()) return NULL;
  }
  if (major >= 1) {
    DLManagedTensorVersioned* m = NULL;
    if (p_to_dlpack_versioned(h, &m) != 0) return raise_from_library("__dlpack__");
    PyObject* cap = PyCapsule_New(m, "dltensor_versioned", capsule_destructor);
    if (cap == NULL) m->deleter(m);
    return cap;
  }
  DLManagedTensor* m = NULL;
  if (p_to_dlpack(h, &m) != 0) return raise_from_library("__dlpack__");
  PyObject* cap = PyCapsule_New(m, "dltensor", capsule_destructor);
  if (cap == NULL) m->deleter(m);
  return cap;
}

static PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused) {
  (void)unused;
  DLTensor* t = (DLTensor*)((char*)((ObjectStruct*)self)->handle + HEADER_BYTES);
  return Py_BuildValue("(ii)", (int)t->device.device_type, (int)t->device.device_id);
}

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "A DLPack capsule of this tensor (no copy)."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS,
     "(device_type, device_id) of this tensor."},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------------------------------ */
/* The module */

static PyObject* core_init(PyObject* module, PyObject* arg) {
  (void)module;
  PyObject* path_bytes = NULL;
  if (!PyUnicode_FSConverter(arg, &path_bytes)) return NULL;
  void* lib = dlopen(PyBytes_AsString(path_bytes), RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  Py_DECREF(path_bytes);
  if (lib == NULL) {
    PyErr_Format(PyExc_OSError, "tvmrt._core: the library is not loaded: %s", dlerror());
    return NULL;
  }
#define RESOLVE(var, name)                                                    \
  do {                                                                        \
    *(void**)(&var) = dlsym(lib, name);                                       \
    if (var == NULL) {                                                        \
      PyErr_Format(PyExc_OSError, "tvmrt._core: %s is not exported", name);   \
      return NULL;                                                            \
    }                                                                         \
  } while (0)
  RESOLVE(p_call, "TVMFFIFunctionCall");
  RESOLVE(p_inc_ref, "TVMFFIObjectIncRef");
  RESOLVE(p_dec_ref, "TVMFFIObjectDecRef");
  RESOLVE(p_move_from_raised, "TVMFFIErrorMoveFromRaised");
  RESOLVE(p_from_dlpack, "TVMFFITensorFromDLPack");
  RESOLVE(p_from_dlpack_versioned, "TVMFFITensorFromDLPackVersioned");
  RESOLVE(p_to_dlpack, "TVMFFITensorToDLPack");
  RESOLVE(p_to_dlpack_versioned, "TVMFFITensorToDLPackVersioned");
  RESOLVE(p_string_from_byte_array, "TVMFFIStringFromByteArray");
  RESOLVE(p_env_get_stream, "TVMFFIEnvGetStream");
#undef RESOLVE
  Py_RETURN_NONE;
}

static PyObject* core_set_hooks(PyObject* module, PyObject* args) {
  (void)module;
  PyObject *tensor, *function, *mod, *device, *convert, *from_any, *error;
  if (!PyArg_ParseTuple(args, "OOOOOOO:set_hooks", &tensor, &function, &mod, &device, &convert,
                        &from_any, &error))
    return NULL;
  PyObject** slots[] = {&g_tensor_cls, &g_function_cls, &g_module_cls, &g_device_cls,
                        &g_convert_arg, &g_from_any, &g_error};
  PyObject* values[] = {tensor, function, mod, device, convert, from_any, error};
  for (int i = 0; i < 3; ++i) {
    if (!PyType_Check(values[i]) ||
        !PyType_IsSubtype((PyTypeObject*)values[i], i == 0   ? g_tensor_type
                                                    : i == 1 ? g_function_type
                                                             : g_object_type)) {
      PyErr_SetString(PyExc_TypeError, "set_hooks: Tensor, Function and Module must derive "
                                       "from tvmrt._core's types");
      return NULL;
    }
  }
  for (int i = 0; i < 7; ++i) {
    PyObject* old = *slots[i];
    Py_INCREF(values[i]);
    *slots[i] = values[i];
    Py_XDECREF(old);
  }
  g_tensor_alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)tensor, Py_tp_alloc);
  g_function_alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)function, Py_tp_alloc);
  g_module_alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)mod, Py_tp_alloc);
  Py_RETURN_NONE;
}

static PyMethodDef core_methods[] = {
    {"init", core_init, METH_O, "init(path): use the functions of the loaded libtvmrt at path."},
    {"set_hooks", core_set_hooks, METH_VARARGS,
     "set_hooks(Tensor, Function, Module, Device, convert_arg, from_any, error_from_handle)."},
    {"from_dlpack", core_from_dlpack, METH_O,
     "A runtime tensor sharing obj's memory (None when obj is not compact)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "tvmrt._core", "tvmrt's hot paths in C.", -1, core_methods,
    NULL, NULL, NULL, NULL,
};

static PyTypeObject* make_type(const char* name, const char* doc, PyType_Slot* extra,
                               PyObject* base, unsigned long flags) {
  PyType_Slot slots[8];
  int n = 0;
  slots[n++] = (PyType_Slot){Py_tp_doc, (void*)doc};
  for (PyType_Slot* s = extra; s && s->slot; ++s) slots[n++] = *s;
  slots[n++] = (PyType_Slot){0, NULL};
  PyType_Spec spec = {name, sizeof(ObjectStruct), 0, flags, slots};
  PyObject* bases = base ? PyTuple_Pack(1, base) : NULL;
  PyObject* t = PyType_FromSpecWithBases(&spec, bases);
  Py_XDECREF(bases);
  return (PyTypeObject*)t;
}

PyMODINIT_FUNC PyInit__core(void) {
  PyObject* m = PyModule_Create(&core_module);
  if (m == NULL) return NULL;
  unsigned long flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  PyType_Slot object_slots[] = {{Py_tp_new, (void*)object_new},
                                {Py_tp_dealloc, (void*)object_dealloc},
                                {Py_tp_members, (void*)object_members},
                                {0, NULL}};
  g_object_type = make_type("tvmrt._core.Object", "A runtime object (owns one reference).",
                            object_slots, NULL, flags);
  if (g_object_type == NULL) return NULL;
  PyType_Slot function_slots[] = {{Py_tp_call, (void*)function_call}, {0, NULL}};
  g_function_type = make_type("tvmrt._core.Function", "A runtime function (callable).",
                              function_slots, (PyObject*)g_object_type, flags);
  PyType_Slot tensor_slots[] = {{Py_tp_methods, (void*)tensor_methods}, {0, NULL}};
  g_tensor_type = make_type("tvmrt._core.Tensor", "A runtime tensor (DLPack).", tensor_slots,
                            (PyObject*)g_object_type, flags);
  if (g_function_type == NULL || g_tensor_type == NULL) return NULL;
  g_kw_max_version = Py_BuildValue("{s(ii)}", "max_version", 1, 0);
  g_str_dlpack = PyUnicode_InternFromString("__dlpack__");
  const char* kw[4] = {"stream", "max_version", "dl_device", "copy"};
  for (int i = 0; i < 4; ++i) {
    g_kw_names[i] = PyUnicode_InternFromString(kw[i]);
    if (g_kw_names[i] == NULL) return NULL;
  }
  g_empty_tuple = PyTuple_New(0);
  if (g_kw_max_version == NULL || g_str_dlpack == NULL || g_empty_tuple == NULL) return NULL;
  Py_INCREF(g_object_type);
  Py_INCREF(g_function_type);
  Py_INCREF(g_tensor_type);
  if (PyModule_AddObject(m, "Object", (PyObject*)g_object_type) != 0 ||
      PyModule_AddObject(m, "Function", (PyObject*)g_function_type) != 0 ||
      PyModule_AddObject(m, "Tensor", (PyObject*)g_tensor_type) != 0)
    return NULL;
  return m;
}
