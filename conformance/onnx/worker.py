"""One ONNX backend test case on one runtime, in its own process (run.py starts it).

    worker.py tvm   CASE_DIR WORK_DIR   compile with TVM 0.27 (from_onnx,
                                        DecomposeOpsForInference, LegalizeOps,
                                        tvm.compile(target="llvm")), export WORK_DIR/lib.so,
                                        run it on TVM's Relax VM
    worker.py tvmrt CASE_DIR WORK_DIR   run WORK_DIR/lib.so on tvmrt (its Python package)

Prints one line, `RESULT pass`, `RESULT fail <reason>` or `RESULT compile-error <reason>`;
a crash or a hang is seen by run.py as the process dying or timing out.
"""

import glob
import os
import sys

import numpy as np

RTOL, ATOL = 1e-4, 1e-5


def read_pb(path):
    import onnx
    from onnx import numpy_helper

    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def data(case_dir):
    sets = sorted(glob.glob(os.path.join(case_dir, "test_data_set_*")))
    if not sets:
        raise ValueError("no test data set")
    d = sets[0]
    n_in = len(glob.glob(os.path.join(d, "input_*.pb")))
    n_out = len(glob.glob(os.path.join(d, "output_*.pb")))
    inputs = [read_pb(os.path.join(d, f"input_{i}.pb")) for i in range(n_in)]
    outputs = [read_pb(os.path.join(d, f"output_{i}.pb")) for i in range(n_out)]
    return inputs, outputs


def compare(got, want):
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, expected {w.shape}"
        if w.dtype.kind in "fc":
            if not np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True):
                return f"output {i}: values differ (max abs diff {np.max(np.abs(g - w))})"
        elif not np.array_equal(g, w):
            return f"output {i}: values differ"
    return None


def flatten(v, to_numpy):
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            out.extend(flatten(x, to_numpy))
        return out
    if hasattr(v, "__len__") and not hasattr(v, "shape") and not hasattr(v, "__dlpack__"):
        return flatten(list(v), to_numpy)
    return [to_numpy(v)]


def run_tvm(case_dir, work):
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    inputs, outputs = data(case_dir)
    try:
        model = onnx.load(os.path.join(case_dir, "model.onnx"))
        mod = from_onnx(model, keep_params_in_input=False)
        mod = relax.transform.DecomposeOpsForInference()(mod)
        mod = relax.transform.LegalizeOps()(mod)
        ex = tvm.compile(mod, target="llvm")
        ex.export_library(os.path.join(work, "lib.so"))
    except Exception as e:  # noqa: BLE001 - any compiler failure is this case's result
        return "compile-error " + (str(e).splitlines() or [type(e).__name__])[0][:200]
    vm = relax.VirtualMachine(ex, tvm.cpu())
    got = vm["main"](*[tvm.runtime.tensor(x) for x in inputs])
    return report(compare(flatten(got, lambda t: t.numpy()), outputs))


def run_tvmrt(case_dir, work):
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    sys.path.insert(0, os.path.join(repo, "python"))
    import tvmrt

    view = tvmrt.get_global_func("runtime.TVMTensorCreateView")

    def to_tvmrt(x):
        # numpy cannot export ml_dtypes arrays (bfloat16, float8...) by DLPack: pass their
        # bytes as unsigned integers and view them with the real dtype.
        if x.dtype.kind != "V" and x.dtype.name in np.sctypeDict:
            return x
        raw = tvmrt.from_dlpack(np.ascontiguousarray(x).view(f"uint{8 * x.dtype.itemsize}"))
        return view(raw, tuple(x.shape), x.dtype.name, 0)

    def to_numpy(t):
        try:
            return np.from_dlpack(t)
        except BufferError:
            import ml_dtypes

            dt = np.dtype(getattr(ml_dtypes, t.dtype))
            raw = view(t, tuple(t.shape), f"uint{8 * dt.itemsize}", 0)
            return np.from_dlpack(raw).copy().view(dt)

    inputs, outputs = data(case_dir)
    vm = tvmrt.VirtualMachine(tvmrt.load_module(os.path.join(work, "lib.so")))
    got = vm["main"](*[to_tvmrt(x) for x in inputs])
    return report(compare(flatten(got, to_numpy), outputs))


def report(problem):
    return "pass" if problem is None else "fail " + problem


def main():
    stage, case_dir, work = sys.argv[1:4]
    try:
        result = run_tvm(case_dir, work) if stage == "tvm" else run_tvmrt(case_dir, work)
    except Exception as e:  # noqa: BLE001 - a runtime error is a failed case
        result = "fail " + (f"{type(e).__name__}: {e}".splitlines() or ["error"])[0][:200]
    print("RESULT " + result, flush=True)


if __name__ == "__main__":
    main()
