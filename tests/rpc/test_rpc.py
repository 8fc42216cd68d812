"""tvmrt rpc-server driven by apache-tvm 0.27's unchanged RPC client (tests/rpc/run.sh)."""

import gc
import subprocess
import sys
import socket
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm.rpc
from tvm import relax

from conftest import (
    CONNECT_TIMEOUT_S,
    PARALLEL_CONSTS,
    READY_TIMEOUT_S,
    SERVER_KIND,
    TVMRT,
    Proc,
    bounded,
    free_port,
    start_server,
    start_tracker,
    wait_port,
)

RPC_MAGIC = 0xFF271
JOIN_TIMEOUT_S = 120.0


def run_add(sess, mod, n, const=0.0, name="add"):
    """Run the add kernel on remote tensors of length n and check it against numpy."""
    dev = sess.cpu()
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype("float32")
    b = rng.standard_normal(n).astype("float32")
    ra = tvm.runtime.tensor(a, device=dev)
    rb = tvm.runtime.tensor(b, device=dev)
    rc = tvm.runtime.tensor(np.zeros(n, "float32"), device=dev)
    mod[name](ra, rb, rc)
    np.testing.assert_array_equal(rc.numpy(), a + b + np.float32(const))


def check_fresh_session(server, art):
    """A new session on `server` uploads, loads and runs the add kernel correctly, and the
    server is still running afterwards."""

    def run():
        sess = tvm.rpc.connect(server.host, server.port)
        sess.upload(str(art.add_so), "fresh_add.so")
        run_add(sess, sess.load_module("fresh_add.so"), 33)

    bounded(run, CONNECT_TIMEOUT_S)
    gc.collect()
    assert server.proc.alive()


def raw_handshake(server, key=""):
    """Connect with a plain socket and do the RPC handshake of tvm/rpc/base.py."""
    s = socket.create_connection(server.addr, timeout=10.0)
    k = ("client:" + key).encode()
    s.sendall(struct.pack("<i", RPC_MAGIC) + struct.pack("<i", len(k)) + k)

    def recvall(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            assert chunk, "server closed during the handshake"
            buf += chunk
        return buf

    magic = struct.unpack("<i", recvall(4))[0]
    assert magic == RPC_MAGIC, hex(magic)
    keylen = struct.unpack("<i", recvall(4))[0]
    assert 0 <= keylen < 4096
    server_key = recvall(keylen).decode()
    assert server_key.startswith("server:"), server_key
    return s


def run_threads(targets):
    """Run callables in threads (bounded join) and re-raise the first failure."""
    errors = [None] * len(targets)

    def wrap(i, f):
        try:
            f()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors[i] = e

    threads = [threading.Thread(target=wrap, args=(i, f), daemon=True) for i, f in enumerate(targets)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        assert not t.is_alive(), "a client thread did not finish in time"
    for e in errors:
        if e is not None:
            raise e


# ---------------------------------------------------------------- files


def test_upload_download_roundtrip(connect):
    sess = connect()
    data = bytes(range(256)) * 1000 + b"tail"
    sess.upload(bytearray(data), "blob.bin")
    assert bytes(sess.download("blob.bin")) == data
    sess.upload(bytearray(b""), "empty.bin")
    assert bytes(sess.download("empty.bin")) == b""


def test_remove_then_download_raises(connect):
    sess = connect()
    sess.upload(bytearray(b"abc"), "gone.bin")
    assert bytes(sess.download("gone.bin")) == b"abc"
    sess.remove("gone.bin")
    with pytest.raises(Exception):
        sess.download("gone.bin")
    # the session keeps working
    sess.upload(bytearray(b"xyz"), "again.bin")
    assert bytes(sess.download("again.bin")) == b"xyz"


def test_upload_file_path(connect, artifacts):
    sess = connect()
    sess.upload(str(artifacts.add_so))
    assert bytes(sess.download("add.so")) == artifacts.add_so.read_bytes()


# ---------------------------------------------------------------- kernels


@pytest.mark.parametrize("ext", ["so", "tar"])
def test_dynamic_add_kernel(connect, artifacts, ext):
    path = artifacts.add_so if ext == "so" else artifacts.add_tar
    sess = connect()
    sess.upload(str(path), f"add.{ext}")
    mod = sess.load_module(f"add.{ext}")
    for n in (1, 7, 1000):
        run_add(sess, mod, n)


def test_remote_matches_local_tvm(connect, artifacts):
    sess = connect()
    sess.upload(str(artifacts.add_so), "add.so")
    rmod = sess.load_module("add.so")
    lmod = tvm.runtime.load_module(str(artifacts.add_so))
    a = np.linspace(-3, 3, 257, dtype="float32")
    b = np.cos(a).astype("float32")
    lc = tvm.runtime.tensor(np.zeros_like(a))
    lmod["add"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), lc)
    dev = sess.cpu()
    rc = tvm.runtime.tensor(np.zeros_like(a), device=dev)
    rmod["add"](tvm.runtime.tensor(a, device=dev), tvm.runtime.tensor(b, device=dev), rc)
    np.testing.assert_array_equal(rc.numpy(), lc.numpy())


# ---------------------------------------------------------------- copies


@pytest.mark.parametrize(
    "dtype", ["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"]
)
def test_copy_roundtrip_dtypes(connect, dtype):
    sess = connect()
    dev = sess.cpu()
    rng = np.random.default_rng(1)
    if dtype == "bool":
        a = rng.integers(0, 2, size=(3, 5, 7)).astype(bool)
    elif np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, size=(3, 5, 7), dtype=dtype, endpoint=True)
    else:
        a = (rng.standard_normal((3, 5, 7)) * 100).astype(dtype)
    r = tvm.runtime.tensor(a, device=dev)
    assert tuple(r.shape) == a.shape
    assert str(r.dtype) == dtype
    back = r.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)


