"""TVM-compiled Relax models run from Python with only tvm-ffi's package and tvmrt.

Every Relax VM case of tests/fixtures/manifest.json (outputs computed by real TVM) is run through
`tvm_ffi.load_module`, the VM's `vm_load_executable` / `vm_initialization`, and the entry
function, on numpy arrays passed and returned through DLPack. Exits non-zero on a mismatch.

    python conformance/tvm_ffi/relax_vm.py     (with the venv whose tvm_ffi has tvmrt swapped in)
"""

import json
import sys
from pathlib import Path

import numpy as np
import tvm_ffi

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def flatten(value):
    """Tensors of a result (a tensor, or a nested tuple of tensors), depth-first."""
    if isinstance(value, tvm_ffi.Tensor):
        return [np.from_dlpack(value)]
    return [t for item in value for t in flatten(item)]


def main():
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    cases = [
        c
        for c in manifest["cases"]
        if c.get("convention") == "relax_vm" and not c.get("expect_error")
    ]
    failed = 0
    for case in cases:
        exe = tvm_ffi.load_module(str(FIXTURES / case["library"]))
        vm = exe[case["vm"]["load"]]()
        vm[case["vm"]["init"]](*case["vm"]["init_args"])
        args = [tvm_ffi.from_dlpack(np.load(FIXTURES / i["file"])) for i in case["inputs"]]
        got = flatten(vm[case["function"]](*args))
        want = [np.load(FIXTURES / o["file"]) for o in case["outputs"]]
        tol = case.get("tolerance") or {"rtol": 1e-5, "atol": 1e-6}
        ok = len(got) == len(want) and all(
            g.shape == w.shape and np.allclose(g, w, rtol=tol["rtol"], atol=tol["atol"])
            for g, w in zip(got, want)
        )
        print(f"  {case['id']}: {'ok' if ok else 'MISMATCH'}")
        failed += not ok
    print(f"relax VM through tvm_ffi: {len(cases) - failed} of {len(cases)} models match TVM")
    return 1 if failed or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
