"""The ONNX backend test suites on TVM's runtime and on tvmrt (see run.sh).

Every case (node, simple, pytorch-converted and pytorch-operator, as the onnx package ships
them) is compiled by TVM 0.27 and run on TVM's Relax VM in one child process (worker.py tvm),
then the exported library is run on tvmrt in another (worker.py tvmrt), each with a timeout.
Prints `onnx: N passed, N failed` for tvmrt with TVM's figure beside it, and every case that
passes on TVM but not on tvmrt; exits 1 if there is one.
"""

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SUITES = ["node", "simple", "pytorch-converted", "pytorch-operator"]


def cases():
    import onnx

    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    out = []
    for suite in SUITES:
        d = os.path.join(root, suite)
        for name in sorted(os.listdir(d)):
            if os.path.exists(os.path.join(d, name, "model.onnx")):
                out.append((f"{suite}/{name}", os.path.join(d, name)))
    return out


def child(stage, case_dir, work, timeout):
    cmd = [sys.executable, os.path.join(HERE, "worker.py"), stage, case_dir, work]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"fail timed out after {timeout} s"
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return line[len("RESULT "):]
    if p.returncode < 0:
        return f"fail crashed (signal {-p.returncode})"
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return f"fail exit {p.returncode}: {tail[:200]}"


def one(case, timeout):
    name, case_dir = case
    work = tempfile.mkdtemp(prefix="onnx_case_")
    try:
        tvm = child("tvm", case_dir, work, timeout)
        if tvm.startswith("compile-error") or not os.path.exists(os.path.join(work, "lib.so")):
            return name, tvm, "not run (no library)"
        return name, tvm, child("tvmrt", case_dir, work, timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", type=int, default=0,
                    help="run a deterministic subset of about this many cases (every k-th)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per child process")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    all_cases = cases()
    chosen = all_cases
    if args.subset:
        step = max(1, len(all_cases) // args.subset)
        chosen = all_cases[::step]
    start = time.time()
    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, tvm, rt in pool.map(lambda c: one(c, args.timeout), chosen):
            results.append((name, tvm, rt))
            if args.verbose:
                print(f"{name}: tvm {tvm} | tvmrt {rt}", flush=True)
    tvm_pass = sum(1 for _, t, _ in results if t == "pass")
    rt_pass = sum(1 for _, _, r in results if r == "pass")
    regressions = [(n, r) for n, t, r in results if t == "pass" and r != "pass"]
    crashes = [(n, r) for n, _, r in results if "crashed" in r or "timed out" in r]
    print(f"{len(results)} of {len(all_cases)} cases in {time.time() - start:.0f} s "
          f"({args.jobs} jobs)")
    print(f"TVM 0.27 runtime: {tvm_pass} passed, {len(results) - tvm_pass} failed")
    print(f"onnx: {rt_pass} passed, {len(results) - rt_pass} failed (tvmrt; TVM: {tvm_pass} "
          f"passed)")
    for n, r in regressions:
        print(f"  passes on TVM, not on tvmrt: {n}: {r}")
    for n, r in crashes:
        print(f"  tvmrt crashed or hung: {n}: {r}")
    return 1 if regressions or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
