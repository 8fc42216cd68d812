"""The direct-call floor of the Triton benchmarks: a tvmrt call of one batch in this process.

Shared by run.py (against Triton's Python backend) and compute_bench.py (server compute on a
bigger machine); it imports only numpy and tvmrt's Python package, so it runs where TVM is not
installed.
"""
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def direct_times(lib, shape, sizes, runtime=None, repeat=200):
    """Median seconds of a direct tvmrt call per batch size (tensor in, `main`, copy out).

    `runtime`, when given, is the libtvmrt.so the package loads (TVMRT_LIBRARY)."""
    if runtime:
        os.environ["TVMRT_LIBRARY"] = runtime
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import tvmrt

    f = tvmrt.VirtualMachine(tvmrt.load_module(lib), tvmrt.cpu())["main"]
    out = {}
    for b in sizes:
        x = np.random.default_rng(b).standard_normal((b, *shape), dtype=np.float32)
        for _ in range(10):
            f(tvmrt.tensor(x)).numpy()
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            f(tvmrt.tensor(x)).numpy()
            ts.append(time.perf_counter() - t0)
        out[b] = statistics.median(ts)
    return out
