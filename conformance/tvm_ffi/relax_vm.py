"""TVM-compiled Relax models run from Python with only tvm-ffi's package and tvmrt.

Every Relax VM case of tests/fixtures/manifest.json (outputs computed by real TVM) is run through
`tvm_ffi.load_module`, the VM's `vm_load_executable` / `vm_initialization`, and the entry
function, on numpy arrays passed and returned through DLPack; the module facts `tvm_ffi` reads
(imports, property masks, writing to a file) are checked too. Exits non-zero on a mismatch.

    python conformance/tvm_ffi/relax_vm.py     (with the venv whose tvm_ffi has tvmrt swapped in)
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import tvm_ffi

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def flatten(value):
    """Tensors of a result (a tensor, or a nested tuple of tensors), depth-first."""
    if isinstance(value, tvm_ffi.Tensor):
        return [np.from_dlpack(value)]
    return [t for item in value for t in flatten(item)]


def check_module(exe, tmp):
    """The module facts tvm_ffi reads, as TVM 0.27's runtime gives them for the same library:
    the executable imports the library module; property masks 1 (binary-serializable) and 3
    (+ runnable); the executable writes its bytes to a file, the library cannot."""
    get = tvm_ffi.get_global_func
    assert exe.kind == "relax.VMExecutable", exe.kind
    (lib,) = exe.imports
    assert lib.kind == "library" and tuple(lib.imports) == (), lib
    assert get("ffi.ModuleGetPropertyMask")(exe) == 1
    assert get("ffi.ModuleGetPropertyMask")(lib) == 3
    assert exe.is_binary_serializable() and not exe.is_runnable()
    assert list(get("ffi.ModuleGetWriteFormats")(exe)) == []
    assert get("ffi.ModuleInspectSource")(exe, "") == ""
    path = Path(tmp) / "exe.bin"
    get("ffi.ModuleWriteToFile")(exe, str(path), "")
    again = get("ffi.Module.load_from_bytes.relax.VMExecutable")(path.read_bytes())
    assert again.kind == "relax.VMExecutable"
    try:
        get("ffi.ModuleWriteToFile")(lib, str(path), "")
    except RuntimeError as e:
        assert "does not support WriteToFile" in str(e), e
    else:
        raise AssertionError("the library module wrote itself to a file")


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
        with tempfile.TemporaryDirectory() as tmp:
            check_module(exe, tmp)
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
