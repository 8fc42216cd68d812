"""tvmrt for Python: load libraries compiled by Apache TVM and call their functions.

A thin ctypes binding of libtvmrt.so (standard library only; numpy optional)::

    import numpy as np, tvmrt

    mod = tvmrt.load_module("add.so")
    a, b = np.ones(16, "float32"), np.arange(16, dtype="float32")
    c = np.empty(16, "float32")
    mod["add"](a, b, c)          # numpy arrays travel by DLPack, without copies

    @tvmrt.register_func("my.callback")
    def callback(x, y):          # C (or compiled code) can now call "my.callback"
        return x + y

Errors raised by the runtime or by compiled code come back as Python exceptions of TVM's kind
(``ValueError``, ``TypeError``, ...; others as subclasses of :class:`TVMError`), with the kind in
``exc.kind``. The library is found through ``$TVMRT_LIBRARY`` or the repository's
``target/{release,debug}`` (see :func:`tvmrt._ffi.find_library`).
"""

from __future__ import annotations

import itertools
import threading
from ctypes import byref, c_void_p

from . import _ffi
from ._ffi import (
    Device,
    DLTensorView,
    Object,
    Tensor,
    TVMError,
    TVMFFIAny,
    TVMFFIByteArray,
)

__version__ = "0.1.0"

__all__ = [
    "Device",
    "DLTensorView",
    "Function",
    "Module",
    "Object",
    "Tensor",
    "TVMError",
    "VirtualMachine",
    "cpu",
    "cuda",
    "device",
    "empty",
    "opencl",
    "vulkan",
    "tensor",
    "from_dlpack",
    "get_global_func",
    "library_path",
    "list_global_funcs",
    "load_module",
    "register_func",
]


def library_path() -> str:
    """The path of the libtvmrt.so in use."""
    return _ffi.lib()._tvmrt_path


def from_dlpack(obj) -> Tensor:
    """A tvmrt tensor sharing the memory of ``obj`` (numpy array or any DLPack producer)."""
    return _ffi.tensor_from_dlpack(obj)


# ---------------------------------------------------------------------------------------------
# Functions and Python callbacks

_callbacks: dict[int, object] = {}
_callback_ids = itertools.count(1)
_callbacks_lock = threading.Lock()


@_ffi.SAFE_CALL
def _safe_call(self_handle, args, num_args, result):
    try:
        fn = _callbacks[self_handle]
        values = []
        for i in range(num_args):
            owned = TVMFFIAny()
            _ffi.check(_ffi.lib().TVMFFIAnyViewToOwnedAny(byref(args[i]), byref(owned)), "argument")
            values.append(_ffi.from_owned_any(owned))
        _ffi.set_owned_result(result.contents, fn(*values))
        return 0
    except BaseException as e:  # every error goes back to C as a raised error
        kind = getattr(e, "kind", None) or type(e).__name__
        message = e.args[0] if len(e.args) == 1 and isinstance(e.args[0], str) else str(e)
        _ffi.lib().TVMFFIErrorSetRaisedFromCStr(
            kind.encode("utf-8", "replace"), message.encode("utf-8", "replace")
        )
        return -1


@_ffi.DELETER
def _delete_callback(self_handle):
    with _callbacks_lock:
        _callbacks.pop(self_handle, None)


class Function(_ffi.FunctionBase, Object):
    """A function of the runtime: a compiled kernel, a global function, or a Python callable
    wrapped for C. Call it with ints, floats, strings, bytes, tensors, numpy arrays (passed by
    DLPack), functions, modules or Python callables."""

    __slots__ = ()
    _static_type_index = _ffi.FUNCTION

    @staticmethod
    def from_callable(fn) -> "Function":
        """Wraps a Python callable as a runtime function that C can call."""
        if isinstance(fn, Function):
            return fn
        if not callable(fn):
            raise TypeError(f"expected a callable, got {type(fn).__name__}")
        with _callbacks_lock:
            key = next(_callback_ids)
            _callbacks[key] = fn
        out = c_void_p()
        status = _ffi.lib().TVMFFIFunctionCreate(key, _safe_call, _delete_callback, byref(out))
        if status != 0:
            with _callbacks_lock:
                _callbacks.pop(key, None)
            raise _ffi.raised_error("TVMFFIFunctionCreate")
        return Function(out.value)

    def __repr__(self):
        return f"tvmrt.Function(0x{self._handle:x})"


