#!/usr/bin/env python3
"""The CUDA fixture suite on a real GPU: every library of tests/fixtures/cuda in every format it
ships (TVM 0.27's CUDA source, compiled by tvmrt with NVRTC; NVRTC's PTX, cubin and fatbin),
each call case run on cuda:0 through the tvmrt Python package and compared with numpy's answer
as TVM's CPU runtime recorded it (data/*.out*.npy), the Relax MLP's `main` among them; then the
classic graph model graph_cuda.so (TVM 0.19's layout, loadbinary_cuda) through the graph
executor. Prints one line
per case and `cuda suite: N passed, N failed`.

The fixtures target sm_80: an sm_80 cubin runs on compute capability 8.x only, so on another
architecture the suite expects tvmrt to refuse it (with its message naming what the module
holds) and counts that refusal as the pass; PTX, fatbin (it carries PTX) and source run
everywhere from 8.0 up.

    python benches/cuda/suite.py [--library PATH/libtvmrt.so] [--fake]

--fake runs against the test double of the driver (TVMRT_CUDA_LIBRARY must name it): its
"device" computes only the elementwise kernels and the matmul, so the MLP's values are not
compared there (the run itself is). TVMRT_NVRTC_LIBRARY (or the pip package) gives NVRTC.
"""

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from tally import Tally

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "cuda"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", help="libtvmrt.so to test (default: target/release)")
    ap.add_argument("--fake", action="store_true", help="the driver is the test double")
    args = ap.parse_args()
    os.environ.setdefault(
        "TVMRT_LIBRARY", args.library or str(ROOT / "target" / "release" / "libtvmrt.so"))
    sys.path.insert(0, str(ROOT / "python"))
    import numpy as np
    import tvmrt

    manifest = json.loads((FIX / "manifest.json").read_text())
    dev = tvmrt.cuda(0)
    attr = tvmrt.get_global_func("runtime.GetDeviceAttr")
    if not attr(2, 0, 0):
        sys.exit("cuda suite: no CUDA device (runtime.GetDeviceAttr says cuda:0 does not exist)")
    version = attr(2, 0, 4)
    sm = int(version.replace(".", ""))
    print(f"device: {attr(2, 0, 5)} (compute capability {version}), driver {attr(2, 0, 12)}")
    tally = Tally()
    report = tally.report

    for case in manifest["cases"]:
        lib_info = manifest["libraries"][case["library"]]
        for fmt, entry in sorted(lib_info["files"].items()):
            what = f"{entry['file']} {case['name']}"
            try:
                lib = tvmrt.load_module(FIX / entry["file"])
                want = [np.load(FIX / o) for o in case["outputs"]]
                if lib_info["relax"]:
                    vm = tvmrt.VirtualMachine(lib, dev)
                    ins = [tvmrt.tensor(np.load(FIX / a["tensor"]), dev) for a in case["args"]]
                    out = vm[case["function"]](*ins)
                    got = [out.numpy()]
                else:
                    call, outs = [], []
                    for a in case["args"]:
                        if "tensor" in a:
                            call.append(tvmrt.tensor(np.load(FIX / a["tensor"]), dev))
                        elif "output" in a:
                            w = want[a["output"]]
                            outs.append(tvmrt.empty(w.shape, str(w.dtype), dev))
                            call.append(outs[-1])
                        else:
                            call.append(a.get("float", a.get("int")))
                    lib[case["function"]](*call)
                    got = [o.numpy() for o in outs]
                if fmt == "cubin" and sm // 10 != 8:
                    report(False, what, f"an sm_80 cubin ran on sm_{sm}")
                    continue
                if args.fake and lib_info["relax"]:
                    report(True, what, "ran (values not compared: the test double does not "
                                       "compute this model)")
                    continue
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
                report(True, what)
            except Exception as e:  # noqa: BLE001 (each case reports its own failure)
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                if fmt == "cubin" and sm // 10 != 8 and "cannot run on cuda:0" in str(e):
                    report(True, what, f"refused on sm_{sm} as expected ({msg[:100]})")
                else:
                    report(False, what, msg)
                    if os.environ.get("VERBOSE"):
                        traceback.print_exc()
    # The classic (TVM 0.19 layout) graph model: a GraphExecutorFactory whose library imports a
    # cuda module (PTX for compute_80) through runtime.module.loadbinary_cuda.
    what = "graph_cuda.so default(cuda:0)"
    try:
        sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "graph"))
        import gen  # the generator's deterministic input values
        from tvmrt import graph_executor

        expected = json.loads((FIX / "graph_cuda.expected.json").read_text())
        m = graph_executor.GraphModule(tvmrt.load_module(FIX / "graph_cuda.so")["default"](dev))
        m.set_input("x", np.array(gen.values(70, 12), dtype="float32").reshape(1, 70))
        m.run()
        for i, out in enumerate(expected["outputs"]):
            np.testing.assert_allclose(m.get_output(i).numpy().ravel(), out["values"],
                                       rtol=1e-6, atol=0)
        report(True, what)
    except Exception as e:  # noqa: BLE001
        report(False, what, str(e).splitlines()[0] if str(e) else type(e).__name__)
    return tally.finish("cuda suite")


if __name__ == "__main__":
    sys.exit(main())
