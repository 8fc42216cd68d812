"""Per-kernel timing reports, as TVM's ``tvm.runtime.profiling.Report`` prints them::

    vm = tvmrt.VirtualMachine(tvmrt.load_module("model.so"), tvmrt.cpu(), profile=True)
    report = vm.profile("main", x)          # one warm-up call, then one timed call
    print(report)                           # per kernel: duration, share, argument shapes
    report.calls[0]["Name"], report.json(), report.csv()

The classic debug executor's ``profile()`` returns one too (:mod:`tvmrt.debug_executor`).
"""

from __future__ import annotations

import json as _json


def _builtin(name):
    from . import _builtin as get

    return get(name)


class Report:
    """A profiling report: one row per kernel call (name, duration, share of the whole,
    device, argument shapes), a total per device, and the run's configuration."""

    def __init__(self, obj):
        self._obj = obj

    @classmethod
    def from_json(cls, text: str) -> "Report":
        """The report of TVM's JSON form (``AsJSON``, what ``profile`` functions return)."""
        return cls(_builtin("runtime.profiling.FromJSON")(text))

    def table(self, sort: bool = True, aggregate: bool = True, col_sums: bool = True) -> str:
        """TVM's table: calls of the same kernel and shapes aggregated, slowest first, a
        "Sum" row, a "Total" per device, then the configuration."""
        return _builtin("runtime.profiling.AsTable")(self._obj, sort, aggregate, col_sums)

    def csv(self) -> str:
        return _builtin("runtime.profiling.AsCSV")(self._obj)

    def json(self) -> str:
        return _builtin("runtime.profiling.AsJSON")(self._obj)

    @property
    def calls(self) -> list:
        """Each call's metrics: ``{"Name": "matmul", "Duration (us)": 1.2, "Count": 1, ...}``."""
        return [{k: _value(v) for k, v in row.items()} for row in _json.loads(self.json())["calls"]]

    @property
    def configuration(self) -> dict:
        return {k: _value(v) for k, v in _json.loads(self.json())["configuration"].items()}

    def __str__(self):
        return self.table()

    def __repr__(self):
        return f"tvmrt.profiling.Report({len(self.calls)} calls)"


def _value(metric: dict):
    """A metric's value (TVM's JSON wraps each in its kind: microseconds, count, ...)."""
    (value,) = metric.values()
    return value
