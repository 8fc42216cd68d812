"""The C side: loading libtvmrt.so and speaking its tvm-ffi C ABI.

Values cross the boundary as ``TVMFFIAny`` (16 bytes: type index, small-string length,
8-byte payload; tvm-ffi ``include/tvm/ffi/c_api.h``). Objects (functions, modules, tensors,
strings, errors) are reference counted: every Python wrapper owns one reference and drops it
when collected. Tensors travel to and from numpy (or any DLPack producer/consumer) through
DLPack, without copies.

Calls, their arguments and results, object lifetimes and DLPack exchange go through the
compiled extension ``tvmrt._core`` (``_core.c``) when it is there (wheels ship it; in a
checkout ``python/build_ext.sh`` builds it), else through ctypes (the ``_Ctypes*`` classes
below, several times slower per call); ``TVMRT_PYTHON_EXTENSION=0`` forces ctypes. Both use the
converters of this module for everything but the common values, so each conversion has one
definition.
"""

from __future__ import annotations

import ctypes
import numbers
import os
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    Union,
    byref,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import NamedTuple


def _load_extension():
    if os.environ.get("TVMRT_PYTHON_EXTENSION", "1") == "0":
        return None
    try:
        from . import _core as core
    except ImportError:
        return None
    return core


#: The compiled extension, or None (ctypes only).
_core = _load_extension()

# ---------------------------------------------------------------------------------------------
# Type indexes (tvm-ffi c_api.h, TVMFFITypeIndex)
NONE, INT, BOOL, FLOAT, OPAQUE_PTR, DTYPE, DEVICE, DLTENSOR_PTR = 0, 1, 2, 3, 4, 5, 6, 7
RAW_STR, BYTE_ARRAY_PTR, OBJECT_RVALUE_REF, SMALL_STR, SMALL_BYTES = 8, 9, 10, 11, 12
STATIC_OBJECT_BEGIN = 64
STR, BYTES, ERROR, FUNCTION, SHAPE, TENSOR, ARRAY, MAP, MODULE = 65, 66, 67, 68, 69, 70, 71, 72, 73

#: Size of the object header that precedes every object's public cell.
OBJECT_HEADER_SIZE = 24


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensor(Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", c_void_p),
]


