"""The debug executor of classic TVM models (TVM <= 0.19), with the names of
``tvm.contrib.debugger.debug_executor``: a :class:`tvmrt.graph_executor.GraphModule` that also
times each node and reads each node's output::

    from tvmrt import debug_executor
    m = debug_executor.create(graph_json, lib, tvmrt.cpu())     # or lib["debug_create"](...)
    m.set_input("x", x)
    times = m.run_individual(number=10, repeat=3)   # seconds per call, per node and repeat
    y = m.debug_get_output("conv1")                  # a node's output (by name or index)
    print(m.profile())                               # a per-kernel report
"""

from __future__ import annotations

import struct

from . import cpu, get_global_func
from .graph_executor import GraphModule
from .profiling import Report


def create(graph_json_str: str, libmod, device=None) -> "GraphModuleDebug":
    """A debug executor for a graph and its kernel library, on ``device`` (the CPU)."""
    device_type, device_id = device if device is not None else cpu()
    fcreate = get_global_func("tvm.graph_executor_debug.create")
    return GraphModuleDebug(fcreate(graph_json_str, libmod, device_type, device_id))


class GraphModuleDebug(GraphModule):
    """Wraps a debug ``GraphExecutor`` module."""

    def __init__(self, module):
        super().__init__(module)
        self._run_individual = module["run_individual"]
        self._run_individual_node = module["run_individual_node"]
        self._debug_get_output = module["debug_get_output"]
        self._execute_node = module["execute_node"]
        self._get_node_output = module["get_node_output"]
        self._profile = module["profile"]

    def run_individual(self, number, repeat=1, min_repeat_ms=0, limit_zero_time_iterations=100,
                       cooldown_interval_ms=0, repeats_to_cooldown=1) -> list:
        """Each node's call timed on its own: one list of ``repeat`` mean seconds per call for
        every node (zeros for inputs), after a whole run."""
        blob = self._run_individual(number, repeat, min_repeat_ms, limit_zero_time_iterations,
                                    cooldown_interval_ms, repeats_to_cooldown)
        (nodes,) = struct.unpack_from("@q", blob, 0)
        offset = struct.calcsize("@q")
        per = "@" + "d" * repeat
        out = []
        for _ in range(nodes):
            out.append(list(struct.unpack_from(per, blob, offset)))
            offset += struct.calcsize(per)
        return out

    def run_individual_node(self, index, number=10, repeat=1, min_repeat_ms=0,
                            limit_zero_time_iterations=100, cooldown_interval_ms=0,
                            repeats_to_cooldown=1) -> list:
        """Node ``index``'s call timed: ``repeat`` mean seconds per call."""
        blob = self._run_individual_node(index, number, repeat, min_repeat_ms,
                                         limit_zero_time_iterations, cooldown_interval_ms,
                                         repeats_to_cooldown)
        return list(struct.unpack("@" + "d" * repeat, blob))

    def debug_get_output(self, node, out=None):
        """Runs the calls up to ``node`` (an index or a name) and returns its output (or copies
        it into ``out``)."""
        if out is not None:
            self._debug_get_output(node, out)
            return out
        return self._debug_get_output(node)

    def execute_node(self, node):
        """Runs the calls after the last node executed, up to ``node``."""
        self._execute_node(node)

    def get_node_output(self, node, index=0):
        """A copy of output ``index`` of ``node``, which must be the last node executed."""
        return self._get_node_output(node, index)

    def profile(self) -> Report:
        """Three warm-up runs, then one run with every call timed."""
        return Report(self._profile())