def test_copy_0d_and_empty(connect):
    sess = connect()
    dev = sess.cpu()
    s = np.array(3.5, dtype="float32")
    r = tvm.runtime.tensor(s, device=dev)
    assert r.numpy().shape == ()
    assert r.numpy() == s
    e = np.zeros((0,), dtype="float32")
    re = tvm.runtime.tensor(e, device=dev)
    assert re.numpy().shape == (0,)


def test_copy_64mib(connect):
    sess = connect()
    dev = sess.cpu()
    a = np.random.default_rng(2).standard_normal(16 * 1024 * 1024).astype("float32")
    r = tvm.runtime.tensor(a, device=dev)
    np.testing.assert_array_equal(r.numpy(), a)


def test_copy_remote_to_remote(connect):
    sess = connect()
    dev = sess.cpu()
    a = np.arange(1000, dtype="float64") * 0.5
    ra = tvm.runtime.tensor(a, device=dev)
    rb = tvm.runtime.tensor(np.zeros_like(a), device=dev)
    rb.copyfrom(ra)
    np.testing.assert_array_equal(rb.numpy(), a)
    # and into a local tensor
    local = tvm.runtime.tensor(np.zeros_like(a))
    ra.copyto(local)
    np.testing.assert_array_equal(local.numpy(), a)


# ---------------------------------------------------------------- time_evaluator


def test_time_evaluator(connect, artifacts):
    sess = connect()
    sess.upload(str(artifacts.add_so), "add.so")
    mod = sess.load_module("add.so")
    dev = sess.cpu()
    n = 4096
    args = [tvm.runtime.tensor(np.ones(n, "float32"), device=dev) for _ in range(3)]
    f = mod.time_evaluator("add", dev, number=3, repeat=4, min_repeat_ms=50)
    t0 = time.monotonic()
    res = f(*args)
    wall = time.monotonic() - t0
    assert len(res.results) == 4
    for r in res.results:
        assert 0 < r < 1.0, res.results
    assert abs(res.mean - float(np.mean(res.results))) < 1e-9
    # each repeat runs until it covers min_repeat_ms: four repeats take >= 4 * 50 ms
    assert wall >= 4 * 0.050, wall
    np.testing.assert_array_equal(args[2].numpy(), np.full(n, 2.0, "float32"))


# ---------------------------------------------------------------- errors


