#!/usr/bin/env python3
"""tvmrt's CUDA tensors and streams with PyTorch and CuPy, on a real GPU (issue 32).

    python benches/cuda/interop.py [--library PATH/libtvmrt.so]

Checks, each printed as PASS/FAIL with what was seen:
- DLPack both ways without a copy: a PyTorch (and a CuPy) tensor on cuda:0 given to tvmrt
  (``tvmrt.from_dlpack``) has the same data pointer; TVM 0.27's `add` kernel
  (tests/fixtures/cuda/elementwise_ptx.so) writes its result into the framework's own output
  tensor in place; a tensor tvmrt allocated is seen by ``torch.from_dlpack`` /
  ``cupy.from_dlpack`` at the same pointer, and a framework write is read back by tvmrt.
- Streams: on a non-blocking CUDA stream S (so the legacy default stream does not order
  against it), PyTorch queues a ~50 ms spin and then writes x; with S made tvmrt's current
  stream (``TVMFFIEnvSetStream``, then the classic ``TVMSetStream``), tvmrt's `add` launched
  right after, without any synchronization, must read the new x: it ran after PyTorch's work on
  S. For comparison the same launch on tvmrt's default stream is reported (it may read the old
  x; that one is information, not a check).
Needs numpy, torch and cupy with a GPU; exits 1 when any check fails.
"""

import argparse
import ctypes
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "cuda"
N = 1 << 20
SPIN_CYCLES = 100_000_000  # about 50 ms at 2 GHz

results = []


def report(ok, what, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", help="libtvmrt.so (default: TVMRT_LIBRARY or target/release)")
    args = ap.parse_args()
    os.environ.setdefault(
        "TVMRT_LIBRARY", args.library or str(ROOT / "target" / "release" / "libtvmrt.so"))
    sys.path.insert(0, str(ROOT / "python"))
    import cupy
    import numpy as np
    import torch
    import tvmrt
    from tvmrt import _ffi

    lib = _ffi.lib()
    lib.TVMFFIEnvSetStream.restype = ctypes.c_int
    lib.TVMFFIEnvSetStream.argtypes = [ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p,
                                       ctypes.POINTER(ctypes.c_void_p)]
    lib.TVMSetStream.restype = ctypes.c_int
    lib.TVMSetStream.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    add = tvmrt.load_module(FIX / "elementwise_ptx.so")["add"]
    dev = tvmrt.cuda(0)

    def ptr(t):
        return t._dl.data + t._dl.byte_offset

    # ---- PyTorch -> tvmrt, in place
    a = torch.arange(N, dtype=torch.float32, device="cuda") * 0.5
    b = torch.full((N,), 3.0, dtype=torch.float32, device="cuda")
    c = torch.zeros(N, dtype=torch.float32, device="cuda")
    ta, tb, tc = (tvmrt.from_dlpack(t) for t in (a, b, c))
    same = all(ptr(t) == x.data_ptr() for t, x in ((ta, a), (tb, b), (tc, c)))
    report(same and tc.device == dev, "torch -> tvmrt without a copy",
           f"pointers {'equal' if same else 'differ'}, device {tc.device}")
    add(ta, tb, tc)
    torch.cuda.synchronize()
    report(torch.equal(c, a + b), "tvmrt's kernel wrote torch's output tensor in place")

    # ---- tvmrt -> PyTorch
    t = tvmrt.tensor(np.arange(N, dtype=np.float32), dev)
    x = torch.from_dlpack(t)
    report(x.data_ptr() == ptr(t) and x.is_cuda, "tvmrt -> torch without a copy",
           f"{x.device}, pointers {'equal' if x.data_ptr() == ptr(t) else 'differ'}")
    x.mul_(2.0)
    torch.cuda.synchronize()
    report(np.array_equal(t.numpy(), np.arange(N, dtype=np.float32) * 2),
           "torch's in-place write seen by tvmrt")

    # ---- CuPy both ways
    ca = cupy.arange(N, dtype=cupy.float32)
    cb = cupy.ones(N, dtype=cupy.float32)
    cc = cupy.empty(N, dtype=cupy.float32)
    tca, tcb, tcc = (tvmrt.from_dlpack(v) for v in (ca, cb, cc))
    same = all(ptr(t) == v.data.ptr for t, v in ((tca, ca), (tcb, cb), (tcc, cc)))
    report(same, "cupy -> tvmrt without a copy")
    add(tca, tcb, tcc)
    cupy.cuda.runtime.deviceSynchronize()
    report(bool(cupy.array_equal(cc, ca + cb)), "tvmrt's kernel wrote cupy's output in place")
    back = cupy.from_dlpack(t)
    report(back.data.ptr == ptr(t), "tvmrt -> cupy without a copy")
    report(bool(cupy.array_equal(back, cupy.arange(N, dtype=cupy.float32) * 2)),
           "cupy reads tvmrt's values")

    # ---- Streams: tvmrt's launch ordered after PyTorch's work on a non-blocking stream
    raw = cupy.cuda.Stream(non_blocking=True)
    stream = torch.cuda.ExternalStream(raw.ptr)
    xs = torch.zeros(N, dtype=torch.float32, device="cuda")
    ones = torch.ones(N, dtype=torch.float32, device="cuda")
    out = torch.zeros(N, dtype=torch.float32, device="cuda")
    txs, tones, tout = (tvmrt.from_dlpack(v) for v in (xs, ones, out))
    torch.cuda.synchronize()

    def queue_then_add(set_stream, value):
        with torch.cuda.stream(stream):
            torch.cuda._sleep(SPIN_CYCLES)
            xs.fill_(value)
        set_stream()
        add(txs, tones, tout)  # no synchronization in between
        torch.cuda.synchronize()
        raw.synchronize()
        got = out[:4].tolist()
        return got == [value + 1.0] * 4, got

    def ffi_set(s):
        def f():
            old = ctypes.c_void_p()
            rc = lib.TVMFFIEnvSetStream(2, 0, s, ctypes.byref(old))
            assert rc == 0, "TVMFFIEnvSetStream failed"
        return f

    def classic_set(s):
        def f():
            assert lib.TVMSetStream(2, 0, s) == 0, "TVMSetStream failed"
        return f

    ok, got = queue_then_add(ffi_set(raw.ptr), 7.0)
    report(ok, "TVMFFIEnvSetStream: tvmrt's kernel ran after torch's work on that stream",
           f"out[:4] = {got}")
    report(lib.TVMFFIEnvGetStream(2, 0) == raw.ptr, "TVMFFIEnvGetStream gives the stream back")
    ffi_set(None)()
    ok, got = queue_then_add(classic_set(raw.ptr), 9.0)
    report(ok, "TVMSetStream: tvmrt's kernel ran after torch's work on that stream",
           f"out[:4] = {got}")
    classic_set(None)()
    _, got = queue_then_add(lambda: None, 11.0)
    print(f"info: on tvmrt's default stream instead, out[:4] = {got} (12.0 would mean ordered "
          "anyway; 1.0 or 10.0 that the launch did not wait)")

    failed = results.count(False)
    print(f"cuda interop: {results.count(True)} passed, {failed} failed")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
