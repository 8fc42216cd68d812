"""The Python user's view of issue 14's first-call figure: a Relax model called from Python on
Apache TVM 0.27 (`tvm.relax.VirtualMachine`) and on tvmrt (`tvmrt.VirtualMachine`, the
repository's package), each sample in a fresh process, the two runtimes alternating.

    python python_calls.py SAMPLES LIB INPUT.npy [LIB INPUT.npy ...]

Per model, prints the median over SAMPLES processes of: the first `main` call with a numpy
input (passed by DLPack, as the conformance worker does), and the steady per-call time with a
runtime tensor and with a numpy array (best of 3 timeit runs of 2000 calls). Run with the
onnx venv's python (apache-tvm 0.27.0.post1, numpy); tvmrt's library is $TVMRT_LIBRARY.
"""

import os
import statistics
import subprocess
import sys

CHILD = r"""
import sys, time, timeit
import numpy as np
which, lib, inp = sys.argv[1:4]
x = np.load(inp)
if which == "tvm":
    import tvm
    from tvm import relax
    f = relax.VirtualMachine(tvm.runtime.load_module(lib), tvm.cpu())["main"]
    t = tvm.runtime.tensor(x)
    out = lambda y: y.numpy()
else:
    sys.path.insert(0, sys.argv[4])
    import tvmrt
    f = tvmrt.VirtualMachine(tvmrt.load_module(lib))["main"]
    t = tvmrt.from_dlpack(x)
    out = lambda y: np.from_dlpack(y)
t0 = time.perf_counter()
y = f(x)
first = time.perf_counter() - t0
per = lambda g: min(timeit.repeat(g, number=2000, repeat=3)) / 2000
print(first * 1e6, per(lambda: f(t)) * 1e6, per(lambda: f(x)) * 1e6, float(out(y).sum()))
"""


def main():
    samples = int(sys.argv[1])
    pairs = list(zip(sys.argv[2::2], sys.argv[3::2]))
    package = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
    print("| model | measurement | TVM 0.27 | tvmrt | tvmrt/TVM |")
    print("|---|---|---:|---:|---:|")
    for lib, inp in pairs:
        got = {"tvm": [], "tvmrt": []}
        for i in range(samples):
            for rt in ("tvm", "tvmrt") if i % 2 == 0 else ("tvmrt", "tvm"):
                cmd = [sys.executable, "-c", CHILD, rt, lib, inp, package]
                line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                got[rt].append([float(v) for v in line.split()])
        sums = {round(s[3], 3) for rt in got for s in got[rt]}
        if len(sums) != 1:
            sys.exit(f"{lib}: the runtimes' outputs differ: {sorted(sums)}")
        name = os.path.splitext(os.path.basename(lib))[0]
        labels = ["first main, numpy input (us)", "steady main, runtime tensor (us)",
                  "steady main, numpy input (us)"]
        for k, label in enumerate(labels):
            tvm = statistics.median(s[k] for s in got["tvm"])
            rt = statistics.median(s[k] for s in got["tvmrt"])
            print(f"| {name} (Python) | {label} | {tvm:.1f} | {rt:.1f} | {rt / tvm:.2f} |")


if __name__ == "__main__":
    main()