def get_global_func(name: str, allow_missing: bool = False):
    """The global function ``name``; ``None`` when missing and ``allow_missing``, else
    ``ValueError``."""
    out = c_void_p()
    arr = TVMFFIByteArray.of(name.encode("utf-8"))
    _ffi.check(_ffi.lib().TVMFFIFunctionGetGlobal(byref(arr), byref(out)), "get_global_func")
    if not out.value:
        if allow_missing:
            return None
        raise ValueError(f"Cannot find global function {name}")
    return Function(out.value)


def register_func(name, f=None, override: bool = False):
    """Registers a Python callable as the global function ``name``, callable from C
    (``TVMFFIFunctionGetGlobal`` / ``TVMFuncGetGlobal``) and from compiled code. Use as
    ``register_func("name", fn)`` or as a decorator ``@register_func("name")``."""
    if not isinstance(name, str):
        raise TypeError("register_func: the name must be a string")

    def register(fn):
        func = Function.from_callable(fn)
        arr = TVMFFIByteArray.of(name.encode("utf-8"))
        status = _ffi.lib().TVMFFIFunctionSetGlobal(byref(arr), func.handle, int(override))
        _ffi.check(status, f"register_func({name!r})")
        return fn

    return register(f) if f is not None else register


_BUILTINS: dict = {}


def _builtin(name: str) -> Function:
    """A global function of tvmrt itself (``ffi.*``, ``runtime.*``), looked up once."""
    f = _BUILTINS.get(name)
    if f is None:
        f = _BUILTINS[name] = get_global_func(name)
    return f


def list_global_funcs() -> list:
    """Names of every global function."""
    names = get_global_func("ffi.FunctionListGlobalNames")()
    if isinstance(names, str):
        return [n for n in names.split("\n") if n]
    return list(names)


# ---------------------------------------------------------------------------------------------
# Modules


class Module(Object):
    """A loaded module: a compiled library, a Relax VM executable, or any registered kind."""

    __slots__ = ()
    _static_type_index = _ffi.MODULE

    @property
    def kind(self) -> str:
        return _builtin("ffi.ModuleGetKind")(self)

    @property
    def imports(self) -> list:
        size = get_global_func("runtime.ModuleImportsSize")(self)
        get = get_global_func("runtime.ModuleGetImport")
        return [get(self, i) for i in range(size)]

    def get_function(self, name: str, query_imports: bool = True):
        """The function ``name`` (searching the imports too), or ``None``."""
        return _builtin("ffi.ModuleGetFunction")(self, name, query_imports)

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        return bool(_builtin("ffi.ModuleImplementsFunction")(self, name, query_imports))

    def __getitem__(self, name: str) -> Function:
        if not isinstance(name, str):
            raise TypeError("module functions are looked up by name (a string)")
        f = self.get_function(name)
        if f is None:
            raise AttributeError(f"Module has no function '{name}'")
        return f

    def __contains__(self, name: str) -> bool:
        return self.implements_function(name, True)

    def __repr__(self):
        return f"tvmrt.Module(kind={self.kind!r})"


def load_module(path, fmt: str = "") -> Module:
    """Loads a library exported by TVM (``.so``) or a file of a registered format."""
    return get_global_func("ffi.ModuleLoadFromFile")(str(path), fmt)


def cpu(dev_id: int = 0) -> Device:
    """The CPU device ``(kDLCPU, dev_id)``, as ``tvm.cpu()`` names it."""
    return Device(_ffi.DEVICE_TYPES["cpu"], dev_id)


def cuda(dev_id: int = 0) -> Device:
    """CUDA device ``dev_id`` ``(kDLCUDA, dev_id)``, as ``tvm.cuda()`` names it."""
    return Device(_ffi.DEVICE_TYPES["cuda"], dev_id)


def opencl(dev_id: int = 0) -> Device:
    """OpenCL device ``dev_id`` ``(kDLOpenCL, dev_id)``, as ``tvm.opencl()`` names it."""
    return Device(_ffi.DEVICE_TYPES["opencl"], dev_id)


def vulkan(dev_id: int = 0) -> Device:
    """Vulkan device ``dev_id`` ``(kDLVulkan, dev_id)``, as ``tvm.vulkan()`` names it."""
    return Device(_ffi.DEVICE_TYPES["vulkan"], dev_id)


