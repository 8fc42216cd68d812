"""Runs tvm-ffi's own Python test suite file by file and counts the results.

Used by run.sh, which builds the venvs and fetches the suite; see there for the usage. Each test
file runs in its own pytest process. When that process dies (a signal, a timeout, or pytest's
"internal error"), the file is run again one test per process, so a crash is pinned on a test
and does not take the file's other tests with it. Prints, for the library under test:

    tvm-ffi suite: N passed, N failed

(skipped tests count in neither) and, with --record-out, writes the passing test ids.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

# pytest exit codes that mean "the run finished": 0 all passed, 1 some failed, 5 none collected.
FINISHED = {0, 1, 5}


def pytest_cmd(python, extra):
    # The suite's pyproject adds "-n auto" (pytest-xdist); one process per file instead.
    return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *extra]


def run_junit(python, targets, cwd, timeout):
    """Runs pytest on targets; returns (finished, {test id: outcome}, output tail)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "r.xml"
        cmd = pytest_cmd(python, [f"--junitxml={xml}", *targets])
        try:
            p = subprocess.run(
                cmd, cwd=cwd, timeout=timeout, capture_output=True, text=True, errors="replace"
            )
            code, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            code, out = "timeout", f"timed out after {timeout} s\n{e.stdout or ''}"
        results = {}
        if xml.exists():
            try:
                for case in ET.parse(xml).iter("testcase"):
                    tid = f"{case.get('classname')}::{case.get('name')}"
                    kinds = {child.tag for child in case}
                    if "failure" in kinds or "error" in kinds:
                        results[tid] = "failed"
                    elif "skipped" in kinds:
                        results[tid] = "skipped"
                    else:
                        results[tid] = "passed"
            except ET.ParseError:
                results = {}
        finished = code in FINISHED and xml.exists()
        return finished, results, code, out[-3000:]


def collect(python, path, cwd, timeout):
    """Test ids of one file, or None when collection itself dies."""
    try:
        p = subprocess.run(
            pytest_cmd(python, ["--collect-only", "-q", path]),
            cwd=cwd,
            timeout=timeout,
            capture_output=True,
            text=True,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        return None
    if p.returncode not in FINISHED:
        return None
    return [line.strip() for line in p.stdout.splitlines() if "::" in line]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="python of the venv under test")
    ap.add_argument("--tests", required=True, help="the suite's tests/python directory")
    ap.add_argument("--label", default="", help="name of the library, for the output")
    ap.add_argument("--file-timeout", type=float, default=600)
    ap.add_argument("--test-timeout", type=float, default=60)
    ap.add_argument(
        "--rerun-budget",
        type=float,
        default=0,
        help="seconds the per-test re-runs of crashed files may take in all (0: no bound)",
    )
    ap.add_argument("--record-out", help="write the passing test ids here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    tests = Path(args.tests).resolve()
    cwd = tests.parent.parent  # the sdist root, where pytest finds the suite's conftest setup
    files = sorted(str(p.relative_to(cwd)) for p in tests.rglob("test_*.py"))
    passed, failed, skipped = set(), set(), 0
    crashes = []
    rerun_spent = 0.0
    t_all = time.monotonic()
    for f in files:
        t0 = time.monotonic()
        finished, res, code, out = run_junit(args.python, [f], cwd, args.file_timeout)
        if not finished:
            # The process died: pin the crash on a test by running each on its own.
            ids = collect(args.python, f, cwd, args.test_timeout)
            if ids is None:
                crashes.append(f"{f} (collection died, exit {code})")
                failed.add(f"{f}::<collection>")
                if args.verbose:
                    print(out, file=sys.stderr)
                print(f"  {f}: collection died (exit {code})", flush=True)
                continue
            res = {}
            for tid in ids:
                if args.rerun_budget and rerun_spent > args.rerun_budget:
                    res[tid] = "failed"
                    continue
                t1 = time.monotonic()
                ok, one, c, o = run_junit(args.python, [tid], cwd, args.test_timeout)
                rerun_spent += time.monotonic() - t1
                if ok and one:
                    res.update(one)
                else:
                    res[tid] = "failed"
                    crashes.append(f"{tid} (exit {c})")
        fp = sum(1 for v in res.values() if v == "passed")
        ff = sum(1 for v in res.values() if v == "failed")
        for tid, v in res.items():
            if v == "passed":
                passed.add(tid)
            elif v == "failed":
                failed.add(tid)
            else:
                skipped += 1
        dt = time.monotonic() - t0
        note = "" if finished else " (re-run per test)"
        print(f"  {f}: {fp} passed, {ff} failed{note} [{dt:.0f} s]", flush=True)

    label = f" ({args.label})" if args.label else ""
    for c in crashes[:40]:
        print(f"  crashed: {c}")
    if len(crashes) > 40:
        print(f"  ... and {len(crashes) - 40} more crashes")
    print(
        f"tvm-ffi suite{label}: {len(passed)} passed, {len(failed)} failed"
        f" ({skipped} skipped, {len(crashes)} crashed, {time.monotonic() - t_all:.0f} s)"
    )
    if args.record_out:
        Path(args.record_out).write_text("".join(f"{t}\n" for t in sorted(passed)))
    # The machine-readable line run.sh compares with the recorded figure.
    print(f"PASSED={len(passed)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
