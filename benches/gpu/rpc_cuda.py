"""tvmrt rpc-server on cuda:0, driven by a raw client (benches/gpu/run.sh's part rpc_cuda).

The GPU machine has python3 and numpy but no TVM: the client is benches/rpc/raw_client.py
(standard library only), speaking TVM 0.27's wire format. It starts `tvmrt rpc-server` on
127.0.0.1, then on cuda:0: reads the device's attributes; copies tensors of several dtypes, a
0-d one and 64 MiB both ways (exact; the 64 MiB ones timed); copies cuda -> cuda on the server;
uploads and loads tests/fixtures/cuda/elementwise_ptx.so and runs its add, axpk and mul_2d
against numpy; times add on 64 MiB operands with the server's runtime.RPCTimeEvaluator and the
round trip of a small launch; checks that a bad call comes back as the server's error and the
session goes on. Prints one verdict line (PASS/FAIL) and exits non-zero on failure.

    python3 benches/gpu/rpc_cuda.py --tool DIR/bin/tvmrt [--fake]
"""

import argparse
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benches" / "rpc"))
import raw_client as rc  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "cuda" / "elementwise_ptx.so"
DTYPES = ["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"]
GPU = (rc.CUDA, 0)
READY_S = 30.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`tvmrt rpc-server` on 127.0.0.1; its output echoed; stopped by pid."""

    def __init__(self, tool):
        port = free_port()
        argv = [tool, "rpc-server", "--host", "127.0.0.1", "--port", str(port),
                "--port-end", str(port + 50)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace")
        self.ready = threading.Event()
        self.port = None
        threading.Thread(target=self._drain, daemon=True).start()
        if not self.ready.wait(READY_S) or self.port is None:
            self.stop()
            raise RuntimeError(f"tvmrt rpc-server did not listen within {READY_S}s")

    def _drain(self):
        for line in self.proc.stdout:
            print("  [server]", line.rstrip())
            m = re.search(r"listening on (\S+):(\d+)", line)
            if m and self.port is None:
                self.port = int(m.group(2))
                self.ready.set()
        self.ready.set()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def sample(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(shape) * 100).astype(dtype)


def upload(sess, a):
    t = sess.empty(a.shape, str(a.dtype), GPU)
    sess.copy_to(t, np.ascontiguousarray(a).tobytes())
    return t


def download(sess, t):
    return np.frombuffer(sess.copy_from(t), dtype=t.dtype).reshape(t.shape)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def copies(sess, notes):
    dtypes = DTYPES
    for i, dtype in enumerate(dtypes):
        a = sample(dtype, (3, 5, 7), i)
        t = upload(sess, a)
        check(np.array_equal(download(sess, t), a), f"{dtype} copy round trip")
        sess.free(t)
    s = np.array(-2.25, "float64")
    t = upload(sess, s)
    check(download(sess, t).shape == () and download(sess, t) == s, "0-d copy")
    sess.free(t)
    e = sess.empty((4, 0), "float32", GPU)
    sess.free(e)

    big = np.random.default_rng(7).random(16 << 20, dtype=np.float32)  # 64 MiB
    raw = big.tobytes()
    t = sess.empty(big.shape, "float32", GPU)
    ups, downs = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        sess.copy_to(t, raw)
        t1 = time.perf_counter()
        back = sess.copy_from(t)
        t2 = time.perf_counter()
        check(back == raw, "64 MiB round trip")
        ups.append(t1 - t0)
        downs.append(t2 - t1)
    t2 = sess.empty(big.shape, "float32", GPU)
    sess.copy_among(t, t2)
    check(sess.copy_from(t2) == raw, "64 MiB cuda -> cuda on the server")
    notes["up_ms"], notes["down_ms"] = min(ups) * 1e3, min(downs) * 1e3
    print(f"  64 MiB to cuda:0 {min(ups) * 1e3:.1f} ms ({64 / min(ups) / 1024:.2f} GiB/s), "
          f"from cuda:0 {min(downs) * 1e3:.1f} ms ({64 / min(downs) / 1024:.2f} GiB/s) "
          f"(best of 3, raw client over 127.0.0.1)")
    return big, t, t2


def kernels(sess, big, ta, tb, notes):
    with open(FIXTURE, "rb") as f:
        sess.call_global("tvm.rpc.server.upload", "elementwise_ptx.so", f.read())
    mod = sess.call_global("tvm.rpc.server.load_module", "elementwise_ptx.so")
    check(mod.type_index == rc.T_MODULE, f"load_module returned type {mod.type_index}")
    funcs = {}
    for name in ("add", "axpk", "mul_2d"):
        r = sess.call_global("tvm.rpc.server.ModuleGetFunction", mod.value, name, True)
        check(r.type_index == rc.T_FUNCTION, f"{name}: type {r.type_index}")
        funcs[name] = r.value

    rng = np.random.default_rng(4)
    n = 1000
    a, b = rng.standard_normal((2, n)).astype("float32")
    ra, rb = upload(sess, a), upload(sess, b)
    out = sess.empty((n,), "float32", GPU)
    sess.call(funcs["add"], ra, rb, out)
    check(np.array_equal(download(sess, out), a + b), "add equals numpy")
    sess.call(funcs["axpk"], ra, out, 2.5, -3)
    want = a * np.float32(2.5) + np.float32(-3)
    # a GPU may fuse the multiply-add (one rounding): within a few ulps
    check(np.allclose(download(sess, out), want, rtol=1e-5, atol=1e-5), "axpk equals numpy")
    p, q = rng.standard_normal((2, 3, 70)).astype("float32")
    rm = sess.empty((3, 70), "float32", GPU)
    sess.call(funcs["mul_2d"], upload(sess, p), upload(sess, q), rm)
    check(np.array_equal(download(sess, rm), p * q), "mul_2d equals numpy")

    # a bad call: the server's message comes back and the session goes on
    short = sess.empty((n + 1,), "float32", GPU)
    try:
        sess.call(funcs["add"], ra, rb, short)
        check(False, "mismatched shapes were accepted")
    except rc.RemoteError as e:
        check("Mismatched C.shape[0]" in str(e), f"error message: {e}")
    sess.call(funcs["add"], ra, rb, out)
    check(np.array_equal(download(sess, out), a + b), "add after an error")

    # the round trip of a small launch (call + stream sync), as a tuner's client sees it
    k = 200
    t0 = time.perf_counter()
    for _ in range(k):
        sess.call(funcs["add"], ra, rb, out)
    sess.stream_sync(GPU)
    notes["launch_us"] = (time.perf_counter() - t0) / k * 1e6

    # the server's own time evaluator on 64 MiB operands: C = A + A
    tc = sess.empty(big.shape, "float32", GPU)
    ev = sess.call_global("runtime.RPCTimeEvaluator", mod.value, "add", rc.CUDA, 0,
                          10, 3, 0, 100, 0, 1, 0, "")
    check(ev.type_index == rc.T_FUNCTION, f"time evaluator type {ev.type_index}")
    res = sess.call(ev.value, ta, tb, tc)
    times = struct.unpack(f"<{len(res.value) // 8}d", res.value)
    check(len(times) == 3 and all(t > 0 for t in times), f"evaluator times {times}")
    check(np.array_equal(download(sess, tc), big + big), "64 MiB add equals numpy")
    best = min(times)
    notes["add64_us"] = best * 1e6
    print(f"  add on 16M float32 (3 x 64 MiB touched): {best * 1e6:.1f} us "
          f"({3 * 64 / 1024 / best:.0f} GiB/s); small launch round trip "
          f"{notes['launch_us']:.0f} us")
    for h in (ev.value, *funcs.values()):
        sess.free_handle(h)
    sess.free_handle(mod.value)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tool", required=True, help="the tvmrt tool (pack.sh's bin/tvmrt)")
    ap.add_argument("--fake", action="store_true", help="the driver is the test double")
    args = ap.parse_args()
    driver = os.environ.get("TVMRT_CUDA_LIBRARY", "the system's libcuda.so.1")
    server = Server(args.tool)
    notes = {}
    try:
        t0 = time.perf_counter()
        sess = rc.Session("127.0.0.1", server.port, timeout=120)
        connect_ms = (time.perf_counter() - t0) * 1e3
        check(sess.device_attr(GPU, rc.ATTR_EXIST) == 1, "cuda:0 exists")
        name = sess.device_attr(GPU, rc.ATTR_DEVICE_NAME)
        cc = sess.device_attr(GPU, rc.ATTR_COMPUTE_VERSION)
        print(f"  cuda:0 on the server: {name} (compute {cc}), driver {driver}; "
              f"connect {connect_ms:.1f} ms")
        big, ta, tb = copies(sess, notes)
        kernels(sess, big, ta, tb, notes)
        sess.close()
    except Exception as e:  # noqa: BLE001 - the verdict line says what failed
        print(f"FAIL rpc_cuda: {type(e).__name__}: {e}")
        return 1
    finally:
        server.stop()
    kind = "test double, timings not a GPU's" if args.fake else name
    print(f"PASS rpc_cuda ({kind}): copies exact (9 dtypes, 0-d, empty, 64 MiB up "
          f"{notes['up_ms']:.0f} ms / down {notes['down_ms']:.0f} ms, cuda->cuda), "
          f"elementwise_ptx.so add/axpk/mul_2d equal numpy, error kept the session, "
          f"add 64 MiB {notes['add64_us']:.0f} us, launch round trip {notes['launch_us']:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