def test_errors_keep_session(connect, artifacts):
    sess = connect()
    sess.upload(str(artifacts.add_so), "add.so")
    mod = sess.load_module("add.so")
    dev = sess.cpu()
    f32 = lambda n: tvm.runtime.tensor(np.ones(n, "float32"), device=dev)  # noqa: E731
    with pytest.raises(Exception) as e:
        mod["add"](f32(5), f32(6), f32(5))  # mismatched shapes
    assert str(e.value)
    run_add(sess, mod, 10)
    i32 = tvm.runtime.tensor(np.ones(5, "int32"), device=dev)
    with pytest.raises(Exception):
        mod["add"](i32, i32, i32)  # wrong dtype
    run_add(sess, mod, 11)
    with pytest.raises(Exception):
        sess.get_function("no.such.function")
    run_add(sess, mod, 12)
    with pytest.raises(Exception):
        sess.load_module("does_not_exist.so")
    run_add(sess, mod, 13)


# ---------------------------------------------------------------- Relax VM


def test_relax_vm_matches_local(connect, artifacts):
    local_vm = relax.VirtualMachine(tvm.runtime.load_module(str(artifacts.mlp_so)), tvm.cpu())
    want = local_vm[artifacts.mlp_entry](*[tvm.runtime.tensor(x) for x in artifacts.mlp_inputs]).numpy()
    sess = connect()
    sess.upload(str(artifacts.mlp_so), "model.so")
    dev = sess.cpu()
    vm = relax.VirtualMachine(sess.load_module("model.so"), dev)
    got = vm[artifacts.mlp_entry](*[tvm.runtime.tensor(x, device=dev) for x in artifacts.mlp_inputs])
    got = got.numpy()
    assert got.shape == want.shape == (4, 8)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # a second call on the same VM
    got2 = vm[artifacts.mlp_entry](*[tvm.runtime.tensor(x, device=dev) for x in artifacts.mlp_inputs])
    np.testing.assert_allclose(got2.numpy(), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- session timeout


def test_session_timeout(server, artifacts):
    def overrun():
        sess = tvm.rpc.connect(server.host, server.port, session_timeout=2)
        sess.upload(str(artifacts.add_so), "add.so")
        mod = sess.load_module("add.so")
        dev = sess.cpu()
        args = [tvm.runtime.tensor(np.ones(1, "float32"), device=dev) for _ in range(3)]
        f = mod.time_evaluator("add", dev, number=1, repeat=1, min_repeat_ms=10000)
        t0 = time.monotonic()
        with pytest.raises(Exception) as e:
            f(*args)
        took = time.monotonic() - t0
        return e.value, took

    err, took = overrun()
    gc.collect()
    msg = str(err)
    assert "RPCSessionTimeoutError" in msg or "closed" in msg.lower() or "reset" in msg.lower(), msg
    assert took < 9.0, took
    check_fresh_session(server, artifacts)


# ---------------------------------------------------------------- parallel sessions


def test_parallel_sessions_isolated(server4, artifacts):
    # with tvmrt all four sessions are open at once (--max-sessions 4): each uploads its own
    # lib.so, then all wait, then each loads and checks its own; TVM's server is sequential.
    barrier = threading.Barrier(len(PARALLEL_CONSTS)) if SERVER_KIND != "tvm" else None

    def client(const, path):
        def run():
            sess = tvm.rpc.connect(server4.host, server4.port)
            sess.upload(str(path), "lib.so")
            if barrier is not None:
                barrier.wait(timeout=60)
            mod = sess.load_module("lib.so")
            for n in (3, 500):
                run_add(sess, mod, n, const=const)

        return run

    run_threads([client(k, p) for k, p in artifacts.parallel])
    check_fresh_session(server4, artifacts)


# ---------------------------------------------------------------- robustness


def test_robust_handshake_then_reset(own_server, artifacts):
    server = own_server
    s = raw_handshake(server)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
    s.close()
    check_fresh_session(server, artifacts)


def test_robust_garbage_after_handshake(own_server, artifacts):
    server = own_server
    s = raw_handshake(server)
    s.sendall(bytes(range(256)) * 64)
    s.close()
    s = raw_handshake(server)
    s.sendall(struct.pack("<q", 16) + b"\xff" * 16)  # a packet with a bad code
    s.close()
    check_fresh_session(server, artifacts)


def test_robust_truncated_library(own_server, artifacts):
    server = own_server
    def truncated():
        sess = tvm.rpc.connect(server.host, server.port)
        data = artifacts.add_so.read_bytes()
        sess.upload(bytearray(data[: len(data) // 2]), "trunc.so")
        with pytest.raises(Exception):
            sess.load_module("trunc.so")["add"]

    truncated()
    gc.collect()
    check_fresh_session(server, artifacts)


def test_robust_disconnect_mid_packet(own_server, artifacts):
    server = own_server
    s = raw_handshake(server)
    s.sendall(struct.pack("<q", 1 << 20) + b"\x00" * 100)
    s.close()
    check_fresh_session(server, artifacts)


def test_robust_non_rpc_client(own_server, artifacts):
    server = own_server
    s = socket.create_connection(server.addr, timeout=10.0)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    s.close()
    check_fresh_session(server, artifacts)


# ---------------------------------------------------------------- tracker


def test_tracker(tracker, artifacts):
    key = "tvmrt-test"
    srv = start_server(key=key, tracker=tracker)
    try:
        client = tvm.rpc.connect_tracker(*tracker)
        deadline = time.monotonic() + 30
        while True:
            summary = client.summary()
            if key in summary.get("queue_info", {}):
                break
            assert time.monotonic() < deadline, f"{key} never registered: {summary}"
            time.sleep(0.25)

        def one_session(n):
            sess = client.request(key)
            sess.upload(str(artifacts.add_so), "add.so")
            run_add(sess, sess.load_module("add.so"), n)

        for n in (5, 6, 7):
            one_session(n)
            gc.collect()

        def concurrent(n):
            def run():
                c = tvm.rpc.connect_tracker(*tracker)
                sess = c.request(key)
                sess.upload(str(artifacts.add_so), "add.so")
                run_add(sess, sess.load_module("add.so"), n)

            return run

        run_threads([concurrent(8), concurrent(9)])
        gc.collect()
        assert srv.proc.alive()
    finally:
        srv.proc.stop()


def test_robust_segfaulting_kernel(own_server, tmp_path, artifacts):
    """A kernel that writes through a null pointer ends its session only."""
    server = own_server
    src = tmp_path / "crash.c"
    src.write_text(
        "int __tvm_ffi_crash(void* self, const void* args, int n, void* ret) {\n"
        "  *(volatile int*)0 = 1;\n  return 0;\n}\n"
    )
    lib = tmp_path / "crash.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)

    def crash():
        sess = tvm.rpc.connect(server.host, server.port)
        sess.upload(str(lib), "crash.so")
        f = sess.load_module("crash.so")["crash"]
        with pytest.raises(Exception):
            f()

    bounded(crash, CONNECT_TIMEOUT_S)
    gc.collect()
    check_fresh_session(server, artifacts)
    assert server.proc.wait_for(r"ended by signal 11", 10)


# ---------------------------------------------------------------- remote OpenCL (POCL in CI)

CL_ELEMENTWISE = Path(__file__).resolve().parents[1] / "fixtures" / "opencl" / "elementwise.so"


def check_device_copies(dev, seed):
    """9 MiB of float32 to a remote device tensor and back (more than one 8 MiB staging
    chunk), then a copy between two remote tensors, all exact; returns the data."""
    x = np.random.default_rng(seed).random(9 * (1 << 18), dtype=np.float32)
    a = tvm.runtime.tensor(x, dev)
    np.testing.assert_array_equal(a.numpy(), x)
    b = tvm.runtime.empty(x.shape, "float32", dev)
    b.copyfrom(a)
    np.testing.assert_array_equal(b.numpy(), x)
    return x


def test_opencl_remote_tensors_and_kernel(server):
    """Remote tensors on the board's OpenCL device: copies both ways through the host staging
    (9 MiB: more than one 8 MiB chunk), a copy between two remote OpenCL tensors, and TVM's
    OpenCL `add` (apache-tvm 0.27, tests/fixtures/opencl) run on them."""

    def run():
        sess = tvm.rpc.connect(server.host, server.port)
        dev = sess.cl(0)
        x = check_device_copies(dev, seed=3)
        sess.upload(str(CL_ELEMENTWISE), "elementwise.so")
        mod = sess.load_module("elementwise.so")
        n = 1000
        p, q = x[:n].copy(), x[n : 2 * n].copy()
        rp, rq = tvm.runtime.tensor(p, dev), tvm.runtime.tensor(q, dev)
        rc = tvm.runtime.empty((n,), "float32", dev)
        mod["add"](rp, rq, rc)
        np.testing.assert_array_equal(rc.numpy(), p + q)
        # MetaSchedule's input filler on a device tensor: values in [1, 10), not all equal.
        sess.get_function("tvm.contrib.random.random_fill_for_measure")(rc)
        filled = rc.numpy()
        assert ((filled >= 1) & (filled < 10)).all() and len(np.unique(filled)) > n // 2

    bounded(run, 120)


def test_memory_limit():
    """`--memory-limit`: an allocation past it is an error naming the limit, and the session
    goes on within it."""
    server = start_server(extra=["--memory-limit", "1000000"])
    try:

        def run():
            sess = tvm.rpc.connect(server.host, server.port)
            dev = sess.cpu()
            with pytest.raises(Exception, match="memory limit of 1000000 bytes"):
                tvm.runtime.empty((1 << 20,), "float32", dev)
            x = np.arange(1000, dtype="float32")
            np.testing.assert_array_equal(tvm.runtime.tensor(x, dev).numpy(), x)

        bounded(run, CONNECT_TIMEOUT_S)
    finally:
        server.proc.stop()


# ---------------------------------------------------------------- proxy and tracker restarts


def test_reverse_connection_through_tvms_proxy(artifacts):
    """`--proxy`: the server connects out to TVM's RPC proxy (as TVM's Android app does from
    behind a NAT); a client reaches it through the proxy by key, session after session."""
    port = free_port()
    proxy = Proc(
        [sys.executable, "-m", "tvm.exec.rpc_proxy", "--host", "127.0.0.1", "--port", str(port),
         "--port-end", str(port + 50), "--web-port", str(free_port())],
        "tvm rpc_proxy",
    )
    try:
        m = proxy.wait_for(r"client port bind to (\S+):(\d+)", READY_TIMEOUT_S)
        addr = (m.group(1), int(m.group(2)))
        server = Proc(
            [str(TVMRT), "rpc-server", "--proxy", f"{addr[0]}:{addr[1]}", "--key", "behind-nat"],
            "tvmrt rpc-server --proxy",
        )
        try:
            for n in (3, 4):

                def run(n=n):
                    sess = tvm.rpc.connect(*addr, key="behind-nat")
                    sess.upload(str(artifacts.add_so), "add.so")
                    run_add(sess, sess.load_module("add.so"), n)

                bounded(run, CONNECT_TIMEOUT_S)
                gc.collect()
        finally:
            server.stop()
    finally:
        proxy.stop()


def test_reregisters_when_the_tracker_restarts(artifacts):
    """A tracker that goes away and comes back on the same port gets the server again."""
    proc, tracker = start_tracker()
    srv = start_server(key="comeback", tracker=tracker)
    try:

        def registered(addr):
            deadline = time.monotonic() + 30
            while True:
                try:
                    summary = tvm.rpc.connect_tracker(*addr).summary()
                    if "comeback" in summary.get("queue_info", {}):
                        return
                except Exception:  # noqa: BLE001 - the tracker is still starting
                    pass
                assert time.monotonic() < deadline, "not registered"
                time.sleep(0.25)

        registered(tracker)
        proc.stop()
        proc = Proc(
            [sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", tracker[0], "--port",
             str(tracker[1]), "--port-end", str(tracker[1] + 1)],
            "tvm rpc_tracker (again)",
        )
        proc.wait_for(r"bind to", READY_TIMEOUT_S)
        wait_port(*tracker, READY_TIMEOUT_S)
        registered(tracker)
        sess = tvm.rpc.connect_tracker(*tracker).request("comeback")
        sess.upload(str(artifacts.add_so), "add.so")
        run_add(sess, sess.load_module("add.so"), 9)
        assert srv.proc.alive()
    finally:
        srv.proc.stop()
        proc.stop()


@pytest.mark.parametrize("kind", ["cl", "vulkan"])
def test_remote_device_tensor_copies(server, kind):
    """Remote tensors on the board's GPU back ends (POCL's OpenCL and Mesa's lavapipe Vulkan
    in CI): 9 MiB both ways through the host staging and a copy between two of them."""

    def run():
        sess = tvm.rpc.connect(server.host, server.port)
        check_device_copies(getattr(sess, kind)(0), seed=5)

    bounded(run, 120)