def empty(shape, dtype="float32", device=None) -> Tensor:
    """A new tensor of ``shape`` and ``dtype`` on ``device`` (the CPU by default)."""
    return _ffi.empty(shape, dtype, device)


def tensor(arr, device=None) -> Tensor:
    """A copy of ``arr`` (a numpy array or any DLPack producer) on ``device`` (the CPU by
    default), as ``tvm.runtime.tensor``. ``t.numpy()`` copies it back."""
    import numpy as np

    a = arr if isinstance(arr, np.ndarray) else np.from_dlpack(arr)
    return _ffi.empty(a.shape, str(a.dtype), device).copyfrom(a)


def device(dev_type, index: int = 0) -> Device:
    """A device by TVM's name or DLPack code: ``device("cpu")``, ``device("opencl:1")``,
    ``device(1, 0)``."""
    if isinstance(dev_type, str):
        name, _, idx = dev_type.partition(":")
        if idx:
            if not idx.isdigit():
                raise ValueError(f"bad device {dev_type!r}: expected NAME or NAME:INDEX")
            index = int(idx)
        if name not in _ffi.DEVICE_TYPES:
            raise ValueError(
                f"unknown device type {name!r}; known: {', '.join(_ffi.DEVICE_TYPES)}"
            )
        dev_type = _ffi.DEVICE_TYPES[name]
    if isinstance(dev_type, bool) or not isinstance(dev_type, int):
        raise TypeError(f"a device type is a name or an int, got {type(dev_type).__name__}")
    return Device(dev_type, int(index))


class VirtualMachine:
    """Runs a Relax model's functions, as ``tvm.relax.VirtualMachine`` does::

    vm = tvmrt.VirtualMachine(tvmrt.load_module("model.so"), tvmrt.cpu())
    y = vm["main"](x)                       # or, statefully:
    vm.set_input("main", x); vm.invoke_stateful("main"); y = vm.get_outputs("main")
    # with profile=True: print(vm.profile("main", x))   (per-kernel times)

    On a device (``tvmrt.opencl()`` or ``tvmrt.cuda()`` for a model built for OpenCL or
    CUDA) the VM runs there with the CPU as its host, as TVM does: ``set_input`` uploads host
    arrays, ``vm["main"]`` takes tensors on the device (``tvmrt.tensor(x, dev)``), and outputs stay on the device
    (``.numpy()`` copies them back).
    """

    #: TVM's ``VirtualMachine.POOLED_ALLOCATOR``.
    POOLED_ALLOCATOR = 2
    #: DLPack's ``kDLCPU``.
    CPU = 1

    def __init__(self, executable: Module, device=None, profile: bool = False):
        device_type, device_id = device if device is not None else cpu()
        self.device = Device(int(device_type), int(device_id))
        load = "vm_profiler_load_executable" if profile else "vm_load_executable"
        self.module = executable[load]()
        init = [device_type, device_id, self.POOLED_ALLOCATOR]
        if device_type != self.CPU:
            init += [self.CPU, 0, self.POOLED_ALLOCATOR]  # the host, as TVM adds it
        self.module["vm_initialization"](*init)

    def __getitem__(self, name: str) -> Function:
        f = self.module.get_function(name, False)
        if f is None:
            raise AttributeError(f"the Relax VM has no function '{name}'")
        return f

    def set_input(self, func_name: str, *args):
        """Sets the inputs of ``func_name`` for :meth:`invoke_stateful`."""
        self.module["set_input"](func_name, *args)

    def invoke_stateful(self, func_name: str):
        """Runs ``func_name`` on the inputs given to :meth:`set_input`."""
        self.module["invoke_stateful"](func_name)

    def get_outputs(self, func_name: str):
        """The result of the last :meth:`invoke_stateful` of ``func_name`` (a tensor, or a
        list for a tuple)."""
        arity = self.module["get_output_arity"](func_name)
        if arity == -1:
            return self.module["get_output"](func_name)
        return [self.get_output(func_name, i) for i in range(arity)]

    def get_output(self, func_name: str, index: int):
        """Output ``index`` of the last :meth:`invoke_stateful` of ``func_name``."""
        return self.module["get_output"](func_name, index)

    def profile(self, func_name: str, *args):
        """One warm-up call of ``func_name``, then one with every kernel call timed: a
        :class:`tvmrt.profiling.Report` (make the VM with ``profile=True``)."""
        from .profiling import Report

        return Report.from_json(self.module["profile"](func_name, *args))
