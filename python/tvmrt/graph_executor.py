"""Classic TVM models (TVM <= 0.19 ``relay.build`` libraries) from Python, with the names of
``tvm.contrib.graph_executor``::

    import numpy as np, tvmrt
    from tvmrt import graph_executor

    lib = tvmrt.load_module("model.so")               # a GraphExecutorFactory at the root
    m = graph_executor.GraphModule(lib["default"](1, 0))   # kDLCPU, device 0
    m.set_input("x", np.ones((1, 4), "float32"))
    m.run()
    y = m.get_output(0).numpy()

Tensors go in and out by DLPack (numpy arrays, or anything with ``__dlpack__``).
"""

from __future__ import annotations

from . import Module, get_global_func

#: DLPack's ``kDLCPU``.
CPU = 1


def create(graph_json_str: str, libmod: Module, device_type=CPU, device_id: int = 0):
    """An executor for a graph and a kernel library, as ``graph_executor.create``; the device
    is a device (``tvmrt.vulkan(0)``, as TVM takes it) or a device type and id."""
    if isinstance(device_type, tuple):
        device_type, device_id = device_type
    return GraphModule(get_global_func("tvm.graph_executor.create")(
        graph_json_str, libmod, device_type, device_id))


class GraphModule:
    """Wraps a ``GraphExecutor`` module (what ``lib["default"](dev)`` returns)."""

    def __init__(self, module: Module):
        self.module = module
        self._set_input = module["set_input"]
        self._run = module["run"]
        self._get_output = module["get_output"]
        self._get_input = module["get_input"]
        self._get_num_outputs = module["get_num_outputs"]
        self._get_num_inputs = module["get_num_inputs"]
        self._get_input_index = module["get_input_index"]
        self._get_input_info = module["get_input_info"]
        self._load_params = module["load_params"]
        self._share_params = module["share_params"]

    def set_input(self, key=None, value=None, **params):
        """Copies ``value`` into input ``key`` (a name or an index); ``params`` sets several by
        name (names the graph does not use are skipped, as in TVM)."""
        if key is not None:
            self._set_input(key, value)
        for name in sorted(params, key=lambda k: -_size(params[k])):
            if self._get_input_index(name) >= 0:
                self._set_input(name, params[name])

    def run(self, **input_dict):
        """Sets the given inputs, then runs the graph once."""
        if input_dict:
            self.set_input(**input_dict)
        self._run()

    def get_num_outputs(self) -> int:
        return self._get_num_outputs()

    def get_num_inputs(self) -> int:
        return self._get_num_inputs()

    def get_input(self, index, out=None):
        """Input ``index`` (a name or an index), or copied into ``out``."""
        t = self._get_input(index)
        if out is not None and t is not None:
            _copy_into(t, out)
            return out
        return t

    def get_input_index(self, name: str) -> int:
        return self._get_input_index(name)

    def get_input_info(self):
        """``(shape_dict, dtype_dict)`` of the inputs not loaded as parameters."""
        info = self._get_input_info()
        return info["shape"], info["dtype"]

    def get_output(self, index: int, out=None):
        """Output ``index``, or copied into ``out`` (a tensor the executor writes)."""
        if out is not None:
            self._get_output(index, out)
            return out
        return self._get_output(index)

    def load_params(self, params_bytes: bytes):
        """Loads parameters from ``save_param_dict`` bytes."""
        self._load_params(bytes(params_bytes))

    def share_params(self, other: "GraphModule", params_bytes: bytes):
        """Shares ``other``'s parameter tensors named in ``params_bytes`` (no copies)."""
        self._share_params(other.module, bytes(params_bytes))

    def __getitem__(self, key):
        return self.module[key]


def _size(value) -> int:
    shape = getattr(value, "shape", ())
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _copy_into(tensor, out):
    import numpy as np  # only for this path

    np.copyto(out, tensor.numpy())
