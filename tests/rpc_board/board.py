"""tvmrt rpc-server on another CPU, as on a board: the tool cross-built for that CPU runs under
qemu-user; the host cross-compiles with apache-tvm 0.27 and reaches it through TVM's tracker
with TVM's unchanged client and MetaSchedule (issue 48). Run by .ci/cross.sh:

    board.py --tool target/cross/aarch64-unknown-linux-gnu/debug/tvmrt \\
        --qemu qemu-aarch64-static --sysroot /usr/aarch64-linux-gnu \\
        --gnu aarch64-linux-gnu --mtriple aarch64-linux-gnu

Prints one closing line `N passed, M failed`; exits non-zero on any failure.
"""

import argparse
import gc
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "rpc"))

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import te  # noqa: E402
from tvm.support import cc as tvm_cc  # noqa: E402

from conftest import start_server, start_tracker  # noqa: E402
from tuning import check_measured, so_exporter, tune  # noqa: E402

KEY = "tvmrt-board"


def add_kernel(mtriple):
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    b = te.placeholder((n,), name="B")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    func = te.create_prim_func([a, b, c]).with_attr("global_symbol", "add")
    return tvm.compile(func, target={"kind": "llvm", "mtriple": mtriple})


def request(tracker):
    client = tvm.rpc.connect_tracker(*tracker)
    deadline = time.monotonic() + 60
    while KEY not in client.summary().get("queue_info", {}):
        assert time.monotonic() < deadline, "the board never registered"
        time.sleep(0.25)
    return client.request(KEY, session_timeout=120)


def run_add(sess, name, n=1000):
    mod = sess.load_module(name)
    dev = sess.cpu()
    rng = np.random.default_rng(n)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    ra, rb = tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev)
    rc = tvm.runtime.tensor(np.zeros(n, np.float32), dev)
    mod["add"](ra, rb, rc)
    np.testing.assert_array_equal(rc.numpy(), a + b)
    t = mod.time_evaluator("add", dev, number=5, repeat=3, min_repeat_ms=20)(ra, rb, rc)
    assert len(t.results) == 3 and all(0 < x < 0.1 for x in t.results), t.results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--qemu", required=True)
    ap.add_argument("--sysroot", required=True)
    ap.add_argument("--gnu", required=True, help="GNU triple of the cross compilers")
    ap.add_argument("--mtriple", required=True)
    a = ap.parse_args()
    cc = f"{a.gnu}-gcc"
    work = Path(tempfile.mkdtemp(prefix="rpc_board_"))
    kernel = add_kernel(a.mtriple)
    kernel.export_library(str(work / "add.so"), fcompile=tvm_cc.cross_compiler(cc))
    kernel.export_library(str(work / "add.tar"))

    tracker_proc, tracker = start_tracker()
    # The board's C compiler links the .tar uploads (here the cross compiler, run natively).
    env = dict(os.environ, CC=cc)
    server = start_server(
        key=KEY,
        tracker=tracker,
        launcher=[a.qemu, "-L", a.sysroot],
        tool=a.tool,
        env=env,
    )
    passed, failed = 0, 0

    def case(name, fn):
        nonlocal passed, failed
        try:
            fn()
            passed += 1
            print(f"ok: {name}", flush=True)
        except Exception:  # noqa: BLE001 - reported, counted
            failed += 1
            print(f"FAILED: {name}\n{traceback.format_exc()}", flush=True)
        gc.collect()

    def so_and_tar():
        sess = request(tracker)
        sess.upload(str(work / "add.so"))
        run_add(sess, "add.so")
        sess.upload(str(work / "add.tar"))
        run_add(sess, "add.tar", n=77)

    target = tvm.target.Target({"kind": "llvm", "mtriple": a.mtriple, "num-cores": 1})
    try:
        case(f"{a.mtriple}: .so and .tar kernels through the tracker", so_and_tar)
        case(
            f"{a.mtriple}: MetaSchedule, .tar linked on the board",
            lambda: check_measured(tune(tracker, KEY, work / "ms_tar", target=target)),
        )
        case(
            f"{a.mtriple}: MetaSchedule, .so cross-linked on the host",
            lambda: check_measured(
                tune(tracker, KEY, work / "ms_so", target=target, export=so_exporter(cc))
            ),
        )
        if not server.proc.alive():
            failed += 1
            print("FAILED: the server died\n" + server.proc.output())
    finally:
        server.proc.stop()
        tracker_proc.stop()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