class DLManagedTensorVersioned(Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", c_void_p),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]


class _Payload(Union):
    _fields_ = [
        ("v_int64", c_int64),
        ("v_float64", c_double),
        ("v_ptr", c_void_p),
        ("v_dtype", DLDataType),
        ("v_device", DLDevice),
        ("v_bytes", c_char * 8),
    ]


class TVMFFIAny(Structure):
    _fields_ = [("type_index", c_int32), ("small_str_len", c_uint32), ("payload", _Payload)]


class TVMFFIByteArray(Structure):
    _fields_ = [("data", c_void_p), ("size", c_uint64)]

    @classmethod
    def of(cls, b: bytes) -> "TVMFFIByteArray":
        buf = ctypes.create_string_buffer(b, len(b))
        arr = cls(ctypes.cast(buf, c_void_p), len(b))
        arr._keep = buf  # the buffer must outlive the view
        return arr


SAFE_CALL = CFUNCTYPE(c_int, c_void_p, POINTER(TVMFFIAny), c_int32, POINTER(TVMFFIAny))
DELETER = CFUNCTYPE(None, c_void_p)

# ---------------------------------------------------------------------------------------------
# Finding and loading the library


def _candidates() -> list[Path]:
    repo = Path(__file__).resolve().parents[2]
    roots = []
    if os.environ.get("CARGO_TARGET_DIR"):
        roots.append(Path(os.environ["CARGO_TARGET_DIR"]))
    roots.append(repo / "target")
    found = []
    for root in roots:
        for profile in ("release", "debug"):
            p = root / profile / "libtvmrt.so"
            if p.is_file():
                found.append(p)
    # The most recently built first.
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def bundled_library() -> Path:
    """Where an installed wheel keeps its libtvmrt.so (``tvmrt/lib/``)."""
    return Path(__file__).resolve().parent / "lib" / "libtvmrt.so"


def find_library() -> str:
    """Path of libtvmrt.so: the one bundled with an installed wheel, else ``$TVMRT_LIBRARY``,
    else the newest ``target/{release,debug}`` build of this repository (or of
    ``$CARGO_TARGET_DIR``), else the system's library path."""
    bundled = bundled_library()
    if bundled.is_file():
        return str(bundled)
    env = os.environ.get("TVMRT_LIBRARY")
    if env:
        if not Path(env).is_file():
            raise OSError(f"TVMRT_LIBRARY={env!r} is not a file")
        return env
    found = _candidates()
    if found:
        return str(found[0])
    import ctypes.util

    name = ctypes.util.find_library("tvmrt")
    if name:
        return name
    raise OSError(
        "libtvmrt.so not found: build it (`cargo build --release` at the repository root) or "
        "set TVMRT_LIBRARY to its path"
    )


def find_pip_nvrtc() -> str | None:
    """NVRTC from the pip packages this Python can import (``nvidia-cuda-nvrtc-cu12``:
    ``nvidia/cuda_nvrtc/lib``; CUDA 13's ``nvidia-cuda-nvrtc``: ``nvidia/cu13/lib``), newest
    first; None when neither is installed."""
    import importlib.util

    for package in ("nvidia.cu13", "nvidia.cuda_nvrtc"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            libs = sorted(
                (p for p in (Path(root) / "lib").glob("libnvrtc.so*")
                 if "builtins" not in p.name and ".alt." not in p.name),
                reverse=True,
            )
            if libs:
                return str(libs[0])
    return None


_lib = None
_lib_lock = threading.Lock()


def lib() -> ctypes.CDLL:
    """The loaded libtvmrt (loaded on first use). NVRTC, which tvmrt opens only to compile a
    CUDA module's source, is pointed to in the pip packages when ``TVMRT_NVRTC_LIBRARY`` does
    not name one (the library then finds CUDA's headers beside it)."""
    global _lib
    if _lib is None:
        with _lib_lock:
            if _lib is None:
                if "TVMRT_NVRTC_LIBRARY" not in os.environ:
                    nvrtc = find_pip_nvrtc()
                    if nvrtc:
                        os.environ["TVMRT_NVRTC_LIBRARY"] = nvrtc
                handle = _load(find_library())
                if _core is not None:
                    _core.init(handle._tvmrt_path)
                    from . import Function, Module  # the package's wrapper classes

                    _core.set_hooks(Tensor, Function, Module, Device, _convert_arg,
                                    _from_any_parts, error_from_handle)
                _lib = handle
    return _lib


def _load(path: str) -> ctypes.CDLL:
    # RTLD_GLOBAL: kernels compiled by TVM import runtime symbols (TVMFFIErrorSetRaisedFrom
    # CStrParts) from the global scope, so the runtime's symbols must be visible there.
    handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    sig = {
        "TVMFFIObjectIncRef": (c_int, [c_void_p]),
        "TVMFFIObjectDecRef": (c_int, [c_void_p]),
        "TVMFFIFunctionGetGlobal": (c_int, [POINTER(TVMFFIByteArray), POINTER(c_void_p)]),
        "TVMFFIFunctionSetGlobal": (c_int, [POINTER(TVMFFIByteArray), c_void_p, c_int]),
        "TVMFFIFunctionCall": (
            c_int,
            [c_void_p, POINTER(TVMFFIAny), c_int32, POINTER(TVMFFIAny)],
        ),
        "TVMFFIFunctionCreate": (c_int, [c_void_p, SAFE_CALL, DELETER, POINTER(c_void_p)]),
        "TVMFFIErrorMoveFromRaised": (None, [POINTER(c_void_p)]),
        "TVMFFIErrorSetRaisedFromCStr": (None, [c_char_p, c_char_p]),
        "TVMFFIStringFromByteArray": (c_int, [POINTER(TVMFFIByteArray), POINTER(TVMFFIAny)]),
        "TVMFFIBytesFromByteArray": (c_int, [POINTER(TVMFFIByteArray), POINTER(TVMFFIAny)]),
        "TVMFFIAnyViewToOwnedAny": (c_int, [POINTER(TVMFFIAny), POINTER(TVMFFIAny)]),
        "TVMFFITensorFromDLPack": (c_int, [c_void_p, c_int32, c_int32, POINTER(c_void_p)]),
        "TVMFFITensorFromDLPackVersioned": (
            c_int,
            [c_void_p, c_int32, c_int32, POINTER(c_void_p)],
        ),
        "TVMFFITensorToDLPack": (c_int, [c_void_p, POINTER(c_void_p)]),
        "TVMFFITensorToDLPackVersioned": (c_int, [c_void_p, POINTER(c_void_p)]),
        "TVMFFIDataTypeFromString": (c_int, [POINTER(TVMFFIByteArray), POINTER(DLDataType)]),
        # Tensors on devices (the classic C calls; a TVMArrayHandle is the object + 24).
        "TVMArrayAlloc": (
            c_int,
            [POINTER(c_int64), c_int, c_int, c_int, c_int, c_int, c_int, POINTER(c_void_p)],
        ),
        "TVMArrayCopyFromBytes": (c_int, [c_void_p, c_void_p, ctypes.c_size_t]),
        "TVMArrayCopyToBytes": (c_int, [c_void_p, c_void_p, ctypes.c_size_t]),
        "TVMArrayCopyFromTo": (c_int, [c_void_p, c_void_p, c_void_p]),
        "TVMFFIEnvGetStream": (c_void_p, [c_int, c_int]),
    }
    for name, (res, args) in sig.items():
        f = getattr(handle, name)
        f.restype = res
        f.argtypes = args
    handle._tvmrt_path = path
    return handle


# ---------------------------------------------------------------------------------------------
# Errors


class TVMError(RuntimeError):
    """An error raised by tvmrt or by compiled code whose kind is not a Python built-in
    exception. ``kind`` holds TVM's error kind (also set on built-in exceptions raised here)."""

    kind = "RuntimeError"


#: TVM error kinds raised as the Python exception of the same name (as tvm-ffi does).
_BUILTIN_KINDS = {
    "ValueError": ValueError,
    "TypeError": TypeError,
    "IndexError": IndexError,
    "KeyError": KeyError,
    "AttributeError": AttributeError,
    "RuntimeError": RuntimeError,
    "NotImplementedError": NotImplementedError,
    "MemoryError": MemoryError,
    "AssertionError": AssertionError,
}
_custom_kinds: dict[str, type] = {}


def error_class(kind: str) -> type:
    """The Python exception class for a TVM error kind."""
    if kind in _BUILTIN_KINDS:
        return _BUILTIN_KINDS[kind]
    cls = _custom_kinds.get(kind)
    if cls is None:
        name = kind if kind.isidentifier() else "TVMError"
        cls = type(name, (TVMError,), {"kind": kind})
        _custom_kinds[kind] = cls
    return cls


def make_error(kind: str, message: str) -> BaseException:
    exc = error_class(kind)(message)
    try:
        exc.kind = kind
    except AttributeError:  # pragma: no cover - built-ins accept attributes
        pass
    return exc


def _byte_array_at(addr: int) -> bytes:
    arr = TVMFFIByteArray.from_address(addr)
    if not arr.size:
        return b""
    return ctypes.string_at(arr.data, arr.size)


def error_from_handle(handle: int) -> BaseException:
    """An exception from an error object (its cell: kind, message, backtrace byte arrays); takes
    over the reference."""
    cell = handle + OBJECT_HEADER_SIZE
    size = ctypes.sizeof(TVMFFIByteArray)
    kind = _byte_array_at(cell).decode("utf-8", "replace")
    message = _byte_array_at(cell + size).decode("utf-8", "replace")
    lib().TVMFFIObjectDecRef(handle)
    return make_error(kind or "RuntimeError", message)


def raised_error(what: str) -> BaseException:
    """The error tvmrt raised for the failed call ``what``."""
    h = c_void_p()
    lib().TVMFFIErrorMoveFromRaised(byref(h))
    if not h.value:
        return TVMError(f"{what} failed without an error message")
    return error_from_handle(h.value)


def check(status: int, what: str) -> None:
    if status != 0:
        raise raised_error(what)


# ---------------------------------------------------------------------------------------------
# Objects


class _CtypesObject:
    """Without the extension: owns one reference, released through ctypes."""

    __slots__ = ("_handle",)

    def __init__(self, handle: int):
        self._handle = handle

    def __del__(self):
        h, self._handle = getattr(self, "_handle", None), None
        if h and _lib is not None:
            try:
                _lib.TVMFFIObjectDecRef(h)
            except Exception:  # interpreter shutdown
                pass


class _CtypesFunction(_CtypesObject):
    """Without the extension: calls through ctypes."""

    __slots__ = ()

    def __call__(self, *args):
        pack = ArgPack(args)
        result = TVMFFIAny()
        status = lib().TVMFFIFunctionCall(self._handle, pack.array, pack.n, byref(result))
        if status != 0:
            raise raised_error("function call")
        return from_owned_any(result)


class _CtypesTensor(_CtypesObject):
    """Without the extension: DLPack export through ctypes."""

    __slots__ = ()

    def __dlpack_device__(self):
        d = DLTensor.from_address(self._handle + OBJECT_HEADER_SIZE).device
        return (d.device_type, d.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("tvmrt tensors export without copies (copy=True unsupported)")
        out = c_void_p()
        if max_version is not None and tuple(max_version)[0] >= 1:
            check(lib().TVMFFITensorToDLPackVersioned(self._handle, byref(out)), "__dlpack__")
            return _capsule(out.value, versioned=True)
        check(lib().TVMFFITensorToDLPack(self._handle, byref(out)), "__dlpack__")
        return _capsule(out.value, versioned=False)


if _core is not None:
    _ObjectBase, FunctionBase, _TensorBase = _core.Object, _core.Function, _core.Tensor
else:
    _ObjectBase, FunctionBase, _TensorBase = _CtypesObject, _CtypesFunction, _CtypesTensor


class Object(_ObjectBase):
    """An object of the runtime (owns one reference)."""

    __slots__ = ()
    # The type index every instance of the class has (None: read it from the object header).
    _static_type_index = None

    @property
    def handle(self) -> int:
        return self._handle

    @property
    def type_index(self) -> int:
        return c_int32.from_address(self._handle + 8).value

    def _new_ref(self) -> int:
        """A new reference to this object, for handing to C."""
        lib().TVMFFIObjectIncRef(self._handle)
        return self._handle


def _dtype_to_str(t: DLDataType) -> str:
    names = {0: "int", 1: "uint", 2: "float", 4: "bfloat"}
    if t.code == 6 and t.bits == 8:
        base = "bool"
    elif t.code in names:
        base = f"{names[t.code]}{t.bits}"
    else:
        base = f"dtype(code={t.code},bits={t.bits})"
    return base if t.lanes == 1 else f"{base}x{t.lanes}"


#: DLPack's device type codes (``DLDeviceType``) by the names TVM gives them.
DEVICE_TYPES = {
    "cpu": 1,
    "cuda": 2,
    "cuda_host": 3,
    "opencl": 4,
    "vulkan": 7,
    "metal": 8,
    "vpi": 9,
    "rocm": 10,
    "rocm_host": 11,
    "ext_dev": 12,
    "cuda_managed": 13,
    "oneapi": 14,
    "webgpu": 15,
    "hexagon": 16,
}
_DEVICE_NAMES = {code: name for name, code in DEVICE_TYPES.items()}


class Device(NamedTuple):
    """A device, as ``tvm.cpu()`` makes one: DLPack's ``(device_type, device_id)``. It is a
    tuple (``Device(1, 0) == (1, 0)``) that runtime functions receive as a ``DLDevice``, e.g.
    ``lib["default"](tvmrt.cpu())`` for a graph executor."""

    device_type: int
    device_id: int

    @property
    def index(self) -> int:
        """The device's id (tvm-ffi's name)."""
        return self.device_id

    def __repr__(self):
        name = _DEVICE_NAMES.get(self.device_type, str(self.device_type))
        return f"device(type='{name}', index={self.device_id})"


class Tensor(_TensorBase, Object):
    """A tensor of the runtime. Convert with ``numpy.from_dlpack(t)`` (no copy) or
    ``t.numpy()``."""

    __slots__ = ()
    _static_type_index = TENSOR

    @property
    def _dl(self) -> DLTensor:
        return DLTensor.from_address(self._handle + OBJECT_HEADER_SIZE)

    @property
    def shape(self) -> tuple:
        dl = self._dl
        return tuple(dl.shape[i] for i in range(dl.ndim))

    @property
    def dtype(self) -> str:
        return _dtype_to_str(self._dl.dtype)

    @property
    def device(self) -> Device:
        d = self._dl.device
        return Device(d.device_type, d.device_id)

    def numpy(self):
        """This tensor as a numpy array: a view of the data on the CPU, a copy of it (made when
        this returns) for a tensor on another device."""
        import numpy as np

        if self._dl.device.device_type == DEVICE_TYPES["cpu"]:
            return np.from_dlpack(self)
        out = np.empty(self.shape, dtype=np.dtype(self.dtype))
        check(
            lib().TVMArrayCopyToBytes(self._handle + OBJECT_HEADER_SIZE, out.ctypes.data, out.nbytes),
            "Tensor.numpy",
        )
        return out

    def copyfrom(self, source) -> "Tensor":
        """Copies a numpy array (or any DLPack producer) of the same shape and dtype into this
        tensor, on whatever device it is."""
        import numpy as np

        arr = np.ascontiguousarray(np.from_dlpack(source) if not isinstance(source, np.ndarray)
                                   else source)
        if tuple(arr.shape) != self.shape or str(arr.dtype) != self.dtype:
            raise ValueError(
                f"copyfrom: expected shape {self.shape} and dtype {self.dtype}, got "
                f"{tuple(arr.shape)} and {arr.dtype}"
            )
        check(
            lib().TVMArrayCopyFromBytes(self._handle + OBJECT_HEADER_SIZE, arr.ctypes.data, arr.nbytes),
            "Tensor.copyfrom",
        )
        return self

    def copyto(self, device) -> "Tensor":
        """A copy of this tensor on ``device`` (a :class:`Device` or ``(type, id)``)."""
        out = empty(self.shape, self.dtype, device)
        check(
            lib().TVMArrayCopyFromTo(
                self._handle + OBJECT_HEADER_SIZE, out._handle + OBJECT_HEADER_SIZE, None
            ),
            "Tensor.copyto",
        )
        return out

    def __repr__(self):
        return f"tvmrt.Tensor(shape={self.shape}, dtype={self.dtype})"


def empty(shape, dtype="float32", device=None) -> Tensor:
    """A new compact tensor on ``device`` (the CPU by default). CPU memory is zeroed; device
    memory is left as the driver gives it."""
    device_type, device_id = device if device is not None else (DEVICE_TYPES["cpu"], 0)
    dims = tuple(int(d) for d in shape)
    arr = (c_int64 * max(len(dims), 1))(*dims)
    t = DLDataType()
    check(lib().TVMFFIDataTypeFromString(byref(TVMFFIByteArray.of(str(dtype).encode())), byref(t)),
          f"dtype {dtype!r}")
    out = c_void_p()
    check(
        lib().TVMArrayAlloc(arr, len(dims), t.code, t.bits, t.lanes, int(device_type),
                            int(device_id), byref(out)),
        "empty",
    )
    return Tensor(out.value - OBJECT_HEADER_SIZE)


class DLTensorView:
    """A borrowed ``DLTensor*`` that compiled code passed to a Python callback: valid only
    during the call. Convert with ``numpy.from_dlpack(view)`` inside the callback."""

    def __init__(self, ptr: int):
        self._ptr = ptr

    @property
    def _dl(self) -> DLTensor:
        return DLTensor.from_address(self._ptr)

    @property
    def shape(self) -> tuple:
        dl = self._dl
        return tuple(dl.shape[i] for i in range(dl.ndim))

    @property
    def dtype(self) -> str:
        return _dtype_to_str(self._dl.dtype)

    def __dlpack_device__(self):
        d = self._dl.device
        return (d.device_type, d.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # A managed tensor that owns nothing but itself: a malloc'd struct whose deleter is
        # libc's free (called with the struct's address). No Python code runs at deletion,
        # which may happen while an exception is propagating.
        if max_version is not None and tuple(max_version)[0] >= 1:
            m = DLManagedTensorVersioned()
            m.version = DLPackVersion(1, 0)
            m.flags = 0
            versioned = True
        else:
            m = DLManagedTensor()
            versioned = False
        ctypes.memmove(byref(m.dl_tensor), self._ptr, ctypes.sizeof(DLTensor))
        m.manager_ctx = None
        m.deleter = _LIBC_FREE
        size = ctypes.sizeof(m)
        block = _libc.malloc(size)
        if not block:
            raise MemoryError("DLTensorView.__dlpack__")
        ctypes.memmove(block, byref(m), size)
        return _capsule(block, versioned=versioned)


_libc = ctypes.CDLL(None)
_libc.malloc.restype = c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_LIBC_FREE = ctypes.cast(_libc.free, c_void_p).value

# PyCapsule glue. Names are module constants: a capsule keeps a pointer to its name.
_NAME_LEGACY = b"dltensor"
_NAME_VERSIONED = b"dltensor_versioned"
_NAME_USED_LEGACY = b"used_dltensor"
_NAME_USED_VERSIONED = b"used_dltensor_versioned"

_py = ctypes.pythonapi
_PyCapsule_New = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, c_char_p, c_void_p)(
    ("PyCapsule_New", _py)
)
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, c_char_p)(
    ("PyCapsule_GetPointer", _py)
)
_PyCapsule_SetName = ctypes.PYFUNCTYPE(c_int, ctypes.py_object, c_char_p)(
    ("PyCapsule_SetName", _py)
)
_PyCapsule_IsValid = ctypes.PYFUNCTYPE(c_int, ctypes.py_object, c_char_p)(
    ("PyCapsule_IsValid", _py)
)


def _capsule(ptr: int, versioned: bool):
    # No capsule destructor: a Python-level one could run while an exception is set (a
    # consumer freed during unwinding), which ctypes callbacks cannot do. Consumers
    # (numpy.from_dlpack, ...) take ownership; a capsule never consumed leaks its tensor.
    name = _NAME_VERSIONED if versioned else _NAME_LEGACY
    return _PyCapsule_New(ptr, name, None)


def _numpy_ndarray():
    """numpy's ndarray class, or a class nothing is an instance of when numpy is missing."""
    global _NDARRAY
    if _NDARRAY is None:
        try:
            import numpy as np

            _NDARRAY = np.ndarray
        except ImportError:  # numpy is optional
            _NDARRAY = type("_NoNumpy", (), {})
    return _NDARRAY


_NDARRAY = None


def tensor_from_dlpack(obj) -> Tensor:
    """A runtime tensor sharing the memory of ``obj`` (a numpy array or any object with
    ``__dlpack__``)."""
    if isinstance(obj, Tensor):
        return obj
    if _core is not None and hasattr(type(obj), "__dlpack__"):
        lib()
        t = _core.from_dlpack(obj)
        if t is not None:
            return t
        # Not compact: numpy arrays are made so below; other producers' strides are kept.
    if isinstance(obj, _numpy_ndarray()) and not obj.flags.c_contiguous:
        # Compiled kernels expect compact row-major tensors.
        import numpy as np

        obj = np.ascontiguousarray(obj)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"expected a tensor or an object with __dlpack__, got {type(obj).__name__}")
    kwargs = {}
    if hasattr(obj, "__dlpack_device__"):
        dev_type, dev_id = obj.__dlpack_device__()
        if int(dev_type) == DEVICE_TYPES["cuda"]:
            # The DLPack protocol: the consumer names the stream it will use, so the producer
            # (PyTorch, CuPy) can order its pending work before it: tvmrt's current stream for
            # the device, or 1, CUDA's legacy default stream, when none was set.
            stream = lib().TVMFFIEnvGetStream(int(dev_type), int(dev_id))
            kwargs["stream"] = stream if stream else 1
    try:
        capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
    except TypeError:  # a producer without DLPack 1.x keywords
        capsule = obj.__dlpack__(**kwargs)
    out = c_void_p()
    if _PyCapsule_IsValid(capsule, _NAME_VERSIONED):
        ptr = _PyCapsule_GetPointer(capsule, _NAME_VERSIONED)
        check(lib().TVMFFITensorFromDLPackVersioned(ptr, 0, 0, byref(out)), "from_dlpack")
        _PyCapsule_SetName(capsule, _NAME_USED_VERSIONED)
    elif _PyCapsule_IsValid(capsule, _NAME_LEGACY):
        ptr = _PyCapsule_GetPointer(capsule, _NAME_LEGACY)
        check(lib().TVMFFITensorFromDLPack(ptr, 0, 0, byref(out)), "from_dlpack")
        _PyCapsule_SetName(capsule, _NAME_USED_LEGACY)
    else:
        raise TypeError("__dlpack__ did not return a DLPack capsule")
    return Tensor(out.value)


# ---------------------------------------------------------------------------------------------
# Converting values


def _str_object_bytes(handle: int) -> bytes:
    return _byte_array_at(handle + OBJECT_HEADER_SIZE)


def _shape_tuple(handle: int) -> tuple:
    cell = handle + OBJECT_HEADER_SIZE
    data = c_void_p.from_address(cell).value
    size = c_uint64.from_address(cell + 8).value
    if not size:
        return ()
    arr = (c_int64 * size).from_address(data)
    return tuple(arr)


def from_owned_any(v: TVMFFIAny):
    """A Python value from an owned TVMFFIAny (takes over its reference)."""
    t = v.type_index
    p = v.payload
    if t == TENSOR:  # the common result, checked first
        return Tensor(p.v_ptr)
    if t == NONE:
        return None
    if t == INT:
        return p.v_int64
    if t == BOOL:
        return bool(p.v_int64)
    if t == FLOAT:
        return p.v_float64
    if t == OPAQUE_PTR:
        return p.v_ptr
    if t == DTYPE:
        return _dtype_to_str(p.v_dtype)
    if t == DEVICE:
        return Device(p.v_device.device_type, p.v_device.device_id)
    if t == DLTENSOR_PTR:
        return DLTensorView(p.v_ptr)
    if t in (SMALL_STR, SMALL_BYTES):
        # Read the payload's memory: a `c_char` array field stops at its first NUL byte.
        raw = ctypes.string_at(ctypes.addressof(v.payload), min(v.small_str_len, 8))
        return raw.decode("utf-8", "replace") if t == SMALL_STR else raw
    if t < STATIC_OBJECT_BEGIN:
        raise TypeError(f"cannot convert a value of type index {t}")
    h = p.v_ptr
    if t in (STR, BYTES):
        raw = _str_object_bytes(h)
        lib().TVMFFIObjectDecRef(h)
        return raw.decode("utf-8", "replace") if t == STR else raw
    if t == SHAPE:
        dims = _shape_tuple(h)
        lib().TVMFFIObjectDecRef(h)
        return dims
    if t == ERROR:
        return error_from_handle(h)
    if t == FUNCTION or t == MODULE:
        from . import Function, Module  # the wrapper classes live in the package

        return Function(h) if t == FUNCTION else Module(h)
    if t == ARRAY:
        return _array_to_list(Object(h))
    if t == MAP:
        return _map_to_dict(Object(h))
    return Object(h)


def _map_to_dict(m: Object) -> dict:
    """The entries of an ``ffi.Map``, through tvm-ffi's ``ffi.MapSize`` and
    ``ffi.MapForwardIterFunctor`` (0: key, 1: value, 2: advance)."""
    from . import get_global_func

    out = {}
    if get_global_func("ffi.MapSize")(m) == 0:
        return out
    it = get_global_func("ffi.MapForwardIterFunctor")(m)
    while True:
        out[it(0)] = it(1)
        if not it(2):
            return out


def make_container(v) -> Object:
    """An ``ffi.Array`` of a list or tuple, or an ``ffi.Map`` of a dict (items converted as
    arguments are, nested containers too), as tvm_ffi passes them."""
    if isinstance(v, dict):
        name, items = b"ffi.Map", [x for kv in v.items() for x in kv]
    else:
        name, items = b"ffi.Array", list(v)
    fn = c_void_p()
    check(lib().TVMFFIFunctionGetGlobal(byref(TVMFFIByteArray.of(name)), byref(fn)), name.decode())
    keep: list = []
    try:
        args = (TVMFFIAny * max(len(items), 1))()
        for i, item in enumerate(items):
            fill_any(args[i], item, keep)
        out = TVMFFIAny()
        status = lib().TVMFFIFunctionCall(fn, args, len(items), byref(out))
    finally:
        lib().TVMFFIObjectDecRef(fn)
    if status != 0:
        raise raised_error(name.decode())
    return Object(out.payload.v_ptr)


def make_shape(dims) -> Object:
    """An ``ffi.Shape`` object of ``dims`` (held as an object, not turned into a tuple)."""
    fn = c_void_p()
    name = TVMFFIByteArray.of(b"ffi.Shape")
    check(lib().TVMFFIFunctionGetGlobal(byref(name), byref(fn)), "ffi.Shape")
    args = (TVMFFIAny * max(len(dims), 1))()
    for i, d in enumerate(dims):
        args[i].type_index = INT
        args[i].payload.v_int64 = int(d)
    out = TVMFFIAny()
    status = lib().TVMFFIFunctionCall(fn, args, len(dims), byref(out))
    lib().TVMFFIObjectDecRef(fn)
    if status != 0:
        raise raised_error("ffi.Shape")
    return Object(out.payload.v_ptr)


def _array_to_list(arr: Object) -> list:
    """The items of an ``ffi.Array``: its cell (tvm-ffi ``SeqBaseObj``) is ``{TVMFFIAny* data;
    int64_t size; int64_t capacity; deleter}`` after the object header."""
    cell = arr.handle + OBJECT_HEADER_SIZE
    data = c_void_p.from_address(cell).value
    size = c_int64.from_address(cell + 8).value
    items = []
    for i in range(size):
        owned = TVMFFIAny()
        view = TVMFFIAny.from_address(data + i * ctypes.sizeof(TVMFFIAny))
        check(lib().TVMFFIAnyViewToOwnedAny(byref(view), byref(owned)), "array item")
        items.append(from_owned_any(owned))
    return items


class ArgPack:
    """Arguments converted for one call; keeps temporaries alive until the call returns."""

    def __init__(self, values):
        n = len(values)
        self.array = (TVMFFIAny * max(n, 1))()
        self.keep = []
        for i, v in enumerate(values):
            fill_any(self.array[i], v, self.keep)
        self.n = n


def fill_any(slot: TVMFFIAny, v, keep: list) -> None:
    """Writes ``v`` into ``slot`` as a borrowed view (temporaries go into ``keep``)."""
    slot.small_str_len = 0
    if isinstance(v, Object):  # tensors, functions, modules: the common case, checked first
        ti = v._static_type_index
        slot.type_index = v.type_index if ti is None else ti
        slot.payload.v_ptr = v._handle
        return
    p = slot.payload
    if v is None:
        slot.type_index = NONE
        p.v_int64 = 0
    elif isinstance(v, bool):
        slot.type_index = BOOL
        p.v_int64 = int(v)
    elif isinstance(v, numbers.Integral):  # int, numpy integers
        v = int(v)
        if not -(2**63) <= v < 2**63:
            raise OverflowError(f"{v} does not fit in int64")
        slot.type_index = INT
        p.v_int64 = v
    elif isinstance(v, numbers.Real):  # float, numpy floats
        slot.type_index = FLOAT
        p.v_float64 = float(v)
    elif isinstance(v, str):
        data = v.encode("utf-8")
        if b"\0" in data:  # a string object keeps the length past the NUL
            check(lib().TVMFFIStringFromByteArray(byref(TVMFFIByteArray.of(data)), byref(slot)),
                  "str argument")
            if slot.type_index >= STATIC_OBJECT_BEGIN:  # else a small string, inline
                keep.append(Object(slot.payload.v_ptr))
            return
        buf = ctypes.create_string_buffer(data)
        keep.append(buf)
        slot.type_index = RAW_STR
        p.v_ptr = ctypes.addressof(buf)
    elif isinstance(v, (bytes, bytearray)):
        arr = TVMFFIByteArray.of(bytes(v))
        keep.append(arr)
        slot.type_index = BYTE_ARRAY_PTR
        p.v_ptr = ctypes.addressof(arr)
    elif isinstance(v, Device):
        slot.type_index = DEVICE
        p.v_device = DLDevice(int(v.device_type), int(v.device_id))
    elif isinstance(v, tuple) and all(isinstance(d, numbers.Integral) for d in v):
        shape = make_shape(v)  # a tuple of ints travels as an ffi.Shape, as in tvm_ffi
        keep.append(shape)
        slot.type_index = SHAPE
        p.v_ptr = shape.handle
    elif isinstance(v, (list, tuple, dict)):
        c = make_container(v)
        keep.append(c)
        slot.type_index = c.type_index
        p.v_ptr = c.handle
    elif isinstance(v, DLTensorView):
        slot.type_index = DLTENSOR_PTR
        p.v_ptr = v._ptr
    elif hasattr(v, "__dlpack__"):
        t = tensor_from_dlpack(v)
        keep.append(t)
        slot.type_index = TENSOR
        p.v_ptr = t.handle
    elif callable(v):
        from . import Function

        f = Function.from_callable(v)
        keep.append(f)
        slot.type_index = FUNCTION
        p.v_ptr = f.handle
    else:
        raise TypeError(f"cannot pass a {type(v).__name__} to a tvmrt function")


def _convert_arg(v):
    """The extension's converter for arguments it does not convert itself: returns an object
    to pass (kept alive for the call) or ``(type_index, payload)`` for a plain value."""
    if isinstance(v, numbers.Integral):  # numpy integers
        v = int(v)
        if not -(2**63) <= v < 2**63:
            raise OverflowError(f"{v} does not fit in int64")
        return v
    if isinstance(v, numbers.Real):
        return float(v)
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, tuple) and all(isinstance(d, numbers.Integral) for d in v):
        return make_shape(v)  # a tuple of ints travels as an ffi.Shape, as in tvm_ffi
    if isinstance(v, (list, tuple, dict)):
        return make_container(v)  # an ffi.Array or ffi.Map, as in tvm_ffi
    if isinstance(v, DLTensorView):
        return (DLTENSOR_PTR, v._ptr)
    if hasattr(v, "__dlpack__"):
        return tensor_from_dlpack(v)  # a layout the extension leaves to the package
    if callable(v):
        from . import Function

        return Function.from_callable(v)
    raise TypeError(f"cannot pass a {type(v).__name__} to a tvmrt function")


