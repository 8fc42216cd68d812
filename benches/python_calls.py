"""Steady per-call time of a Relax model called from Python: Apache TVM 0.27
(`tvm.relax.VirtualMachine`) against tvmrt's package (`tvmrt.VirtualMachine`, from the wheel
installed in a fresh venv), each in its own processes, alternating.

    python python_calls.py TVM_PYTHON TVMRT_PYTHON ROUNDS OUT_DIR

TVM_PYTHON has apache-tvm 0.27 and numpy (it also compiles the four-input model into OUT_DIR);
TVMRT_PYTHON has the tvmrt wheel and numpy. Measurements (microseconds per call, best of 15
timeit runs of 1000 calls in each process; the table gives the median over ROUNDS processes):
  tensor_in            f(t): main of tests/fixtures/mlp.so on a runtime tensor
  numpy_in             f(x): on a numpy array
  numpy_in_out         np.from_dlpack(f(x)): numpy in and out
  lookup_numpy_in_out  np.from_dlpack(vm["main"](x)): the function looked up on every call
  four_numpy_in_out    np.from_dlpack(vm4["main"](x, w1, b1, w2)): an MLP taking its weights
                       as four numpy inputs
Outputs are checked to agree between the runtimes.
"""

import os
import statistics
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

MODEL4 = r"""
import sys
import tvm
from tvm import relax
bb = relax.BlockBuilder()
x = relax.Var("x", relax.TensorType((1, 16), "float32"))
w1 = relax.Var("w1", relax.TensorType((16, 32), "float32"))
b1 = relax.Var("b1", relax.TensorType((32,), "float32"))
w2 = relax.Var("w2", relax.TensorType((32, 8), "float32"))
with bb.function("main", [x, w1, b1, w2]):
    with bb.dataflow():
        h = bb.emit(relax.op.nn.relu(relax.op.add(relax.op.matmul(x, w1), b1)))
        y = bb.emit_output(relax.op.matmul(h, w2))
    bb.emit_func_output(y)
tvm.compile(bb.get(), target="llvm").export_library(sys.argv[1])
"""

CHILD = r"""
import sys, timeit
import numpy as np
which, mlp, mlp4, xin = sys.argv[1:5]
x = np.load(xin)
rng = np.random.default_rng(0)
ins4 = [rng.standard_normal(s).astype("float32") for s in [(1, 16), (16, 32), (32,), (32, 8)]]
if which == "tvm":
    import tvm
    from tvm import relax
    vm = relax.VirtualMachine(tvm.runtime.load_module(mlp), tvm.cpu())
    vm4 = relax.VirtualMachine(tvm.runtime.load_module(mlp4), tvm.cpu())
    t = tvm.runtime.tensor(x)
else:
    import tvmrt
    assert tvmrt._ffi._core is not None, "tvmrt's C extension is not loaded"
    vm = tvmrt.VirtualMachine(tvmrt.load_module(mlp))
    vm4 = tvmrt.VirtualMachine(tvmrt.load_module(mlp4))
    t = tvmrt.from_dlpack(x)
f, f4 = vm["main"], vm4["main"]
check = float(np.from_dlpack(f(x)).sum()) + float(np.from_dlpack(f4(*ins4)).sum())
per = lambda g: min(timeit.repeat(g, number=1000, repeat=15)) / 1000 * 1e6
r = [per(lambda: f(t)), per(lambda: f(x)), per(lambda: np.from_dlpack(f(x))),
     per(lambda: np.from_dlpack(vm["main"](x))),
     per(lambda: np.from_dlpack(vm4["main"](*ins4)))]
print(" ".join(f"{v:.4f}" for v in r), f"{check:.4f}")
"""

LABELS = ["tensor_in", "numpy_in", "numpy_in_out", "lookup_numpy_in_out", "four_numpy_in_out"]


def main():
    tvm_py, rt_py, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    os.makedirs(out, exist_ok=True)
    mlp4 = os.path.join(out, "mlp4.so")
    if not os.path.exists(mlp4):
        subprocess.run([tvm_py, "-c", MODEL4, mlp4], check=True)
    fix = os.path.join(ROOT, "tests", "fixtures")
    args = [os.path.join(fix, "mlp.so"), mlp4, os.path.join(fix, "data", "mlp.main.in0.npy")]
    got = {"tvm": [], "tvmrt": []}
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("TVMRT_LIBRARY", None)
    for i in range(rounds):
        for rt in ("tvm", "tvmrt") if i % 2 == 0 else ("tvmrt", "tvm"):
            py = tvm_py if rt == "tvm" else rt_py
            line = subprocess.run([py, "-c", CHILD, rt, *args], check=True, capture_output=True,
                                  text=True, env=env, cwd=out).stdout
            got[rt].append([float(v) for v in line.split()])
    checks = {round(s[-1], 3) for rt in got for s in got[rt]}
    if len(checks) != 1:
        sys.exit(f"the runtimes' outputs differ: {sorted(checks)}")
    print("| measurement | TVM 0.27 (us) | tvmrt (us) | tvmrt/TVM | TVM min | tvmrt min |")
    print("|---|---:|---:|---:|---:|---:|")
    for k, label in enumerate(LABELS):
        tvm = [s[k] for s in got["tvm"]]
        rt = [s[k] for s in got["tvmrt"]]
        tm, rm = statistics.median(tvm), statistics.median(rt)
        print(f"| {label} | {tm:.2f} | {rm:.2f} | {rm / tm:.2f} | {min(tvm):.2f} | {min(rt):.2f} |")


if __name__ == "__main__":
    main()