def _from_any_parts(type_index: int, payload: int, small_len: int):
    """The extension's converter for results it does not convert itself (takes them over)."""
    v = TVMFFIAny()
    v.type_index = type_index
    v.small_str_len = small_len
    v.payload.v_int64 = ctypes.c_int64(payload).value
    return from_owned_any(v)


def set_owned_result(slot: TVMFFIAny, v) -> None:
    """Writes ``v`` into ``slot`` as an owned value (for a callback's return)."""
    keep: list = []
    if isinstance(v, str):
        data = v.encode("utf-8")
        check(lib().TVMFFIStringFromByteArray(byref(TVMFFIByteArray.of(data)), byref(slot)), "str")
        return
    if isinstance(v, (bytes, bytearray)):
        data = bytes(v)
        check(lib().TVMFFIBytesFromByteArray(byref(TVMFFIByteArray.of(data)), byref(slot)), "bytes")
        return
    if isinstance(v, (tuple, list)) and not isinstance(v, Device):
        raise TypeError("returning sequences from a callback is not supported")
    view = TVMFFIAny()
    fill_any(view, v, keep)
    if view.type_index == DLTENSOR_PTR:
        raise TypeError("a callback cannot return a borrowed DLTensor view")
    # Objects gain a reference for the caller; plain values are copied.
    check(lib().TVMFFIAnyViewToOwnedAny(byref(view), byref(slot)), "result")
